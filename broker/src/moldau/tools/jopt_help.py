"""The option table jopt-simple 5.0.4's BuiltinHelpFormatter prints (the one every
jopt-simple tool of Kafka shows after a usage error), laid out the same way: two columns,
each as wide as its widest entry, the options' at most 39 characters (an 80-column row
less a 2-space gap, halved), the descriptions' at most what is left of the 80; entries
wrapped where Java's line BreakIterator allows, continuation lines indented by two; every
line padded to both columns' width."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal

from moldau.tools.java_line_breaks import segments

ROW_WIDTH = 80
GAP = 2
INDENT = "  "
MAX_COLUMN = (ROW_WIDTH - GAP) // 2
# what Java's String.trim and the formatter's "\s+$" strip
_JAVA_SPACE = " \t\n\x0b\f\r"


def _java_trim(text: str) -> str:
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def _java_lines(text: str) -> list[str]:
    """Java's text.split("\\n"): trailing empty strings dropped."""
    lines = text.split("\n")
    while len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def wrap(text: str, width: int) -> list[str]:
    """The text's pieces for a column `width` wide: each embedded line filled with
    Java's line-break segments; a segment that does not fit starts a new, indented,
    piece (even one that does not fit there either)."""
    pieces: list[str] = []
    for line in _java_lines(_java_trim(text)):
        piece = ""
        for segment in segments(line):
            if len(piece) + len(segment) > width:
                pieces.append(piece.rstrip(_JAVA_SPACE))
                piece = INDENT + segment
            else:
                piece += segment
        if piece:
            pieces.append(piece)
    return pieces


def _widths(rows: Sequence[tuple[str, str]]) -> tuple[int, int]:
    """The option column: its widest entry, at most half the row; the description
    column: its widest entry, at most what the option column leaves."""
    option_width = min(MAX_COLUMN, max(len(option) for option, _ in rows))
    left = ROW_WIDTH - option_width - GAP
    return option_width, min(left, max(len(description) for _, description in rows))


def table(rows: Sequence[tuple[str, str]], any_required: bool = False) -> str:
    """The table of (option, description) rows, in the order given, headed as
    jopt-simple heads it; each line ends with a newline."""
    header = ([("Option (* = required)", "Description"), ("---------------------", "-----------")]
              if any_required else [("Option", "Description"), ("------", "-----------")])
    rows = [*header, *rows]
    option_width, description_width = _widths(rows)
    fitted: list[tuple[str, str]] = []
    for option, description in rows:
        lefts = wrap(option, option_width)
        rights = wrap(description, description_width)
        for n in range(max(len(lefts), len(rights))):
            fitted.append((lefts[n] if n < len(lefts) else "",
                           rights[n] if n < len(rights) else ""))
    # the widths again, of what was fitted (a segment too long for its column widens it)
    option_width, description_width = _widths(fitted)
    return "".join(f"{option:<{option_width}}{' ' * GAP}{description:<{description_width}}\n"
                   for option, description in fitted)


def java_string(value: object) -> str:
    """A default value as Java's toString shows it (jopt-simple's "(default: ...)")."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(java_string(v) for v in value) + "]"
    return str(value)


def _java_double(value: float) -> str:
    """Double.toString: plain from 10^-3 up to 10^7, d.dddE<n> outside (shortest digits
    that read back as the same double, as Python's repr has them)."""
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    shown = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) - 1 + int(exponent)
    return f"{'-' if sign else ''}{shown[0]}.{shown[1:] or '0'}E{power}"
