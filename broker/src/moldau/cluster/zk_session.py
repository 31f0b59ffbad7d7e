"""One ZooKeeper session on kazoo, as the broker keeps it (Kafka's ZooKeeperClient).

It connects (the chroot created first; TLS, SASL and secure ACLs when configured), tells state
and session listeners what happens to the connection, re-registers the broker after its
session expired, runs each call retried while the connection is down (up to the session
timeout, as a Kafka broker keeps retrying until its session expires, then
ZooKeeperUnavailableError), and offers the generic znode operations and watches that
Kafka's znode operations (KafkaZkClient) are built from.

The methods block (kazoo's synchronous API): the broker calls them through `AsyncZk`, which
runs them in a dedicated thread so ZooKeeper never stalls the event loop. Watch callbacks
and state listeners run on kazoo's threads: they must not block on ZooKeeper calls
(AsyncZk hops them onto the event loop).
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from typing import ParamSpec, Self, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError, NotEmptyError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry
from kazoo.security import ACL

from moldau.cluster import zk_acls, zk_tls
from moldau.cluster.zk_broker_znode import BrokerRegistration
from moldau.cluster.zk_errors import UNAVAILABLE, ZkNodeExistsError, ZooKeeperUnavailableError
from moldau.cluster.zk_handler import PollingHandler
from moldau.cluster.zk_paths import broker_path
from moldau.cluster.zk_sasl import SaslOutcome, ZkLogin, start_admitted

# The logger of the ZooKeeper client, whichever of its modules logs.
log = logging.getLogger("moldau.cluster.zk_client")

P = ParamSpec("P")
T = TypeVar("T")


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


class ZkSession:
    """One kazoo session, and the broker registration it keeps alive; see the module
    docstring."""

    def __init__(
        self,
        hosts: str,
        chroot: str | None = None,
        session_timeout_ms: int = 18000,
        connection_timeout_ms: int | None = None,
        tls_context: ssl.SSLContext | Callable[[], ssl.SSLContext] | None = None,
        secure_acls: bool = False,
        max_in_flight: int = 10,
        sasl: ZkLogin | None = None,
    ) -> None:
        """`tls_context`: connect to ZooKeeper's secure port with it (zk_tls.tls_context),
        or with what it returns at each connection (zk_tls.StoreWatchingContext).
        `sasl`: log in with SASL (DIGEST-MD5 or Kerberos) on every connection (zk_sasl;
        a Kerberos login fetches its TGT at start() and is closed with the session).
        `secure_acls`: zookeeper.set.acl, the znodes this client creates get Kafka's
        secure ACLs (zk_acls.acls_for); it needs an identity, `sasl` or a client
        certificate in `tls_context`.
        `max_in_flight`: zookeeper.max.in.flight.requests, the most requests pipelined at
        once (other calls wait for their answer before the next is sent)."""
        self.max_in_flight = max(1, max_in_flight)
        self.hosts, self.chroot = _split_connect(hosts, chroot)
        self.tls_context = tls_context
        self.secure_acls = secure_acls
        self.sasl = sasl
        self._tls_handler: zk_tls.TlsHandler | None = None
        self._sasl_outcome: SaslOutcome | None = None
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
        # KazooClient's keyword arguments; a handler whose select is one poll call
        options: dict[str, object] = {"handler": PollingHandler()}
        if self.tls_context is not None:
            self._tls_handler = zk_tls.TlsHandler(self.tls_context)
            options["handler"] = self._tls_handler
        if self.secure_acls:
            options["default_acl"] = zk_acls.acls_for("/")
        if self.sasl is not None:
            options["sasl_options"] = self.sasl.kazoo_options()
        zk = KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000,
                         connection_retry=conn_retry, command_retry=cmd_retry, **options)
        if self.sasl is not None:
            self._sasl_outcome = SaslOutcome.watch(zk, self.sasl.refusal_hint)
        return zk

    def _acl(self, path: str) -> list[ACL] | None:
        """The ACLs for a znode created at `path`; None = kazoo's default."""
        return zk_acls.acls_for(path) if self.secure_acls else None

    def _start_kazoo(self, zk: KazooClient, deadline: float) -> None:
        try:
            start_admitted(zk, self.hosts, self.sasl, self._sasl_outcome,
                           timeout=max(deadline - time.monotonic(), 0.001))
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
        try:
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
            self._start_kazoo(zk, deadline)
        except BaseException:
            self._zk = None
            if self.sasl is not None:
                self.sasl.close()  # a Kerberos login's ticket refresh
            raise
        self._session_id = self._current_session_id()

    def close(self) -> None:
        """Close the session: our ephemeral znodes (registration, /controller) go at once."""
        self._closed = True
        self._registration = None
        zk, self._zk = self._zk, None
        try:
            if zk is not None:
                try:
                    zk.stop()
                finally:
                    zk.close()
        finally:
            if self.sasl is not None:
                self.sasl.close()  # a Kerberos login's ticket refresh

    def __enter__(self) -> Self:
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

    def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
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
        except UNAVAILABLE as exc:
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

    def ensure_parents(self, path: str) -> None:
        """Create the missing ancestors of `path`, each with its own ACL (kazoo's makepath
        would give them the child's: a creator-only /config under /config/users)."""
        parts = path.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            self.ensure_path("/" + "/".join(parts[:depth]))

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
                except UNAVAILABLE:
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

    # -- broker registration (renewed with each new session) -------------------------------

    def register_broker(self, reg: BrokerRegistration) -> int:
        """Create the ephemeral /brokers/ids/<id>; returns the broker epoch (its czxid).

        Raises ZkNodeExistsError when another live session holds the id. A new session after
        expiry re-registers automatically (see set_registration_listener)."""
        path = broker_path(reg.id)
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
                stat = self._checked_ephemeral_create(broker_path(reg.id), reg.encode())
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

    # -- watches -------------------------------------------------------------------------------

    def watch_children(self, path: str, fn: Callable[[list[str]], object]) -> WatchHandle:
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
                   fn: Callable[[bytes | None, ZnodeStat | None], object]) -> WatchHandle:
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
