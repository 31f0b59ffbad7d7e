"""File ranges on a TLS connection (connection.Connection._write_copies), over a real
socket and a real TLS handshake: read, encrypted and written a chunk at a time, each
once the transport has drained, so the bytes arrive whole and in order behind a slow
reader while the broker holds a few chunks of them, not the whole range several times
over; a range the file cannot fill closes the connection instead of sending a short
response."""

from __future__ import annotations

import asyncio
import hashlib
import os
import ssl
import struct
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tls_material import TlsMaterial, make_tls_material

from moldau.server.connection import TLS_WRITE_HIGH_WATER, TLS_WRITE_LOW_WATER
from moldau.server.network import Connection, Listener, SocketServer
from moldau.server.responses import FileRecords

from .file_response_client import read_slowly, send_request

MIB = 1 << 20
FILE_BYTES = os.urandom(12 * MIB + 333)  # ranges that are no multiple of a chunk
FIRST = (7, 5 * MIB + 1)  # (position, size) of the response's two ranges
SECOND = (5 * MIB + 8, 7 * MIB)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


def _contexts(tls: TlsMaterial) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(tls.server_cert, tls.server_key)
    client = ssl.create_default_context(cafile=str(tls.ca_cert))
    return server, client


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


async def _serve(tmp: Path, tls: TlsMaterial, ranges: list[tuple[int, int]],
                 exchange: Callable[[asyncio.StreamReader, asyncio.StreamWriter, list[Connection]],
                                    Any]) -> Any:
    path = tmp / "records"
    path.write_bytes(FILE_BYTES)
    fd = os.open(path, os.O_RDONLY)
    connections: list[Connection] = []

    def handler(conn: Connection, frame: bytearray) -> list[Any]:
        connections.append(conn)
        correlation = bytes(frame[4:8])
        if frame[8:9] == b"F":
            return _response(fd, correlation, ranges)
        return [struct.pack(">i", 4 + 2) + correlation + b"ok"]

    server_context, client_context = _contexts(tls)
    server = SocketServer(handler)
    listener = Listener("SSL", "127.0.0.1", 0, "SSL", ssl_context=server_context)
    await server.start([listener])
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.bound_port,
                                                       ssl=client_context,
                                                       server_hostname="localhost")
        try:
            return await exchange(reader, writer, connections)
        finally:
            writer.close()
    finally:
        await server.stop()
        os.close(fd)


def test_file_ranges_arrive_whole_behind_a_slow_reader_in_bounded_memory(
        tls: TlsMaterial, tmp_path: Path) -> None:
    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       connections: list[Connection]) -> tuple[bytes, bytes, int, tuple]:
        send_request(writer, 1, b"s")  # the handshake and a first answer, before measuring
        first = await asyncio.wait_for(reader.readexactly(10), 10)
        tracemalloc.start()
        try:
            send_request(writer, 2, b"F")
            size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
            digest = await read_slowly(reader, size)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        send_request(writer, 3, b"s")  # the connection serves on, in order
        last = await asyncio.wait_for(reader.readexactly(10), 10)
        transport = connections[-1].transport
        assert transport is not None
        assert first == struct.pack(">ii", 6, 1) + b"ok"
        return digest, last, peak, transport.get_write_buffer_limits()

    digest, last, peak, limits = asyncio.run(_serve(tmp_path, tls, [FIRST, SECOND], exchange))
    expected = (struct.pack(">i", 2) + b"hd" + FILE_BYTES[FIRST[0]:sum(FIRST)] + b"mid"
                + FILE_BYTES[SECOND[0]:sum(SECOND)] + b"tail")
    assert digest == hashlib.sha256(expected).digest()
    assert last == struct.pack(">ii", 6, 3) + b"ok"
    assert limits == (TLS_WRITE_LOW_WATER, TLS_WRITE_HIGH_WATER)
    # 12 MiB went out: about 2.4 MiB at the peak (chunks in the transports' buffers, the
    # client's too); writing each range whole peaked at 22 MiB
    assert peak < 4 * MIB, f"{peak} bytes allocated at the peak"


def test_a_range_past_the_end_of_the_file_closes_the_connection(
        tls: TlsMaterial, tmp_path: Path) -> None:
    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                       connections: list[Connection]) -> bytes:
        send_request(writer, 1, b"F")
        return await asyncio.wait_for(reader.read(), 10)  # until the broker closes

    beyond = (len(FILE_BYTES) - 1000, 5000)
    received = asyncio.run(_serve(tmp_path, tls, [beyond], exchange))
    # the bytes the file had, then the close: never a response that looks whole
    assert len(received) < 4 + 2 + 5000 + 4
