"""The principal of a connection: KafkaPrincipal, and Kafka's `ssl.principal.mapping.rules`
that turn a client certificate's subject DN into a principal name.

Needs no TLS context (only the peer's DER certificate), so other authentication paths can
reuse KafkaPrincipal.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field
from functools import lru_cache

from moldau.security.ssl_settings import PRINCIPAL_MAPPING_RULES, TlsConfigError
from moldau.security.x500 import distinguished_name

DEFAULT_RULES = "DEFAULT"


class PrincipalMappingError(ValueError):
    """No `ssl.principal.mapping.rules` rule applies to a certificate's name (Kafka fails
    the authentication of that connection)."""


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal as Kafka writes it: "User:alice"."""

    name: str
    type: str = "User"

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = KafkaPrincipal("ANONYMOUS")


@dataclass(frozen=True)
class _Rule:
    pattern_text: str | None  # None = DEFAULT
    replacement_text: str = ""
    case: str = ""  # "", "L" or "U"
    pattern: re.Pattern[str] | None = None
    parts: tuple[str | int, ...] = ()  # literal text (str) and group references
    names: frozenset[int] = field(default_factory=frozenset)  # indexes of named refs

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        # Kafka: matches() decides, then replaceAll() rewrites (the whole DN, normally).
        result = self.pattern.sub(self._expand, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def _expand(self, match: re.Match[str]) -> str:
        out: list[str] = []
        for index, part in enumerate(self.parts):
            if index in self.names or isinstance(part, int):
                out.append(match.group(part) or "")
            else:
                out.append(part)
        return "".join(out)

    def __str__(self) -> str:  # Kafka's Rule.toString
        if self.pattern_text is None:
            return "DEFAULT"
        case = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern_text}/{self.replacement_text}{case}"


_SPACE = " \t\n\x0b\f\r"


def _read_part(text: str, pos: int) -> tuple[str, int] | None:
    """Up to the next unescaped '/' (backslash escapes kept); None if there is none."""
    start = pos
    while pos < len(text):
        if text[pos] == "\\":
            pos += 2
        elif text[pos] == "/":
            return text[start:pos], pos + 1
        else:
            pos += 1
    return None


