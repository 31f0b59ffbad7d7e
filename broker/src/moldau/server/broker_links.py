"""Requests from this broker to another broker's inter-broker listener, one connection
per broker kept open between requests (Kafka's NetworkClient as its InterBrokerSendThreads
use it): the leader's transaction verification asks the transaction coordinator's broker
through it.

A connection is made on the first request to a broker, at the endpoint the metadata cache
names for the inter-broker listener, with the inter-broker client security asked at each
connection (a certificate renewal reloads it); a failed request closes it, and the next
one connects again. Requests to one broker share its connection (the protocol pipelines
them).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from moldau.client.broker_connection import BrokerConnection

if TYPE_CHECKING:
    from moldau.client.security import ClientSecurity
    from moldau.protocol._runtime import Message

log = logging.getLogger("kafka.server.BrokerLinks")

# where a broker's inter-broker listener is, None when the metadata does not know it
Endpoints = Callable[[int], tuple[str, int] | None]


class BrokerLinks:
    def __init__(self, client_id: str, endpoint: Endpoints,
                 security_for: Callable[[], ClientSecurity], *,
                 connect_timeout_s: float = 10.0) -> None:
        self.client_id = client_id
        self.endpoint = endpoint
        self.security_for = security_for
        self.connect_timeout_s = connect_timeout_s
        self._connections: dict[int, BrokerConnection] = {}
        # a connection being made, which concurrent requests to its broker wait for
        self._connecting: dict[int, asyncio.Future[BrokerConnection]] = {}
        self.closed = False

    async def request(self, broker_id: int, api_key: int, version: int, body: Message,
                      timeout_s: float) -> Any:  # Any: the class of APIS[api_key].response
        """Send one request to the broker and return its response. ConnectionError when
        the broker cannot be reached or the connection fails, TimeoutError after
        timeout_s; either way the connection is closed (the next request reconnects)."""
        connection = await self._connection(broker_id)
        try:
            return await connection.request(api_key, version, body, timeout_s)
        except (OSError, ConnectionError, TimeoutError):
            self._drop(broker_id, connection)
            raise

    async def _connection(self, broker_id: int) -> BrokerConnection:
        if self.closed:
            raise ConnectionError("the broker links are closed")
        connection = self._connections.get(broker_id)
        if connection is not None and not connection.closed:
            return connection
        pending = self._connecting.get(broker_id)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[BrokerConnection] = (
            asyncio.get_running_loop().create_future())
        self._connecting[broker_id] = future
        try:
            connection = await self._connect(broker_id)
        except BaseException as exc:
            future.set_exception(exc if isinstance(exc, Exception)
                                 else ConnectionError("connecting was cancelled"))
            future.exception()  # retrieved: no waiter may be left to see it
            raise
        finally:
            self._connecting.pop(broker_id, None)
        future.set_result(connection)
        self._connections[broker_id] = connection
        return connection

    async def _connect(self, broker_id: int) -> BrokerConnection:
        address = self.endpoint(broker_id)
        if address is None:
            raise ConnectionError(f"broker {broker_id} has no known inter-broker endpoint")
        host, port = address
        security = self.security_for()
        try:
            return await BrokerConnection.connect(
                host or "localhost", port, client_id=self.client_id,
                ssl_context=security.ssl_context, sasl=security.sasl,
                timeout_s=self.connect_timeout_s)
        except (OSError, TimeoutError) as exc:
            raise ConnectionError(f"cannot connect to broker {broker_id} at {host}:{port}: "
                                  f"{exc}") from exc

    def _drop(self, broker_id: int, connection: BrokerConnection) -> None:
        connection.close()
        if self._connections.get(broker_id) is connection:
            del self._connections[broker_id]

    def close(self) -> None:
        self.closed = True
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()
