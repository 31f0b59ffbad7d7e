"""One listener of the socket server: its name, address, security protocol and TLS
context, and the sockets it listens on once started (acceptor.bind)."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field


@dataclass
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str
    ssl_context: ssl.SSLContext | None = None
    sockets: list[socket.socket] = field(default_factory=list)

    @property
    def bound_port(self) -> int:
        if not self.sockets or self.sockets[0].fileno() == -1:
            return self.port
        return int(self.sockets[0].getsockname()[1])
