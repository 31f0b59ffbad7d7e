"""What kafka-transactions.sh prints: Kafka's table (every column padded to its widest
cell and followed by a tab, the header row always printed) and its failures (one line on
stderr, exit status 1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from moldau.tools.options import ToolError


class CommandFailed(ToolError):
    """Kafka's printErrorAndExit: the line printed on stderr before exiting with 1."""


def failed(context: str, cause: Exception) -> CommandFailed:
    """printErrorAndExit(message, cause): the context, the cause's message and Kafka's
    hint about debug logging."""
    return CommandFailed(f"{context}: {cause}. Enable debug logging for additional detail.")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of Kafka's ToolsUtils.prettyPrintTable."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    return ["".join(f"{cell:<{w}}\t" for cell, w in zip(row, widths, strict=True))
            for row in [list(headers), *rows]]


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: TextIO) -> None:
    for line in table(headers, rows):
        out.write(line + "\n")
