"""An immutable view of every ACL a broker knows, indexed for the questions the authorizer
asks: which ACL sets apply to one literal resource (its literal name, the literal `*`, each
prefix pattern of its name), and which bindings a filter selects.

Immutable so the request path reads it without a lock while the ZooKeeper side builds the
next one (`with_acls`) and swaps it in.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from moldau.security.acls import (
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
    ResourceType,
)

Entries = frozenset[AccessControlEntry]
_Key = tuple[ResourceType, str]


class AclSnapshot:
    """Every stored pattern with its (non-empty) entries."""

    __slots__ = ("_acls", "_literal", "_prefix_lengths", "_prefixed")

    def __init__(self, acls: Mapping[ResourcePattern, Entries] | None = None) -> None:
        self._acls: dict[ResourcePattern, Entries] = {
            pattern: entries for pattern, entries in (acls or {}).items() if entries}
        self._literal: dict[_Key, Entries] = {}
        self._prefixed: dict[_Key, Entries] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for pattern, entries in self._acls.items():
            key = (pattern.resource_type, pattern.name)
            if pattern.pattern_type is PatternType.LITERAL:
                self._literal[key] = entries
            elif pattern.pattern_type is PatternType.PREFIXED:
                self._prefixed[key] = entries
                lengths.setdefault(pattern.resource_type, set()).add(len(pattern.name))
        # only the prefix lengths in use are tried against a resource name
        self._prefix_lengths = {resource_type: tuple(sorted(found))
                                for resource_type, found in lengths.items()}

    def with_acls(self, pattern: ResourcePattern, entries: Entries) -> AclSnapshot:
        """A new snapshot where `pattern` has `entries` (none: the pattern goes)."""
        acls = dict(self._acls)
        if entries:
            acls[pattern] = entries
        else:
            acls.pop(pattern, None)
        return AclSnapshot(acls)

    def get(self, pattern: ResourcePattern) -> Entries:
        return self._acls.get(pattern, frozenset())

    def __contains__(self, pattern: object) -> bool:
        return pattern in self._acls

    def __len__(self) -> int:
        return len(self._acls)

    def items(self) -> Iterator[tuple[ResourcePattern, Entries]]:
        return iter(self._acls.items())

    def acl_sets_for(self, resource_type: ResourceType, name: str) -> list[Entries]:
        """The ACL sets that apply to the literal resource `name` (Kafka's matchingAcls)."""
        found: list[Entries] = []
        wildcard = self._literal.get((resource_type, WILDCARD_RESOURCE))
        if wildcard:
            found.append(wildcard)
        if name != WILDCARD_RESOURCE:
            literal = self._literal.get((resource_type, name))
            if literal:
                found.append(literal)
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            prefixed = self._prefixed.get((resource_type, name[:length]))
            if prefixed:
                found.append(prefixed)
        return found

    def bindings(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The bindings a filter selects, in Kafka's order (by resource type, pattern type,
        then name in reverse; entries in a stable order within a pattern)."""
        ordered = sorted(self._acls, key=lambda pattern: pattern.name, reverse=True)
        ordered.sort(key=lambda pattern: (pattern.resource_type, pattern.pattern_type))
        out: list[AclBinding] = []
        for pattern in ordered:
            if not binding_filter.pattern_filter.matches(pattern):
                continue
            entries = sorted(self._acls[pattern], key=_entry_order)
            out += [AclBinding(pattern, entry) for entry in entries
                    if binding_filter.entry_filter.matches(entry)]
        return out


def _entry_order(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return entry.principal, entry.host, entry.operation.value, entry.permission.value
