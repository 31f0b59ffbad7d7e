"""The rest of a response with file ranges, once the socket did not take it at once
(connection.Connection._send_rest): sendfile on plaintext connections, chunked copies
on TLS ones.

Plaintext: asyncio's `loop.sendfile` costs, for every range, a pause and a resume of the
transport's reading and, each time the socket fills, a writer registered and removed
again (two epoll_ctl) and a new future; with Kafka's default 100 KiB send buffer the
socket fills every 200 KB, and that bookkeeping was half the broker's CPU on a large
fetch. Here the writer is registered once per response, on a duplicate of the socket's
descriptor (asyncio lets no one else watch a descriptor its transport owns), and each
round is a sendfile and a wait.

TLS: asyncio's TLS transport encrypts a write whole into a memory BIO that grows by
copying, then copies it out and on into the socket's buffer, so one 10 MB range cost
several fresh 10 MB buffers (their page faults, copies and wipes were most of a TLS
fetch's CPU). Ranges are read and written TLS_COPY_CHUNK at a time instead, the next
once the transport has drained, reusing a few warm buffers.
"""

from __future__ import annotations

import asyncio
import os
from typing import Protocol

from .responses import FileRecords

TLS_COPY_CHUNK = 256 * 1024


class Sending(Protocol):
    """What the continuation uses of its connection (connection.Connection)."""

    closed: bool
    transport: asyncio.Transport | None

    def close(self, why: str = "") -> None: ...

    def write_paused(self) -> bool: ...

    async def writable(self) -> None: ...


class SocketWaiter:
    """Waits for a socket to take more bytes: a writer on a duplicate of its descriptor,
    registered at the first wait and kept until `release` (once per response)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int) -> None:
        self._loop = loop
        self._fd = fd
        self._dup = -1
        self._waiter: asyncio.Future[None] | None = None

    async def wait(self) -> None:
        if self._dup < 0:
            self._dup = os.dup(self._fd)
            self._loop.add_writer(self._dup, self._ready)
        waiter = self._waiter = self._loop.create_future()
        await waiter

    def _ready(self) -> None:
        # level-triggered: it fires while the socket is writable, also between a wake and
        # the task's next send (once); a wait that is over ignores it
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def release(self) -> None:
        """Unregister (before closing the duplicate: epoll would otherwise keep watching
        the socket) and wake a waiter, which finds its connection closed."""
        if self._dup >= 0:
            self._loop.remove_writer(self._dup)
            os.close(self._dup)
            self._dup = -1
        self._ready()


async def sendfile_range(conn: Sending, part: FileRecords, sock_fd: int,
                         waiter: SocketWaiter) -> None:
    """Send a file range with sendfile, waiting for the socket whenever it is full."""
    transport = conn.transport
    assert transport is not None
    while transport.get_write_buffer_size() and not conn.closed:
        await waiter.wait()  # the bytes the transport holds go first
    position, end = part.position, part.position + part.size
    while position < end and not conn.closed:
        try:
            sent = os.sendfile(sock_fd, part.fd, position, end - position)
        except (BlockingIOError, InterruptedError):
            sent = -1
        except OSError as exc:
            conn.close(f"send failed: {exc}")
            return
        if sent == 0:  # the file is shorter than the range: the response cannot be whole
            conn.close(f"a file range ended early at {position} of {end}")
            return
        if sent > 0:
            position += sent
        if position < end:
            await waiter.wait()  # a short send: the socket is full


async def copy_range(conn: Sending, part: FileRecords) -> None:
    """Send a file range on a TLS connection: read and written TLS_COPY_CHUNK at a time,
    waiting for the transport to drain in between."""
    transport = conn.transport
    assert transport is not None
    position, end = part.position, part.position + part.size
    while position < end:
        if conn.write_paused():
            await conn.writable()
        if conn.closed:
            return
        chunk = os.pread(part.fd, min(TLS_COPY_CHUNK, end - position), position)
        if not chunk:  # the file is shorter than the range: the response cannot be whole
            conn.close(f"a file range ended early at {position} of {end}")
            return
        transport.write(chunk)
        position += len(chunk)