def _java_regex(pattern: str) -> str:
    """The few Java regex spellings Python writes differently: named groups."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("\\k<", i):
            close = pattern.find(">", i)
            if close > 0:
                out.append(f"(?P={pattern[i + 3:close]})")
                i = close + 1
                continue
        if pattern[i] == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if pattern.startswith("(?<", i) and i + 3 < len(pattern) and pattern[i + 3].isalpha():
            out.append("(?P<")
            i += 3
            continue
        out.append(pattern[i])
        i += 1
    return "".join(out)


def _compile_replacement(rule: str, text: str, pattern: re.Pattern[str]
                         ) -> tuple[tuple[str | int, ...], frozenset[int]]:
    """Java's replacement syntax: \\x is a literal x, $n a group (Java takes more digits
    while the number stays a valid group), ${name} a named group. As in Kafka, $n with n
    beyond the groups is literal text."""
    groups = pattern.groups
    parts: list[str | int] = []
    names: set[int] = set()
    literal: list[str] = []

    def flush() -> None:
        if literal:
            parts.append("".join(literal))
            literal.clear()

    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 == len(text):
                raise TlsConfigError(PRINCIPAL_MAPPING_RULES, f"invalid rule {rule}: the "
                                     "replacement ends with a lone backslash")
            literal.append(text[i + 1])
            i += 2
        elif ch == "$" and text.startswith("{", i + 1):
            close = text.find("}", i)
            name = text[i + 2:close] if close > 0 else ""
            if name not in pattern.groupindex:
                raise TlsConfigError(PRINCIPAL_MAPPING_RULES, f"invalid rule {rule}: no "
                                     f"group named {name!r}")
            flush()
            names.add(len(parts))
            parts.append(name)
            i = close + 1
        elif ch == "$" and i + 1 < len(text) and text[i + 1] in "0123456789":
            ref = int(text[i + 1])
            if ref > groups:
                literal.append("$")
                i += 1
                continue
            j = i + 2
            while j < len(text) and text[j] in "0123456789" and ref * 10 + int(text[j]) <= groups:
                ref = ref * 10 + int(text[j])
                j += 1
            flush()
            parts.append(ref)
            i = j
        elif ch == "$":
            raise TlsConfigError(PRINCIPAL_MAPPING_RULES, f"invalid rule {rule}: '$' must be "
                                 "followed by a group number or {name}; write \\$ for a $")
        else:
            literal.append(ch)
            i += 1
    flush()
    return tuple(parts), frozenset(names)


def _make_rule(source: str, pattern_text: str, replacement: str, case: str) -> _Rule:
    try:
        pattern = re.compile(_java_regex(pattern_text))
    except re.error as exc:
        raise TlsConfigError(PRINCIPAL_MAPPING_RULES, f"invalid rule {source}: bad pattern "
                             f"{pattern_text!r}: {exc}") from None
    parts, names = _compile_replacement(source, replacement, pattern)
    return _Rule(pattern_text, replacement, case, pattern, parts, names)


def parse_rules(rules: str | None) -> list[_Rule]:
    """Kafka's `ssl.principal.mapping.rules`: comma-separated `DEFAULT` and
    `RULE:pattern/replacement/[LU]` entries (whitespace around entries and empty entries
    are ignored; pattern and replacement may hold commas and `\\/`)."""
    text = (DEFAULT_RULES if rules is None else rules).strip(_SPACE)
    out: list[_Rule] = []
    pos = 0
    while pos < len(text):
        while pos < len(text) and text[pos] in _SPACE:
            pos += 1
        start = pos
        if text.startswith(",", pos):
            pos += 1
            continue
        if text.startswith("DEFAULT", pos):
            out.append(_Rule(None))
            pos += len("DEFAULT")
        elif text.startswith("RULE:", pos):
            first = _read_part(text, pos + len("RULE:"))
            second = _read_part(text, first[1]) if first else None
            if first is None or second is None:
                end = text.find(",", pos)
                raise TlsConfigError(PRINCIPAL_MAPPING_RULES, "invalid rule "
                                     f"{text[pos:end if end >= 0 else None]!r}: expected "
                                     "RULE:pattern/replacement/ with an optional L or U")
            pos = second[1]
            case = ""
            if pos < len(text) and text[pos] in "LU":
                case = text[pos]
                pos += 1
            out.append(_make_rule(text[start:pos], first[0], second[0], case))
        while pos < len(text) and text[pos] in _SPACE:
            pos += 1
        if pos < len(text):
            if text[pos] != ",":
                end = text.find(",", pos)
                bad = text[start:end if end >= 0 else None].strip(_SPACE)
                raise TlsConfigError(PRINCIPAL_MAPPING_RULES, f"invalid rule {bad!r}: "
                                     "expected DEFAULT or RULE:pattern/replacement/[LU]")
            pos += 1
    return out


class SslPrincipalMapper:
    """Maps a certificate's RFC 2253 DN to a principal name with Kafka's rules."""

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        self.rules = parse_rules(rules)

    @staticmethod
    def from_rules(rules: str | None) -> SslPrincipalMapper:
        """A parsed mapper, cached: connections share the listener's rules string."""
        return _cached_mapper(rules)

    def get_name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise PrincipalMappingError(f"No rules apply to {dn}, rules {self._names()}")

    def _names(self) -> str:
        return "[" + ", ".join(str(r) for r in self.rules) + "]"

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = {self._names()})"


@lru_cache(maxsize=64)
def _cached_mapper(rules: str | None) -> SslPrincipalMapper:
    return SslPrincipalMapper(rules)


def principal_from_certificate(peer_cert_der: bytes | None,
                               rules: str | None = DEFAULT_RULES) -> str:
    """The principal name (no "User:" prefix) of a TLS peer: ANONYMOUS without a client
    certificate, else the subject DN mapped by `ssl.principal.mapping.rules`.
    Raises PrincipalMappingError when no rule applies (Kafka fails that authentication)."""
    if not peer_cert_der:
        return ANONYMOUS.name
    return SslPrincipalMapper.from_rules(rules).get_name(distinguished_name(peer_cert_der))


def peer_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None,
                   rules: str | None = DEFAULT_RULES) -> KafkaPrincipal:
    """The KafkaPrincipal of an established TLS connection (asyncio: the transport's
    "ssl_object" extra info)."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    return KafkaPrincipal(principal_from_certificate(der, rules))
