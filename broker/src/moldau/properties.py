"""Java `.properties` files, read and written with java.util.Properties' exact rules.

One reader and one writer for every properties file Moldau touches (server.properties,
meta.properties, the tools' --command-config files ...), so that a file means the same thing
to each of them and to Kafka:

- `parse(text)` is Properties.load(Reader): logical lines, comments, separators, escapes;
- `load(path)` is Properties.load(InputStream): the bytes decoded as ISO-8859-1;
- `dumps(props, comments, now)` is Properties.store(OutputStream, comments) as text.

This module imports nothing from moldau: it sits below protocol/ and storage/.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path

__all__ = ["PropertiesError", "dumps", "load", "parse"]

# A natural line ends at \n, \r or \r\n, nothing else: not at \f (whitespace here) nor at
# the other breaks str.splitlines() knows (\v, \x1c-\x1e, \x85, \u2028, \u2029).
_NATURAL_LINE = re.compile(r"\r\n|\r|\n")
_WHITESPACE = " \t\f"
_KEY_END = "=: \t\f"
# \uXXXX, a \u without four hex digits (malformed), or a backslash before any other char.
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|(u)|(.))", re.DOTALL)
_UNESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_ESCAPED = {"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f", "\\": "\\\\",
            "=": "\\=", ":": "\\:", "#": "\\#", "!": "\\!"}
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class PropertiesError(ValueError):
    """A malformed \\uxxxx escape, where Java's Properties.load throws
    IllegalArgumentException("Malformed \\\\uxxxx encoding.").

    `key` is the decoded key (as written if the bad escape is in the key itself), `value`
    the value as written, `line` the number of the natural line the logical line starts on.
    """

    def __init__(self, escape: str, key: str, value: str, line: int) -> None:
        super().__init__(f"Malformed \\uxxxx encoding in line {line}: {escape}")
        self.escape = escape
        self.key = key
        self.value = value
        self.line = line


class _MalformedEscape(Exception):
    """Raised by _unescape; parse() turns it into a PropertiesError with the context."""


# -- reading -----------------------------------------------------------------------------


def parse(text: str) -> dict[str, str]:
    """The properties in `text` (Properties.load(Reader)); a repeated key keeps its last value.

    Raises PropertiesError for a malformed \\uxxxx escape.
    """
    props: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key_text, value_text = _split(line)
        try:
            key = _unescape(key_text)
        except _MalformedEscape as exc:
            raise PropertiesError(str(exc), key_text, value_text, number) from None
        try:
            props[key] = _unescape(value_text)
        except _MalformedEscape as exc:
            raise PropertiesError(str(exc), key, value_text, number) from None
    return props


def load(path: str | os.PathLike[str]) -> dict[str, str]:
    """The properties of a file, as Properties.load(InputStream) reads it: each byte is one
    ISO-8859-1 character, so other characters must be written as \\uXXXX escapes.

    Raises OSError if the file cannot be read, PropertiesError for a malformed escape.
    """
    return parse(Path(path).read_bytes().decode("latin-1"))


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(number of its first natural line, text) of each logical line, as LineReader joins
    them: leading whitespace of every natural line dropped, a line ending in an odd number
    of backslashes continued (without that backslash) by the next one."""
    naturals = _NATURAL_LINE.split(text)
    if not naturals[-1]:
        naturals.pop()  # the text ends with a line break: no line after it
    pending, start, empty_continued = "", 0, False
    for number, natural in enumerate(naturals, 1):
        line = natural.lstrip(_WHITESPACE)
        if not pending:
            # LineReader looks for blank and comment lines only while the logical line is
            # still empty: a comment is never continued, but a continuation may start with #.
            if not line or line[0] in "#!":
                empty_continued = False
                continue
            start = number
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending += line[:-1]
            empty_continued = not pending
            continue
        yield start, pending + line
        pending, empty_continued = "", False
    if pending:  # a backslash on the last line continues into nothing (Java drops it)
        yield start, pending
    elif empty_continued and not text.endswith("\r\n"):
        # LineReader's quirk: a lone backslash line at the very end (or followed by \n or \r
        # only, not \r\n, whose \n it consumes first) gives an empty line, not none, which
        # loads as the empty key with an empty value.
        yield start, ""


