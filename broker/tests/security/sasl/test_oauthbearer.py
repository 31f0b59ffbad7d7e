"""The OAUTHBEARER server and client state machines: success, the two-step failure
(JSON error, 0x01, then the SaslAuthenticationError with that JSON), authorization ids,
and the client's side of each step."""

from __future__ import annotations

import pytest

from moldau.security.sasl.errors import (
    SaslAuthenticationError,
    SaslIllegalStateError,
    SaslMechanismError,
)
from moldau.security.sasl.oauthbearer import OAuthBearerClient, OAuthBearerServer
from moldau.security.sasl.oauthbearer_messages import ClientInitialResponse
from moldau.security.sasl.oauthbearer_token import (
    OAuthBearerToken,
    TokenValidationError,
)


class Validator:
    """Accepts the token "good-<principal>", refuses anything else."""

    def validate(self, token_value: str) -> OAuthBearerToken:
        if token_value == "scope":
            raise TokenValidationError("no", "insufficient_scope", "[admin]")
        if not token_value.startswith("good-"):
            raise TokenValidationError(f"bad token {token_value}")
        return OAuthBearerToken(token_value, token_value[5:], frozenset(), 1_234_000, None)


def message(token: str, authzid: str = "", **extensions: str) -> bytes:
    return ClientInitialResponse(token, authzid, extensions).encode()


def test_a_valid_token_completes_with_an_empty_answer() -> None:
    server = OAuthBearerServer(Validator())
    assert server.evaluate(message("good-alice", "alice", traceId="7")) == b""
    assert server.complete
    assert (server.authorization_id, server.credential_expiry_ms) == ("alice", 1_234_000)
    assert server.extensions == {"traceId": "7"} and not server.token_authenticated
    with pytest.raises(SaslIllegalStateError):
        server.evaluate(b"\x01")


def test_a_refused_token_fails_in_two_steps() -> None:
    server = OAuthBearerServer(Validator())
    assert server.evaluate(message("bad")) == b'{"status":"invalid_token"}'
    assert not server.complete
    with pytest.raises(SaslAuthenticationError) as raised:
        server.evaluate(b"\x01")
    assert str(raised.value) == '{"status":"invalid_token"}'
    with pytest.raises(SaslIllegalStateError):
        server.evaluate(message("good-alice"))


def test_insufficient_scope_names_the_required_scope() -> None:
    server = OAuthBearerServer(Validator())
    assert server.evaluate(message("scope")) == \
        b'{"status":"insufficient_scope", "scope":"[admin]"}'


def test_after_an_error_another_token_may_be_offered_as_kafka_allows() -> None:
    server = OAuthBearerServer(Validator())
    server.evaluate(message("bad"))
    assert server.evaluate(message("good-bob")) == b"" and server.authorization_id == "bob"


def test_a_lone_0x01_without_an_error_is_a_malformed_message() -> None:
    with pytest.raises(SaslMechanismError, match="Invalid OAUTHBEARER client first message"):
        OAuthBearerServer(Validator()).evaluate(b"\x01")


def test_an_authorization_id_other_than_the_principal_is_refused() -> None:
    with pytest.raises(SaslAuthenticationError) as raised:
        OAuthBearerServer(Validator()).evaluate(message("good-alice", "admin"))
    assert str(raised.value) == ("Authentication failed: Client requested an authorization id "
                                 "(admin) that is different from the token's principal name "
                                 "(alice)")


def test_the_authorization_id_before_completion_is_an_illegal_state() -> None:
    with pytest.raises(SaslIllegalStateError):
        _ = OAuthBearerServer(Validator()).authorization_id


def test_client_and_server_together() -> None:
    tokens = iter(["bad", "good-carol"])
    for expected_complete in (False, True):
        client = OAuthBearerClient(lambda: next(tokens), {"traceId": "1"})
        server = OAuthBearerServer(Validator())
        challenge = server.evaluate(client.initial_response())
        reply = client.evaluate(challenge)
        if expected_complete:
            assert reply is None and client.complete and server.complete
        else:
            assert reply == b"\x01" and client.error == '{"status":"invalid_token"}'
            with pytest.raises(SaslAuthenticationError):
                server.evaluate(reply)
            assert not client.complete


def test_client_refuses_to_send_twice_or_bad_extensions() -> None:
    client = OAuthBearerClient(lambda: "t")
    client.initial_response()
    with pytest.raises(SaslIllegalStateError):
        client.initial_response()
    with pytest.raises(SaslMechanismError, match="Extension name auth is invalid"):
        OAuthBearerClient(lambda: "t", {"auth": "x"}).initial_response()


def test_a_validator_bug_fails_only_this_exchange_with_the_generic_kind_of_error() -> None:
    class Broken:
        def validate(self, token_value: str) -> OAuthBearerToken:
            raise KeyError("kid")

    with pytest.raises(SaslMechanismError, match="internal error on the server"):
        OAuthBearerServer(Broken()).evaluate(message("anything"))
