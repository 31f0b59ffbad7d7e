"""One listener of the socket server: its name, address, security protocol and TLS
context, and the asyncio server accepting on it once started."""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass


@dataclass
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str
    ssl_context: ssl.SSLContext | None = None
    server: asyncio.base_events.Server | None = None

    @property
    def bound_port(self) -> int:
        if self.server is None or not self.server.sockets:
            return self.port
        return self.server.sockets[0].getsockname()[1]
