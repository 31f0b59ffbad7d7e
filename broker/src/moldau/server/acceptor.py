"""One listener's acceptor (Kafka's Acceptor): binds the listening sockets, takes new
connections off them, and holds back what the connection quotas (connection_quotas.py)
say must wait.

It reads the listening sockets itself (not asyncio's Server) so that it can stop
reading them: a connection over `max.connections`, or one that must wait out the
creation-rate throttle, is held while the acceptor stops accepting, and the ones behind
it stay in the kernel's backlog until a close frees a slot (`retry`) or the throttle time
has passed. The time spent so is marked on `AcceptorBlockedPercent` (seconds per
second, as Kafka's meter counts nanoseconds per nanosecond). A connection over its
address's creation rate is held and closed after its throttle time; one over
`max.connections.per.ip` is closed at once, with no answer, as Kafka does.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import time
from collections.abc import Callable
from typing import Protocol

from .connection_quotas import ConnectionQuotas
from .listener import Listener

log = logging.getLogger("kafka.network.SocketServer")  # network.py's, which log configs name

# accept() errors that mean the process is out of descriptors or memory: asyncio's Server
# pauses accepting for a second on these, and so does this acceptor
_RESOURCE_ERRORS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_RESOURCE_PAUSE_S = 1.0
ACCEPT_BATCH = 64  # connections taken per readiness event before the loop runs others


class BlockedMeter(Protocol):
    def mark(self, n: float = 1) -> None: ...


def bind(listener: Listener, backlog: int, receive_buffer: int) -> list[socket.socket]:
    """The listening sockets of a listener: one per address its host resolves to ("" is
    every interface), as asyncio's create_server binds them."""
    host = listener.host or None
    infos = socket.getaddrinfo(host, listener.port, socket.AF_UNSPEC, socket.SOCK_STREAM,
                               0, socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, type_, proto, _name, address in dict.fromkeys(infos):
            sock = socket.socket(family, type_, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if receive_buffer != -1:  # before the first accept: accepted sockets inherit it
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            try:
                sock.bind(address)
            except OSError as exc:
                reason = (exc.strerror or str(exc)).lower()
                raise OSError(exc.errno, f"error while attempting to bind on address "
                              f"{address!r}: {reason}") from None
            sock.listen(backlog)
            sock.setblocking(False)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Acceptor:
    """Accepts on one listener's sockets and hands admitted connections to `hand_off`
    (the socket server, which makes them Connections)."""

    def __init__(self, listener: Listener, sockets: list[socket.socket],
                 quotas: ConnectionQuotas,
                 hand_off: Callable[[Listener, socket.socket, str], None],
                 blocked: BlockedMeter | None = None,
                 on_resource_error: Callable[[OSError], None] | None = None) -> None:
        self.listener = listener
        self.sockets = sockets
        self.quotas = quotas
        self.hand_off = hand_off
        self.blocked = blocked
        self.on_resource_error = on_resource_error
        self._loop = asyncio.get_running_loop()
        self._reading = False
        self._closed = False
        # the connection waiting for a slot or its throttle: (socket, address, until ms,
        # waiting since (perf_counter))
        self._waiting: tuple[socket.socket, str, float, float] | None = None
        self._wake: asyncio.TimerHandle | None = None
        # connections over their address's creation rate, closed when their time is up
        self._held: dict[socket.socket, asyncio.TimerHandle] = {}

    @property
    def name(self) -> str:
        return self.listener.name

    @property
    def blocking(self) -> bool:
        """Whether a connection waits here (the acceptor has stopped accepting)."""
        return self._waiting is not None

    def start(self) -> None:
        self._start_reading()

    def close(self) -> None:
        self._closed = True
        self._stop_reading()
        if self._wake is not None:
            self._wake.cancel()
        if self._waiting is not None:
            self._waiting[0].close()
            self._waiting = None
        for sock, handle in self._held.items():
            handle.cancel()
            sock.close()
        self._held.clear()
        for sock in self.sockets:
            sock.close()

    # --- reading the listening sockets -------------------------------------------------

    def _start_reading(self) -> None:
        if not self._reading and not self._closed:
            self._reading = True
            for sock in self.sockets:
                self._loop.add_reader(sock.fileno(), self._on_readable, sock)

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            for sock in self.sockets:
                self._loop.remove_reader(sock.fileno())

    def _on_readable(self, listening: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            if self._waiting is not None or not self._reading:
                return
            try:
                sock, peer = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _RESOURCE_ERRORS:
                    self._pause_for_resources(exc)
                    return
                continue  # the client gave up already (ECONNABORTED): the next one
            sock.setblocking(False)
            self._take(sock, str(peer[0]))

    def _pause_for_resources(self, exc: OSError) -> None:
        if self.on_resource_error is not None:
            self.on_resource_error(exc)
        self._stop_reading()
        self._loop.call_later(_RESOURCE_PAUSE_S, self._start_reading)

    # --- the quotas --------------------------------------------------------------------

    def _take(self, sock: socket.socket, address: str) -> None:
        now_ms = time.monotonic() * 1000
        throttle = self.quotas.record_accept(self.name, now_ms)
        if throttle > 0 or not self.quotas.slot_available(self.name):
            # wait, as Kafka's acceptor thread does, with the connection in hand
            self._waiting = (sock, address, now_ms + throttle, time.perf_counter())
            self._stop_reading()
            if throttle > 0:
                self._wake = self._loop.call_later(throttle / 1000, self._on_wake)
            return
        self._admit(sock, address)

    def _on_wake(self) -> None:
        self._wake = None
        self.retry()

    def retry(self) -> None:
        """Take the waiting connection further if its throttle time has passed and a slot
        is free (called on its timer, on every close and on new limits)."""
        if self._waiting is None:
            return
        sock, address, until_ms, since = self._waiting
        remaining_ms = until_ms - time.monotonic() * 1000
        if remaining_ms > 0:
            if self._wake is None:
                self._wake = self._loop.call_later(remaining_ms / 1000, self._on_wake)
            return
        if not self.quotas.slot_available(self.name):
            return
        self._waiting = None
        if self._wake is not None:
            self._wake.cancel()
            self._wake = None
        if self.blocked is not None:
            self.blocked.mark(time.perf_counter() - since)
        self._admit(sock, address)
        self._start_reading()

    def _admit(self, sock: socket.socket, address: str) -> None:
        admission = self.quotas.admit(self.name, address, time.monotonic() * 1000)
        if admission.ip_throttle_ms is not None:
            log.debug("Delaying closing of connection from %s for %d ms", address,
                      admission.ip_throttle_ms)
            self._held[sock] = self._loop.call_later(
                admission.ip_throttle_ms / 1000, self._close_held, sock)
        elif admission.ip_limit is not None:
            log.info("Rejected connection from /%s, address already has the configured "
                     "maximum of %d connections.", address, admission.ip_limit)
            sock.close()
        else:
            self.hand_off(self.listener, sock, address)

    def _close_held(self, sock: socket.socket) -> None:
        self._held.pop(sock, None)
        sock.close()
