"""A response with file ranges is written under TCP_CORK (one push for its header, ranges
and tail), and the cork is always cleared: by the end of the pass that sent it, and
before a range that cannot go at once is finished on a task."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import tempfile
from typing import Any

from moldau.server.network import Connection, Listener, SocketServer
from moldau.server.responses import FileRecords


def _file(data: bytes) -> int:
    fd, path = tempfile.mkstemp()
    os.unlink(path)
    os.write(fd, data)
    return fd


async def _exchange(handler: Any, requests: int, read_delay_s: float = 0.0
                    ) -> tuple[list[bytes], list[int]]:
    """Serve `requests` pipelined frames with handler; (responses read, TCP_CORK of the
    server's socket after each response was read)."""
    server = SocketServer(handler)
    listener = Listener("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT")
    await server.start([listener])
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.bound_port)
    try:
        writer.write(b"".join(struct.pack(">i", 1) + bytes([i]) for i in range(requests)))
        await writer.drain()
        await asyncio.sleep(read_delay_s)
        answers, corks = [], []
        for _ in range(requests):
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
            answers.append(await asyncio.wait_for(reader.readexactly(size), 10))
            await asyncio.sleep(0.01)  # the server's pass ends
            conn: Connection = next(iter(server.connections))
            assert conn.sock is not None
            corks.append(conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
        return answers, corks
    finally:
        writer.close()
        await server.stop()


def _fetch_like(fd: int, size: int) -> Any:
    """A handler answering [header, file range, bytes, file range, tail]."""
    def handle(conn: Connection, request: bytearray) -> list[Any]:
        body_size = 2 + 2 * size + 3 + 4
        return [struct.pack(">i", body_size) + b"h" + bytes(request), FileRecords(fd, 0, size),
                b"mid", FileRecords(fd, 0, size), b"tail"]
    return handle


def test_a_response_with_file_ranges_arrives_whole_and_uncorked() -> None:
    data = os.urandom(3000)
    fd = _file(data)
    try:
        answers, corks = asyncio.run(_exchange(_fetch_like(fd, len(data)), 3))
    finally:
        os.close(fd)
    assert answers == [b"h" + bytes([i]) + data + b"mid" + data + b"tail" for i in range(3)]
    assert corks == [0, 0, 0]


def test_a_range_finished_on_a_task_is_not_left_corked() -> None:
    data = os.urandom(12 << 20)  # more than the socket takes at once
    fd = _file(data)
    try:
        answers, corks = asyncio.run(_exchange(_fetch_like(fd, len(data)), 2, 0.2))
    finally:
        os.close(fd)
    assert answers == [b"h" + bytes([i]) + data + b"mid" + data + b"tail" for i in range(2)]
    assert corks == [0, 0]
