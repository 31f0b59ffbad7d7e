"""Responses leave in one write per pass (unit test of network.Connection): the requests
a client pipelines into one read are answered with one send, in order, and a long
pipeline still meets the transport's back-pressure."""

from __future__ import annotations

import asyncio
from typing import Any

from moldau.protocol.framing import frame
from moldau.server.network import COALESCE_BYTES, Connection, Listener, SocketServer


class RecordingTransport:
    """What asyncio's socket transport offers a protocol, recording each write."""

    def __init__(self, high_water: int = 1 << 30) -> None:
        self.writes: list[bytes] = []
        self.buffered = 0  # bytes the "client" has not drained yet
        self.high_water = high_water
        self.protocol: Connection | None = None

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))
        self.buffered += len(data)
        if self.buffered > self.high_water and self.protocol is not None:
            self.protocol.pause_writing()

    def drain(self) -> None:
        self.buffered = 0
        assert self.protocol is not None
        self.protocol.resume_writing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 9092)}.get(
            name, default)

    def set_write_buffer_limits(self, high: int, low: int) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        pass


def connect(handler: Any, transport: RecordingTransport) -> Connection:
    server = SocketServer(handler)
    conn = Connection(server, Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"))
    transport.protocol = conn
    conn.connection_made(transport)  # type: ignore[arg-type]
    return conn


def receive(conn: Connection, data: bytes) -> None:
    """The socket delivers `data` to the protocol, as asyncio does, in buffer-sized reads."""
    while data:
        buffer = conn.get_buffer(len(data))
        n = min(len(buffer), len(data))
        buffer[:n] = data[:n]
        conn.buffer_updated(n)
        data = data[n:]


def echo(conn: Connection, request: bytearray) -> list[bytes]:
    return [frame(b"answer to " + bytes(request))]


def test_a_pipelined_read_is_answered_in_one_write_in_order() -> None:
    transport = RecordingTransport()
    conn = connect(echo, transport)
    requests = [f"request {i}".encode() for i in range(20)]
    receive(conn, b"".join(frame(r) for r in requests))
    assert transport.writes == [b"".join(frame(b"answer to " + r) for r in requests)]
    receive(conn, frame(b"one more"))  # a later read: its own write
    assert transport.writes[1:] == [frame(b"answer to one more")]


def test_a_long_pipeline_is_written_in_pieces_and_stops_when_the_client_lags() -> None:
    transport = RecordingTransport(high_water=3 * COALESCE_BYTES)
    conn = connect(lambda _c, request: [bytes(64 * 1024)], transport)
    receive(conn, b"".join(frame(b"%d" % i) for i in range(200)))  # 12.5 MiB of answers
    # each write holds about COALESCE_BYTES; handling stopped once the client lagged
    assert all(len(w) <= COALESCE_BYTES for w in transport.writes)
    assert transport.buffered > transport.high_water
    answered = sum(map(len, transport.writes)) // (64 * 1024)
    assert answered < 200 and len(conn.pending) == 200 - answered
    while conn.pending:
        transport.drain()
    assert sum(map(len, transport.writes)) == 200 * 64 * 1024


def test_answers_before_a_waiting_request_leave_before_it_waits() -> None:
    async def scenario() -> list[bytes]:
        transport = RecordingTransport()
        release = asyncio.get_running_loop().create_future()

        async def later(request: bytes) -> list[bytes]:
            await release
            return [frame(b"late " + request)]

        def handler(conn: Connection, request: bytearray) -> Any:
            if request.startswith(b"wait"):
                return later(bytes(request))
            return [frame(b"now " + bytes(request))]

        conn = connect(handler, transport)
        receive(conn, frame(b"a") + frame(b"wait") + frame(b"b") + frame(b"c"))
        assert transport.writes == [frame(b"now a")]  # written while "wait" waits
        release.set_result(None)
        for _ in range(5):
            await asyncio.sleep(0)
        return transport.writes

    writes = asyncio.run(scenario())
    # the waiting answer, then the pass it resumed, each in one write
    assert writes == [frame(b"now a"), frame(b"late wait"), frame(b"now b") + frame(b"now c")]


def test_answers_before_a_malformed_request_are_sent_before_the_connection_closes() -> None:
    from moldau.protocol.errors import ProtocolError

    def handler(conn: Connection, request: bytearray) -> list[bytes]:
        if request == b"garbage":
            raise ProtocolError("garbage is not a request")
        return echo(conn, request)

    transport = RecordingTransport()
    conn = connect(handler, transport)
    receive(conn, frame(b"a") + frame(b"b") + frame(b"garbage") + frame(b"c"))
    assert conn.closed
    assert transport.writes == [frame(b"answer to a") + frame(b"answer to b")]


def test_the_responses_of_a_pass_are_reported_sent_once_written() -> None:
    transport = RecordingTransport()
    reported: list[tuple[Any, int, bool]] = []

    def handler(conn: Connection, request: bytearray) -> list[bytes]:
        conn.response_meta = bytes(request)  # what RequestMetrics leaves for on_sent
        return echo(conn, request)

    conn = connect(handler, transport)
    conn.server.on_sent = lambda meta, started, sent: reported.append(
        (meta, len(transport.writes), 0 < started <= sent))
    receive(conn, frame(b"a") + frame(b"b"))
    # both after the pass's one write, with its times
    assert reported == [(b"a", 1, True), (b"b", 1, True)]
