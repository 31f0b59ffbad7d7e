"""The broker's JMX-like read endpoint: the metrics registry as JSON over HTTP, so
exporters and operators read MBeans without a JVM.

    GET /jmx                                   every MBean
    GET /jmx?qry=kafka.server:type=ReplicaManager,*

answers {"beans": [{"name": "<mbean>", "<attribute>": value, ...}, ...]} (the shape of
Hadoop's and ZooKeeper's JMX JSON servlets). It binds to a local address only: the port
comes from the MOLDAU_METRICS_PORT environment variable (and MOLDAU_METRICS_HOST,
default 127.0.0.1), as JMX_PORT does for Kafka.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from urllib.parse import parse_qs, unquote, urlsplit

from .registry import MetricsRegistry

log = logging.getLogger("kafka.metrics")
METRICS_PORT_ENV, METRICS_HOST_ENV = "MOLDAU_METRICS_PORT", "MOLDAU_METRICS_HOST"
MAX_REQUEST_BYTES = 8192


def _finite(value: object) -> object:
    """JSON has no NaN or infinities."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def render(registry: MetricsRegistry, target: str) -> tuple[int, bytes]:
    """(HTTP status, JSON body) for a request target such as /jmx?qry=..."""
    parts = urlsplit(target)
    if parts.path.rstrip("/") != "/jmx":
        return 404, json.dumps({"error": f"no such path {parts.path}; use /jmx"}).encode()
    query = parse_qs(parts.query).get("qry", [None])[0]
    beans = [{k: _finite(v) for k, v in bean.items()}
             for bean in registry.snapshot(unquote(query) if query else None)]
    return 200, json.dumps({"beans": beans}).encode()


class MetricsServer:
    def __init__(self, registry: MetricsRegistry, host: str, port: int) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("Serving metrics as JSON on http://%s:%d/jmx", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            if len(head) > MAX_REQUEST_BYTES:
                raise ValueError("request too large")
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            if method != "GET":
                status, body = 405, b'{"error": "only GET"}'
            else:
                status, body = render(self.registry, target)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError,
                ValueError, UnicodeDecodeError):
            status, body = 400, b'{"error": "bad request"}'
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found",
                  405: "Method Not Allowed"}[status]
        writer.write(f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                     + body)
        try:
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
