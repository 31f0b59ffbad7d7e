"""Kafka's socket settings (`SocketSettings`), read once from the broker config.

The listening sockets get `socket.receive.buffer.bytes` (accepted sockets inherit it, and
with it the TCP window scale the handshake announces) and a `socket.listen.backlog.size`
backlog (socket_server.py); accepted sockets get `socket.send.buffer.bytes`, TCP_NODELAY
and keep-alive (connection.py); -1 leaves a buffer to the kernel's autotuning. A
connection with no traffic either way for `connections.max.idle.ms` is closed, as Kafka's
selector does (socket_server.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import BrokerConfig


@dataclass(frozen=True)
class SocketSettings:
    """Kafka's socket server settings, with Kafka's defaults (-1: the OS's buffer size)."""

    send_buffer_bytes: int = 100 * 1024  # socket.send.buffer.bytes
    receive_buffer_bytes: int = 100 * 1024  # socket.receive.buffer.bytes
    listen_backlog: int = 50  # socket.listen.backlog.size
    connections_max_idle_ms: int = 600_000  # connections.max.idle.ms

    @classmethod
    def from_config(cls, config: BrokerConfig) -> SocketSettings:
        return cls(config["socket.send.buffer.bytes"], config["socket.receive.buffer.bytes"],
                   config["socket.listen.backlog.size"], config["connections.max.idle.ms"])
