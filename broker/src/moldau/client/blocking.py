"""A small blocking Kafka connection: send a request, read its response.

Enough for health checks, tools and protocol-level tests (which also need to send raw
bytes); it negotiates nothing and keeps one request in flight.
"""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from moldau.protocol._runtime import Message
from moldau.protocol.generated.api import APIS
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.headers import decode_response, encode_request

_INT32 = struct.Struct(">i")


class BlockingConnection:
    def __init__(self, host: str, port: int, *, timeout: float = 10.0,
                 client_id: str = "moldau-client",
                 ssl_context: ssl.SSLContext | None = None) -> None:
        sock = socket.create_connection((host, port), timeout=timeout)
        if ssl_context is not None:
            sock = ssl_context.wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, body: Message) -> int:
        self._correlation += 1
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=self._correlation, client_id=self.client_id)
        self.sock.sendall(encode_request(header, body))
        return self._correlation

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = _INT32.unpack(self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def request(self, api_key: int, version: int,
                body: Message) -> Any:  # Any: the class of APIS[api_key].response, at run time
        correlation = self.send(api_key, version, body)
        got, response = decode_response(self.read_frame(), api_key, version)
        if got != correlation:
            raise ConnectionError(f"correlation id {got} does not match {correlation}")
        return response

    def request_by_name(self, name: str, version: int,
                        **fields: Any) -> Any:  # Any: a generated class's fields; as request()
        spec = next(s for s in APIS.values() if s.name == name)
        return self.request(spec.key, version, spec.request(**fields))
