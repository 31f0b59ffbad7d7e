"""The socket server's acceptors over real sockets (server/acceptor.py with
server/socket_server.py, in-process): `max.connections` holds a new connection back in
the backlog until another closes (per listener too), the inter-broker listener goes over
the broker-wide limit and the least recently used connection of the other listeners is
closed, the creation rate delays accepts without losing or reordering connections, and
a connection over its address's `connection_creation_rate` is closed unanswered."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from moldau.server.client_quota_configs import ClientQuotaConfigs
from moldau.server.limits import ConnectionLimits
from moldau.server.network import Connection, Listener, SocketServer

INTER, CLIENT, OTHER = "REPLICATION", "CLIENT", "OTHER"
QUIET_S = 0.3  # how long a held-back connection is watched for an answer it must not get


def answer(conn: Connection, frame: bytearray) -> list[bytes]:
    return [struct.pack(">i", 4) + bytes(frame[4:8])]  # the correlation id back


class Meter:
    def __init__(self) -> None:
        self.count = 0.0

    def mark(self, n: float = 1) -> None:
        self.count += n


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    async def send(self) -> int:
        self.correlation += 1
        body = struct.pack(">hhi", 18, 0, self.correlation)
        self.writer.write(struct.pack(">i", len(body)) + body)
        await self.writer.drain()
        return self.correlation

    async def answered(self, timeout: float = 5.0) -> bool:
        """The answer to the last request, or False when the broker closed the socket."""
        try:
            size = await asyncio.wait_for(self.reader.readexactly(4), timeout)
            data = await asyncio.wait_for(
                self.reader.readexactly(struct.unpack(">i", size)[0]), timeout)
        except (asyncio.IncompleteReadError, ConnectionError):
            return False
        assert struct.unpack(">i", data)[0] == self.correlation
        return True

    async def round_trip(self, timeout: float = 5.0) -> bool:
        await self.send()
        return await self.answered(timeout)

    async def silent_for(self, seconds: float) -> bool:
        """Whether no answer (and no close) came within `seconds`."""
        try:
            await asyncio.wait_for(self.reader.readexactly(4), seconds)
        except TimeoutError:
            return True
        except (asyncio.IncompleteReadError, ConnectionError):
            return False
        return False

    def close(self) -> None:
        self.writer.close()


class Broker:
    def __init__(self, server: SocketServer, meters: Mapping[str, Meter]) -> None:
        self.server = server
        self.meters = meters
        self.clients: list[Client] = []

    def port(self, listener: str) -> int:
        return next(lst.bound_port for lst in self.server.listeners if lst.name == listener)

    async def connect(self, listener: str = CLIENT, source: str = "127.0.0.1") -> Client:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", self.port(listener), local_addr=(source, 0))
        client = Client(reader, writer)
        self.clients.append(client)
        return client


@contextlib.asynccontextmanager
async def broker(limits: ConnectionLimits, ip_rates: Any = None) -> AsyncIterator[Broker]:
    server = SocketServer(answer)
    server.limits = limits
    if ip_rates is not None:
        server.use_ip_rates(ip_rates)
    meters = {name: Meter() for name in (INTER, CLIENT, OTHER)}
    server.blocked_meter = meters.__getitem__
    await server.start([Listener(name, "127.0.0.1", 0, "PLAINTEXT")
                        for name in (INTER, CLIENT, OTHER)])
    b = Broker(server, meters)
    try:
        yield b
    finally:
        for client in b.clients:
            client.close()
        await server.stop()


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_max_connections_holds_a_connection_in_the_backlog_until_another_closes() -> None:
    async def scenario() -> None:
        async with broker(ConnectionLimits(max_connections=2, inter_broker_listener=INTER)) as b:
            first, second = await b.connect(), await b.connect(OTHER)
            assert await first.round_trip() and await second.round_trip()
            waiting = await b.connect()  # the kernel completes the handshake: the backlog
            await waiting.send()
            assert await waiting.silent_for(QUIET_S)
            assert b.server.acceptors[CLIENT].blocking
            assert await first.round_trip() and await second.round_trip()  # still served
            first.close()
            assert await waiting.answered()
            assert b.meters[CLIENT].count > 0  # AcceptorBlockedPercent
            assert not b.server.acceptors[CLIENT].blocking

    run(scenario())


def test_a_listener_limit_holds_that_listener_only() -> None:
    async def scenario() -> None:
        limits = ConnectionLimits(listener_max_connections={OTHER: 1},
                                  inter_broker_listener=INTER)
        async with broker(limits) as b:
            first = await b.connect(OTHER)
            assert await first.round_trip()
            waiting = await b.connect(OTHER)
            await waiting.send()
            assert await waiting.silent_for(QUIET_S)
            client = await b.connect(CLIENT)
            assert await client.round_trip()  # another listener accepts meanwhile
            first.close()
            assert await waiting.answered()

    run(scenario())


def test_a_raised_limit_lets_the_waiting_connection_in() -> None:
    async def scenario() -> None:
        async with broker(ConnectionLimits(max_connections=1, inter_broker_listener=INTER)) as b:
            first = await b.connect()
            assert await first.round_trip()
            waiting = await b.connect()
            await waiting.send()
            assert await waiting.silent_for(QUIET_S)
            b.server.limits = ConnectionLimits(max_connections=2, inter_broker_listener=INTER)
            assert await waiting.answered()

    run(scenario())


def test_the_inter_broker_listener_goes_over_the_limit_and_the_lru_connection_closes() -> None:
    async def scenario() -> None:
        async with broker(ConnectionLimits(max_connections=2, inter_broker_listener=INTER)) as b:
            idle, busy = await b.connect(), await b.connect(OTHER)
            assert await idle.round_trip()
            await asyncio.sleep(0.05)
            assert await busy.round_trip()  # `idle` is now the least recently used
            replica = await b.connect(INTER)
            assert await replica.round_trip()  # not held back by the broker-wide limit
            assert not await idle.round_trip()  # closed to bring the total back to 2
            assert await busy.round_trip() and await replica.round_trip()
            assert b.server.quotas.total == 2

    run(scenario())


def test_a_lowered_limit_closes_the_least_recently_used_connections() -> None:
    async def scenario() -> None:
        async with broker(ConnectionLimits(inter_broker_listener=INTER)) as b:
            clients = [await b.connect() for _ in range(3)]
            for client in clients:
                assert await client.round_trip()
                await asyncio.sleep(0.02)
            b.server.limits = ConnectionLimits(max_connections=2, inter_broker_listener=INTER)
            assert [await c.round_trip() for c in clients] == [False, True, True]

    run(scenario())


def test_the_creation_rate_delays_accepts_in_order_and_loses_none() -> None:
    async def scenario() -> None:
        limits = ConnectionLimits(max_connection_rate=2, quota_window_num=2,
                                  quota_window_size_seconds=1, inter_broker_listener=INTER)
        async with broker(limits) as b:
            clients = [await b.connect() for _ in range(4)]
            for client in clients:
                await client.send()
            answered: list[int] = []

            async def wait(i: int) -> None:
                assert await clients[i].answered(10)
                answered.append(i)

            await asyncio.gather(*(wait(i) for i in range(4)))
            assert answered == [0, 1, 2, 3]  # accepted one after the other, as they came
            stats = b.server.quotas.listeners[CLIENT]
            assert stats.throttles.measure(time.monotonic() * 1000) > 0
            assert b.meters[CLIENT].count > 0  # the acceptor waited out throttles
            assert stats.created == 4

    run(scenario())


def test_an_address_over_its_creation_rate_is_closed_unanswered() -> None:
    async def scenario() -> None:
        configs = ClientQuotaConfigs()
        configs.set_ip("127.0.0.3", 1)
        limits = ConnectionLimits(quota_window_num=2, quota_window_size_seconds=1,
                                  inter_broker_listener=INTER)
        async with broker(limits, configs.ip_connection_rates) as b:
            first = await b.connect(source="127.0.0.3")
            assert await first.round_trip()
            over = await b.connect(source="127.0.0.3")
            await over.send()
            other = await b.connect(source="127.0.0.4")
            assert await other.round_trip()  # another address is not held back
            assert not await over.answered()  # closed after the throttle, no answer
            assert b.server.quotas.per_ip["127.0.0.3"] == 1
            assert await first.round_trip()

    run(scenario())
