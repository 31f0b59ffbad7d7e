"""KafkaZkClient: the broker's ZooKeeper operations, on kazoo, in Kafka 3.9's layout.

The methods block (kazoo's synchronous API): the broker calls them through `AsyncZk`, which
runs them in a dedicated thread so ZooKeeper never stalls the event loop. Each operation is
retried while the connection is down (up to the session timeout, as a Kafka broker keeps
retrying until its session expires), then raises ZooKeeperUnavailableError.

Watch callbacks and state listeners run on kazoo's threads: they must not block on
ZooKeeper calls (AsyncZk hops them onto the event loop).
"""

from __future__ import annotations

import contextlib
import logging
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry, RetryFailedError
from kazoo.security import ACL

from moldau.cluster import zk_data as zd
from moldau.cluster import zk_tls
from moldau.cluster.zk_data import (
    BrokerRegistration,
    ConfigChangeNotification,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
)
from moldau.errors import (
    RequestTimedOutError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

# ZkNodeChangeNotificationListener's changeExpirationMs: notifications older than this go.
CONFIG_CHANGE_EXPIRATION_MS = 15 * 60 * 1000
# Kafka's reserved.broker.max.id default: generated broker ids start above it.
DEFAULT_RESERVED_BROKER_MAX_ID = 1000

_UNAVAILABLE = (ConnectionLoss, OperationTimeoutError, SessionExpiredError, RetryFailedError,
                KazooTimeoutError, ConnectionClosedError)


class ZkError(Exception):
    """Base of the errors of the ZooKeeper layer."""


class ZooKeeperUnavailableError(ZkError, RequestTimedOutError):
    """No connection to ZooKeeper (at start, or for longer than an operation may wait).
    A request handler that meets it answers REQUEST_TIMED_OUT with this message."""


class ZkNodeExistsError(ZkError):
    """A znode that must not exist does (a broker id registered by another live broker)."""


class ZkNoNodeError(ZkError):
    """A znode that must exist does not."""


class ZkBadVersionError(ZkError):
    """A conditional write lost against a concurrent writer (the znode version moved)."""


class ControllerMovedError(ZkError):
    """The controller epoch moved: this broker is no longer (or not) the controller."""


class WatchHandle:
    """Returned by the watch helpers; `cancel()` stops further callbacks."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def _split_connect(hosts: str, chroot: str | None) -> tuple[str, str | None]:
    """zookeeper.connect may carry the chroot ("h1:2181,h2:2181/kafka"); an explicit chroot
    argument wins. "/" and "" mean no chroot."""
    hosts = hosts.strip()
    slash = hosts.find("/")
    if slash >= 0:
        chroot = chroot or hosts[slash:]
        hosts = hosts[:slash]
    if chroot is not None:
        chroot = "/" + chroot.strip().strip("/")
        if chroot == "/":
            chroot = None
    return hosts, chroot


class KafkaZkClient:
    """Kafka's KafkaZkClient operations over one kazoo session."""

    def __init__(
        self,
        hosts: str,
        chroot: str | None = None,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
        tls_context: ssl.SSLContext | Callable[[], ssl.SSLContext] | None = None,
        secure_acls: bool = False,
        max_in_flight: int = 10,
    ) -> None:
        """`tls_context`: connect to ZooKeeper's secure port with it (zk_tls.tls_context),
        or with what it returns at each connection (zk_tls.StoreWatchingContext).
        `secure_acls`: zookeeper.set.acl, the znodes this client creates get Kafka's
        secure ACLs (zk_tls.acls_for); it needs a client certificate in `tls_context`.
        `max_in_flight`: zookeeper.max.in.flight.requests, the most requests pipelined at
        once (other calls wait for their answer before the next is sent)."""
        self.max_in_flight = max(1, max_in_flight)
        self.hosts, self.chroot = _split_connect(hosts, chroot)
        self.tls_context = tls_context
        self.secure_acls = secure_acls
        self._tls_handler: zk_tls.TlsHandler | None = None
        self.session_timeout_ms = session_timeout_ms
        # Kafka: zookeeper.connection.timeout.ms defaults to the session timeout.
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._zk: KazooClient | None = None
        self._lock = threading.Lock()
        self._session_id: int | None = None
        self._state_listeners: list[Callable[[str], None]] = []
        self._session_listeners: list[Callable[[int], None]] = []
        self._registration: BrokerRegistration | None = None
        self._on_reregistered: Callable[[int], None] | None = None
        self._closed = False
        self.broker_epoch = -1  # czxid of our /brokers/ids/<id>
        self.controller_epoch_zk_version = -1  # /controller_epoch version after our election

    # -- connection ----------------------------------------------------------------------------

    @property
    def connect_string(self) -> str:
        return self.hosts + (self.chroot or "")

    def _new_kazoo(self, hosts: str) -> KazooClient:
        # Reconnect quickly after an outage (kazoo's default backoff grows to an hour), and
        # give each operation until the session timeout, as Kafka's retryUntilConnected does.
        conn_retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0)
        cmd_retry = dict(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0,
                         deadline=self.session_timeout_ms / 1000)
        options: dict[str, Any] = {}
        if self.tls_context is not None:
            self._tls_handler = zk_tls.TlsHandler(self.tls_context)
            options["handler"] = self._tls_handler
        if self.secure_acls:
            options["default_acl"] = zk_tls.acls_for("/")
        return KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000,
                           connection_retry=conn_retry, command_retry=cmd_retry, **options)

    def _acl(self, path: str) -> list[ACL] | None:
        """The ACLs for a znode created at `path`; None = kazoo's default."""
        return zk_tls.acls_for(path) if self.secure_acls else None

    def _start_kazoo(self, zk: KazooClient, deadline: float) -> None:
        try:
            zk.start(timeout=max(deadline - time.monotonic(), 0.001))
        except KazooTimeoutError:
            tls_error = self._tls_handler.last_error if self._tls_handler else None
            raise ZooKeeperUnavailableError(
                f"Timed out waiting for connection to ZooKeeper at {self.hosts} while in state:"
                f" CONNECTING (zookeeper.connection.timeout.ms={self.connection_timeout_ms})"
                + (f"; {tls_error}" if tls_error else "")
            ) from None

    def start(self) -> None:
        """Connect; create the chroot first when it is missing (as Kafka does)."""
        deadline = time.monotonic() + self.connection_timeout_ms / 1000
        self._closed = False
        if self.chroot:
            boot = self._new_kazoo(self.hosts)
            self._start_kazoo(boot, deadline)
            try:
                boot.ensure_path(self.chroot)
            finally:
                boot.stop()
                boot.close()
        zk = self._new_kazoo(self.connect_string)
        zk.add_listener(self._on_state)
        self._zk = zk
        try:
            self._start_kazoo(zk, deadline)
        except BaseException:
            self._zk = None
            raise
        self._session_id = self._current_session_id()

    def close(self) -> None:
        """Close the session: our ephemeral znodes (registration, /controller) go at once."""
        self._closed = True
        self._registration = None
        zk, self._zk = self._zk, None
        if zk is not None:
            try:
                zk.stop()
            finally:
                zk.close()

    def __enter__(self) -> KafkaZkClient:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def state(self) -> str:
        """kazoo's state: CONNECTED, SUSPENDED (connection lost, session alive) or LOST;
        NOT_STARTED before start() and CLOSED after close()."""
        if self._zk is None:
            return "CLOSED" if self._closed else "NOT_STARTED"
        return str(self._zk.state)

    @property
    def connected(self) -> bool:
        return self._zk is not None and self._zk.connected

    @property
    def session_id(self) -> int | None:
        return self._current_session_id()

    @property
    def kazoo(self) -> KazooClient:
        """The underlying kazoo client (tests and tools; prefer the methods)."""
        return self._client()

    def add_state_listener(self, fn: Callable[[str], None]) -> None:
        """fn(state) on every kazoo state change, on kazoo's thread (do not block in it)."""
        self._state_listeners.append(fn)

    def remove_state_listener(self, fn: Callable[[str], None]) -> None:
        if fn in self._state_listeners:
            self._state_listeners.remove(fn)

    def add_session_listener(self, fn: Callable[[int], None]) -> None:
        """fn(new_session_id) after the session expired and a new one was established (and
        the broker re-registered), on a helper thread: Kafka's afterInitializingSession."""
        self._session_listeners.append(fn)

    def set_registration_listener(self, fn: Callable[[int], None] | None) -> None:
        """fn(new_broker_epoch) after an automatic re-registration on a new session."""
        self._on_reregistered = fn

    def _client(self) -> KazooClient:
        if self._zk is None:
            raise ZooKeeperUnavailableError("the ZooKeeper client is not started")
        return self._zk

    def _current_session_id(self) -> int | None:
        ident = self._zk.client_id if self._zk is not None else None
        return ident[0] if ident else None

    def _on_state(self, state: str) -> None:
        # On kazoo's connection thread: no ZooKeeper calls here.
        if state == KazooState.CONNECTED:
            sid = self._current_session_id()
            previous, self._session_id = self._session_id, sid
            if previous is not None and sid is not None and sid != previous:
                threading.Thread(target=self._after_new_session, args=(sid,),
                                 name="moldau-zk-session", daemon=True).start()
        for fn in list(self._state_listeners):
            try:
                fn(str(state))
            except Exception:
                log.exception("ZooKeeper state listener failed")

    def _after_new_session(self, session_id: int) -> None:
        log.info("new ZooKeeper session 0x%x after expiry", session_id)
        reg = self._registration
        if reg is not None:
            try:
                epoch = self._reregister(reg, session_id)
            except Exception:
                log.exception("re-registration of broker %d failed", reg.id)
            else:
                if epoch is not None and self._on_reregistered is not None:
                    try:
                        self._on_reregistered(epoch)
                    except Exception:
                        log.exception("registration listener failed")
        for fn in list(self._session_listeners):
            try:
                fn(session_id)
            except Exception:
                log.exception("ZooKeeper session listener failed")

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a kazoo call, retried while disconnected (kazoo's command retry policy).
        kazoo queues a call made while disconnected until the connection returns, with no
        deadline; so wait for the connection first, at most one session timeout."""
        zk = self._client()
        deadline = time.monotonic() + self.session_timeout_ms / 1000
        while not zk.connected:
            if self._closed or time.monotonic() >= deadline:
                raise ZooKeeperUnavailableError(
                    f"ZooKeeper at {self.connect_string} has been unreachable for "
                    f"{self.session_timeout_ms} ms (zookeeper.session.timeout.ms)")
            time.sleep(0.05)
        try:
            return zk.retry(fn, *args, **kwargs)
        except _UNAVAILABLE as exc:
            raise ZooKeeperUnavailableError(
                f"ZooKeeper at {self.connect_string} unavailable: {type(exc).__name__} {exc}"
            ) from exc

    # -- generic helpers -----------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        return self._call(self._client().exists, path) is not None

    def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        try:
            return self._call(self._client().get, path)
        except NoNodeError:
            return None

    def get_children(self, path: str) -> list[str]:
        try:
            return sorted(self._call(self._client().get_children, path))
        except NoNodeError:
            return []

    def ensure_path(self, path: str) -> None:
        self._call(self._client().ensure_path, path, self._acl(path))

    def delete_recursive(self, path: str) -> None:
        """Delete a znode and its subtree; a missing znode is fine."""
        zk = self._client()
        for _ in range(10):  # children may appear concurrently: retry a few times
            try:
                self._call(zk.delete, path, recursive=True)
                return
            except NoNodeError:
                return
            except NotEmptyError:
                continue

    def _get_many(self, paths: list[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """Pipelined gets (as Kafka's retryRequestsUntilConnected); None for missing znodes."""
        zk = self._client()
        out: list[tuple[bytes, ZnodeStat] | None] = []
        for window in self._windows(paths):
            pending = [zk.get_async(p) for p in window]
            for path, result in zip(window, pending, strict=True):
                try:
                    out.append(result.get(timeout=self.session_timeout_ms / 1000))
                except NoNodeError:
                    out.append(None)
                except _UNAVAILABLE:
                    out.append(self.get(path))  # fall back to the retried form
        return out

    def _windows(self, paths: Sequence[str]) -> list[Sequence[str]]:
        """paths in groups of max_in_flight: what may be pipelined at once."""
        step = self.max_in_flight
        return [paths[i:i + step] for i in range(0, len(paths), step)]

    def _set_or_create(self, path: str, data: bytes) -> int:
        """set_data, or create (with parents) when missing; returns the new version."""
        zk = self._client()
        while True:
            try:
                return self._call(zk.set, path, data).version
            except NoNodeError:
                try:
                    self._call(zk.create, path, data, self._acl(path), makepath=True)
                    return 0
                except NodeExistsError:
                    continue

    def _create_if_missing(self, path: str, data: bytes = b"") -> bool:
        try:
            self._call(self._client().create, path, data, makepath=True)
            return True
        except NodeExistsError:
            return False

    def _checked_ephemeral_create(self, path: str, data: bytes) -> ZnodeStat | None:
        """Kafka's checkedEphemeralCreate: create the ephemeral znode; if it exists and our
        session owns it (a retried create), that is success. Returns its stat, or None when
        another session owns it."""
        zk = self._client()
        while True:
            try:
                _, stat = self._call(zk.create, path, data, ephemeral=True, makepath=True,
                                     include_data=True)
                return stat
            except NodeExistsError:
                try:
                    _, stat = self._call(zk.get, path)
                except NoNodeError:
                    continue  # it went away between the create and the get: try again
                if stat.ephemeralOwner == self._current_session_id():
                    return stat
                return None

    # -- startup paths, cluster id, broker ids ---------------------------------------------------

    def ensure_persistent_paths(self) -> None:
        """createTopLevelPaths: the persistent znodes every broker expects."""
        zk = self._client()
        if self.secure_acls:  # /config first, or a sensitive child's ACL would be its parent's
            self.ensure_path(zd.CONFIG_PATH)
        for window in self._windows(zd.PERSISTENT_PATHS):
            pending = [(p, zk.ensure_path_async(p, self._acl(p))) for p in window]
            for path, result in pending:
                try:
                    result.get(timeout=self.session_timeout_ms / 1000)
                except _UNAVAILABLE:
                    self.ensure_path(path)

    def get_cluster_id(self) -> str | None:
        found = self.get(zd.CLUSTER_ID_PATH)
        return zd.decode_cluster_id(found[0]) if found else None

    def get_or_create_cluster_id(self) -> str:
        """The cluster id of /cluster/id, created with a new random id by the first broker."""
        while True:
            existing = self.get_cluster_id()
            if existing is not None:
                return existing
            proposed = zd.generate_cluster_id()
            if self._create_if_missing(zd.CLUSTER_ID_PATH, zd.encode_cluster_id(proposed)):
                return proposed

    def generate_broker_id(
        self, reserved_broker_max_id: int = DEFAULT_RESERVED_BROKER_MAX_ID
    ) -> int:
        """broker.id.generation: bump /brokers/seqid's version; id = version + reserved max."""
        zk = self._client()
        while True:
            try:
                stat = self._call(zk.set, zd.BROKER_SEQID_PATH, b"", -1)
                return stat.version + reserved_broker_max_id
            except NoNodeError:
                self._create_if_missing(zd.BROKER_SEQID_PATH)

    # -- broker registration ---------------------------------------------------------------------

    def register_broker(self, reg: BrokerRegistration) -> int:
        """Create the ephemeral /brokers/ids/<id>; returns the broker epoch (its czxid).

        Raises ZkNodeExistsError when another live session holds the id. A new session after
        expiry re-registers automatically (see set_registration_listener)."""
        path = zd.broker_path(reg.id)
        stat = self._checked_ephemeral_create(path, reg.encode())
        if stat is None:
            owner = self.get(path)
            owner_id = f"0x{owner[1].ephemeralOwner:x}" if owner else "?"
            raise ZkNodeExistsError(
                f"broker id {reg.id} is already registered at {path} by another ZooKeeper"
                f" session ({owner_id}); is another broker running with broker.id={reg.id}?"
            )
        self._registration = reg
        self.broker_epoch = stat.czxid
        log.info("registered broker %d at %s with endpoints %s, broker epoch %d", reg.id, path,
                 ",".join(e.connection_string() for e in reg.endpoints), stat.czxid)
        return stat.czxid

    def _reregister(self, reg: BrokerRegistration, session_id: int) -> int | None:
        """Register again on a new session, retrying while ZooKeeper is unreachable. The old
        session's znode may outlive it for a moment (a server that has not applied the
        expiry yet): wait up to two session timeouts for it to go."""
        deadline = time.monotonic() + 2 * self.session_timeout_ms / 1000
        while self._registration is reg and self._session_id == session_id:
            try:
                stat = self._checked_ephemeral_create(zd.broker_path(reg.id), reg.encode())
            except ZooKeeperUnavailableError:
                time.sleep(0.1)  # the call itself retried up to a session timeout
                continue
            if stat is not None:
                self.broker_epoch = stat.czxid
                log.info("re-registered broker %d, broker epoch %d", reg.id, stat.czxid)
                return stat.czxid
            if time.monotonic() > deadline:
                raise ZkNodeExistsError(
                    f"broker id {reg.id} is registered by another ZooKeeper session")
            time.sleep(0.1)
        return None  # closed, or a newer session took over the job

    def get_broker_ids(self) -> list[int]:
        return sorted(int(c) for c in self.get_children(zd.BROKER_IDS_PATH) if c.isdigit())

    def get_broker(self, broker_id: int) -> BrokerRegistration | None:
        found = self.get(zd.broker_path(broker_id))
        return _registration(broker_id, found) if found else None

    def get_all_brokers(self) -> list[BrokerRegistration]:
        ids = self.get_broker_ids()
        found = self._get_many([zd.broker_path(i) for i in ids])
        return [_registration(i, f) for i, f in zip(ids, found, strict=True) if f]

    # -- topics --------------------------------------------------------------------------------

    def topic_exists(self, topic: str) -> bool:
        return self.exists(zd.topic_path(topic))

    def create_topic(
        self,
        topic: str,
        topic_id: uuid.UUID | None,
        assignment: Mapping[int, list[int]],
        config: Mapping[str, str] | None = None,
    ) -> None:
        """AdminZkClient.createTopicWithAssignment: the config znode first (so a broker that
        sees the topic also sees its overrides), then the assignment."""
        if self.topic_exists(topic):
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
        if self.exists(zd.delete_topic_path(topic)):
            raise TopicAlreadyExistsError(f"Topic '{topic}' is marked for deletion.")
        self._set_or_create(zd.config_entity_path(zd.ConfigType.TOPIC, topic),
                            zd.encode_entity_config(config or {}))
        data = TopicAssignment({int(p): list(r) for p, r in assignment.items()}, topic_id).encode()
        try:
            self._call(self._client().create, zd.topic_path(topic), data, makepath=True)
        except NodeExistsError:
            raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.") from None

    def get_topic_assignment(self, topic: str) -> TopicAssignment | None:
        found = self.get(zd.topic_path(topic))
        if found is None:
            return None
        return TopicAssignment.decode(found[0], zk_version=found[1].version)

    def get_topic_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """Pipelined get_topic_assignment; missing topics are left out."""
        names = list(topics)
        found = self._get_many([zd.topic_path(t) for t in names])
        return {t: TopicAssignment.decode(f[0], zk_version=f[1].version)
                for t, f in zip(names, found, strict=True) if f}

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment,
                             expected_version: int = -1) -> int:
        """Rewrite /brokers/topics/<t> (CreatePartitions, reassignment); conditional on
        `expected_version` (-1: any). Returns the new znode version."""
        try:
            stat = self._call(self._client().set, zd.topic_path(topic), assignment.encode(),
                              expected_version)
        except BadVersionError:
            raise ZkBadVersionError(
                f"topic {topic} assignment changed concurrently (expected version"
                f" {expected_version})") from None
        except NoNodeError:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.") from None
        return stat.version

    def set_partition_reassignment(
            self, reassignment: Mapping[tuple[str, int], Sequence[int]]) -> None:
        """Write /admin/reassign_partitions (the legacy way to ask for a reassignment,
        which the controller rewrites as partitions complete)."""
        self._set_or_create(zd.REASSIGN_PARTITIONS_PATH, zd.encode_reassignment(reassignment))

    def get_all_topics(self) -> list[str]:
        return self.get_children(zd.TOPICS_PATH)

    def get_topics_marked_for_deletion(self) -> list[str]:
        return self.get_children(zd.DELETE_TOPICS_PATH)

    def mark_topic_for_deletion(self, topic: str) -> bool:
        """AdminZkClient.deleteTopic: create /admin/delete_topics/<t> for the controller.
        False when it was already marked; UnknownTopicOrPartitionError when no such topic."""
        if not self.topic_exists(topic):
            raise UnknownTopicOrPartitionError(f"Topic `{topic}` to delete does not exist")
        return self._create_if_missing(zd.delete_topic_path(topic))

    def delete_topic_znodes(self, topic: str) -> None:
        """The controller's last deletion step: the topic (with its partition states), its
        config and its deletion marker, in Kafka's order."""
        self.delete_recursive(zd.topic_path(topic))
        self.delete_recursive(zd.config_entity_path(zd.ConfigType.TOPIC, topic))
        self.delete_recursive(zd.delete_topic_path(topic))

    # -- partition state -----------------------------------------------------------------------

    def create_partition_states(
        self,
        topic: str,
        states: Mapping[int, PartitionState],
        expected_controller_epoch_zk_version: int | None = None,
    ) -> None:
        """Create partitions/<p> and partitions/<p>/state for new partitions, atomically (one
        multi-op). Raises ZkNodeExistsError when a state already exists, ControllerMovedError
        when /controller_epoch moved (if an expected version is given)."""
        zk = self._client()
        self._create_if_missing(zd.topic_partitions_path(topic))

        def commit() -> list[Any]:
            txn = zk.transaction()
            if expected_controller_epoch_zk_version is not None:
                txn.check(zd.CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version)
            for p, state in states.items():
                if not zk.exists(zd.partition_path(topic, p)):
                    txn.create(zd.partition_path(topic, p), b"")
                txn.create(zd.partition_state_path(topic, p), state.encode())
            return txn.commit()

        self._check_results(self._call(commit), f"partition states of {topic}")

    def _check_results(self, results: list[Any], what: str) -> None:
        # A failed multi-op reports the failing op's error; the ops before it come back as
        # RolledBackError and those after it as RuntimeInconsistency.
        failures = [r for r in results if isinstance(r, Exception)
                    and not isinstance(r, (RolledBackError, RuntimeInconsistency))]
        if not failures:
            return
        error = failures[0]
        if isinstance(error, BadVersionError):
            raise ControllerMovedError(f"{what}: the controller epoch moved") from error
        if isinstance(error, NodeExistsError):
            raise ZkNodeExistsError(f"{what}: already exist") from error
        if isinstance(error, NoNodeError):
            raise ZkNoNodeError(f"{what}: missing parent znode") from error
        raise error if isinstance(error, KazooException) else ZkError(str(error))

    def get_partition_state(self, topic: str, partition: int) -> tuple[PartitionState, int] | None:
        """(state, znode version), or None when the partition has no state znode."""
        found = self.get(zd.partition_state_path(topic, partition))
        if found is None or not found[0]:
            return None
        return PartitionState.decode(found[0]), found[1].version

    def get_partition_states(self, topic: str) -> dict[int, tuple[PartitionState, int]]:
        """Every partition state of a topic (pipelined)."""
        parts = sorted(int(p) for p in self.get_children(zd.topic_partitions_path(topic))
                       if p.isdigit())
        found = self._get_many([zd.partition_state_path(topic, p) for p in parts])
        return {p: (PartitionState.decode(f[0]), f[1].version)
                for p, f in zip(parts, found, strict=True) if f and f[0]}

    def update_partition_state(
        self,
        topic: str,
        partition: int,
        state: PartitionState,
        expected_version: int,
        expected_controller_epoch_zk_version: int | None = None,
    ) -> int:
        """Conditional write of a partition state (the controller, and the leader shrinking
        or expanding its ISR). Returns the new version; ZkBadVersionError on conflict."""
        zk = self._client()
        path = zd.partition_state_path(topic, partition)
        if expected_controller_epoch_zk_version is None:
            try:
                return self._call(zk.set, path, state.encode(), expected_version).version
            except BadVersionError:
                raise ZkBadVersionError(
                    f"{topic}-{partition} state changed concurrently (expected version"
                    f" {expected_version})") from None
            except NoNodeError:
                raise ZkNoNodeError(f"{topic}-{partition} has no state znode") from None

        def commit() -> list[Any]:
            txn = zk.transaction()
            txn.check(zd.CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version)
            txn.set_data(path, state.encode(), expected_version)
            return txn.commit()

        results = self._call(commit)
        check, result = results[0], results[1]
        if isinstance(check, BadVersionError):
            raise ControllerMovedError(f"{topic}-{partition}: the controller epoch moved")
        if isinstance(result, BadVersionError):
            raise ZkBadVersionError(f"{topic}-{partition} state changed concurrently")
        self._check_results(results, f"{topic}-{partition} state")
        return result.version

    # -- ISR change notifications -------------------------------------------------------------

    def _notify(self, parent: str, prefix: str, data: bytes) -> str:
        """A sequential notification znode under parent (the controller watches it)."""
        created = self._call(self._client().create, f"{parent}/{prefix}", data,
                             sequence=True, makepath=True)
        return created.rsplit("/", 1)[1]

    def _take_notifications(self, parent: str, prefix: str) -> list[bytes]:
        """The data of every pending notification under parent; the notifications go."""
        zk = self._client()
        paths = [f"{parent}/{c}" for c in self.get_children(parent) if c.startswith(prefix)]
        out = []
        for path, found in zip(paths, self._get_many(paths), strict=True):
            if found is not None:
                out.append(found[0])
            with contextlib.suppress(NoNodeError):
                self._call(zk.delete, path)
        return out

    def create_isr_change_notification(self, partitions: Iterable[tuple[str, int]]) -> str:
        """A leader changed ISRs in ZooKeeper: tell the controller."""
        return self._notify(zd.ISR_CHANGE_NOTIFICATION_PATH, zd.ISR_CHANGE_PREFIX,
                            zd.encode_isr_change(sorted(partitions)))

    def take_isr_change_notifications(self) -> set[tuple[str, int]]:
        """The partitions named by every pending ISR change notification."""
        changed: set[tuple[str, int]] = set()
        for data in self._take_notifications(zd.ISR_CHANGE_NOTIFICATION_PATH,
                                             zd.ISR_CHANGE_PREFIX):
            changed |= zd.decode_isr_change(data)
        return changed

    def create_log_dir_event_notification(self, broker_id: int) -> str:
        """A log dir of this broker failed: tell the controller."""
        return self._notify(zd.LOG_DIR_EVENT_NOTIFICATION_PATH, zd.LOG_DIR_EVENT_PREFIX,
                            zd.encode_log_dir_event(broker_id))

    def take_log_dir_event_notifications(self) -> set[int]:
        """The brokers named by every pending log dir event notification."""
        brokers = set()
        for data in self._take_notifications(zd.LOG_DIR_EVENT_NOTIFICATION_PATH,
                                             zd.LOG_DIR_EVENT_PREFIX):
            with contextlib.suppress(Exception):  # an unreadable one is dropped
                brokers.add(zd.decode_log_dir_event(data))
        return brokers

    # -- configs -------------------------------------------------------------------------------

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """The overrides of /config/<type>/<name> ({} when there are none)."""
        found = self.get(zd.config_entity_path(entity_type, name))
        return zd.decode_entity_config(found[0]) if found else {}

    def set_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> str:
        """AdminZkClient.changeConfigs: write the whole override set (an empty dict removes
        every override), then a change notification so every broker applies it. Returns the
        notification's sequence name."""
        self._set_or_create(zd.config_entity_path(entity_type, name),
                            zd.encode_entity_config(config))
        return self.create_config_change_notification(f"{entity_type}/{name}")

    def create_config_change_notification(self, entity_path: str) -> str:
        zk = self._client()
        data = zd.encode_config_change(entity_path)
        while True:
            try:
                created = self._call(zk.create, zd.CONFIG_CHANGE_CREATE_PATH, data, sequence=True)
                return created.rsplit("/", 1)[1]
            except NoNodeError:
                self.ensure_path(zd.CONFIG_CHANGES_PATH)

    def delete_entity_config(self, entity_type: str, name: str) -> None:
        """Remove /config/<type>/<name> (topic deletion does this; for overrides of live
        entities Kafka writes an empty config with set_entity_config instead)."""
        self.delete_recursive(zd.config_entity_path(entity_type, name))

    def get_all_entity_names(self, entity_type: str) -> list[str]:
        return self.get_children(zd.config_entity_type_path(entity_type))

    def read_change_notifications(
        self,
        after: str | None = None,
        purge: bool = True,
        max_age_ms: int = CONFIG_CHANGE_EXPIRATION_MS,
    ) -> list[ConfigChangeNotification]:
        """The config change notifications after sequence name `after` (all when None), in
        order. Like ZkNodeChangeNotificationListener it also deletes notifications older than
        15 minutes (ZooKeeper ctime), unless purge is False."""
        names = [c for c in self.get_children(zd.CONFIG_CHANGES_PATH)
                 if c.startswith(zd.CONFIG_CHANGE_PREFIX)]
        names.sort(key=zd.sequence_number)
        found = self._get_many([zd.config_change_path(n) for n in names])
        out: list[ConfigChangeNotification] = []
        expired: list[str] = []
        now_ms = time.time() * 1000
        for name, item in zip(names, found, strict=True):
            if item is None:
                continue
            data, stat = item
            if after is None or zd.sequence_number(name) > zd.sequence_number(after):
                try:
                    entity_type, entity_name = zd.decode_config_change(data)
                except (ValueError, KeyError):
                    log.warning("ignoring malformed config change notification %s: %r",
                                name, data)
                else:
                    out.append(ConfigChangeNotification(name, entity_type, entity_name))
            if purge and now_ms - stat.ctime > max_age_ms:
                expired.append(name)
        for name in expired:
            with contextlib.suppress(NoNodeError):  # another broker purged it first
                self._call(self._client().delete, zd.config_change_path(name))
        return out

    def watch_config_changes(self, fn: Callable[[list[str]], Any]) -> WatchHandle:
        """fn(children of /config/changes) now and on every change (kazoo's thread)."""
        return self.watch_children(zd.CONFIG_CHANGES_PATH, fn)

    # -- producer ids --------------------------------------------------------------------------

    def allocate_producer_id_block(self, broker_id: int) -> tuple[int, int]:
        """ZkProducerIdManager.getNewProducerIdBlock: take the next 1000 producer ids with a
        conditional write on /latest_producer_id_block. Returns (first, last) inclusive."""
        zk = self._client()
        while True:
            found = self.get(zd.PRODUCER_ID_BLOCK_PATH)
            if found is None:
                block = ProducerIdBlock(broker_id, 0)
                if self._create_if_missing(zd.PRODUCER_ID_BLOCK_PATH, block.encode()):
                    return block.first, block.last
                continue
            data, stat = found
            if data:
                current = ProducerIdBlock.decode(data)
                if current.last > zd.LONG_MAX - zd.PRODUCER_ID_BLOCK_SIZE:
                    raise ZkError("Have exhausted all producerIds.")
                block = ProducerIdBlock(broker_id, current.next_block_first)
            else:
                block = ProducerIdBlock(broker_id, 0)
            try:
                self._call(zk.set, zd.PRODUCER_ID_BLOCK_PATH, block.encode(), stat.version)
                return block.first, block.last
            except BadVersionError:
                continue  # another broker took a block: read again

    # -- controller ----------------------------------------------------------------------------

    def get_controller_id(self) -> int | None:
        found = self.get(zd.CONTROLLER_PATH)
        return zd.decode_controller(found[0]) if found else None

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(controller epoch, znode version of /controller_epoch), or None before the first
        election."""
        found = self.get(zd.CONTROLLER_EPOCH_PATH)
        return (zd.decode_controller_epoch(found[0]), found[1].version) if found else None

    def try_elect_controller(self, broker_id: int) -> int | None:
        """registerControllerAndIncrementControllerEpoch: create the ephemeral /controller
        (checked against the /controller_epoch version we read), then bump the epoch with a
        conditional write. Returns the new epoch, or None when another broker won."""
        zk = self._client()
        self._create_if_missing(zd.CONTROLLER_EPOCH_PATH,
                                zd.encode_controller_epoch(zd.INITIAL_CONTROLLER_EPOCH - 1))
        current = self.get_controller_epoch()
        if current is None:
            return None
        epoch, epoch_version = current

        def commit() -> list[Any]:
            txn = zk.transaction()
            txn.check(zd.CONTROLLER_EPOCH_PATH, epoch_version)
            txn.create(zd.CONTROLLER_PATH, zd.encode_controller(broker_id), ephemeral=True)
            return txn.commit()

        results = self._call(commit)
        if isinstance(results[0], BadVersionError):
            return None  # the epoch moved under us: someone else was elected
        if isinstance(results[1], NodeExistsError):
            found = self.get(zd.CONTROLLER_PATH)
            if found is None or found[1].ephemeralOwner != self._current_session_id():
                return None
        elif isinstance(results[1], Exception):
            self._check_results(results, "controller election")
        try:
            stat = self._call(zk.set, zd.CONTROLLER_EPOCH_PATH,
                              zd.encode_controller_epoch(epoch + 1), epoch_version)
        except BadVersionError:
            return None  # ControllerMovedException in Kafka
        self.controller_epoch_zk_version = stat.version
        log.info("broker %d elected controller, epoch %d", broker_id, epoch + 1)
        return epoch + 1

    def resign_controller(self) -> bool:
        """Delete /controller if this session holds it; True when it did."""
        found = self.get(zd.CONTROLLER_PATH)
        if found is None or found[1].ephemeralOwner != self._current_session_id():
            return False
        try:
            self._call(self._client().delete, zd.CONTROLLER_PATH, found[1].version)
        except (NoNodeError, BadVersionError):
            return False
        return True

    # -- watches -------------------------------------------------------------------------------

    def watch_children(self, path: str, fn: Callable[[list[str]], Any]) -> WatchHandle:
        """fn(sorted children) now and after every change, re-armed across sessions. The
        path is created when missing (a children watch needs an existing znode)."""
        handle = WatchHandle(path)
        self.ensure_path(path)

        def deliver(children: list[str]) -> bool | None:
            if handle.cancelled:
                return False
            fn(sorted(children))
            return None

        ChildrenWatch(self._client(), path, deliver)
        return handle

    def watch_data(self, path: str,
                   fn: Callable[[bytes | None, ZnodeStat | None], Any]) -> WatchHandle:
        """fn(data, stat) now and after every change; (None, None) while the znode does not
        exist (the watch then fires when it is created)."""
        handle = WatchHandle(path)

        def deliver(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
            if handle.cancelled:
                return False
            fn(data, stat)
            return None

        DataWatch(self._client(), path, deliver)
        return handle


def _registration(broker_id: int, found: tuple[bytes, ZnodeStat]) -> BrokerRegistration:
    """A registration with its broker epoch: the czxid of the ephemeral znode."""
    registration = BrokerRegistration.decode(broker_id, found[0])
    registration.epoch = found[1].czxid
    return registration
