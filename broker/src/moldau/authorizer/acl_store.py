"""Kafka's ACL znodes through a kazoo client: `/kafka-acl/<Type>/<name>` and
`/kafka-acl-extended/prefixed/<Type>/<name>` with their entries as JSON, and the sequential
change notifications (`acl_changes_<seq>` under `/kafka-acl-changes` and
`/kafka-acl-extended-changes`) that tell every broker which resource to re-read.

Every call blocks (it runs on the broker's ZooKeeper thread or the change listener's) and
never waits for a lost connection: while ZooKeeper is away it raises
AclStoreUnavailableError at once, so a write fails clearly and the cache keeps deciding.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import ZnodeStat

from moldau.cluster.zk_client import ZooKeeperUnavailableError
from moldau.errors import KafkaError
from moldau.security.acls import (
    CHANGE_PREFIX,
    CONCRETE_RESOURCE_TYPES,
    STORED_PATTERN_TYPES,
    AccessControlEntry,
    ResourcePattern,
    ResourceType,
    acl_paths,
    acl_root,
    acl_znode_path,
    change_root,
    decode_acls,
    encode_acl_change,
    encode_acls,
)

log = logging.getLogger(__name__)

P = ParamSpec("P")  # a kazoo *_async method's arguments

_CONNECTION_ERRORS = (ConnectionLoss, ConnectionClosedError, SessionExpiredError,
                      OperationTimeoutError, KazooTimeoutError)
# AclAuthorizer's maxUpdateRetries, retryBackoffMs and retryBackoffJitterMs.
MAX_UPDATE_RETRIES = 10
RETRY_BACKOFF_S = 0.1
RETRY_JITTER_S = 0.05
# How many reads go out before their answers are awaited (pipelining the initial load).
_READ_WINDOW = 100


class AclStoreUnavailableError(ZooKeeperUnavailableError):
    """ZooKeeper is not connected: ACLs cannot be read from it or written to it now."""


class AclUpdateFailedError(KafkaError):
    """A resource's ACLs could not be written (conflicts past the retry limit, or a znode
    this broker cannot read): UNKNOWN_SERVER_ERROR with this message."""


@dataclass(frozen=True, slots=True)
class VersionedAcls:
    """A resource znode's entries and its version (None: no znode), the CAS token of the
    next write."""

    entries: frozenset[AccessControlEntry]
    version: int | None


NO_ACLS = VersionedAcls(frozenset(), None)


@dataclass(frozen=True, slots=True)
class ChangeNode:
    """One change notification: its name under its root, its data and its creation time."""

    name: str
    data: bytes
    ctime_ms: int


def sequence_number(name: str) -> int:
    """The counter ZooKeeper appended to a sequential node's name."""
    return int(name[len(CHANGE_PREFIX):])


