"""The socket server: the broker's listeners and their connections.

It binds every listener (with Kafka's socket settings, socket_settings.py), accepts
connections (connection.Connection), counts them against Kafka's connection quotas
(`max.connections.per.ip` and its overrides, `max.connections`; limits.ConnectionLimits),
closes the ones idle for `connections.max.idle.ms`, and turns asyncio's generic traceback
for a failed accept() (too many open files) into a message for the operator.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import socket
import time
from collections.abc import Callable
from typing import Any

from .connection import Connection, RequestHandler
from .limits import ConnectionLimits, RequestQueueBound
from .listener import Listener
from .socket_settings import SocketSettings

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
        self.limits = ConnectionLimits()  # the broker replaces it when the configs change
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._admitted: dict[Connection, bool] = {}  # counted against max.connections?
        self._capped_connections = 0
        self.max_request_size = max_request_size
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

    async def start(self, listeners: list[Listener]) -> None:
        loop = asyncio.get_running_loop()
        self._install_accept_error_logging(loop)
        receive_buffer = self.settings.receive_buffer_bytes
        for listener in listeners:
            host = listener.host or None  # "" binds every interface, as Kafka
            server = await loop.create_server(
                lambda lst=listener: Connection(self, lst),
                host, listener.port, ssl=listener.ssl_context, reuse_address=True,
                backlog=self.settings.listen_backlog, start_serving=False,
            )
            if receive_buffer != -1:  # before the first accept: accepted sockets inherit it
                for sock in server.sockets:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            await server.start_serving()
            listener.server = server
            self.listeners.append(listener)
            log.info("Awaiting socket connections on %s:%d (%s).", host or "0.0.0.0",
                     listener.bound_port, listener.name)
        if self._idle_reaper is None:
            self._idle_reaper = asyncio.ensure_future(self._close_idle_connections())

    def admit(self, conn: Connection) -> str | None:
        """Count a new connection against the connection quotas; the reason it is refused,
        or None."""
        limits, address = self.limits, conn.session.client_address
        per_ip = limits.for_ip(address)
        if self._per_ip[address] >= per_ip:
            return f"address already has the configured maximum of {per_ip} connections"
        capped = conn.listener.name != limits.inter_broker_listener
        if capped and self._capped_connections >= limits.max_connections:
            return (f"the broker already has the configured maximum of "
                    f"{limits.max_connections} connections (max.connections)")
        self._per_ip[address] += 1
        self._admitted[conn] = capped
        self._capped_connections += capped
        return None

    def release(self, conn: Connection) -> None:
        if conn in self._admitted:
            self._capped_connections -= self._admitted.pop(conn)
            address = conn.session.client_address
            self._per_ip[address] -= 1
            if self._per_ip[address] <= 0:
                del self._per_ip[address]

    async def _close_idle_connections(self) -> None:
        """connections.max.idle.ms: close connections with no traffic for that long (a
        connection waiting on its own request, a long-poll fetch say, is not idle)."""
        max_idle = self.settings.connections_max_idle_ms / 1000
        check_every = min(max(max_idle / 4, 0.05), 30.0)
        while True:
            await asyncio.sleep(check_every)
            now = time.monotonic()
            for conn in list(self.connections):
                if not conn.busy and not conn.pending and now - conn.last_active > max_idle:
                    # Kafka logs these at debug too: a quiet client is no news
                    log.debug("About to close the idle connection %s due to being idle for "
                              "%.0f millis", conn.id, (now - conn.last_active) * 1000)
                    conn.close()

    def _install_accept_error_logging(self, loop: asyncio.AbstractEventLoop) -> None:
        """asyncio pauses accepting for a second when accept() fails with EMFILE; make the
        log say what that means for the operator instead of a generic traceback."""
        previous = loop.get_exception_handler()

        def on_error(loop: asyncio.AbstractEventLoop,
                     context: dict[str, Any]) -> None:  # Any: asyncio's context values
            exc = context.get("exception")
            if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
                now = time.monotonic()
                if now - self._last_fd_warning > 5:
                    self._last_fd_warning = now
                    log.error("Too many open files (%s): refusing new connections for now; "
                              "%d existing connections keep being served. Raise the open "
                              "files limit (LimitNOFILE) of the broker.", exc.strerror,
                              len(self.connections))
                return
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)

        loop.set_exception_handler(on_error)

    def stop_accepting(self) -> None:
        for listener in self.listeners:
            if listener.server is not None:
                listener.server.close()

    async def stop(self) -> None:
        if self._idle_reaper is not None:
            self._idle_reaper.cancel()
            self._idle_reaper = None
        self.stop_accepting()
        for conn in list(self.connections):
            conn.close()
        for listener in self.listeners:
            if listener.server is not None:
                await listener.server.wait_closed()
