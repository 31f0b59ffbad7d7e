"""Kerberos principal names and `sasl.kerberos.principal.to.local.rules`, as Kafka's
KerberosName, KerberosRule and KerberosShortNamer read and apply them (the Hadoop
auth_to_local syntax), so a GSSAPI client becomes the same `User:<short name>` on Moldau
as on Kafka and ACLs written for one hold for the other.

A rule is `DEFAULT` (a one- or two-part name in the default realm -> its first part) or
`RULE:[<n>:<format>](<match>)s/<from>/<to>/[g][/L|/U]`: it applies to names of `n` parts;
`format` builds a string from `$0` (the realm) and `$1`, `$2` (the parts); `match`, a
regex, must match that whole string; the substitution (`g`: every occurrence) rewrites it;
`L`/`U` lower- or upper-case the result. The first rule that applies wins; none applying is
an error. The regexes are Java's: Python's `re` reads the common subset the same way, and
the `$n` group references of the replacement are translated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_RULES", "KerberosName", "KerberosNameError", "KerberosRule",
           "NoMatchingRule", "ShortNamer", "parse_rules"]

DEFAULT_RULES = ("DEFAULT",)

# `name[/host]@REALM`, each part free of '/' and '@' (KerberosName's grammar)
_NAME = re.compile(r"([^/@]*)(?:/([^/@]*))?@([^/@]*)")
# one rule, read from its start; the whole text must be consumed (KerberosShortNamer)
_RULE = re.compile(r"(DEFAULT)|RULE:\[([0-9]*):([^\]]*)\](?:\(([^)]*)\))?"
                   r"(?:s/([^/]*)/([^/]*)/(g)?)?/?(L|U)?")
# the format: literal text, then optionally `$` and digits (KerberosRule's parameters)
_PARAMETER = re.compile(r"([^$]*)(\$([0-9]*))?")
_NON_SIMPLE = re.compile(r"[/@]")
_DIGITS = "0123456789"  # Java's group references take ASCII digits only


class KerberosNameError(ValueError):
    """A name or rule that cannot be read, or a rule that fails on a name."""


class NoMatchingRule(KerberosNameError):
    """No rule gives a short name for the principal (Kafka's NoMatchingRule)."""


@dataclass(frozen=True)
class KerberosName:
    """`service[/host][@realm]`: a user (`alice@REALM`) has no host part."""

    service: str
    host: str | None
    realm: str | None

    @classmethod
    def parse(cls, principal: str) -> KerberosName:
        match = _NAME.fullmatch(principal)
        if match is None:
            if "@" in principal:
                raise KerberosNameError(f"Malformed Kerberos name: {principal}")
            return cls(principal, None, None)
        return cls(match.group(1), match.group(2), match.group(3))

    def __str__(self) -> str:
        host = f"/{self.host}" if self.host is not None else ""
        realm = f"@{self.realm}" if self.realm is not None else ""
        return f"{self.service}{host}{realm}"


def _java_replacement(template: str, pattern: re.Pattern[str]
                      ) -> Callable[[re.Match[str]], str]:
    """Java's Matcher replacement syntax against `pattern`'s groups: `$n` names a group
    (Java takes as many digits as still name an existing group, so `$12` with one group
    is group 1 then "2"), `${name}` a named one, a backslash quotes the next character,
    anything else is literal. Checked here, so a bad reference fails when the rule is
    read rather than at a client's login."""
    literals: list[str] = []  # the text around the group references
    groups: list[int] = []  # the groups, one between each two literals
    literal: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if char == "\\":
            if i + 1 == len(template):
                raise KerberosNameError("character to be escaped is missing")
            literal.append(template[i + 1])
            i += 2
        elif char != "$":
            literal.append(char)
            i += 1
        else:
            literals.append("".join(literal))
            literal = []
            group, i = _group_reference(template, i + 1, pattern)
            groups.append(group)
    literals.append("".join(literal))

    def expand(match: re.Match[str]) -> str:
        out = [literals[0]]
        for group, text in zip(groups, literals[1:], strict=True):
            out.append(match.group(group) or "")  # a group that did not take part: ""
            out.append(text)
        return "".join(out)

    return expand


def _group_reference(template: str, start: int, pattern: re.Pattern[str]) -> tuple[int, int]:
    """The group number a reference starting at `start` (just after `$`) names, and where
    the text after it starts."""
    named = re.match(r"\{([A-Za-z][A-Za-z0-9]*)\}", template[start:])
    if named is not None:
        name = named.group(1)
        if name not in pattern.groupindex:
            raise KerberosNameError(f"No group with name {{{name}}}")
        return pattern.groupindex[name], start + len(named.group())
    if start == len(template) or template[start] not in _DIGITS:
        raise KerberosNameError("Illegal group reference")
    number = int(template[start])
    end = start + 1
    while end < len(template) and template[end] in _DIGITS:
        longer = number * 10 + int(template[end])
        if longer > pattern.groups:
            break
        number, end = longer, end + 1
    if number > pattern.groups:
        raise KerberosNameError(f"No group {number}")
    return number, end


@dataclass(frozen=True)
class KerberosRule:
    """One parsed rule; `text` is how it was written."""

    text: str
    default_realm: str
    is_default: bool = False
    components: int = 0
    format: str = ""
    match: re.Pattern[str] | None = None
    substitute: re.Pattern[str] | None = None
    replacement: Callable[[re.Match[str]], str] | None = None
    repeat: bool = False
    case: str = ""  # "L", "U" or ""

    def apply(self, parts: Sequence[str]) -> str | None:
        """The short name for `parts` (realm first, then the name's parts), None when this
        rule does not apply."""
        result: str | None = None
        if self.is_default:
            if parts[0] == self.default_realm:
                result = parts[1]
        elif len(parts) - 1 == self.components:
            base = self._fill_format(parts)
            if self.match is None or self.match.fullmatch(base):
                result = base
                if self.substitute is not None and self.replacement is not None:
                    result = self.substitute.sub(self.replacement, base,
                                                 count=0 if self.repeat else 1)
        if result is not None and _NON_SIMPLE.search(result):
            raise NoMatchingRule(f"Non-simple name {result} after auth_to_local rule {self}")
        if result is not None and self.case == "L":
            result = result.lower()
        elif result is not None and self.case == "U":
            result = result.upper()
        return result

    def _fill_format(self, parts: Sequence[str]) -> str:
        out = []
        for literal, reference, digits in _PARAMETER.findall(self.format):
            out.append(literal)
            if not reference:
                continue
            if not digits:
                raise KerberosNameError(f"bad format in username mapping in {digits}")
            index = int(digits)
            if index >= len(parts):
                raise KerberosNameError(f"index {index} from {self.format} is outside of the "
                                        f"valid range 0 to {len(parts) - 1}")
            out.append(parts[index])
        return "".join(out)

    def __str__(self) -> str:
        return self.text


def _compile(regex: str, rule: str) -> re.Pattern[str]:
    try:
        return re.compile(regex)
    except re.error as exc:
        raise KerberosNameError(f"Invalid rule: {rule} ({regex}: {exc})") from None


def parse_rules(default_realm: str, rules: Sequence[str]) -> list[KerberosRule]:
    """Read the rules of `sasl.kerberos.principal.to.local.rules`; KerberosNameError names
    the first one that is not a rule."""
    parsed = []
    for rule in rules:
        found = _RULE.match(rule)
        if found is None:
            raise KerberosNameError(f"Invalid rule: {rule}")
        if found.end() != len(rule):
            raise KerberosNameError(f"Invalid rule: `{rule}`, unmatched substring: "
                                    f"`{rule[found.end():]}`")
        if found.group(1) is not None:
            parsed.append(KerberosRule(rule, default_realm, is_default=True))
            continue
        count, fmt, match, source, target, repeat, case = found.groups()[1:]
        if not count:
            raise KerberosNameError(f"Invalid rule: {rule} (no component count)")
        substitute = _compile(source, rule) if source is not None else None
        try:
            replacement = (_java_replacement(target, substitute)
                           if substitute is not None else None)
        except KerberosNameError as exc:
            raise KerberosNameError(f"Invalid rule: {rule} ({exc})") from None
        parsed.append(KerberosRule(
            rule, default_realm, components=int(count), format=fmt,
            match=_compile(match, rule) if match is not None else None,
            substitute=substitute, replacement=replacement, repeat=repeat == "g",
            case=case or ""))
    return parsed


class ShortNamer:
    """Kafka's KerberosShortNamer: a principal's short name by the first rule that applies
    (`User:<short name>` is the GSSAPI client's principal)."""

    def __init__(self, default_realm: str, rules: Sequence[str] = DEFAULT_RULES) -> None:
        self.rules = parse_rules(default_realm, rules)

    def short_name(self, principal: str | KerberosName) -> str:
        """The short name; NoMatchingRule when no rule applies, KerberosNameError for a
        malformed name or a rule that fails on it."""
        name = principal if isinstance(principal, KerberosName) else KerberosName.parse(principal)
        if name.host is None:
            if name.realm is None:
                return name.service  # already simple
            parts = [name.realm, name.service]
        else:
            parts = [name.realm or "", name.service, name.host]
        for rule in self.rules:
            result = rule.apply(parts)
            if result is not None:
                return result
        shown = ", ".join(str(r) for r in self.rules)
        raise NoMatchingRule(f"No rules apply to {name}, rules [{shown}]")

    def __call__(self, principal: str) -> str:
        return self.short_name(principal)
