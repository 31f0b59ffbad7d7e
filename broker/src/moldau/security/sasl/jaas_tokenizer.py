"""The part of java.io.StreamTokenizer that JAAS configuration is read with, quirks
included, so that a value Java accepts reads the same here and one it refuses is refused.

Two syntax tables matter: Kafka's JaasConfig (`sasl.jaas.config`: almost every printable
character is a word character) and the JDK's ConfigFile (login configuration files: the
tokenizer's defaults, numbers parsed, ends of line significant). Both treat bytes 0-32 as
white space, `'` and `"` as quotes and `/` as a comment character with `//` and `/* */`
comments on."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass


class TokenKind(enum.Enum):
    WORD = enum.auto()
    QUOTED = enum.auto()
    NUMBER = enum.auto()
    ORDINARY = enum.auto()  # a single character that is nothing else: ; = { } ...
    EOL = enum.auto()
    EOF = enum.auto()


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    text: str  # the word, the quoted string's content, the number or the character
    line: int  # 1-based line the token starts on
    quote: str = ""  # which quote character, for QUOTED

    @property
    def sval(self) -> str | None:
        """StreamTokenizer's `sval`: set only for words and quoted strings."""
        return self.text if self.kind in (TokenKind.WORD, TokenKind.QUOTED) else None

    def is_char(self, char: str) -> bool:
        return self.kind is TokenKind.ORDINARY and self.text == char


@dataclass(frozen=True)
class Syntax:
    is_word_start: Callable[[str], bool]  # a character below 256 that is a word character
    parse_numbers: bool
    eol_significant: bool


def _kafka_word_char(char: str) -> bool:
    # JaasConfig: wordChars(32, 128) and (160, 255), minus what is made whitespace,
    # comment, quote or ordinary afterwards.
    code = ord(char)
    return (33 <= code <= 128 or 160 <= code <= 255) and char not in "/'\";="


def _default_word_char(char: str) -> bool:
    # StreamTokenizer's defaults (letters and 160-255) plus ConfigFile's $ _ - *.
    return (char.isascii() and char.isalpha()) or 160 <= ord(char) <= 255 or char in "$_-*"


KAFKA_JAAS_CONFIG_SYNTAX = Syntax(_kafka_word_char, parse_numbers=False, eol_significant=False)
JAAS_FILE_SYNTAX = Syntax(_default_word_char, parse_numbers=True, eol_significant=True)

_QUOTES = "\"'"
_NUMBER_CHARS = "0123456789.-"
_ESCAPES = {"a": "\x07", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\x0b"}
_OCTAL = "01234567"
_EOF = ""


class StreamTokenizer:
    def __init__(self, text: str, syntax: Syntax) -> None:
        self._text = text
        self._syntax = syntax
        self._pos = 0
        self._line = 1

    def _peek(self) -> str:
        return self._text[self._pos] if self._pos < len(self._text) else _EOF

    def _read(self) -> str:
        char = self._peek()
        if char:
            self._pos += 1
        return char

    def _is_word_char(self, char: str) -> bool:
        if not char:
            return False
        if ord(char) >= 256:
            return True
        return self._syntax.is_word_start(char) or (
            self._syntax.parse_numbers and char in _NUMBER_CHARS)

    def next_token(self) -> Token:
        while True:
            char = self._read()
            if not char:
                return Token(TokenKind.EOF, "", self._line)
            if char in "\r\n":
                line = self._line
                self._line += 1
                if char == "\r" and self._peek() == "\n":
                    self._pos += 1
                if self._syntax.eol_significant:
                    return Token(TokenKind.EOL, "", line)
                continue
            if ord(char) <= 32:
                continue
            if self._syntax.parse_numbers and char in _NUMBER_CHARS:
                return self._number(char)
            if ord(char) >= 256 or self._syntax.is_word_start(char):
                return self._word(char)
            if char in _QUOTES:
                return self._quoted(char)
            if char == "/":
                if self._skip_comment():
                    continue
                return Token(TokenKind.EOF, "", self._line)
            return Token(TokenKind.ORDINARY, char, self._line)

    def _word(self, first: str) -> Token:
        start = self._pos - 1
        while self._is_word_char(self._peek()):
            self._pos += 1
        return Token(TokenKind.WORD, self._text[start:self._pos], self._line)

    def _number(self, first: str) -> Token:
        start = self._pos - 1
        if first == "-" and not (self._peek() == "." or self._peek().isdigit()):
            return Token(TokenKind.ORDINARY, "-", self._line)
        seen_dot = first == "."
        while True:
            char = self._peek()
            if char == "." and not seen_dot:
                seen_dot = True
            elif not (char and "0" <= char <= "9"):
                break
            self._pos += 1
        return Token(TokenKind.NUMBER, self._text[start:self._pos], self._line)

    def _quoted(self, quote: str) -> Token:
        # Ends at the matching quote, or unterminated at an end of line or of input
        # (the end of line is then read again as white space).
        line = self._line
        out: list[str] = []
        while (char := self._peek()) and char not in (quote, "\n", "\r"):
            self._pos += 1
            out.append(self._escape() if char == "\\" else char)
        if char == quote:
            self._pos += 1
        return Token(TokenKind.QUOTED, "".join(out), line, quote)

    def _escape(self) -> str:
        char = self._read()
        if not char:
            return "\uffff"  # Java appends (char) -1 for a backslash at the end
        if char == "\n" or (char == "\r" and self._peek() != "\n"):
            self._line += 1  # an escaped line break continues the string
        if char in _OCTAL:
            value = int(char)
            if self._peek_is_octal():
                value = value * 8 + int(self._read())
                if char <= "3" and self._peek_is_octal():
                    value = value * 8 + int(self._read())
            return chr(value)
        return _ESCAPES.get(char, char)

    def _peek_is_octal(self) -> bool:
        char = self._peek()
        return bool(char) and char in _OCTAL

    def _skip_comment(self) -> bool:
        """After a `/`: skip the comment; False when input ends inside `/* */`."""
        # Java consumes the character after the `/` before deciding, so a lone `/`
        # right before a line break comments out the next line too.
        char = self._read()
        if char == "*":
            previous = ""
            while True:
                char = self._read()
                if char == "/" and previous == "*":
                    return True
                if char in ("\r", "\n"):
                    self._line += 1
                    if char == "\r" and self._peek() == "\n":
                        self._pos += 1
                    char = self._read()  # Java's quirk: this one is never checked for '/'
                if not char:
                    return False
                previous = char
        if char == "\n" or (char == "\r" and self._peek() != "\n"):
            self._line += 1
        while (char := self._peek()) and char not in "\r\n":
            self._pos += 1
        return True
