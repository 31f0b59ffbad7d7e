"""One client connection (an asyncio Protocol): frames in, responses out, in order.

Frames are cut from the byte stream as they arrive and handled one at a time per
connection, in order, as Kafka does (a client pipelines up to max.in.flight requests;
their responses must come back in order). A request whose handler answers at once costs
no task; one that waits (a long-poll fetch, acks=all) parks the connection's queue on a
task until it completes.

Back-pressure: a connection holding frames over the broker-wide `queued.max.requests`
bound (limits.py) stops reading until it frees; one whose transport buffer is over the
high-water mark stops handling requests (and reading) until the client drains it.

Responses are a list of parts: bytes, and `FileRecords` (segment file ranges). On a
plaintext connection file ranges go out with `sendfile`, straight from the page cache;
on TLS they are read with pread and encrypted, a chunk at a time (file_sends.py, which
also finishes a plaintext response the socket did not take at once). The bytes of the
responses to the requests handled in one pass (what one read brought in) leave in one
write: a send is a system call that also wakes the client, which cost more than handling
a small produce.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, cast

from moldau.protocol.errors import ProtocolError
from moldau.protocol.framing import FrameReader, ReceiveBuffer
from moldau.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from moldau.protocol.generated.sasl_handshake_response import SaslHandshakeResponse
from moldau.security.acls import java_host_address

from .file_sends import SocketWaiter, copy_range, sendfile_range
from .limits import RequestQueueBound
from .listener import Listener
from .responses import FileRecords, Parts
from .session import Session
from .socket_settings import SocketSettings

log = logging.getLogger("kafka.network.SocketServer")  # network.py's, which log configs name

# A connection stops handling requests while its unsent responses exceed this.
WRITE_HIGH_WATER = 4 * 1024 * 1024
WRITE_LOW_WATER = 1 * 1024 * 1024
# Response bytes gathered for one write go out once they reach this much, so the
# transport's high-water mark still pauses a pass that answers a long pipeline.
COALESCE_BYTES = 256 * 1024
# A TLS connection's water marks (of the TLS layer's own buffer, which fills while the
# socket's is full): file ranges go out in chunks (file_sends.copy_range), and no more
# than about one waits there.
TLS_WRITE_HIGH_WATER = 512 * 1024
TLS_WRITE_LOW_WATER = 128 * 1024
# What an idle connection holds instead of a queue or a set of its own (a deque is 600
# bytes, an empty set 200: on thousands of idle connections, most of what they cost).
_NO_FRAMES: tuple[()] = ()
_NOT_MUTED: frozenset[str] = frozenset()

# handle(connection, frame) -> parts to send, None (no response: acks=0), or an awaitable
# of either. May raise ProtocolError: the connection is then closed.
RequestHandler = Callable[["Connection", bytearray], "Parts | Awaitable[Parts | None] | None"]


class Authenticator(Protocol):
    """A SASL connection's authenticator (sasl_authenticator.SaslAuthenticator; a
    Protocol so that this module does not import it back)."""

    def receive(self, conn: Connection, frame: bytearray,
                received: int) -> Parts | Awaitable[Parts | None] | None: ...

    def closed(self) -> None: ...

    def begin_reauthentication(self, conn: Connection, request: SaslHandshakeRequest,
                               version: int) -> SaslHandshakeResponse | None: ...


class ConnectionServer(Protocol):
    """What a connection uses of the server that accepted it (socket_server.SocketServer;
    a Protocol so that this module does not import the server back)."""

    handler: RequestHandler
    max_request_size: int
    # the scratch buffer every connection's socket is read into (framing.ReceiveBuffer)
    receive_buffer: ReceiveBuffer
    settings: SocketSettings
    queue_bound: RequestQueueBound
    principal_builder: Callable[[Listener, bytes | None], str]
    # by listener name, for SASL listeners: gives a new connection its authenticator
    sasl_gates: dict[str, Callable[[Connection], None]]
    connections: set[Connection]
    # called with (a connection's response_meta, send start ns, sent ns)
    on_sent: Callable[[Any, int, int], None] | None

    def admit(self, conn: Connection) -> str | None: ...

    def release(self, conn: Connection) -> None: ...


class Connection(asyncio.BufferedProtocol):
    """One client connection (Kafka's KafkaChannel and its Processor state)."""

    def __init__(self, server: ConnectionServer, listener: Listener) -> None:
        self.server = server
        self.listener = listener
        # reads go into the server's one scratch buffer: an idle connection holds none
        self.reader = FrameReader(server.max_request_size, shared=server.receive_buffer)
        # the frames read and not yet handled, while there are any
        self.pending: collections.deque[bytearray] | tuple[()] = _NO_FRAMES
        self.session = Session(listener=listener.name,
                               security_protocol=listener.security_protocol)
        self.transport: asyncio.Transport | None = None
        self.sock: socket.socket | None = None
        self.busy = False  # a request is in progress (waiting on a task)
        self.closed = False
        self.muted = False  # some reason below holds the connection: no reads, no requests
        self._mute_reasons = _NOT_MUTED
        self._throttle_end: asyncio.TimerHandle | None = None
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None  # writable's, till resume_writing
        self._socket_waiter: SocketWaiter | None = None  # while a sendfile waits (file_sends)
        self._read_paused_by_bound = False
        self.id = ""
        self.tls = listener.ssl_context is not None
        self._task: asyncio.Future[None] | None = None  # the request in progress, if it waits
        self._loop: asyncio.AbstractEventLoop | None = None  # bound by _start
        self.response_meta: Any = None  # the handler's note for on_sent (RequestMetrics)
        self._send_started = 0
        self._corked = False  # TCP_CORK is set on the socket (_cork)
        self._unsent: list[bytes | bytearray] = []  # response bytes of this pass, not yet written
        self._unsent_bytes = 0
        # (response_meta, send start or 0) of the responses whose last bytes are in
        # _unsent: reported to on_sent when _flush writes them
        self._unsent_meta: list[tuple[Any, int]] = []
        self.last_active = time.monotonic()  # bytes in or a response out (idle closing)
        # A SASL listener's connection: its authenticator (re-authentication), which
        # also takes every frame while `authenticating` holds it (sasl_authenticator.py)
        self.sasl: Authenticator | None = None
        self.authenticating: Authenticator | None = None

    # --- asyncio callbacks -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.transport = transport
        if self.tls:
            transport.set_write_buffer_limits(TLS_WRITE_HIGH_WATER, TLS_WRITE_LOW_WATER)
        else:
            transport.set_write_buffer_limits(WRITE_HIGH_WATER, WRITE_LOW_WATER)
        peer = transport.get_extra_info("peername") or ("?", 0)
        local = transport.get_extra_info("sockname") or ("?", 0)
        self.id = f"{local[0]}:{local[1]}-{peer[0]}:{peer[1]}"
        self.session.client_address = str(peer[0])
        self.session.acl_host = java_host_address(self.session.client_address)
        refused = self.server.admit(self)
        if refused:
            log.info("Rejected connection from %s: %s", peer[0], refused)
            self.closed = True
            transport.abort()
            return
        self.sock = transport.get_extra_info("socket")
        if self.sock is not None:
            with contextlib.suppress(OSError):  # not a TCP socket (tests over socketpair)
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
                send_buffer = self.server.settings.send_buffer_bytes
                if send_buffer != -1:
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        gate = self.server.sasl_gates.get(self.listener.name)
        if gate is not None:
            gate(self)  # SASL names the principal (on SASL_SSL too)
        elif self.tls:
            ssl_object = transport.get_extra_info("ssl_object")
            cert = ssl_object.getpeercert(binary_form=True) if ssl_object else None
            try:
                self.session.principal = self.server.principal_builder(self.listener, cert)
            except ValueError as exc:  # no ssl.principal.mapping.rules rule applies
                self.server.connections.add(self)
                self.close(f"authentication failed: {exc}")
                return
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake_writer()
        self._release_socket_waiter()
        if self._throttle_end is not None:
            self._throttle_end.cancel()
        if self.sasl is not None:
            self.sasl.closed()
        self.server.release(self)
        self.server.connections.discard(self)
        if self.pending:
            self.server.queue_bound.release(len(self.pending),
                                            sum(len(f) for f in self.pending))
            self.pending = _NO_FRAMES
        if exc is not None and not isinstance(exc, ConnectionError):
            log.debug("connection %s lost: %s", self.id, exc)

    def get_buffer(self, sizehint: int) -> memoryview:
        # the socket is read straight into the frame buffers (one copy at most)
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        try:
            frames = self.reader.buffer_updated(nbytes)
        except ProtocolError as exc:
            self.close(f"invalid frame: {exc}")
            return
        if not frames:
            return
        if self.pending:
            self.pending.extend(frames)
        else:
            self.pending = collections.deque(frames)
        bound = self.server.queue_bound
        bound.add(frames)
        self._process()
        # Only a connection holding queued frames waits for the bound to free: one that
        # handled all it read (a follower's fetch, a controller request) keeps being read,
        # or the acks=all requests filling the queue would wait for fetches never read.
        if self.pending and bound.full() and not self.closed and not self._read_paused_by_bound:
            self._read_paused_by_bound = True
            bound.park(self)
            self._sync_reading()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_writer()
        self._process()

    def _wake_writer(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def write_paused(self) -> bool:
        return self._write_paused

    async def writable(self) -> None:
        """Wait until the transport drains below its low-water mark (or the connection
        closes)."""
        while self._write_paused and not self.closed:
            if self._drained is None:
                loop = self._loop or asyncio.get_running_loop()
                self._drained = loop.create_future()
            await self._drained

    def eof_received(self) -> bool | None:
        return None  # close our side too

    # --- flow control ------------------------------------------------------------------

    def resume_from_queue_bound(self) -> None:
        self._read_paused_by_bound = False
        self._sync_reading()

    def mute(self, reason: str) -> None:
        """Stop reading and handling requests until every reason is lifted (a quota's
        throttle time; SASL's delays)."""
        self._mute_reasons = self._mute_reasons | {reason}
        if not self.muted:
            self.muted = True
            self._sync_reading()

    def unmute(self, reason: str) -> None:
        self._mute_reasons = self._mute_reasons - {reason} or _NOT_MUTED
        if self.muted and not self._mute_reasons:
            self.muted = False
            self._sync_reading()
            self._process()

    def throttle(self, ms: int) -> None:
        """A quota's throttle time (KIP-219): the response carrying it is on its way; the
        client's next requests wait until it has passed. A longer throttle replaces a
        shorter one still running."""
        loop = asyncio.get_running_loop()
        ends = loop.time() + ms / 1000
        if self._throttle_end is not None:
            if self._throttle_end.when() >= ends:
                return
            self._throttle_end.cancel()
        self._throttle_end = loop.call_at(ends, self._throttle_over)
        self.mute("throttled")

    def _throttle_over(self) -> None:
        self._throttle_end = None
        if not self.closed:
            self.unmute("throttled")

    def _sync_reading(self) -> None:
        """Read the socket unless muted or parked by a full queued.max.requests bound.
        (Reading is not paused while a request waits: the requests a client pipelines
        behind it are read meanwhile, which keeps a pipelining producer fast; the bound
        limits the memory they take.)"""
        if self.closed or self.transport is None:
            return
        if self.muted or self._read_paused_by_bound:  # both calls are idempotent
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def close(self, why: str = "") -> None:
        if self.closed:
            return
        if why:
            log.info("Closing connection %s (%s): %s", self.id, self.session.client_id or "-",
                     why)
        self._flush()  # the answers to the requests before the one that failed still go
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # --- request processing --------------------------------------------------------------

    def _process(self) -> None:
        """Handle queued frames in order until one has to wait or the client must drain;
        the responses of the pass leave together."""
        try:
            self._handle_pending()
        finally:
            if not self.pending:
                self.pending = _NO_FRAMES  # the queue goes with its last frame
            self._flush()

    def _handle_pending(self) -> None:
        handler = self.server.handler
        bound = self.server.queue_bound
        pending = self.pending
        while pending and not (self.busy or self.closed or self.muted or self._write_paused):
            frame = pending.popleft()
            bound.release(1, len(frame))  # being handled: no longer queued (limits.py)
            try:
                result = handler(self, frame)
            except ProtocolError as exc:
                self.close(str(exc))
                return
            except Exception:  # a bug must not take the broker down: drop the connection
                log.exception("Unexpected error handling a request on %s; closing it", self.id)
                self.close()
                return
            if result is None or type(result) is list:
                if result:
                    if not self._send(result):
                        return  # the rest of the response goes out on a task
                    self._gathered()
                continue
            self.busy = True
            waiting = cast("Awaitable[Parts | None]", result)  # neither None nor a list
            self._task = self._start(self._finish(waiting))
            return

    def _start(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """A task for the rest of a request, on the connection's loop (looked up once:
        asyncio.ensure_future asks for the running loop, a getpid system call in
        CPython 3.11, and every long-polled fetch and acks=all produce comes here)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop.create_task(work)

    async def _finish(self, pending: Awaitable[Parts | None]) -> None:
        try:
            result = await pending
        except ProtocolError as exc:
            self.close(str(exc))
            return
        except Exception:
            log.exception("Unexpected error completing a request on %s; closing it", self.id)
            self.close()
            return
        if result and not self.closed:
            # A long-polled fetch ends here: its file ranges go out with a plain sendfile
            # when the socket takes them, as in _process; asyncio's loop.sendfile costs
            # far more per range (futures, writer registration, pausing reads).
            sent_at_once = self._send(result)
            if sent_at_once:
                self._gathered()
            self._flush()
            if not sent_at_once:
                return  # _send_rest finishes the response and carries on
        self.busy = False
        if not self.closed:
            self._process()

    def _send(self, parts: Parts) -> bool:
        """Send a response; True when it is done at once: its bytes gathered for the pass's
        write (`_flush`), its file ranges sent. A response with file ranges that cannot be
        sent at once finishes on a task."""
        transport = self.transport
        assert transport is not None
        self._send_started = 0  # bytes only: the send starts with the pass's write
        for i, part in enumerate(parts):
            if not isinstance(part, FileRecords):
                self._unsent.append(part)
                self._unsent_bytes += len(part)
                if self._unsent_bytes >= COALESCE_BYTES:
                    self._flush()
                continue
            if not self._send_started:
                self._send_started = time.monotonic_ns()
            if not self._corked and not self.tls and not transport.get_write_buffer_size():
                self._cork(True)
            self._flush()  # what precedes the file range goes first
            if self.tls or transport.get_write_buffer_size():
                # finish on a task (TLS copies; plaintext waits for the buffer to drain)
                self._cork(False)
                self.busy = True
                self._task = self._start(self._send_rest(parts[i:]))
                return False
            sent = self._sendfile_now(part)
            if sent < part.size:
                self._cork(False)
                self.busy = True
                rest = FileRecords(part.fd, part.position + sent, part.size - sent)
                self._task = self._start(self._send_rest([rest, *parts[i + 1:]]))
                return False
        if self._corked:
            self._gathered()
            self._flush()  # the response's tail goes with its file data...
            self._cork(False)  # ...in full segments, then the rest at once
        return True

    def _cork(self, on: bool) -> None:
        """TCP_CORK around a response with file ranges: the bytes before each range and
        its tail go out in the range's segments instead of in small segments of their
        own, each of which woke the reader (a follower's fetcher) for a few bytes."""
        if on == self._corked or self.sock is None:
            return
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1 if on else 0)
        except OSError:  # not TCP (tests over socketpair): nothing to hold back
            return
        self._corked = on

    def _gathered(self) -> None:
        """A response is all sent but for the bytes gathered for the pass's write: its
        send is reported when _flush writes them."""
        meta = self.response_meta
        if meta is not None:
            self.response_meta = None
            self._unsent_meta.append((meta, self._send_started))

    def _flush(self) -> None:
        """Write the gathered response bytes in one call (one send when the socket
        takes them), then report the responses they complete as sent: the clock is read
        twice per write, not per response."""
        unsent = self._unsent
        metas = self._unsent_meta
        if not unsent and not metas:
            return
        started = time.monotonic_ns()
        if unsent:
            self._unsent = []
            self._unsent_bytes = 0
            if not self.closed and self.transport is not None:
                self.transport.write(unsent[0] if len(unsent) == 1 else b"".join(unsent))
        if metas:
            self._unsent_meta = []
            sent = time.monotonic_ns()
            self.last_active = sent / 1e9  # the clock of time.monotonic()
            on_sent = self.server.on_sent
            if on_sent is not None:
                for meta, send_started in metas:
                    on_sent(meta, send_started or started, sent)

    def _sendfile_now(self, part: FileRecords) -> int:
        """sendfile as much as the socket takes without blocking."""
        fd = self.sock.fileno()  # type: ignore[union-attr]
        sent = 0
        try:
            while sent < part.size:
                n = os.sendfile(fd, part.fd, part.position + sent, part.size - sent)
                if n == 0:
                    break
                sent += n
        except BlockingIOError:
            pass
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                self.close(f"send failed: {exc}")
                return part.size
        return sent

    def _sent(self) -> None:
        """Report a response sent to the server's on_sent (request metrics)."""
        self.last_active = time.monotonic()
        meta, on_sent = self.response_meta, self.server.on_sent
        if meta is not None and on_sent is not None:
            self.response_meta = None
            on_sent(meta, self._send_started, time.monotonic_ns())

    async def _send_rest(self, parts: Parts) -> None:
        try:
            await self._send_async(parts)
        finally:
            self._release_socket_waiter()
        self._sent()
        self.busy = False
        if not self.closed:
            self._process()

    async def _send_async(self, parts: Parts) -> None:
        transport = self.transport
        assert transport is not None
        for part in parts:
            if self.closed:
                return
            if type(part) is not FileRecords:
                transport.write(part)  # type: ignore[arg-type]
            elif self.tls:
                await copy_range(self, part)
            else:
                assert self.sock is not None
                if self._socket_waiter is None:
                    loop = self._loop or asyncio.get_running_loop()
                    self._socket_waiter = SocketWaiter(loop, self.sock.fileno())
                await sendfile_range(self, part, self.sock.fileno(), self._socket_waiter)

    def _release_socket_waiter(self) -> None:
        waiter, self._socket_waiter = self._socket_waiter, None
        if waiter is not None:
            waiter.release()
