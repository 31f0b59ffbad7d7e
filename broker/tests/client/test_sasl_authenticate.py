"""The client half of SASL (moldau.client.sasl_authenticate) through BlockingConnection
and BrokerConnection, against a small in-process fake broker: a threaded socket server
that answers ApiVersions, SaslHandshake and SaslAuthenticate with the real mechanism
servers (PlainServer, ScramServer) the way Kafka's SaslServerAuthenticator does, and
ApiVersions after authentication (so a test can see the connection works)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from moldau.client.blocking import BlockingConnection
from moldau.client.broker_connection import BrokerConnection
from moldau.client.sasl_authenticate import (
    SaslAuthenticationFailed,
    SaslMechanismNotEnabled,
    reauthentication_delay_s,
)
from moldau.protocol._runtime import Message
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.api_versions_response import ApiVersionsResponse
from moldau.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse
from moldau.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from moldau.protocol.generated.sasl_handshake_response import SaslHandshakeResponse
from moldau.protocol.headers import decode_request, encode_response
from moldau.security.sasl.errors import (
    SaslAuthenticationError,
    SaslMechanismError,
    generic_failure_message,
)
from moldau.security.sasl.mechanism import SaslClient, SaslServer
from moldau.security.sasl.plain import PlainClient, PlainServer
from moldau.security.sasl.scram import ScramClient, ScramServer
from moldau.security.sasl.scram_credentials import ScramMechanism, derive_credential

USERS = {"alice": "alice-secret"}
SHA256 = ScramMechanism.SCRAM_SHA_256
CREDENTIALS = {name: derive_credential(SHA256, password, 4096)
               for name, password in USERS.items()}
_INT32 = struct.Struct(">i")


@dataclass
class Behaviour:
    """How the fake broker answers."""

    mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256")
    authenticate_max_version: int = 2
    session_lifetime_ms: int = 0
    sasl_listener: bool = True  # False: answer SaslHandshake as a PLAINTEXT listener does
    close_after_handshake: bool = False
    tamper_server_final: bool = False  # flip a byte of SCRAM's server signature
    # what arrived, in order: (api key, version) per request, over every connection
    received: list[tuple[int, int]] = field(default_factory=list)


def _server_for(mechanism: str) -> SaslServer:
    if mechanism == "PLAIN":
        return PlainServer(USERS)
    return ScramServer(SHA256, CREDENTIALS.get)


class FakeBroker:
    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError, ConnectionError):
            mechanism: SaslServer | None = None
            authenticated = False
            expires_at: float | None = None
            while True:
                header, body = decode_request(_read_frame(conn))
                key, version = header.request_api_key, header.request_api_version
                self.behaviour.received.append((key, version))
                if (expires_at is not None and time.monotonic() > expires_at
                        and key != ApiKey.SASL_HANDSHAKE):
                    return  # Kafka: any other request once the session expired closes
                answer: Message
                close = False
                if key == ApiKey.API_VERSIONS:
                    answer = self._api_versions()
                elif key == ApiKey.SASL_HANDSHAKE:
                    assert isinstance(body, SaslHandshakeRequest)
                    answer, mechanism = self._handshake(body.mechanism)
                    authenticated, expires_at = False, None  # the tokens are the exchange's
                    close = mechanism is None or self.behaviour.close_after_handshake
                elif key == ApiKey.SASL_AUTHENTICATE and mechanism is not None:
                    assert isinstance(body, SaslAuthenticateRequest)
                    result = self._authenticate(mechanism, body.auth_bytes)
                    answer, close = result, result.error_code != 0
                    authenticated = mechanism.complete and not close
                else:
                    return  # anything else before authentication: close, no answer
                if close and self.behaviour.close_after_handshake:
                    return
                conn.sendall(encode_response(header.correlation_id, key, version, answer))
                if close:
                    return
                if authenticated:
                    mechanism = None  # a later SaslHandshake starts a re-authentication
                    lifetime = self.behaviour.session_lifetime_ms
                    expires_at = time.monotonic() + lifetime / 1000 if lifetime else None

    def _api_versions(self) -> ApiVersionsResponse:
        served = {ApiKey.SASL_HANDSHAKE: 1, ApiKey.API_VERSIONS: 3,
                  ApiKey.SASL_AUTHENTICATE: self.behaviour.authenticate_max_version}
        return ApiVersionsResponse(api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=0, max_version=v)
            for k, v in served.items()])

    def _handshake(self, name: str) -> tuple[SaslHandshakeResponse, SaslServer | None]:
        enabled = list(self.behaviour.mechanisms)
        if not self.behaviour.sasl_listener:
            return SaslHandshakeResponse(error_code=34, mechanisms=[]), None
        if name not in enabled:
            return SaslHandshakeResponse(error_code=33, mechanisms=enabled), None
        return SaslHandshakeResponse(error_code=0, mechanisms=enabled), _server_for(name)

    def _authenticate(self, mechanism: SaslServer, token: bytes) -> SaslAuthenticateResponse:
        try:
            challenge = mechanism.evaluate(token)
        except SaslAuthenticationError as exc:
            return SaslAuthenticateResponse(error_code=58, error_message=str(exc))
        except SaslMechanismError:
            return SaslAuthenticateResponse(
                error_code=58, error_message=generic_failure_message(mechanism.mechanism))
        if mechanism.complete and self.behaviour.tamper_server_final and challenge:
            # v=<base64>: change one whole byte's worth of the signature
            challenge = challenge[:2] + (b"AA" if challenge[2:4] != b"AA" else b"BB") \
                + challenge[4:]
        lifetime = self.behaviour.session_lifetime_ms if mechanism.complete else 0
        return SaslAuthenticateResponse(error_code=0, auth_bytes=challenge,
                                        session_lifetime_ms=lifetime)


def _read_frame(conn: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError("client went away")
            data += chunk
        return data
    return exact(_INT32.unpack(exact(4))[0])


@contextlib.contextmanager
def fake_broker(**settings: object) -> Iterator[FakeBroker]:
    broker = FakeBroker(Behaviour(**settings))  # type: ignore[arg-type]
    try:
        yield broker
    finally:
        broker.close()


def plain(password: str = "alice-secret") -> Callable[[], SaslClient]:
    return lambda: PlainClient("alice", password)


def scram(password: str = "alice-secret",
          mechanism: ScramMechanism = SHA256) -> Callable[[], SaslClient]:
    return lambda: ScramClient(mechanism, "alice", password)


def works(conn: BlockingConnection) -> bool:
    """An ApiVersions after authentication is answered."""
    return conn.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="test", client_software_version="1")).error_code == 0


AUTH = [(ApiKey.API_VERSIONS, 0), (ApiKey.SASL_HANDSHAKE, 1)]


# ---------------------------------------------------------------------- blocking


@pytest.mark.parametrize("mechanism", [plain(), scram()], ids=["PLAIN", "SCRAM-SHA-256"])
def test_blocking_connection_authenticates_and_then_works(mechanism) -> None:
    with fake_broker() as broker, BlockingConnection(
            "127.0.0.1", broker.port, timeout=5, sasl=mechanism) as conn:
        assert works(conn)
    tokens = 1 if mechanism().mechanism == "PLAIN" else 2
    assert broker.behaviour.received == [*AUTH, *[(ApiKey.SASL_AUTHENTICATE, 2)] * tokens,
                                         (ApiKey.API_VERSIONS, 3)]


@pytest.mark.parametrize("max_version", [0, 1])
def test_the_broker_s_highest_sasl_authenticate_version_is_used(max_version: int) -> None:
    with fake_broker(authenticate_max_version=max_version) as broker, BlockingConnection(
            "127.0.0.1", broker.port, timeout=5, sasl=scram()) as conn:
        assert works(conn)
    assert (ApiKey.SASL_AUTHENTICATE, max_version) in broker.behaviour.received


def test_wrong_plain_password_carries_the_broker_s_message() -> None:
    with fake_broker() as broker, pytest.raises(SaslAuthenticationFailed) as failed:
        BlockingConnection("127.0.0.1", broker.port, timeout=5, sasl=plain("wrong"))
    assert failed.value.error_code == 58
    assert str(failed.value) == "Authentication failed: Invalid username or password"


def test_wrong_scram_password_carries_kafka_s_generic_message() -> None:
    with fake_broker() as broker, pytest.raises(SaslAuthenticationFailed) as failed:
        BlockingConnection("127.0.0.1", broker.port, timeout=5, sasl=scram("wrong"))
    assert failed.value.error_code == 58
    assert str(failed.value) == ("Authentication failed during authentication due to "
                                 "invalid credentials with SASL mechanism SCRAM-SHA-256")


def test_a_mechanism_the_broker_does_not_enable_lists_the_enabled_ones() -> None:
    with fake_broker() as broker, pytest.raises(SaslMechanismNotEnabled) as failed:
        BlockingConnection("127.0.0.1", broker.port, timeout=5,
                           sasl=scram(mechanism=ScramMechanism.SCRAM_SHA_512))
    assert failed.value.error_code == 33
    assert failed.value.enabled == ["PLAIN", "SCRAM-SHA-256"]
    assert str(failed.value) == ("Client SASL mechanism 'SCRAM-SHA-512' not enabled in the "
                                 "server, enabled mechanisms are [PLAIN, SCRAM-SHA-256]")


def test_a_listener_that_is_not_sasl_answers_the_handshake_with_34() -> None:
    with fake_broker(sasl_listener=False) as broker, \
            pytest.raises(SaslAuthenticationFailed) as failed:
        BlockingConnection("127.0.0.1", broker.port, timeout=5, sasl=plain())
    assert failed.value.error_code == 34
    assert str(failed.value) == ("Unexpected handshake request with client mechanism PLAIN, "
                                 "enabled mechanisms are []")


def test_a_bad_server_signature_fails_the_client() -> None:
    with fake_broker(tamper_server_final=True) as broker, \
            pytest.raises(SaslAuthenticationFailed, match="did not check out"):
        BlockingConnection("127.0.0.1", broker.port, timeout=5, sasl=scram())


def test_a_close_during_authentication_is_a_clear_connection_error() -> None:
    with fake_broker(close_after_handshake=True) as broker, \
            pytest.raises(ConnectionError, match="closed during SASL authentication"):
        BlockingConnection("127.0.0.1", broker.port, timeout=5, sasl=plain())


REAUTH = [(ApiKey.SASL_HANDSHAKE, 1), (ApiKey.SASL_AUTHENTICATE, 2),
          (ApiKey.SASL_AUTHENTICATE, 2)]  # SCRAM, without ApiVersions first


@pytest.mark.parametrize("idle_s", [0.28, 0.5], ids=["before-expiry", "after-expiry"])
def test_blocking_connection_reauthenticates_before_its_next_request(idle_s: float) -> None:
    with fake_broker(session_lifetime_ms=300) as broker, BlockingConnection(
            "127.0.0.1", broker.port, timeout=5, sasl=scram()) as conn:
        assert works(conn)
        # on a loaded machine the first request may already come after a re-authentication:
        # what follows the idle time is what this test is about
        before_idle = len(broker.behaviour.received)
        time.sleep(idle_s)
        assert works(conn)
    assert broker.behaviour.received[before_idle:] == [*REAUTH, (ApiKey.API_VERSIONS, 3)]


# ---------------------------------------------------------------------- asyncio


async def _async_works(conn: BrokerConnection) -> bool:
    answer = await conn.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="test", client_software_version="1"))
    return bool(answer.error_code == 0)


def test_broker_connection_authenticates_and_then_works() -> None:
    async def run(port: int) -> bool:
        conn = await BrokerConnection.connect("127.0.0.1", port, client_id="broker-1",
                                              sasl=scram())
        try:
            return await _async_works(conn)
        finally:
            conn.close()

    with fake_broker() as broker:
        assert asyncio.run(run(broker.port))
    assert broker.behaviour.received[:2] == AUTH


def test_broker_connection_refused_authentication_raises_and_closes() -> None:
    async def run(port: int) -> None:
        await BrokerConnection.connect("127.0.0.1", port, client_id="broker-1",
                                       sasl=plain("wrong"))

    with fake_broker() as broker, pytest.raises(SaslAuthenticationFailed,
                                                match="Invalid username or password"):
        asyncio.run(run(broker.port))


def test_broker_connection_reauthenticates_once_for_concurrent_requests() -> None:
    async def run(port: int) -> list[bool]:
        conn = await BrokerConnection.connect("127.0.0.1", port, client_id="broker-1",
                                              sasl=scram())
        try:
            await asyncio.sleep(0.4)  # past the session's end: only SaslHandshake may come
            return list(await asyncio.gather(*(_async_works(conn) for _ in range(3))))
        finally:
            conn.close()

    with fake_broker(session_lifetime_ms=300) as broker:
        assert asyncio.run(run(broker.port)) == [True, True, True]
    assert broker.behaviour.received[-6:] == [*REAUTH, *[(ApiKey.API_VERSIONS, 3)] * 3]


def test_a_refused_reauthentication_closes_the_broker_connection() -> None:
    passwords = iter(["alice-secret", "changed-meanwhile"])

    async def run(port: int) -> None:
        conn = await BrokerConnection.connect(
            "127.0.0.1", port, client_id="broker-1",
            sasl=lambda: ScramClient(SHA256, "alice", next(passwords)))
        await asyncio.sleep(0.3)
        with pytest.raises(ConnectionError, match="SASL re-authentication failed: "
                                                  "Authentication failed during"):
            await _async_works(conn)
        assert conn.closed

    with fake_broker(session_lifetime_ms=300) as broker:
        asyncio.run(run(broker.port))


# ---------------------------------------------------------------------- timing


def test_reauthentication_comes_between_85_and_95_percent_of_the_lifetime() -> None:
    assert reauthentication_delay_s(0) is None
    delays = [reauthentication_delay_s(10_000) for _ in range(100)]
    assert all(d is not None and 8.5 <= d <= 9.5 for d in delays)


# ---------------------------------------------------------------------- the tools' Admin


def admin_config(password: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                f'required username="alice" password="{password}";'}


def test_the_tools_admin_authenticates_from_a_command_config() -> None:
    from moldau.tools.admin import Admin

    with fake_broker() as broker, Admin(f"127.0.0.1:{broker.port}",
                                        admin_config("alice-secret")) as admin:
        assert ApiKey.SASL_AUTHENTICATE in admin.api_versions()


def test_the_tools_admin_reports_a_refused_login_as_kafka_s_exception() -> None:
    from moldau.tools.admin import Admin
    from moldau.tools.kafka_errors import KafkaToolError

    with fake_broker() as broker, Admin(f"127.0.0.1:{broker.port}",
                                        admin_config("wrong")) as admin, \
            pytest.raises(KafkaToolError) as failed:
        admin.api_versions()
    assert (failed.value.code, str(failed.value)) == (
        58, "Authentication failed during authentication due to invalid credentials with "
            "SASL mechanism SCRAM-SHA-256")
