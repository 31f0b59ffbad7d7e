"""A refused TLS handshake reaches the client as OpenSSL's alert, not as a bare close.

With TLS 1.3 the client's handshake is over before the server checks its certificate, so
the client learns of the refusal only from the alert that follows: Kafka's Java client
then fails at once with SslAuthenticationException, where a connection closed without it
looks like a broker gone away and is retried until the client's timeout (the reference
lab found Moldau's listener closing without the alert)."""

from __future__ import annotations

import asyncio
import socket
import ssl
from pathlib import Path

import pytest
from tls_material import TlsMaterial, make_tls_material

from moldau.protocol.framing import ReceiveBuffer
from moldau.server.tls_accept import accept_tls


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


class Nothing(asyncio.BufferedProtocol):
    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(bytearray(1024))

    def buffer_updated(self, nbytes: int) -> None:
        pass


def server_context(tls: TlsMaterial) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls.server_cert, tls.server_key)
    context.load_verify_locations(tls.ca_cert)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_talks(port: int, tls: TlsMaterial, certificate: tuple[Path, Path] | None) -> str:
    """The client's handshake (complete on its side under TLS 1.3), a request, and what
    reading the answer raised."""
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    if certificate is not None:
        context.load_cert_chain(certificate[1], certificate[0])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as conn:
        conn.sendall(b"\x00\x00\x00\x00")
        try:
            data = conn.recv(1024)
        except ssl.SSLError as exc:
            return f"alert: {exc.reason}"
        except OSError as exc:
            return f"closed: {exc!r}"
        return f"read {data!r}"


async def refused(tls: TlsMaterial, certificate: tuple[Path, Path] | None) -> str:
    loop = asyncio.get_running_loop()
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        listening.setblocking(False)
        port = listening.getsockname()[1]
        client = asyncio.create_task(asyncio.to_thread(client_talks, port, tls, certificate))
        sock, _ = await loop.sock_accept(listening)
        with pytest.raises(ssl.SSLError):
            await accept_tls(Nothing(), sock, server_context(tls), ReceiveBuffer())
        return await client


def untrusted_certificate(tmp_path: Path) -> tuple[Path, Path]:
    other = make_tls_material(tmp_path / "other-ca")
    return other.client_key, other.client_cert


def test_a_client_without_a_certificate_gets_the_certificate_required_alert(
        tls: TlsMaterial) -> None:
    assert asyncio.run(refused(tls, None)) == "alert: TLSV13_ALERT_CERTIFICATE_REQUIRED"


def test_a_certificate_from_an_untrusted_ca_gets_the_unknown_ca_alert(
        tls: TlsMaterial, tmp_path: Path) -> None:
    outcome = asyncio.run(refused(tls, untrusted_certificate(tmp_path)))
    assert outcome == "alert: TLSV1_ALERT_UNKNOWN_CA"
