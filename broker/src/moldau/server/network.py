"""The socket server: listeners, connections, framing, back-pressure and response sending.

This module gathers the names of the network layer, which the broker, the request
dispatcher and the tests import from here; each job has its module:

- `socket_server.py`: `SocketServer` (the listeners' acceptors, the connections they
  admit, closing connections over `max.connections`, idle closing);
- `acceptor.py`: `Acceptor` (one listener's listening sockets; holds back or closes
  what the connection quotas say);
- `connection_quotas.py`: `ConnectionQuotas` (Kafka's counts and creation rates per
  listener, broker and address), with the client quotas' rates (`rate_sensors.py`);
- `connection.py`: `Connection` (frames in, responses out in request order, flow
  control, sendfile and TCP_CORK, coalesced writes) and the `RequestHandler` it calls;
- `file_sends.py`: the rest of a response with file ranges once the socket is full
  (sendfile and a wait for the socket; on TLS, copies a chunk at a time);
- `limits.py`: `RequestQueueBound` (`queued.max.requests`/`queued.max.request.bytes`)
  and `ConnectionLimits` (`max.connections`, `max.connections.per.ip`,
  `max.connection.creation.rate`, per listener too), which
  `connection_limit_configs.py` builds from the broker's configs;
- `socket_settings.py`: `SocketSettings` (Kafka's socket.* and connections.max.idle.ms);
- `listener.py`: `Listener` (one endpoint and its asyncio server);
- `session.py`: `Session` (the principal and client the authorizer and quotas see).
"""

from __future__ import annotations

import logging

from .connection import (
    COALESCE_BYTES,
    WRITE_HIGH_WATER,
    WRITE_LOW_WATER,
    Connection,
    RequestHandler,
)
from .limits import INT_MAX, ConnectionLimits, RequestQueueBound
from .listener import Listener
from .session import Session
from .socket_server import SocketServer
from .socket_settings import SocketSettings

# the same logger object the modules above use (logging.getLogger returns one per name)
log = logging.getLogger("kafka.network.SocketServer")

__all__ = [
    "COALESCE_BYTES",
    "INT_MAX",
    "WRITE_HIGH_WATER",
    "WRITE_LOW_WATER",
    "Connection",
    "ConnectionLimits",
    "Listener",
    "RequestHandler",
    "RequestQueueBound",
    "Session",
    "SocketServer",
    "SocketSettings",
    "log",
]
