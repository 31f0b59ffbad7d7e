"""A response with file ranges goes out under TCP_CORK (network.Connection._cork): over a
real TCP connection its bytes arrive whole and in order, and the socket is uncorked once
the response is out, so the next small response is not held back."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import tempfile
from typing import Any

import pytest

from moldau.server.network import Connection, Listener, SocketServer
from moldau.server.responses import FileRecords

# A range the socket takes at once (the response is sent in the call), and one it does
# not (its rest goes out on a task, uncorked).
SMALL = os.urandom(10_000)
LARGE = os.urandom(3_000_000)


async def _exchange(tmp: str, file_bytes: bytes) -> tuple[list[bytes], list[int]]:
    fd = os.open(os.path.join(tmp, "records"), os.O_RDWR | os.O_CREAT)
    os.write(fd, file_bytes)
    cork_after: list[int] = []
    connections: list[Connection] = []

    def handler(conn: Connection, frame: bytearray) -> list[Any]:
        connections.append(conn)
        correlation = bytes(frame[4:8])
        if frame[8:9] == b"F":  # a response with a file range between two byte parts
            size = 4 + 2 + len(file_bytes) + 4
            return [struct.pack(">i", size) + correlation + b"hd",
                    FileRecords(fd, 0, len(file_bytes)), b"tail"]
        return [struct.pack(">i", 4 + 2) + correlation + b"ok"]

    server = SocketServer(handler)
    listener = Listener("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT")
    await server.start([listener])
    reader, writer = await asyncio.open_connection("127.0.0.1", listener.bound_port)
    answers = []
    for i, kind in enumerate((b"F", b"s", b"F", b"s")):
        body = struct.pack(">hhi", 0, 0, i) + kind  # api key, version, correlation id
        writer.write(struct.pack(">i", len(body)) + body)
        await writer.drain()
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))[0]
        answers.append(await asyncio.wait_for(reader.readexactly(size), 5))
        sock = connections[-1].sock
        assert sock is not None
        cork_after.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK))
    writer.close()
    os.close(fd)
    return answers, cork_after


@pytest.mark.parametrize("file_bytes", [SMALL, LARGE], ids=["sent-at-once", "on-a-task"])
def test_a_file_response_arrives_whole_and_leaves_the_socket_uncorked(file_bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        answers, cork_after = asyncio.run(_exchange(tmp, file_bytes))
    assert answers[0] == struct.pack(">i", 0) + b"hd" + file_bytes + b"tail"
    assert answers[1] == struct.pack(">i", 1) + b"ok"
    assert answers[2] == struct.pack(">i", 2) + b"hd" + file_bytes + b"tail"
    assert answers[3] == struct.pack(">i", 3) + b"ok"
    assert cork_after == [0, 0, 0, 0]
