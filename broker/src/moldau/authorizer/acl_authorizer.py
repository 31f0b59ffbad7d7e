"""AclAuthorizer: Kafka 3.9's ZooKeeper-backed authorizer (kafka.security.authorizer.
AclAuthorizer). Every ACL is cached in memory, loaded at start and kept current by the
change notifications every writer leaves; decisions come from the cache alone.

Threads: `authorize` (the request path) takes no lock and reads one immutable view (the
ACL snapshot and the decisions memoized on it); ACL writes (`create_acls`, `delete_acls`,
blocking, meant for the broker's ZooKeeper thread) and the change listener's thread build
the next snapshot under a lock and swap a whole new view in. Any ACL change drops every
memoized decision with the old view.

While ZooKeeper is away the cache keeps deciding, and writes raise AclStoreUnavailableError.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kazoo.client import KazooClient

from moldau.authorizer.acl_change_listener import AclChangeListener
from moldau.authorizer.acl_snapshot import AclSnapshot, Entries
from moldau.authorizer.acl_store import AclStore, AclUpdateFailedError, VersionedAcls
from moldau.authorizer.audit import log_decision
from moldau.cluster.zk_client import KafkaZkClient
from moldau.errors import InvalidRequestError, KafkaError
from moldau.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPolicy,
    Action,
    PatternType,
    ResourcePattern,
    ResourceType,
    operations_bitfield,
    parse_super_users,
    supported_operations,
    validate_for_create,
)

log = logging.getLogger("kafka.security.authorizer.AclAuthorizer")

SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_CONFIG = "allow.everyone.if.no.acl.found"
# Memoized decisions per ACL view: past this many the memo starts over (a bound on memory
# for brokers that see many hosts or resources, not a tuning knob).
MAX_CACHED_DECISIONS = 100_000

# (principal, host, operation, resource type, name or None for a by-type question)
_DecisionKey = tuple[str, str, AclOperation, ResourceType, str | None]


@dataclass(frozen=True, slots=True)
class AclAuthorizerConfig:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> AclAuthorizerConfig:
        """From Kafka's keys: `super.users` (`User:a;User:b`) and
        `allow.everyone.if.no.acl.found` (true or false, default false)."""
        allow = properties.get(ALLOW_EVERYONE_CONFIG, "false").strip().lower()
        if allow not in ("true", "false"):
            raise ValueError(f"{ALLOW_EVERYONE_CONFIG} must be true or false, got {allow!r}")
        return cls(parse_super_users(properties.get(SUPER_USERS_CONFIG)), allow == "true")


@dataclass(frozen=True, slots=True)
class AclBindingDeleteResult:
    """A binding a delete filter matched; `error` when its removal failed."""

    binding: AclBinding
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True)
class AclDeleteResult:
    """What one delete filter did: the bindings it deleted (each attributed to the first
    filter of the request that matched it), or an error for the whole filter."""

    bindings: tuple[AclBindingDeleteResult, ...] = ()
    error: KafkaError | None = None


@dataclass(frozen=True, slots=True, eq=False)
class _View:
    """What `authorize` reads: a snapshot and the decisions memoized on it (only ever
    added to; a new snapshot comes with a new, empty memo)."""

    snapshot: AclSnapshot
    decisions: dict[_DecisionKey, bool]


def _adding(entries: Entries) -> Callable[[Entries], Entries]:
    return lambda current: current | entries


def _removing(filters: Sequence[AclBindingFilter]) -> Callable[[Entries], Entries]:
    def remaining(current: Entries) -> Entries:
        return frozenset(entry for entry in current
                         if not any(f.entry_filter.matches(entry) for f in filters))
    return remaining


class AclAuthorizer:
    """Kafka's AclAuthorizer over one kazoo session (the broker's own: pass
    `KafkaZkClient.kazoo`, or use from_zk_client). start() before the first decision."""

    def __init__(self, zk: KazooClient, config: AclAuthorizerConfig | None = None,
                 store: AclStore | None = None) -> None:
        self.config = config or AclAuthorizerConfig()
        self.policy = AclPolicy(self.config.super_users,
                                self.config.allow_everyone_if_no_acl_found)
        self.store = store or AclStore(zk)
        # serializes the ZooKeeper side: writes, change notifications, the initial load
        self._lock = threading.RLock()
        self._versions: dict[ResourcePattern, int] = {}  # znode versions, under _lock
        self._view = _View(AclSnapshot(), {})
        self._listener = AclChangeListener(self.store, self._on_change_notification)

    @classmethod
    def from_zk_client(cls, zk_client: KafkaZkClient,
                       config: AclAuthorizerConfig | None = None) -> AclAuthorizer:
        """An authorizer on a started KafkaZkClient's session (valid until it closes)."""
        return cls(zk_client.kazoo, config)

    # -- life cycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Create the ACL znodes, start following changes, then load every ACL: the listener
        comes first so no change made during the load is missed (a notification is read
        and applied wholly before or after the load, which holds the same lock)."""
        self.store.create_paths()
        try:
            self._listener.start()
            with self._lock:  # each notification's read and apply come before or after
                loaded = self.store.read_all()
                self._versions = {pattern: acls.version for pattern, acls in loaded.items()
                                  if acls.version is not None}
                self._publish(AclSnapshot({pattern: acls.entries
                                           for pattern, acls in loaded.items()}))
        except BaseException:
            self._listener.stop()
            raise
        log.info("Loaded ACLs of %d resource patterns", len(loaded))

    def close(self) -> None:
        self._listener.stop()

    @property
    def snapshot(self) -> AclSnapshot:
        return self._view.snapshot

    # -- decisions ------------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, request_name: str,
                  actions: Sequence[Action]) -> list[bool]:
        """May `principal` (`User:alice`) connected from `host` (the client's IP as Java
        prints it, see acls.java_host_address) do each action? `request_name` (Kafka's
        name of the API, `Fetch`) is only for the audit log."""
        view = self._view
        decisions = view.decisions
        results = []
        for action in actions:
            key = (principal, host, action.operation, action.resource_type, action.name)
            allowed = decisions.get(key)
            if allowed is None:
                allowed = self.policy.authorize(
                    view.snapshot.acl_sets_for(action.resource_type, action.name),
                    principal, host, action.operation)
                self._memoize(decisions, key, allowed)
            log_decision(principal, host, request_name, action, allowed)
            results.append(allowed)
        return results

    def authorize_by_resource_type(self, principal: str, host: str, request_name: str,
                                   operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May `principal` do `operation` on some resource of the type (Kafka's
        authorizeByResourceType: an idempotent producer's InitProducerId without
        IDEMPOTENT_WRITE asks for WRITE on any topic)."""
        view = self._view
        key: _DecisionKey = (principal, host, operation, resource_type, None)
        allowed = view.decisions.get(key)
        if allowed is None:
            allowed = self.policy.authorize_by_resource_type(
                view.snapshot.items(), principal, host, operation, resource_type)
            self._memoize(view.decisions, key, allowed)
        # Kafka logs this decision against the pseudo resource <type>:UNKNOWN:NONE
        log_decision(principal, host, request_name,
                     Action(operation, resource_type, "NONE", reference_count=0),
                     allowed, pattern_type=PatternType.UNKNOWN)
        return allowed

    def authorized_operations(self, principal: str, host: str, request_name: str,
                              resource_type: ResourceType, name: str) -> int:
        """KIP-430's authorized-operations bit field of one resource (decisions logged at
        TRACE only, as Kafka's)."""
        operations = sorted(supported_operations(resource_type))
        actions = [Action(operation, resource_type, name, log_if_allowed=False,
                          log_if_denied=False) for operation in operations]
        allowed = self.authorize(principal, host, request_name, actions)
        return operations_bitfield(op for op, ok in zip(operations, allowed, strict=True) if ok)

    @staticmethod
    def _memoize(decisions: dict[_DecisionKey, bool], key: _DecisionKey,
                 allowed: bool) -> None:
        if len(decisions) >= MAX_CACHED_DECISIONS:
            decisions.clear()
        decisions[key] = allowed

    # -- ACL administration (blocking: the ZooKeeper thread) ----------------------------------

    def describe_acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """The cached bindings a filter selects (DescribeAcls answers from the cache)."""
        return self._view.snapshot.bindings(binding_filter)

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[KafkaError | None]:
        """Add each binding (an existing one is a success); per binding, None or the error
        to answer (a refused binding: InvalidRequestError with Kafka's message; a failed
        write: the store's error). Raises AclStoreUnavailableError, with nothing written,
        while ZooKeeper is away."""
        results: list[KafkaError | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, list[int]] = {}
        for index, binding in enumerate(bindings):
            reason = validate_for_create(binding)
            if reason is not None:
                results[index] = InvalidRequestError(reason)
            else:
                by_pattern.setdefault(binding.pattern, []).append(index)
        if not by_pattern:
            return results
        self.store.require_available()
        with self._lock:
            for pattern, indexes in by_pattern.items():
                added = frozenset(bindings[index].entry for index in indexes)
                try:
                    self._update(pattern, _adding(added))
                except KafkaError as exc:
                    log.error("Failed to add ACLs to %s: %s", pattern, exc)
                    for index in indexes:
                        results[index] = exc
        return results

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[AclDeleteResult]:
        """Remove what each filter matches: patterns in the cache, and the pattern(s) a
        filter names exactly even when this broker has not heard of them yet (as Kafka's;
        a MATCH or wildcard filter only sees the cache). Raises AclStoreUnavailableError,
        with nothing removed, while ZooKeeper is away."""
        refused: dict[int, AclDeleteResult] = {}
        valid: list[tuple[int, AclBindingFilter]] = []
        for index, binding_filter in enumerate(filters):
            if binding_filter.is_unknown:
                refused[index] = AclDeleteResult(
                    error=InvalidRequestError("Filters contain UNKNOWN elements"))
            else:
                valid.append((index, binding_filter))
        deleted: list[list[AclBindingDeleteResult]] = [[] for _ in filters]
        if valid:
            self.store.require_available()
            with self._lock:
                self._delete_matching(valid, deleted)
        return [refused.get(index) or AclDeleteResult(tuple(deleted[index]))
                for index in range(len(filters))]

    def _delete_matching(self, filters: list[tuple[int, AclBindingFilter]],
                         deleted: list[list[AclBindingDeleteResult]]) -> None:
        snapshot = self._view.snapshot
        patterns = {pattern for pattern, _ in snapshot.items()}
        for _, binding_filter in filters:
            patterns.update(binding_filter.pattern_filter.exact_patterns())
        for pattern in sorted(patterns, key=_pattern_order):
            matching = [(index, f) for index, f in filters if f.pattern_filter.matches(pattern)]
            if not matching:
                continue
            remove = _removing([f for _, f in matching])
            error: KafkaError | None = None
            try:
                before, after = self._update(pattern, remove)
                removed = before - after
            except KafkaError as exc:  # report what the cache says was to go
                log.error("Failed to delete ACLs of %s: %s", pattern, exc)
                error = exc
                removed = snapshot.get(pattern) - remove(snapshot.get(pattern))
            for entry in sorted(removed, key=_entry_order):
                first = next(index for index, f in matching if f.entry_filter.matches(entry))
                deleted[first].append(AclBindingDeleteResult(AclBinding(pattern, entry), error))

    def _update(self, pattern: ResourcePattern,
                change: Callable[[Entries], Entries]) -> tuple[Entries, Entries]:
        """Write a pattern's new entries (starting from the cache when it knows the pattern)
        and apply them to the cache before other brokers hear of them. Under _lock."""
        version = self._versions.get(pattern)
        known = None if version is None else VersionedAcls(self._view.snapshot.get(pattern),
                                                           version)
        before, after = self.store.update(pattern, change, known, on_written=self._apply_to(
            pattern))
        self._apply(pattern, after)  # also when nothing changed: the version may have moved
        if before.entries != after.entries:
            log.info("Updated ACLs for %s with new version %s", pattern, after.version)
        return before.entries, after.entries

    # -- the cache ------------------------------------------------------------------------------

    def _on_change_notification(self, pattern: ResourcePattern) -> None:
        """Re-read one pattern another writer (or this one) changed; the listener's thread."""
        with self._lock:
            try:
                acls = self.store.read(pattern)
            except AclUpdateFailedError as exc:  # unreadable: keep what we had
                log.error("Ignoring ACL change of %s: %s", pattern, exc)
                return
            log.info("Processing Acl change notification for %s, versionedAcls : %s, "
                     "zkVersion : %s", pattern, sorted(map(str, acls.entries)), acls.version)
            self._apply(pattern, acls)

    def _apply_to(self, pattern: ResourcePattern) -> Callable[[VersionedAcls], None]:
        return lambda acls: self._apply(pattern, acls)

    def _apply(self, pattern: ResourcePattern, acls: VersionedAcls) -> None:
        """The cache learns a pattern's state; a new view when its entries changed. Under
        _lock."""
        if acls.version is None:
            self._versions.pop(pattern, None)
        else:
            self._versions[pattern] = acls.version
        snapshot = self._view.snapshot
        if snapshot.get(pattern) != acls.entries:
            self._publish(snapshot.with_acls(pattern, acls.entries))

    def _publish(self, snapshot: AclSnapshot) -> None:
        self._view = _View(snapshot, {})  # one reference swap: readers see old or new


def _pattern_order(pattern: ResourcePattern) -> tuple[int, int, str]:
    return pattern.resource_type.value, pattern.pattern_type.value, pattern.name


def _entry_order(entry: AccessControlEntry) -> tuple[str, str, int, int]:
    return entry.principal, entry.host, entry.operation.value, entry.permission.value
