"""File ranges on a plaintext connection whose socket fills (file_sends.sendfile_range),
over a real TCP connection with Kafka's default 100 KiB send buffer and a slow reader:
the bytes arrive exactly as the file holds them, in order with the bytes between the
ranges and with the next response; the descriptor the wait used is closed once the
response is out; a range the file cannot fill closes the connection instead of sending
a short response."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from moldau.server.network import Connection, Listener, SocketServer
from moldau.server.responses import FileRecords

from .file_response_client import read_slowly, send_request

MIB = 1 << 20
FILE_BYTES = os.urandom(6 * MIB + 123)
RANGES = [(3, 2 * MIB + 5), (2 * MIB + 8, 11), (2 * MIB + 19, 4 * MIB)]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _response(fd: int, correlation: bytes, ranges: list[tuple[int, int]]) -> list[Any]:
    """A frame of a header, the ranges with b"mid" between them, and b"tail"."""
    size = 4 + 2 + sum(n for _, n in ranges) + 3 * (len(ranges) - 1) + 4
    parts: list[Any] = [struct.pack(">i", size) + correlation + b"hd"]
    for i, (position, n) in enumerate(ranges):
        if i:
            parts.append(b"mid")
        parts.append(FileRecords(fd, position, n))
    parts.append(b"tail")
    return parts


Exchange = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[Any]]


async def _serve(tmp: Path, ranges: list[tuple[int, int]], exchange: Exchange,
                 servers: list[SocketServer] | None = None) -> Any:
    path = tmp / "records"
    path.write_bytes(FILE_BYTES)
    fd = os.open(path, os.O_RDONLY)

    def handler(conn: Connection, frame: bytearray) -> list[Any]:
        correlation = bytes(frame[4:8])
        if frame[8:9] == b"F":
            return _response(fd, correlation, ranges)
        return [struct.pack(">i", 4 + 2) + correlation + b"ok"]

    server = SocketServer(handler)  # socket.send.buffer.bytes: Kafka's 100 KiB
    listener = Listener("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT")
    await server.start([listener])
    if servers is not None:
        servers.append(server)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.bound_port)
        try:
            return await exchange(reader, writer)
        finally:
            writer.close()
    finally:
        await server.stop()
        os.close(fd)


def test_ranges_arrive_exactly_behind_a_slow_reader_and_the_wait_leaves_no_descriptor(
        tmp_path: Path) -> None:
    async def exchange(reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> tuple[list[bytes], list[int]]:
        digests, fds = [], []
        for correlation in (1, 2):  # twice: the second response waits on a fresh descriptor
            fds.append(_open_fds())
            send_request(writer, correlation, b"F")
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
            digests.append(await read_slowly(reader, size))
            send_request(writer, 10 + correlation, b"s")  # the next response, in order
            assert await asyncio.wait_for(reader.readexactly(10), 10) == struct.pack(
                ">ii", 6, 10 + correlation) + b"ok"
            fds.append(_open_fds())
        return digests, fds

    digests, fds = asyncio.run(_serve(tmp_path, RANGES, exchange))
    for correlation, digest in zip((1, 2), digests, strict=True):
        expected = struct.pack(">i", correlation) + b"hd" + b"mid".join(
            FILE_BYTES[p:p + n] for p, n in RANGES) + b"tail"
        assert digest == hashlib.sha256(expected).digest()
    assert len(set(fds)) == 1, f"open descriptors before and after each response: {fds}"


def test_a_range_past_the_end_of_the_file_closes_the_connection(tmp_path: Path) -> None:
    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        send_request(writer, 1, b"F")
        return await asyncio.wait_for(reader.read(), 10)  # until the broker closes

    # a socket-filling range first, so the short one is sent by the waiting sendfile
    ranges = [(0, 4 * MIB), (len(FILE_BYTES) - 1000, 5000)]
    received = asyncio.run(_serve(tmp_path, ranges, exchange))
    assert len(received) < 4 + 2 + 4 * MIB + 3 + 5000 + 4


def test_a_client_gone_mid_response_leaves_no_descriptor_and_others_are_served(
        tmp_path: Path) -> None:
    servers: list[SocketServer] = []

    async def exchange(reader: asyncio.StreamReader,
                       writer: asyncio.StreamWriter) -> tuple[int, int, bytes]:
        fds = _open_fds()
        send_request(writer, 1, b"F")
        await asyncio.wait_for(reader.readexactly(64 * 1024), 10)  # the socket fills
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # a reset while the broker waits to send the rest
        for _ in range(500):
            if not servers[0].connections:
                break
            await asyncio.sleep(0.01)
        remaining = len(servers[0].connections)
        # another client is served as before
        reader2, writer2 = await asyncio.open_connection("127.0.0.1",
                                                         writer.get_extra_info("peername")[1])
        send_request(writer2, 2, b"s")
        answer = await asyncio.wait_for(reader2.readexactly(10), 10)
        writer2.close()
        await asyncio.sleep(0.05)
        return remaining, _open_fds() - fds, answer

    remaining, more_fds, answer = asyncio.run(_serve(tmp_path, RANGES, exchange, servers))
    assert remaining == 0
    assert answer == struct.pack(">ii", 6, 2) + b"ok"
    # the client's own socket is gone too; what is left open is what was open before
    assert more_fds <= 0, f"{more_fds} more descriptors open than before the response"
