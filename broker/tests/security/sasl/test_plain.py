"""SASL/PLAIN as Kafka's PlainSaslServer answers it: RFC 4616 parsing with Kafka's token
counting, its error texts (all of which reach the client), the authzid rule, and the
client's single message."""

from __future__ import annotations

import pytest

from moldau.security.sasl.errors import (
    SaslAuthenticationError,
    SaslIllegalStateError,
    SaslMechanismError,
    generic_failure_message,
)
from moldau.security.sasl.mechanism import SaslClient, SaslServer
from moldau.security.sasl.plain import PlainClient, PlainServer

USERS = {"admin": "admin-secret", "alice": "alice-secret", "ünï": "pässwörd"}


def _server() -> PlainServer:
    return PlainServer(USERS)


def test_generic_failure_message_is_kafkas_text() -> None:
    assert generic_failure_message("SCRAM-SHA-256") == (
        "Authentication failed during authentication due to invalid credentials with "
        "SASL mechanism SCRAM-SHA-256")
    assert generic_failure_message("PLAIN", reauthentication=True) == (
        "Authentication failed during re-authentication due to invalid credentials with "
        "SASL mechanism PLAIN")


def test_illegal_state_is_a_mechanism_error() -> None:
    assert issubclass(SaslIllegalStateError, SaslMechanismError)
    assert not issubclass(SaslMechanismError, SaslAuthenticationError)


@pytest.mark.parametrize("message, principal", [
    (b"\x00admin\x00admin-secret", "admin"),
    (b"alice\x00alice\x00alice-secret", "alice"),  # authzid equal to the user name
    ("\x00ünï\x00pässwörd".encode(), "ünï"),
])
def test_valid_credentials_complete_with_an_empty_challenge(message: bytes,
                                                            principal: str) -> None:
    server = _server()
    assert not server.complete
    assert server.evaluate(message) == b""
    assert server.complete
    assert server.authorization_id == principal
    assert not server.token_authenticated
    assert server.credential_expiry_ms is None


@pytest.mark.parametrize("message, error", [
    (b"", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"admin", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
    (b"admin\x00admin-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\x00admin\x00admin-secret\x00", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"a\x00b\x00c\x00d\x00e\x00f", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
    (b"\x00\x00admin-secret", "Authentication failed: username not specified"),
    (b"\x00\x00", "Authentication failed: username not specified"),
    (b"\x00admin\x00", "Authentication failed: password not specified"),
    (b"\x00admin\x00wrong", "Authentication failed: Invalid username or password"),
    (b"\x00admin\x00admin-secreT", "Authentication failed: Invalid username or password"),
    (b"\x00nobody\x00admin-secret", "Authentication failed: Invalid username or password"),
    (b"\x00alice\x00admin-secret", "Authentication failed: Invalid username or password"),
    (b"\xff\x00admin\x00wrong", "Authentication failed: Invalid username or password"),
    (b"alice\x00admin\x00admin-secret",
     "Authentication failed: Client requested an authorization id that is different "
     "from username"),
])
def test_failures_reach_the_client_with_kafkas_text(message: bytes, error: str) -> None:
    server = _server()
    with pytest.raises(SaslAuthenticationError) as failure:
        server.evaluate(message)
    assert str(failure.value) == error
    assert not server.complete
    with pytest.raises(SaslIllegalStateError):
        _ = server.authorization_id


def test_wrong_password_is_checked_before_the_authzid() -> None:
    # Kafka verifies the password first, so a bad authzid with a bad password says
    # "Invalid username or password".
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        _server().evaluate(b"alice\x00admin\x00nope")


def test_invalid_utf8_is_replaced_not_refused() -> None:
    server = PlainServer({"a\ufffdb": "pw"})
    server.evaluate(b"\x00a\xffb\x00pw")
    assert server.authorization_id == "a\ufffdb"


def test_a_second_token_is_an_illegal_state() -> None:
    server = _server()
    server.evaluate(b"\x00admin\x00admin-secret")
    with pytest.raises(SaslIllegalStateError):
        server.evaluate(b"\x00admin\x00admin-secret")


def test_a_failed_exchange_takes_no_second_guess() -> None:
    server = _server()
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"\x00admin\x00guess")
    with pytest.raises(SaslIllegalStateError):
        server.evaluate(b"\x00admin\x00admin-secret")
    assert not server.complete


def test_client_sends_one_message_and_is_done() -> None:
    client = PlainClient("admin", "admin-secret")
    assert client.mechanism == "PLAIN"
    assert not client.complete
    message = client.initial_response()
    assert message == b"\x00admin\x00admin-secret"
    assert client.complete
    assert client.evaluate(b"") is None
    with pytest.raises(SaslIllegalStateError):
        client.evaluate(b"unexpected")
    with pytest.raises(SaslIllegalStateError):
        client.initial_response()


def test_client_with_authorization_id_and_non_ascii() -> None:
    client = PlainClient("ünï", "pässwörd", authorization_id="ünï")
    server = _server()
    server.evaluate(client.initial_response())
    assert server.authorization_id == "ünï"


@pytest.mark.parametrize("username, password, authzid", [
    ("a\x00b", "pw", ""), ("a", "p\x00w", ""), ("a", "pw", "x\x00"),
])
def test_client_refuses_nul_in_its_fields(username: str, password: str, authzid: str) -> None:
    with pytest.raises(ValueError, match="NUL"):
        PlainClient(username, password, authzid)


def test_classes_satisfy_the_protocols() -> None:
    server: SaslServer = _server()
    client: SaslClient = PlainClient("admin", "admin-secret")
    assert server.mechanism == client.mechanism == "PLAIN"