class AclStore:
    """Reads and writes the ACL znodes of one ZooKeeper session (the chroot is the kazoo
    client's)."""

    def __init__(self, zk: KazooClient, request_timeout_s: float = 10.0,
                 max_update_retries: int = MAX_UPDATE_RETRIES) -> None:
        self.zk = zk
        self.request_timeout_s = request_timeout_s
        self.max_update_retries = max_update_retries

    # -- calls ---------------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        return bool(self.zk.connected)

    def require_available(self) -> None:
        if not self.zk.connected:
            raise AclStoreUnavailableError(
                "ZooKeeper is not connected: ACLs cannot be changed until it is back "
                "(decisions go on from the ACLs this broker last read)")

    def _wait(self, pending: IAsyncResult) -> Any:  # Any: kazoo's answers are untyped
        """The answer of an asynchronous kazoo call, or AclStoreUnavailableError when the
        connection drops or the answer takes longer than the request timeout."""
        try:
            return pending.get(timeout=self.request_timeout_s)
        except _CONNECTION_ERRORS as exc:
            raise AclStoreUnavailableError(
                f"ZooKeeper connection lost during an ACL operation: {type(exc).__name__} "
                f"{exc}") from exc

    def _call(self, start: Callable[P, IAsyncResult], *args: P.args,
              **kwargs: P.kwargs) -> Any:  # Any: kazoo's answers are untyped
        # kazoo queues a call made while disconnected with no deadline: refuse it instead
        self.require_available()
        return self._wait(start(*args, **kwargs))

    def _get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """(data, stat) of each path, None for a missing one; reads are pipelined."""
        self.require_available()
        found: list[tuple[bytes, ZnodeStat] | None] = []
        for start in range(0, len(paths), _READ_WINDOW):
            window = paths[start:start + _READ_WINDOW]
            for pending in [self.zk.get_async(path) for path in window]:
                try:
                    found.append(self._wait(pending))
                except NoNodeError:
                    found.append(None)
        return found

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._call(self.zk.get_children_async, path))
        except NoNodeError:
            return []

    # -- layout ----------------------------------------------------------------------------------

    def create_paths(self) -> None:
        """The roots, change roots and resource type directories (Kafka's createAclPaths)."""
        for path in acl_paths():
            self._call(self.zk.ensure_path_async, path)

    # -- resources -------------------------------------------------------------------------------

    def read(self, pattern: ResourcePattern) -> VersionedAcls:
        """The ACLs of one pattern as ZooKeeper holds them now."""
        path = acl_znode_path(pattern)
        try:
            data, stat = self._call(self.zk.get_async, path)
        except NoNodeError:
            return NO_ACLS
        return VersionedAcls(frozenset(_decode(path, data)), stat.version)

    def read_all(self) -> dict[ResourcePattern, VersionedAcls]:
        """Every stored pattern with its ACLs (Kafka's loadAllAcls). A type directory this
        version does not know is skipped with a warning, as Kafka does; an unreadable znode
        raises AclUpdateFailedError (a broker must not start on ACLs it cannot read)."""
        patterns: list[ResourcePattern] = []
        for pattern_type in STORED_PATTERN_TYPES:
            root = acl_root(pattern_type)
            for type_name in self._children(root):
                resource_type = _resource_type_of_dir(type_name)
                if resource_type is None:
                    log.warning("Ignoring unknown ResourceType: %s (under %s)", type_name, root)
                    continue
                patterns += [ResourcePattern(resource_type, name, pattern_type)
                             for name in self._children(f"{root}/{type_name}")]
        paths = [acl_znode_path(pattern) for pattern in patterns]
        loaded: dict[ResourcePattern, VersionedAcls] = {}
        for pattern, path, found in zip(patterns, paths, self._get_many(paths), strict=True):
            if found is not None:
                data, stat = found
                loaded[pattern] = VersionedAcls(frozenset(_decode(path, data)), stat.version)
        return loaded

    def update(self, pattern: ResourcePattern,
               change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
               known: VersionedAcls | None = None,
               on_written: Callable[[VersionedAcls], None] | None = None,
               ) -> tuple[VersionedAcls, VersionedAcls]:
        """Replace the pattern's entries by `change(entries)`, with the znode version as CAS:
        on a conflict re-read, wait 100-150 ms and try again, at most max_update_retries
        times (Kafka's updateResourceAcls). `known`: the cached state to try first (None:
        read ZooKeeper). The znode is created when missing and deleted when the set becomes
        empty. When the entries changed, `on_written(written)` runs (the writer's own cache
        learns first), then a change notification tells every broker. Returns (the state the
        write replaced, the state written)."""
        current = known if known is not None else self.read(pattern)
        fresh = known is None
        retries = 0
        while True:
            new_entries = frozenset(change(current.entries))
            if new_entries == current.entries:
                if fresh:  # nothing to write (Kafka writes anyway; only the version moves)
                    return current, current
                current, fresh = self.read(pattern), True  # the cache may be stale
                continue
            written = self._write(pattern, new_entries, current.version)
            if written is not None:
                break
            if retries >= self.max_update_retries:
                raise AclUpdateFailedError(
                    f"Failed to update ACLs for {pattern} after trying a maximum of "
                    f"{self.max_update_retries} times")
            retries += 1
            time.sleep(RETRY_BACKOFF_S + random.uniform(0, RETRY_JITTER_S))
            # the winner may have written through another server: catch ours up first
            self._call(self.zk.sync_async, acl_znode_path(pattern))
            current, fresh = self.read(pattern), True
        if on_written is not None:
            on_written(written)
        self.notify_change(pattern)
        return current, written

    def _write(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry],
               version: int | None) -> VersionedAcls | None:
        """One conditional write; None when another writer got there first."""
        path = acl_znode_path(pattern)
        try:
            if not entries:
                if version is not None:
                    self._call(self.zk.delete_async, path, version)
                return VersionedAcls(entries, None)
            if version is None:
                self._call(self.zk.create_async, path, encode_acls(entries), makepath=True)
                return VersionedAcls(entries, 0)
            stat = self._call(self.zk.set_async, path, encode_acls(entries), version)
            return VersionedAcls(entries, stat.version)
        except NoNodeError:
            # deleted under us: gone is what a delete wanted, a set must start over
            return VersionedAcls(entries, None) if not entries else None
        except (BadVersionError, NodeExistsError):
            return None

    # -- change notifications ----------------------------------------------------------------

    def notify_change(self, pattern: ResourcePattern) -> str:
        """A persistent sequential change node naming the pattern; returns its name."""
        root = change_root(pattern.pattern_type)
        created = self._call(self.zk.create_async, f"{root}/{CHANGE_PREFIX}",
                             encode_acl_change(pattern), sequence=True, makepath=True)
        return str(created).rsplit("/", 1)[1]

    def change_nodes(self, root: str) -> list[ChangeNode]:
        """The change notifications under a change root, oldest first."""
        names = sorted((name for name in self._children(root) if name.startswith(CHANGE_PREFIX)),
                       key=sequence_number)
        found = self._get_many([f"{root}/{name}" for name in names])
        return [ChangeNode(name, item[0] or b"", item[1].ctime)
                for name, item in zip(names, found, strict=True) if item is not None]

    def delete_change_nodes(self, root: str, names: Iterable[str]) -> None:
        """Remove notifications (another broker may have removed them first)."""
        self.require_available()
        pending = [self.zk.delete_async(f"{root}/{name}") for name in names]
        for result in pending:
            with contextlib.suppress(NoNodeError):
                self._wait(result)


def _decode(path: str, data: bytes | None) -> set[AccessControlEntry]:
    try:
        return decode_acls(data)
    except ValueError as exc:
        raise AclUpdateFailedError(f"Cannot read the ACLs of {path}: {exc}") from exc


def _resource_type_of_dir(name: str) -> ResourceType | None:
    """The resource type of a directory under an ACL root: only Kafka's PascalCase names
    (SecurityUtils.resourceType)."""
    for resource_type in CONCRETE_RESOURCE_TYPES:
        if resource_type.pascal_name == name:
            return resource_type
    return None
