"""A small blocking Kafka connection: send a request, read its response.

Enough for health checks, tools and protocol-level tests (which also need to send raw
bytes); it negotiates nothing but SASL (when given a mechanism) and keeps one request in
flight.
"""

from __future__ import annotations

import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from moldau.client.sasl_authenticate import (
    SaslAuthenticationFailed,
    authenticate,
    reauthentication_delay_s,
)
from moldau.protocol._runtime import Message
from moldau.protocol.generated.api import APIS
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.headers import decode_response, encode_request
from moldau.security.sasl.gssapi import bind_server_host

if TYPE_CHECKING:
    from moldau.security.sasl.mechanism import SaslClient

_INT32 = struct.Struct(">i")


class SslHandshakeFailed(ConnectionError):
    """A TLS connection the broker ended before its first answer: with TLS 1.3 a refused
    client certificate (or none sent to a listener that requires one) only shows then.
    Kafka's clients report it as SslAuthenticationException, "SSL handshake failed"."""

    def __init__(self) -> None:
        super().__init__("SSL handshake failed")


class BlockingConnection:
    """sasl: makes a fresh mechanism client; given, the connection authenticates right
    after connecting (after the TLS handshake), raising SaslAuthenticationFailed when the
    broker refuses, and again before a request once the session nears its end (KIP-368)."""

    def __init__(self, host: str, port: int, *, timeout: float = 10.0,
                 client_id: str = "moldau-client",
                 ssl_context: ssl.SSLContext | None = None,
                 sasl: Callable[[], SaslClient] | None = None,
                 setup_timeout: float | None = None) -> None:
        # setup_timeout bounds each step of connecting, the TLS handshake and SASL (as
        # Kafka's socket.connection.setup.timeout.ms); timeout then each request's reads
        sock = socket.create_connection(
            (host, port), timeout=timeout if setup_timeout is None else setup_timeout)
        try:
            if ssl_context is not None:
                sock = ssl_context.wrap_socket(sock, server_hostname=host)
            self.sock = sock
            self._tls_unconfirmed = ssl_context is not None  # until the first answer
            self.client_id = client_id
            self._correlation = 0
            self._sasl = sasl
            self._host = host  # GSSAPI names the broker's principal after it
            self._reauthenticate_at: float | None = None  # time.monotonic(); None: never
            self._authenticate_version: int | None = None  # known after the first one
            if sasl is not None:
                try:
                    self._authenticate()
                except (SaslAuthenticationFailed, SslHandshakeFailed):
                    raise
                except ConnectionError as exc:
                    raise ConnectionError(
                        f"connection to {host}:{port} closed during SASL authentication "
                        f"({exc}); is it a SASL listener?") from None
            sock.settimeout(timeout)
        except BaseException:
            sock.close()
            raise

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
        frame = self._read_exact(size)
        self._tls_unconfirmed = False
        return frame

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            try:
                chunk = self.sock.recv(min(n, 1 << 20))
            except (ssl.SSLError, ConnectionResetError):
                if self._tls_unconfirmed:
                    raise SslHandshakeFailed() from None
                raise
            if not chunk:
                if self._tls_unconfirmed:
                    raise SslHandshakeFailed()
                raise ConnectionError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _authenticate(self) -> None:
        assert self._sasl is not None
        started = time.monotonic()
        session = authenticate(self._request, bind_server_host(self._sasl(), self._host),
                               self._authenticate_version)
        self._authenticate_version = session.authenticate_version
        delay = reauthentication_delay_s(session.lifetime_ms)
        self._reauthenticate_at = None if delay is None else started + delay

    def request(self, api_key: int, version: int,
                body: Message) -> Any:  # Any: the class of APIS[api_key].response, at run time
        if self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            self._authenticate()
        return self._request(api_key, version, body)

    def _request(self, api_key: int, version: int,
                 body: Message) -> Any:  # Any: as request()
        correlation = self.send(api_key, version, body)
        got, response = decode_response(self.read_frame(), api_key, version)
        if got != correlation:
            raise ConnectionError(f"correlation id {got} does not match {correlation}")
        return response

    def request_by_name(self, name: str, version: int,
                        **fields: Any) -> Any:  # Any: a generated class's fields; as request()
        spec = next(s for s in APIS.values() if s.name == name)
        return self.request(spec.key, version, spec.request(**fields))
