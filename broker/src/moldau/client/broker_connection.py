"""An asyncio connection from one broker to another (the controller's channel, the replica
fetchers): requests are pipelined and matched to their responses by correlation id.

Kafka's NetworkClient does the same for its inter-broker traffic; this one negotiates
nothing but SASL (the caller picks the versions from inter.broker.protocol.version) and
fails every pending request with ConnectionError when the connection drops, so the caller
reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from moldau.client.sasl_authenticate import authenticate_async, reauthentication_delay_s
from moldau.protocol._runtime import Message
from moldau.protocol.errors import ProtocolError
from moldau.protocol.framing import FrameReader
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.headers import decode_response, encode_request
from moldau.security.sasl.gssapi import bind_server_host

if TYPE_CHECKING:
    from moldau.security.sasl.mechanism import SaslClient

_INT32 = struct.Struct(">i")
_T = TypeVar("_T")
MAX_RESPONSE = 512 * 1024 * 1024  # beyond any fetch response a broker asks for


class _Responses(asyncio.BufferedProtocol):
    """Reads the socket straight into frame buffers (FrameReader, as the broker's own
    listeners do): a large fetch response is copied once, from the socket into the
    bytearray its records stay in until they are appended."""

    def __init__(self) -> None:
        self.frames = FrameReader(MAX_RESPONSE)
        self.connection: BrokerConnection | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        assert self.connection is not None
        try:
            frames = self.frames.buffer_updated(nbytes)
        except ProtocolError as exc:
            self.connection.close(f"bad response: {exc}")
            return
        for frame in frames:
            self.connection.on_frame(frame)

    def eof_received(self) -> bool:
        return False  # close the transport: the peer is gone

    def connection_lost(self, exc: Exception | None) -> None:
        if self.connection is not None:
            self.connection.close(f"connection lost: {exc}" if exc else "closed by the peer")


class BrokerConnection:
    def __init__(self, transport: asyncio.Transport, client_id: str) -> None:
        self.transport = transport
        self.client_id = client_id
        self._correlation = 0
        # correlation id -> (future, api key, version, deadline on the loop's clock, timeout)
        self._pending: dict[int, tuple[asyncio.Future[Message], int, int, float, float]] = {}
        self._closed = False
        # One timer for every request's timeout, armed at the earliest deadline it knows
        # of and re-armed when it fires: a replica fetcher sends a request per produce, and
        # a timer (or asyncio.wait_for, which adds a future and a loop pass) per request
        # was a measurable share of a follower's CPU.
        self._timer: asyncio.TimerHandle | None = None
        # the transport's loop, looked up at the first request (the lookup is a getpid
        # system call in CPython 3.11, and a follower's fetcher sends a request per produce)
        self._loop: asyncio.AbstractEventLoop | None = None
        # SASL (KIP-368): the mechanism factory, when the loop's clock says to authenticate
        # again (None: never), and the re-authentication under way, which requests wait for
        self._sasl: Callable[[], SaslClient] | None = None
        self._host = ""  # GSSAPI names the broker's principal after it
        self._reauthenticate_at: float | None = None
        self._reauthentication: asyncio.Future[None] | None = None
        self._authenticate_version: int | None = None  # known after the first one

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str,
                      ssl_context: ssl.SSLContext | None = None,
                      timeout_s: float = 10.0,
                      receive_buffer_bytes: int = -1,
                      sasl: Callable[[], SaslClient] | None = None) -> BrokerConnection:
        """Connect within timeout_s (Kafka's socket.connection.setup.timeout.ms, which
        covers TLS and SASL too); a receive_buffer_bytes other than -1 sizes SO_RCVBUF
        before the handshake, so the window the connection announces follows it
        (replica.socket.receive.buffer.bytes). `sasl` makes a fresh mechanism client: given,
        the connection authenticates before it is returned (SaslAuthenticationFailed when
        the broker refuses) and again before the session the broker granted ends."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s

        async def open_connection() -> tuple[asyncio.Transport, _Responses]:
            server_hostname = host if ssl_context else None
            if receive_buffer_bytes == -1:
                return await loop.create_connection(
                    _Responses, host, port, ssl=ssl_context, server_hostname=server_hostname)
            sock = await _connected_socket(loop, host, port, receive_buffer_bytes)
            return await loop.create_connection(
                _Responses, sock=sock, ssl=ssl_context, server_hostname=server_hostname)

        transport, protocol = await asyncio.wait_for(open_connection(), timeout_s)
        connection = cls(transport, client_id)
        protocol.connection = connection
        if transport.is_closing():  # lost before we were listening
            connection.close("closed by the peer")
        if sasl is not None:
            connection._sasl = sasl
            connection._host = host
            try:
                await asyncio.wait_for(connection._authenticate(),
                                       max(deadline - loop.time(), 0.001))
            except BaseException:
                connection.close("SASL authentication did not complete")
                raise
        return connection

    async def _authenticate(self) -> None:
        """One SASL exchange; no other request may go out meanwhile (the broker takes the
        frames after a SaslHandshake for SASL tokens), which request() sees to."""
        assert self._sasl is not None
        loop = asyncio.get_running_loop()
        started = loop.time()
        session = await authenticate_async(self._send, bind_server_host(self._sasl(), self._host),
                                           self._authenticate_version)
        self._authenticate_version = session.authenticate_version
        delay = reauthentication_delay_s(session.lifetime_ms)
        self._reauthenticate_at = None if delay is None else started + delay

    async def _reauthenticate(self) -> None:
        """Authenticate again, once for every request that finds the session ending: the
        first starts it, the others wait for it. A failure closes the connection (its
        requests fail with ConnectionError, and the caller reconnects)."""
        if self._closed:
            raise ConnectionError("connection closed")
        if self._reauthentication is None:
            self._reauthentication = asyncio.ensure_future(self._run_reauthentication())
            # its waiters may all be cancelled; the failure is in the close reason anyway
            self._reauthentication.add_done_callback(_retrieve)
        await asyncio.shield(self._reauthentication)

    async def _run_reauthentication(self) -> None:
        try:
            await self._authenticate()
        except Exception as exc:
            self.close(f"SASL re-authentication failed: {exc}")
            raise ConnectionError(f"SASL re-authentication failed: {exc}") from exc
        except BaseException:  # cancelled halfway: the broker expects more tokens
            self.close("SASL re-authentication cancelled")
            raise
        finally:
            self._reauthentication = None

    @property
    def closed(self) -> bool:
        return self._closed

    async def request(self, api_key: int, version: int, body: Message,
                      timeout_s: float = 30.0) -> Any:  # Any: the class of APIS[api_key].response
        """Send one request and wait for its response; ConnectionError when the connection
        fails, TimeoutError (and a closed connection, as Kafka's client does) on timeout."""
        if self._reauthenticate_at is not None and (
                self._reauthentication is not None
                or asyncio.get_running_loop().time() >= self._reauthenticate_at):
            await self._reauthenticate()
        # the body of _send, inline: one coroutine fewer per request on a fetcher's path
        correlation, future = self._submit(api_key, version, body, timeout_s)
        try:
            return await future
        finally:
            self._pending.pop(correlation, None)

    async def _send(self, api_key: int, version: int, body: Message,
                    timeout_s: float = 30.0) -> Any:  # Any: as request()
        """request() without the re-authentication check: the SASL exchange's own path."""
        correlation, future = self._submit(api_key, version, body, timeout_s)
        try:
            return await future
        finally:
            self._pending.pop(correlation, None)

    def _submit(self, api_key: int, version: int, body: Message, timeout_s: float
                ) -> tuple[int, asyncio.Future[Message]]:
        """Write a request; its correlation id and the future its response will fill."""
        if self._closed:
            raise ConnectionError("connection closed")
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        correlation = self._correlation
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=correlation, client_id=self.client_id)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        future: asyncio.Future[Message] = loop.create_future()
        deadline = loop.time() + timeout_s
        self._pending[correlation] = (future, api_key, version, deadline, timeout_s)
        self.transport.write(encode_request(header, body))
        timer = self._timer
        if timer is None or deadline < timer.when():
            self._arm(loop, deadline)
        return correlation, future

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._expire)

    def _expire(self) -> None:
        """The timer fired: fail a request past its deadline with TimeoutError and close
        the connection (as Kafka's client does); else wait for the earliest deadline."""
        self._timer = None
        if self._closed or not self._pending:
            return
        loop = asyncio.get_running_loop()
        now = loop.time() + 0.001  # the loop may run a timer a hair before its time
        for future, api_key, version, deadline, timeout_s in self._pending.values():
            if deadline <= now:
                reason = f"request {api_key} v{version} timed out after {timeout_s} s"
                if not future.done():
                    future.set_exception(TimeoutError(reason))
                    future.add_done_callback(_retrieve)  # its requester may be gone
                self.close(reason)
                return
        self._arm(loop, min(entry[3] for entry in self._pending.values()))

    def on_frame(self, frame: bytearray) -> None:
        """A response arrived: decode it for its requester (if it still waits)."""
        correlation = _INT32.unpack_from(frame, 0)[0]
        entry = self._pending.get(correlation)
        if entry is None:
            return  # its requester timed out and went away
        future, api_key, version, _, _ = entry
        try:
            _, body = decode_response(frame, api_key, version)
        except ProtocolError as exc:
            self.close(f"bad response: {exc}")
            return
        if not future.done():
            future.set_result(body)

    def close(self, reason: str = "closed") -> None:
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for future, *_ in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionError(reason))
                # its requester may be cancelled at the same time and never look at it
                future.add_done_callback(_retrieve)
        self._pending.clear()
        with contextlib.suppress(Exception):
            self.transport.close()


async def _connected_socket(loop: asyncio.AbstractEventLoop, host: str, port: int,
                            receive_buffer_bytes: int) -> socket.socket:
    """A TCP socket with SO_RCVBUF set before it connects to host:port (each address in
    turn, as create_connection would try them)."""
    error: OSError | None = None
    for family, kind, proto, _, address in await loop.getaddrinfo(
            host, port, type=socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
            await loop.sock_connect(sock, address)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
        except BaseException:
            sock.close()
            raise
    raise error or OSError(f"no address for {host}:{port}")


def _retrieve(future: asyncio.Future[_T]) -> None:
    if not future.cancelled():
        future.exception()
