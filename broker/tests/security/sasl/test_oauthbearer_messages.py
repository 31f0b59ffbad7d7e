"""The OAUTHBEARER client message and the server's JSON error, byte for byte as Kafka's
OAuthBearerClientInitialResponse and OAuthBearerSaslServer write and read them."""

from __future__ import annotations

import pytest

from moldau.security.sasl.errors import SaslMechanismError
from moldau.security.sasl.oauthbearer_messages import (
    ClientInitialResponse,
    error_json,
    parse_client_initial_response,
)

TOKEN = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0."


def test_encode_as_kafkas_client_writes_it() -> None:
    assert ClientInitialResponse(TOKEN).encode() == \
        f"n,,\x01auth=Bearer {TOKEN}\x01\x01".encode()
    message = ClientInitialResponse(TOKEN, "alice", {"traceId": "1", "x": "a b=c"}).encode()
    assert message == f"n,a=alice,\x01auth=Bearer {TOKEN}\x01traceId=1\x01x=a b=c\x01\x01".encode()


def test_parse_round_trips_token_authzid_and_extensions() -> None:
    sent = ClientInitialResponse(TOKEN, "alice", {"traceId": "123", "logicalCluster": "lc-1"})
    assert parse_client_initial_response(sent.encode()) == sent


def test_parse_keeps_kafkas_quirks() -> None:
    # scheme in any case, several spaces, a later duplicate wins, =2C kept as sent
    message = f"n,a=a=2Cb,\x01auth=BEARER   {TOKEN}\x01k=1\x01k=2\x01\x01".encode()
    parsed = parse_client_initial_response(message)
    assert (parsed.token, parsed.authorization_id, dict(parsed.extensions)) == \
        (TOKEN, "a=2Cb", {"k": "2"})


@pytest.mark.parametrize("message, reason", [
    (b"", "Invalid OAUTHBEARER client first message"),
    (f"n,,auth=Bearer {TOKEN}\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (f"y,,\x01auth=Bearer {TOKEN}\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (f"n,,\x01auth=Bearer {TOKEN}\x01".encode(), "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01k=v\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01auth=Bearer a+b/c\x01\x01",
     "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
    (f"n,,\x01auth=Bearer {TOKEN}\x01k1=v\x01\x01".encode(),
     "Invalid OAUTHBEARER client first message"),  # keys are letters only
    ("n,a=é,\x01auth=Bearer x\x01\x01".encode(), "Invalid OAUTHBEARER client first message"),
])
def test_malformed_messages_are_mechanism_errors(message: bytes, reason: str) -> None:
    with pytest.raises(SaslMechanismError) as raised:
        parse_client_initial_response(message)
    assert str(raised.value) == reason


@pytest.mark.parametrize("extensions, reason", [
    ({"auth": "x"}, "Extension name auth is invalid"),
    ({"a1": "x"}, "Extension name a1 is invalid"),
    ({"a": "\x01"}, "Extension value (\x01) for extension a is invalid"),
    ({"a": ""}, "Extension value () for extension a is invalid"),
])
def test_a_client_refuses_extensions_rfc_7628_forbids(extensions: dict[str, str],
                                                      reason: str) -> None:
    with pytest.raises(ValueError, match=r"^Extension") as raised:
        ClientInitialResponse(TOKEN, "", extensions).encode()
    assert str(raised.value) == reason


def test_error_json_is_spelled_as_kafka_spells_it() -> None:
    assert error_json("invalid_token") == '{"status":"invalid_token"}'
    assert error_json("insufficient_scope", "[a, b]") == \
        '{"status":"insufficient_scope", "scope":"[a, b]"}'
    assert error_json("invalid_token", None, "https://x/.well-known") == \
        '{"status":"invalid_token", "openid-configuration":"https://x/.well-known"}'
