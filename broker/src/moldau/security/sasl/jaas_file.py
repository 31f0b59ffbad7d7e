"""JAAS login configuration files as the JDK's ConfigFile reads them:
`Name { module flag key="value" ... ; ... };`, several sections, comments, only double
quotes, and `${prop}` expanded from system properties. Errors are the JDK's texts, which
name the line."""

from __future__ import annotations

from collections.abc import Mapping

from moldau.security.sasl.jaas_entry import CONTROL_FLAGS, JaasEntry, JaasError
from moldau.security.sasl.jaas_tokenizer import JAAS_FILE_SYNTAX, StreamTokenizer, Token, TokenKind


def parse_jaas_file(text: str, system_properties: Mapping[str, str] | None = None
                    ) -> dict[str, list[JaasEntry]]:
    """The sections of a JAAS login configuration file, by name. `${prop}` in a value
    expands from `system_properties` (`${/}` is "/"); an unknown one is an error."""
    return _JaasFileParser(text, system_properties or {}).parse()


def load_jaas_file(path: str, system_properties: Mapping[str, str] | None = None
                   ) -> dict[str, list[JaasEntry]]:
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise JaasError(f"Cannot read the JAAS configuration file {path}: {exc}") from None
    try:
        return parse_jaas_file(text, system_properties)
    except JaasError as exc:
        raise JaasError(f"{path}: {exc}") from None


class _JaasFileParser:
    """ConfigFile.Spi's recursive descent: `Name { module flag key="value"... ; ... };`."""

    _VALUE_TOKENS = ("module class name", "controlFlag", "option key", "option value")

    def __init__(self, text: str, system_properties: Mapping[str, str]) -> None:
        self._tokenizer = StreamTokenizer(text, JAAS_FILE_SYNTAX)
        self._properties = system_properties
        self._lookahead = self._next()

    def _next(self) -> Token:
        while (token := self._tokenizer.next_token()).kind is TokenKind.EOL:
            pass
        return token

    def parse(self) -> dict[str, list[JaasEntry]]:
        sections: dict[str, list[JaasEntry]] = {}
        while self._lookahead.kind is not TokenKind.EOF:
            name, entries = self._parse_section()
            if name in sections:
                raise JaasError(
                    f"Configuration Error:\n\tCan not specify multiple entries for {name}")
            sections[name] = entries
        return sections

    def _parse_section(self) -> tuple[str, list[JaasEntry]]:
        name_token = self._lookahead
        if name_token.sval is None:
            raise self._unexpected("application name")
        self._lookahead = self._next()
        self._match("{")
        entries: list[JaasEntry] = []
        while not self._lookahead.is_char("}"):
            login_module = self._match("module class name")
            flag = self._match("controlFlag")
            if flag.upper().lower() not in CONTROL_FLAGS:
                raise JaasError(f"Configuration Error:\n\tInvalid control flag, {flag.upper()}")
            options: dict[str, str] = {}
            while not self._lookahead.is_char(";"):
                key = self._match("option key")
                self._match("=")
                value_line = self._lookahead.line
                options[key] = self._expand(self._match("option value"), value_line)
            self._lookahead = self._next()
            entries.append(JaasEntry(login_module, flag.upper().lower(), options))
        self._match("}")
        self._match(";")
        return name_token.text, entries

    def _match(self, expected: str) -> str:
        token = self._lookahead
        if token.kind is TokenKind.EOF:
            raise JaasError(
                f"Configuration Error:\n\texpected [{expected}], read [end of file]")
        # Only double quotes quote here: ConfigFile refuses a single-quoted token.
        named = token.kind is TokenKind.WORD or (
            token.kind is TokenKind.QUOTED and token.quote == '"')
        if named and expected in self._VALUE_TOKENS:
            self._lookahead = self._next()
            return token.text
        if token.kind is TokenKind.ORDINARY and token.text in ("{", "}", ";", "="):
            if token.text == expected:
                self._lookahead = self._next()
                return token.text
            raise JaasError(f"Configuration Error:\n\tLine {token.line}: expected [{expected}]")
        raise self._unexpected(expected)

    def _unexpected(self, expected: str) -> JaasError:
        # Java prints "null" for a number or a stray character; its text helps more.
        token = self._lookahead
        return JaasError(f"Configuration Error:\n\tLine {token.line}: expected [{expected}], "
                         f"found [{token.text}]")

    def _expand(self, value: str, line: int) -> str:
        if not value:
            return value
        try:
            expanded = expand_properties(value, self._properties)
        except KeyError as exc:
            raise JaasError(f"Configuration Error:\n\tLine {line}: unable to expand "
                            f"property {exc.args[0]}") from None
        if not expanded:
            raise JaasError(f"Configuration Error:\n\tLine {line}: system property "
                            f"[{value}] expanded to empty value")
        return expanded


def expand_properties(value: str, properties: Mapping[str, str]) -> str:
    """The JDK's PropertyExpander: `${name}` becomes the property (KeyError when it is
    not set), `${/}` the file separator; `${{...}}` and an unclosed `${` stay as text."""
    out: list[str] = []
    position = 0
    while (start := value.find("${", position)) != -1:
        out.append(value[position:start])
        if value.startswith("{", start + 2):
            end = value.find("}}", start + 2)
            if end == -1:
                out.append(value[start:])
                return "".join(out)
            out.append(value[start:end + 2])
            position = end + 2
            continue
        end = value.find("}", start + 2)
        if end == -1:
            out.append(value[start:])
            return "".join(out)
        name = value[start + 2:end]
        out.append("/" if name == "/" else properties[name])
        position = end + 1
    out.append(value[position:])
    return "".join(out)
