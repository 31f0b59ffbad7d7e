"""TLS for accepted connections without a read buffer per connection.

asyncio's TLS protocol (asyncio.sslproto.SSLProtocol, what `connect_accepted_socket(...,
ssl=...)` puts under a protocol) gives every connection a 256 KiB bytearray of its own
to read the socket into, and keeps it for the connection's life: on an idle TLS
connection that buffer was nearly all the broker's memory for it (docs/broker.md,
Networking). Its bytes only pass through it: the transport reads into it and, in the same
call, the protocol copies them into OpenSSL's input BIO. So, as with plaintext reads
(framing.ReceiveBuffer), one buffer per event loop serves every TLS connection: the
event loop never reads another socket between a get_buffer() and its buffer_updated().
A closed connection lets go of its OpenSSL state and of the references that made it a
cycle, so its memory is freed at once and the socket server's malloc_trim after a storm
of closes (memory_reclaim.py) can return it.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from asyncio import sslproto

from moldau.protocol.framing import ReceiveBuffer


class SharedBufferTLS(sslproto.SSLProtocol):
    """asyncio's server-side TLS protocol, reading the socket into a shared buffer."""

    # what the base class allocates for itself in __init__ (bytearray(max_size)); a
    # buffered app protocol is the only kind accepted, so it never reads max_size
    # bytes of decrypted data into a fresh bytes object either
    max_size = 0
    _outgoing: ssl.MemoryBIO  # the base class's: what OpenSSL has for the peer

    def __init__(self, scratch: ReceiveBuffer, loop: asyncio.AbstractEventLoop,
                 app_protocol: asyncio.BufferedProtocol, context: ssl.SSLContext,
                 handshake: asyncio.Future[None]) -> None:
        if not isinstance(app_protocol, asyncio.BufferedProtocol):
            raise TypeError("SharedBufferTLS needs a BufferedProtocol under it")
        super().__init__(loop, app_protocol, context, handshake, server_side=True)
        self._scratch = scratch

    def _on_handshake_complete(self, handshake_exc: BaseException | None) -> None:
        # A refused handshake (an untrusted client certificate, or none where one is
        # required) leaves OpenSSL's alert in the outgoing BIO, and the base class closes
        # the socket without sending it: Kafka's client then sees a disconnection and
        # retries until its timeout. Kafka's broker sends the alert, and the client fails
        # at once with SslAuthenticationException.
        transport = self._transport
        if handshake_exc is not None and isinstance(transport, asyncio.WriteTransport):
            alert = self._outgoing.read()
            if alert:
                transport.write(alert)
        super()._on_handshake_complete(handshake_exc)

    def get_buffer(self, n: int) -> memoryview:
        view = self._scratch.view
        # the base class's buffer_updated() takes the bytes read from this view
        self._ssl_buffer_view = view
        return view

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        # The closed connection's memory goes now, by reference counting, rather than when
        # the cyclic collector gets to it, which on a broker left idle after a storm of
        # closes may be much later: OpenSSL's state (about 17 KiB after a TLS 1.3
        # handshake), and the app protocol's bound methods the base class keeps (the
        # app protocol holds its transport, which holds this protocol: a cycle). Nothing
        # uses them once the connection is lost (the protocol is UNWRAPPED).
        self._sslobj = None
        self._extra.pop("ssl_object", None)
        self._app_protocol_get_buffer = self._app_protocol_buffer_updated = _lost


def _lost(*_: object) -> None:
    raise ConnectionError("the TLS connection is closed")


async def accept_tls(app_protocol: asyncio.BufferedProtocol, sock: socket.socket,
                     context: ssl.SSLContext, scratch: ReceiveBuffer) -> None:
    """Run the TLS handshake on an accepted socket, then hand app_protocol its transport
    (connection_made), as `connect_accepted_socket(..., ssl=context)` does. Raises what
    the handshake failed with (the socket is closed then)."""
    loop = asyncio.get_running_loop()
    handshake: asyncio.Future[None] = loop.create_future()
    tls = SharedBufferTLS(scratch, loop, app_protocol, context, handshake)
    transport, _ = await loop.connect_accepted_socket(lambda: tls, sock)
    try:
        await handshake
    except BaseException:
        transport.close()
        raise
