"""What a connection holds, and that it lets go (issue 42, many connections): the
connections of a socket server read into one shared buffer, an idle connection keeps
no request queue or read buffer, a closed one leaves nothing in the server, and a storm
of closes is followed by a reclaim (server/memory_reclaim.py). Real sockets, in-process."""

from __future__ import annotations

import asyncio
import gc
import struct
import weakref
from typing import Any

import pytest

from moldau.protocol.errors import ProtocolError
from moldau.protocol.framing import FrameReader, ReceiveBuffer, frame
from moldau.server.memory_reclaim import MemoryReclaimer, _malloc_trim
from moldau.server.network import Connection, Listener, SocketServer


def answer(conn: Connection, request: bytearray) -> list[bytes]:
    return [frame(bytes(request[4:8]))]  # the correlation id back


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def receive(reader: FrameReader, data: bytes) -> list[bytes]:
    target = reader.get_buffer()
    target[:len(data)] = data
    return [bytes(f) for f in reader.buffer_updated(len(data))]


def test_readers_sharing_a_buffer_keep_their_unfinished_frames_apart() -> None:
    shared = ReceiveBuffer(1024)
    one, two = FrameReader(shared=shared), FrameReader(shared=shared)
    a, b = frame(b"a" * 300), frame(b"b" * 300)
    assert receive(one, a[:100]) == []
    assert receive(two, b[:2]) == []  # not even the whole size prefix
    assert receive(two, b[2:250]) == []
    assert receive(one, a[100:] + frame(b"next")) == [b"a" * 300, b"next"]
    assert receive(two, b[250:]) == [b"b" * 300]
    assert one.pending == two.pending == 0


def test_a_large_frame_gets_its_own_buffer_and_the_shared_one_stays_its_size() -> None:
    shared = ReceiveBuffer(1024)
    reader = FrameReader(shared=shared)
    payload = bytes(range(256)) * 40  # 10 KiB: larger than half the shared buffer
    data = frame(payload)
    assert receive(reader, data[:1000]) == []
    rest = reader.get_buffer()
    assert len(rest) == len(data) - 1000  # straight into the frame's own bytearray
    rest[:] = data[1000:]
    assert reader.buffer_updated(len(rest)) == [bytearray(payload)]
    assert len(shared.buffer) == 1024 and reader.pending == 0


def test_bytes_read_into_another_readers_buffer_are_refused() -> None:
    shared = ReceiveBuffer(1024)
    one, two = FrameReader(shared=shared), FrameReader(shared=shared)
    one.get_buffer()
    two.get_buffer()
    with pytest.raises(ProtocolError):
        one.buffer_updated(4)


def test_closed_connections_leave_nothing_behind_in_the_server() -> None:
    async def scenario() -> None:
        server = SocketServer(answer)
        await server.start([Listener("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT")])
        port = server.listeners[0].bound_port
        try:
            clients = [await asyncio.open_connection("127.0.0.1", port) for _ in range(20)]
            for i, (reader, writer) in enumerate(clients):
                writer.write(frame(struct.pack(">hhi", 18, 0, i)))
                assert await reader.readexactly(8) == frame(struct.pack(">i", i))
            conns = list(server.connections)
            assert len(conns) == 20
            for conn in conns:
                # answered and idle: no request queue, the reads went to the shared buffer
                assert conn.pending == () and conn.reader.pending == 0
                assert conn.reader._scratch is server.receive_buffer
            gone = [weakref.ref(c) for c in conns]
            del conns, conn
            for _, writer in clients:
                writer.close()
            for _ in range(200):
                if not server.connections:
                    break
                await asyncio.sleep(0.01)
            assert not server.connections and not server._counted
            assert server.reclaimer.closes == 20
            await asyncio.sleep(0)
            gc.collect()
            assert [ref() for ref in gone] == [None] * 20  # nothing refers to them
        finally:
            await server.stop()

    run(scenario())


def test_a_connection_that_waited_on_a_muted_queue_lets_it_go() -> None:
    async def scenario() -> None:
        server = SocketServer(answer)
        await server.start([Listener("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT")])
        port = server.listeners[0].bound_port
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.sleep(0.05)
            (conn,) = server.connections
            conn.mute("test")
            writer.write(b"".join(frame(struct.pack(">hhi", 18, 0, i)) for i in range(3)))
            await writer.drain()
            conn.unmute("test")  # reading resumes; the frames come in and are answered
            for i in range(3):
                assert await reader.readexactly(8) == frame(struct.pack(">i", i))
            assert conn.pending == () and not conn.muted
            writer.close()
        finally:
            await server.stop()

    run(scenario())


def test_a_storm_of_closes_is_followed_by_one_trim_of_the_c_heap() -> None:
    async def scenario() -> None:
        reclaimer = MemoryReclaimer(closes_before_reclaim=5, min_interval_s=60, settle_s=0.01)
        trims: list[int] = []
        reclaimer._trim = lambda: trims.append(1)
        for _ in range(4):
            reclaimer.closed()
        await asyncio.sleep(0.05)
        assert trims == [] and reclaimer.reclaims == 0  # not a storm
        for _ in range(6):
            reclaimer.closed()
        for _ in range(100):
            if reclaimer.reclaims:
                break
            await asyncio.sleep(0.01)
        assert trims == [1] and reclaimer.reclaims == 1 and reclaimer.closes == 0
        for _ in range(5):
            reclaimer.closed()  # the next storm waits out min_interval_s
        await asyncio.sleep(0.05)
        assert trims == [1]
        reclaimer.stop()

    run(scenario())


def test_glibc_malloc_trim_is_found_and_runs() -> None:
    trim = _malloc_trim()
    assert trim is not None  # the broker's hosts run glibc (Debian)
    assert trim() in (0, 1)
