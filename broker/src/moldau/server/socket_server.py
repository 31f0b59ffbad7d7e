"""The socket server: the broker's listeners and their connections.

It binds every listener (with Kafka's socket settings, socket_settings.py), accepts
connections through one acceptor per listener (acceptor.Acceptor), which holds back what
Kafka's connection quotas say must wait or go (connection_quotas.ConnectionQuotas:
`max.connections`, per listener too, `max.connection.creation.rate`,
`max.connections.per.ip` and its overrides, the per-address `connection_creation_rate`),
makes the admitted ones Connections (connection.Connection), closes the least recently
used ones when the inter-broker listener took the total over `max.connections`, closes
the ones idle for `connections.max.idle.ms`, and tells the operator what a failed
accept() (too many open files) means.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from moldau.protocol.framing import ReceiveBuffer

from .acceptor import Acceptor, BlockedMeter, bind
from .connection import Connection, RequestHandler
from .connection_quotas import ConnectionQuotas
from .limits import ConnectionLimits, RequestQueueBound
from .listener import Listener
from .memory_reclaim import MemoryReclaimer
from .socket_settings import SocketSettings
from .tls_accept import accept_tls

log = logging.getLogger("kafka.network.SocketServer")


def _default_principal(listener: Listener, cert: bytes | None) -> str:
    return "User:ANONYMOUS"


class SocketServer:
    """The broker's listeners and their connections."""

    def __init__(
        self,
        handler: RequestHandler,
        *,
        max_request_size: int = 100 * 1024 * 1024,
        queued_max_requests: int = 500,
        queued_max_request_bytes: int = -1,
        principal_builder: Callable[[Listener, bytes | None], str] = _default_principal,
        settings: SocketSettings | None = None,
    ) -> None:
        self.handler = handler
        self.settings = settings or SocketSettings()
        # the broker replaces the limits when the configs change, and points ip_rates at
        # its ClientQuotaConfigs' `connection_creation_rate` values
        self.quotas = ConnectionQuotas(ConnectionLimits())
        # a connection counted by its acceptor: (listener, address) until it closes
        self._counted: dict[Connection, tuple[str, str]] = {}
        self.acceptors: dict[str, Acceptor] = {}
        # the AcceptorBlockedPercent meter of a listener (set before start())
        self.blocked_meter: Callable[[str], BlockedMeter] | None = None
        self.max_request_size = max_request_size
        self.receive_buffer = ReceiveBuffer()  # one for every connection (one event loop)
        # and one that TLS connections read their sockets' encrypted bytes into
        self.tls_receive_buffer = ReceiveBuffer()
        self.queue_bound = RequestQueueBound(queued_max_requests, queued_max_request_bytes)
        self.principal_builder = principal_builder
        self.connections: set[Connection] = set()
        self.listeners: list[Listener] = []
        # SASL listeners' gates (listener_security.py), set before start()
        self.sasl_gates: dict[str, Callable[[Connection], None]] = {}
        # called with (a connection's response_meta, send start ns, sent ns)
        self.on_sent: Callable[[Any, int, int], None] | None = None
        self._last_fd_warning = 0.0
        self._idle_reaper: asyncio.Task[None] | None = None
        self._handshakes: set[asyncio.Future[Any]] = set()  # held until done
        self.reclaimer = MemoryReclaimer()  # after a storm of closes (memory_reclaim.py)

    @property
    def limits(self) -> ConnectionLimits:
        return self.quotas.limits

    @limits.setter
    def limits(self, limits: ConnectionLimits) -> None:
        """New limits (dynamic broker configs): a raised limit lets a waiting acceptor go
        on, a lowered `max.connections` closes connections over it."""
        self.quotas.limits = limits
        for acceptor in self.acceptors.values():
            acceptor.retry()
        self._close_excess_connections()

    def use_ip_rates(self, ip_rates: Callable[[], Mapping[str, float]]) -> None:
        """Where the per-address `connection_creation_rate` values are read
        (ClientQuotaConfigs.ip_connection_rates)."""
        self.quotas.ip_rates = ip_rates

    async def start(self, listeners: list[Listener]) -> None:
        for listener in listeners:
            sockets = bind(listener, self.settings.listen_backlog,
                           self.settings.receive_buffer_bytes)
            listener.sockets = sockets
            self.quotas.add_listener(listener.name)
            blocked = self.blocked_meter(listener.name) if self.blocked_meter else None
            acceptor = Acceptor(listener, sockets, self.quotas, self._hand_off, blocked,
                                self._warn_out_of_descriptors)
            self.acceptors[listener.name] = acceptor
            self.listeners.append(listener)
            acceptor.start()
            log.info("Awaiting socket connections on %s:%d (%s).", listener.host or "0.0.0.0",
                     listener.bound_port, listener.name)
        if self._idle_reaper is None:
            self._idle_reaper = asyncio.ensure_future(self._close_idle_connections())

    # --- connections the acceptors admitted ----------------------------------------------

    def _hand_off(self, listener: Listener, sock: socket.socket, address: str) -> None:
        """An admitted connection becomes a Connection (after its TLS handshake)."""
        conn = Connection(self, listener)
        self._counted[conn] = (listener.name, address)
        task = asyncio.ensure_future(self._connect(conn, sock, listener))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)
        if self.quotas.protected(listener.name):
            self._close_excess_connections()

    async def _connect(self, conn: Connection, sock: socket.socket,
                       listener: Listener) -> None:
        try:
            if listener.ssl_context is None:
                await asyncio.get_running_loop().connect_accepted_socket(lambda: conn, sock)
            else:
                await accept_tls(conn, sock, listener.ssl_context, self.tls_receive_buffer)
        except (Exception, asyncio.CancelledError) as exc:
            # no Connection came of it (a failed TLS handshake): its count goes now
            log.debug("Connection from %s on %s failed before it opened: %r",
                      self._counted.get(conn, ("", "?"))[1], listener.name, exc)
            if conn.transport is None:
                self._uncount(conn)
                sock.close()
            if isinstance(exc, asyncio.CancelledError):
                raise

    def admit(self, conn: Connection) -> str | None:
        """The connection opened (Connection.connection_made); its acceptor counted it
        against the quotas already, so it is never refused here."""
        return None

    def release(self, conn: Connection) -> None:
        """A connection closed: its slot frees, and an acceptor waiting for one goes on."""
        self.reclaimer.closed()
        if self._uncount(conn):
            for acceptor in self.acceptors.values():
                acceptor.retry()

    def _uncount(self, conn: Connection) -> bool:
        counted = self._counted.pop(conn, None)
        if counted is None:
            return False
        self.quotas.release(*counted, time.monotonic() * 1000)
        return True

    def _close_excess_connections(self) -> None:
        """While the total is over `max.connections` (the protected inter-broker listener
        may take it there), close the least recently used connections of the other
        listeners, as Kafka's processors do."""
        excess = self.quotas.total - self.limits.max_connections
        if excess <= 0:
            return
        candidates = sorted(
            (c for c in self.connections
             if not c.closed and self.quotas.over_broker_limit(c.listener.name)),
            key=lambda c: c.last_active)
        for conn in candidates[:excess]:
            log.debug("Closing the least recently used connection %s: the broker is over "
                      "max.connections (%d)", conn.id, self.limits.max_connections)
            conn.close()

    def _warn_out_of_descriptors(self, exc: OSError) -> None:
        """accept() failed for want of descriptors or memory: the acceptor pauses for a
        second; the log says what that means for the operator."""
        now = time.monotonic()
        if now - self._last_fd_warning > 5:
            self._last_fd_warning = now
            log.error("Too many open files (%s): refusing new connections for now; "
                      "%d existing connections keep being served. Raise the open "
                      "files limit (LimitNOFILE) of the broker.", exc.strerror,
                      len(self.connections))

    async def _close_idle_connections(self) -> None:
        """connections.max.idle.ms: close connections with no traffic for that long (a
        connection waiting on its own request, a long-poll fetch say, is not idle)."""
        max_idle = self.settings.connections_max_idle_ms / 1000
        check_every = min(max(max_idle / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(check_every)
            now = time.monotonic()
            self.quotas.expire_idle_ip_rates(now * 1000)  # addresses gone for an hour
            for conn in list(self.connections):
                if not conn.busy and not conn.pending and now - conn.last_active > max_idle:
                    # Kafka logs these at debug too: a quiet client is no news
                    log.debug("About to close the idle connection %s due to being idle for "
                              "%.0f millis", conn.id, (now - conn.last_active) * 1000)
                    conn.close()

    def stop_accepting(self) -> None:
        for acceptor in self.acceptors.values():
            acceptor.close()

    async def stop(self) -> None:
        self.reclaimer.stop()
        if self._idle_reaper is not None:
            self._idle_reaper.cancel()
            self._idle_reaper = None
        self.stop_accepting()
        for task in list(self._handshakes):
            task.cancel()
        for conn in list(self.connections):
            conn.close()
        if self._handshakes:
            await asyncio.gather(*self._handshakes, return_exceptions=True)