def _split(line: str) -> tuple[str, str]:
    """Key and value of a logical line, still escaped, as Properties.load0 cuts them: the key
    ends at the first unescaped '=', ':' or whitespace; then whitespace, at most one '=' or
    ':' and more whitespace are skipped. The value keeps its trailing whitespace."""
    i, n = 0, len(line)
    while i < n and line[i] not in _KEY_END:
        i += 2 if line[i] == "\\" else 1  # an escaped char never ends the key
    key_end = i = min(i, n)
    while i < n and line[i] in _WHITESPACE:
        i += 1
    if i < n and line[i] in "=:":
        i += 1
        while i < n and line[i] in _WHITESPACE:
            i += 1
    return line[:key_end], line[i:]


def _unescape(text: str) -> str:
    """Properties.loadConvert: \\t \\n \\r \\f, \\uXXXX, and a backslash before any other
    character stands for that character."""
    if "\\" not in text:
        return text
    decoded = _ESCAPE.sub(_unescape_one, text)
    # \uXXXX escapes are UTF-16 units, as Java's chars: join escaped surrogate pairs into one
    # character (a lone surrogate stays, as in a Java String).
    return decoded.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _unescape_one(match: re.Match[str]) -> str:
    hex_digits, bad_u, other = match.groups()
    if hex_digits is not None:
        return chr(int(hex_digits, 16))
    if bad_u is not None:
        raise _MalformedEscape(match.string[match.start() : match.start() + 6])
    return _UNESCAPED.get(other, other)


# -- writing -----------------------------------------------------------------------------


def dumps(
    props: Mapping[str, str], comments: str | None = None, now: datetime | None = None
) -> str:
    """The text Properties.store(OutputStream, comments) writes: the comments as `#` lines
    (none if None; "" gives a lone `#`), a `#<date>` line (Date.toString() of `now`, local
    time by default), then `key=value` lines sorted by key as Java 18+ sorts them.

    Keys and values are ASCII (other chars as \\uXXXX); comments keep ISO-8859-1 letters as
    Java does, so encode the text as ISO-8859-1 (for ASCII-only comments that is ASCII).
    """
    lines: list[str] = [] if comments is None else _comment_lines(comments)
    lines.append("#" + _java_date(now if now is not None else datetime.now().astimezone()))
    for key in sorted(props, key=_utf16):
        lines.append(f"{_escape(key, is_key=True)}={_escape(props[key], is_key=False)}")
    return "".join(line + "\n" for line in lines)


def _comment_lines(comments: str) -> list[str]:
    """Properties.writeComments: each line gets a `#` unless it already starts with # or !;
    characters above U+00FF are written as \\uXXXX."""
    first, *rest = _NATURAL_LINE.split(comments)
    lines = ["#" + first] + [line if line[:1] in ("#", "!") else "#" + line for line in rest]
    return [re.sub(r"[^\x00-\xff]", lambda m: _unicode_escape(m.group()), line)
            for line in lines]


def _escape(text: str, is_key: bool) -> str:
    """Properties.saveConvert with escapeUnicode: a space is escaped in keys and at the start
    of values (elsewhere in a value it survives loading as it is)."""
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch == " ":
            out.append("\\ " if is_key or i == 0 else " ")
        elif ch in _ESCAPED:
            out.append(_ESCAPED[ch])
        elif ch < " " or ch > "~":
            out.append(_unicode_escape(ch))
        else:
            out.append(ch)
    return "".join(out)


def _unicode_escape(ch: str) -> str:
    """\\uXXXX (uppercase hex) for each UTF-16 unit of `ch`: two for a character beyond the
    BMP, as Java's chars are."""
    data = ch.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{data[k]:02X}{data[k + 1]:02X}" for k in range(0, len(data), 2))


def _utf16(text: str) -> bytes:
    """Sort key giving Java's String order (by UTF-16 unit), which differs from code point
    order for characters beyond the BMP."""
    return text.encode("utf-16-be", "surrogatepass")


def _java_date(now: datetime) -> str:
    """Date.toString(): `EEE MMM dd HH:mm:ss zzz yyyy`, English names whatever the locale."""
    zone = now.tzname() or "UTC"
    return (
        f"{_WEEKDAYS[now.weekday()]} {_MONTHS[now.month - 1]} {now.day:02d}"
        f" {now:%H:%M:%S} {zone} {now.year}"
    )
