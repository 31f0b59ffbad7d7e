"""Normalising kafka-acls output: Kafka's AclCommand prints each resource's entries from a
Scala set and the resources from a Scala map, both ordered by hash codes that include Java
enums' identity hash codes (AclOperation, ResourceType, ...), which change with what the
JVM did before. So the entries of a block and the blocks of a run are compared sorted;
the text of each block stays as Kafka prints it."""

from __future__ import annotations

import re

from compat.normalise import Normaliser, drop

# "Adding ACLs for resource `ResourcePattern(...)`: " and "Current ACLs for resource ...",
# then " \t(entry)", "\t(entry)", ..., the last with a trailing space, then an empty line.
BLOCK_HEAD = re.compile(r"^(Adding|Current) ACLs for resource `")
# A stack trace on standard output (AclCommand prints its failures there): the
# exception's own line and its "Caused by:" stay, the frames go, as on standard error.
STDOUT_FRAMES: Normaliser = drop(r"^\t(at |\.\.\. \d+ more)")

Block = tuple[str, list[str]]


def _entries(lines: list[str]) -> list[str]:
    """A block's entries without Kafka's decoration (a space before the first, a tab
    before each, a space after the last)."""
    stripped = (line.strip(" ").removeprefix("\t") for line in lines)
    return [entry for entry in stripped if entry]


def _render(block: Block) -> list[str]:
    head, entries = block
    if not entries:
        return [head, "  ", ""]
    lines = [f"\t{entry}" for entry in entries]
    lines[0] = " " + lines[0]
    lines[-1] += " "
    return [head, *lines, ""]


def _read_block(lines: list[str], start: int) -> tuple[Block, int]:
    """The block whose head is lines[start], and where the line after it starts."""
    end = start + 1
    while end < len(lines) and lines[end] != "":
        end += 1
    block = (lines[start], sorted(_entries(lines[start + 1:end])))
    return block, min(end + 1, len(lines))


def _kind(line: str) -> str | None:
    """"Adding" or "Current" for a block's head, None for any other line."""
    head = BLOCK_HEAD.match(line)
    return head.group(1) if head else None


def sort_acl_blocks(lines: list[str]) -> list[str]:
    """Each block's entries sorted, and each run of consecutive blocks of one kind (the
    additions of a command, or its listing) sorted by head."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        kind = _kind(lines[i])
        if kind is None:
            out.append(lines[i])
            i += 1
            continue
        run: list[Block] = []
        while i < len(lines) and _kind(lines[i]) == kind:
            block, i = _read_block(lines, i)
            run.append(block)
        for block in sorted(run):
            out.extend(_render(block))
    return out
