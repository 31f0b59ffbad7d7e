"""The inter-broker clients (a follower's fetcher, the controller's sender to a broker)
ask for their security (TLS context, SASL mechanism) at each connection, not once when
they start: a certificate
renewal or CA rotation rewrites the store files under a running broker, and a reconnect
after it must present and trust what the files hold then (a fetcher that kept its first
context failed every reconnect after a CA rotation's finish stage)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from moldau.client.security import ClientSecurity
from moldau.cluster import zk_data
from moldau.replication.replica_fetcher import FetcherConfig, ReplicaFetcher
from moldau.server.controller_channel import BrokerSender


async def _accepting_server() -> tuple[asyncio.AbstractServer, int]:
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def counting_context_source() -> tuple[list[int], Callable[[], ClientSecurity]]:
    """A security factory that counts its calls: plain TCP here, since what matters is
    when the client asks."""
    asked: list[int] = []

    def context_for() -> ClientSecurity:
        asked.append(1)
        return ClientSecurity("PLAINTEXT", None, None, None)

    return asked, context_for


def test_a_fetcher_asks_for_its_context_at_each_connection() -> None:
    async def scenario() -> int:
        server, port = await _accepting_server()
        asked, context_for = counting_context_source()

        fetcher = ReplicaFetcher("ReplicaFetcherThread-0-2", 2, FetcherConfig(broker_id=1),
                                 None, lambda _id: ("127.0.0.1", port),  # type: ignore[arg-type]
                                 context_for, lambda _p, _n: None)
        async with server:
            await fetcher._connect()
            fetcher._disconnect()
            await fetcher._connect()
            fetcher._disconnect()
        return len(asked)

    assert asyncio.run(scenario()) == 2


def test_the_controllers_sender_asks_for_its_context_at_each_connection() -> None:
    async def scenario() -> int:
        server, port = await _accepting_server()
        asked, context_for = counting_context_source()

        registration = zk_data.BrokerRegistration(
            2, [zk_data.EndPoint("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT")])
        sender = BrokerSender(2, registration, "PLAINTEXT", "controller-1", context_for, 5.0)
        async with server:
            connection = await sender._connect()
            connection.close()
            await sender._connect()
            sender.close()
        return len(asked)

    assert asyncio.run(scenario()) == 2
