"""TLS connections reading into one shared buffer (server/tls_accept.py), over real
sockets and real TLS handshakes: several connections' bytes, each larger than the
buffer, arrive whole and in order while they interleave; an idle connection holds no
read buffer of its own; a closed one is freed by reference counting, its OpenSSL state at
once."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import ssl
import tracemalloc
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from tls_material import TlsMaterial, make_tls_material

from moldau.protocol.framing import ReceiveBuffer
from moldau.server.tls_accept import accept_tls

PAYLOAD = 1 << 20  # four times the shared buffer


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


class Collector(asyncio.BufferedProtocol):
    """Keeps every decrypted byte, read into a small buffer of its own."""

    def __init__(self) -> None:
        self.buffer = bytearray(16 * 1024)
        self.received = bytearray()
        self.transport: Any = None
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self.buffer)

    def buffer_updated(self, nbytes: int) -> None:
        self.received += self.buffer[:nbytes]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)


Connect = Callable[[], Awaitable[ssl.SSLSocket]]


@asynccontextmanager
async def tls_server(tls: TlsMaterial, scratch: ReceiveBuffer
                     ) -> AsyncIterator[tuple[Connect, list[Collector]]]:
    """A listening socket whose accepted connections go through accept_tls; yields a
    function that opens a client connection (a blocking ssl.SSLSocket, handshaken in a
    thread: asyncio's own TLS client would hold its 256 KiB buffer in this process too)
    and the server's protocols in order."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tls.server_cert, tls.server_key)
    client_context = ssl.create_default_context(cafile=str(tls.ca_cert))
    loop = asyncio.get_running_loop()
    accepted: list[Collector] = []
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        listening.setblocking(False)
        port = listening.getsockname()[1]

        def client() -> ssl.SSLSocket:
            raw = socket.create_connection(("127.0.0.1", port), timeout=30)
            return client_context.wrap_socket(raw, server_hostname="localhost")

        async def connect() -> ssl.SSLSocket:
            opening = asyncio.ensure_future(asyncio.to_thread(client))
            sock, _ = await loop.sock_accept(listening)
            collector = Collector()
            await accept_tls(collector, sock, server_context, scratch)
            accepted.append(collector)
            return await opening

        yield connect, accepted


def test_interleaved_connections_get_their_own_bytes_whole(tls: TlsMaterial) -> None:
    async def scenario() -> None:
        async with tls_server(tls, ReceiveBuffer()) as (connect, accepted):
            clients = [await connect() for _ in range(3)]
            payloads = [os.urandom(PAYLOAD) for _ in clients]
            # three threads send at once: the server's reads of them interleave
            await asyncio.gather(*(asyncio.to_thread(c.sendall, payload)
                                   for c, payload in zip(clients, payloads, strict=True)))
            while any(len(c.received) < PAYLOAD for c in accepted):
                await asyncio.sleep(0.01)
            assert [bytes(c.received) for c in accepted] == payloads
            for c in clients:
                c.close()

    asyncio.run(scenario())


def test_an_idle_tls_connection_holds_no_read_buffer(tls: TlsMaterial) -> None:
    """asyncio's own TLS protocol allocates 256 KiB per connection to read into."""
    connections = 20

    async def scenario() -> float:
        async with tls_server(tls, ReceiveBuffer()) as (connect, _):
            await connect()  # the first one's imports and caches are not counted
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                clients = [await connect() for _ in range(connections)]
                grown = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()
            for c in clients:
                c.close()
            # both ends are in this process: the clients' side counts too (a few KiB)
            return grown / connections

    assert asyncio.run(scenario()) < 64 * 1024


def test_a_closed_connection_is_freed_without_the_cyclic_collector(
        tls: TlsMaterial) -> None:
    """OpenSSL's state goes at the close; the rest once the app protocol is dropped (no
    reference cycle through the TLS layer keeps it for the collector)."""
    async def scenario() -> None:
        async with tls_server(tls, ReceiveBuffer()) as (connect, accepted):
            client = await connect()
            server = accepted.pop()
            openssl = weakref.ref(server.transport.get_extra_info("ssl_object"))
            assert openssl() is not None
            client.close()
            await asyncio.wait_for(server.lost, 10)
            await asyncio.sleep(0)
            # the server's protocols are still referenced here
            assert openssl() is None
            assert server.transport.get_extra_info("ssl_object") is None
            app = weakref.ref(server)
            del server
            assert app() is None

    gc.disable()
    try:
        asyncio.run(scenario())
    finally:
        gc.enable()
