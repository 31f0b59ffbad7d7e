"""SCRAM-SHA-256/512 as Kafka's ScramSaslServer and ScramSaslClient run it: RFC 7677's
example byte for byte, round trips for both mechanisms, the server's checks in Kafka's
order with Kafka's split between client-visible and hidden failures, the client's
checks of the server, and every malformed message."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from moldau.security.sasl.errors import (
    SaslAuthenticationError,
    SaslIllegalStateError,
    SaslMechanismError,
)
from moldau.security.sasl.mechanism import SaslClient, SaslServer
from moldau.security.sasl.scram import DelegationTokenCredential, ScramClient, ScramServer
from moldau.security.sasl.scram_credentials import (
    ScramCredential,
    ScramMechanism,
    derive_credential,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3.
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
RFC_NONCE = RFC_CLIENT_NONCE + RFC_SERVER_NONCE

_CREDENTIALS: dict[tuple[ScramMechanism, str, str, int], ScramCredential] = {}


def credential(password: str = "pencil", mechanism: ScramMechanism = SHA256,
               iterations: int = 4096, salt: bytes = RFC_SALT) -> ScramCredential:
    key = (mechanism, password, salt.hex(), iterations)
    if key not in _CREDENTIALS:  # PBKDF2 is the slow part of these tests
        _CREDENTIALS[key] = derive_credential(mechanism, password, iterations, salt)
    return _CREDENTIALS[key]


def users(**by_name: ScramCredential) -> Callable[[str], ScramCredential | None]:
    return by_name.get


def rfc_server(**kwargs: ScramCredential) -> ScramServer:
    return ScramServer(SHA256, users(**(kwargs or {"user": credential()})),
                       nonce=RFC_SERVER_NONCE)


def rfc_client(username: str = "user", password: str = "pencil") -> ScramClient:
    return ScramClient(SHA256, username, password, nonce=RFC_CLIENT_NONCE)


def test_rfc_7677_example_from_both_sides() -> None:
    client, server = rfc_client(), rfc_server()
    assert client.mechanism == server.mechanism == "SCRAM-SHA-256"
    assert client.initial_response() == RFC_CLIENT_FIRST
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert client.evaluate(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert not server.complete
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.authorization_id == "user"
    assert not server.token_authenticated and server.credential_expiry_ms is None
    assert not client.complete
    assert client.evaluate(RFC_SERVER_FINAL) is None
    assert client.complete


def test_a_final_nonce_that_repeats_the_client_nonce_in_front_is_accepted() -> None:
    """librdkafka before 2.1 (Debian 12's kcat) sends r=<client nonce><combined nonce>;
    Kafka checks only that the nonce ends with the one it sent, and the proof is over
    the message as sent."""
    from moldau.security.sasl.scram_messages import (
        ClientFinalMessage,
        ClientFirstMessage,
        ServerFirstMessage,
        auth_message,
    )

    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST)
    nonce = RFC_CLIENT_NONCE + RFC_NONCE
    without_proof = f"c=biws,r={nonce}"
    message = auth_message(ClientFirstMessage.parse(RFC_CLIENT_FIRST),
                           ServerFirstMessage.parse(RFC_SERVER_FIRST),
                           ClientFinalMessage.parse(f"{without_proof},p=AAAA".encode()))
    salted = SHA256.salted_password("pencil", RFC_SALT, 4096)
    client_key = SHA256.client_key(salted)
    signature = SHA256.hmac(SHA256.hash(client_key), message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    assert server.evaluate(final).startswith(b"v=")
    assert server.complete


def exchange(client: SaslClient, server: SaslServer) -> None:
    token: bytes | None = client.initial_response()
    while token is not None:
        challenge = server.evaluate(token)
        token = client.evaluate(challenge)
    assert client.complete and server.complete


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
@pytest.mark.parametrize("iterations", [4096, 8192])
def test_round_trip(mechanism: ScramMechanism, iterations: int) -> None:
    stored = credential("alice-secret", mechanism, iterations, b"salt")
    server = ScramServer(mechanism, users(alice=stored))
    exchange(ScramClient(mechanism, "alice", "alice-secret"), server)
    assert server.authorization_id == "alice"


def test_random_nonces_are_base36_and_differ() -> None:
    first = ScramClient(SHA256, "user", "pencil").initial_response().decode()
    second = ScramClient(SHA256, "user", "pencil").initial_response().decode()
    assert first != second
    nonce = first.rsplit("r=", 1)[1]
    assert re.fullmatch(r"[0-9a-z]{1,26}", nonce)
    server_first = ScramServer(SHA256, users(user=credential())).evaluate(first.encode())
    server_nonce = server_first.decode().split(",")[0][2 + len(nonce):]
    assert re.fullmatch(r"[0-9a-z]{1,26}", server_nonce)


def test_escaped_names_round_trip() -> None:
    stored = credential("pw")
    server = ScramServer(SHA256, users(**{"a=b,c": stored}))
    client = ScramClient(SHA256, "a=b,c", "pw")
    assert b"n=a=3Db=2Cc," in client.initial_response()
    exchange(ScramClient(SHA256, "a=b,c", "pw"), server)
    assert server.authorization_id == "a=b,c"


def test_unknown_user_fails_at_the_first_message_with_a_hidden_error() -> None:
    with pytest.raises(SaslMechanismError) as failure:
        rfc_server().evaluate(b"n,,n=nobody,r=abc")
    assert str(failure.value) == "Authentication failed: Invalid user credentials"
    assert not isinstance(failure.value, SaslAuthenticationError)


def test_wrong_password_fails_at_the_final_message_with_a_hidden_error() -> None:
    client, server = rfc_client(password="wrong"), rfc_server()
    challenge = server.evaluate(client.initial_response())
    final = client.evaluate(challenge)
    assert final is not None
    with pytest.raises(SaslMechanismError, match=r"^Invalid client credentials$"):
        server.evaluate(final)
    assert not server.complete


def test_a_failing_credential_store_is_hidden() -> None:
    def broken(_: str) -> ScramCredential | None:
        raise RuntimeError("ZooKeeper is down")

    with pytest.raises(SaslMechanismError,
                       match=r"^Authentication failed: Credentials could not be obtained$"):
        ScramServer(SHA256, broken).evaluate(RFC_CLIENT_FIRST)


def test_too_few_stored_iterations_are_refused() -> None:
    server = ScramServer(SHA256, users(user=credential(iterations=4095)))
    with pytest.raises(SaslMechanismError,
                       match=r"^Iterations 4095 is less than the minimum 4096 for SCRAM_SHA_256$"):
        server.evaluate(RFC_CLIENT_FIRST)


def test_authzid_different_from_username_reaches_the_client() -> None:
    with pytest.raises(SaslAuthenticationError) as failure:
        rfc_server().evaluate(b"n,a=admin,n=user,r=abc")
    assert str(failure.value) == ("Authentication failed: Client requested an authorization "
                                  "id that is different from username")


def test_authzid_of_an_unknown_user_stays_hidden() -> None:
    # Kafka looks the user up before comparing the authzid.
    with pytest.raises(SaslMechanismError, match="Invalid user credentials"):
        rfc_server().evaluate(b"n,a=admin,n=nobody,r=abc")


def test_authzid_equal_to_username_is_accepted() -> None:
    assert rfc_server().evaluate(b"n,a=user,n=user," + b"r=" + RFC_CLIENT_NONCE.encode()
                                 ) == RFC_SERVER_FIRST


def test_authzid_is_compared_as_sent() -> None:
    # Kafka compares the escaped authzid with the unescaped user name.
    server = ScramServer(SHA256, users(**{"a,b": credential()}))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"n,a=a=2Cb,n=a=2Cb,r=abc")


def test_reserved_mext_and_unknown_extensions_are_accepted() -> None:
    server = rfc_server()
    challenge = server.evaluate(b"n,,m=whatever,n=user,r=" + RFC_CLIENT_NONCE.encode()
                                + b",foo=bar,baz=a=b")
    assert challenge == RFC_SERVER_FIRST


def test_client_extensions_take_part_in_the_proof() -> None:
    server = ScramServer(SHA512, users(user=credential(mechanism=SHA512)))
    exchange(ScramClient(SHA512, "user", "pencil", {"foo": "bar"}), server)
    assert not server.token_authenticated


@pytest.mark.parametrize("key, value", [("a1", "x"), ("", "x"), ("a", ""), ("a", "x,y"),
                                        ("a", "ü")])
def test_client_refuses_extensions_kafka_cannot_parse(key: str, value: str) -> None:
    with pytest.raises(ValueError, match="SCRAM extension"):
        ScramClient(SHA256, "user", "pencil", {key: value})


def _token(owner: str = "alice", expiry: int = 1_700_000_000_000
           ) -> Callable[[str], DelegationTokenCredential | None]:
    tokens = {"token-id": DelegationTokenCredential(owner, credential("hmac"), expiry)}
    return tokens.get


@pytest.mark.parametrize("value", ["true", "TRUE", "True"])
def test_delegation_token_login(value: str) -> None:
    server = ScramServer(SHA256, users(), tokens=_token())
    assert not server.token_authenticated and server.credential_expiry_ms is None
    exchange(ScramClient(SHA256, "token-id", "hmac", {"tokenauth": value}), server)
    assert server.authorization_id == "alice"
    assert server.token_authenticated
    assert server.credential_expiry_ms == 1_700_000_000_000


def test_tokenauth_false_is_an_ordinary_login() -> None:
    server = ScramServer(SHA256, users(user=credential()), tokens=_token())
    exchange(ScramClient(SHA256, "user", "pencil", {"tokenauth": "false"}), server)
    assert server.authorization_id == "user" and not server.token_authenticated


@pytest.mark.parametrize("tokens", [None, _token()])
def test_unknown_token_is_refused_and_hidden(
        tokens: Callable[[str], DelegationTokenCredential | None] | None) -> None:
    server = ScramServer(SHA256, users(user=credential()), tokens=tokens)
    with pytest.raises(SaslMechanismError,
                       match=r"^Token Authentication failed: Invalid tokenId : user$"):
        server.evaluate(b"n,,n=user,r=abc,tokenauth=true")


@pytest.mark.parametrize("message", [
    b"",
    b"n,,",
    b"n,,n=user",
    b"n,,n=user,r=",
    b"n,,r=abc,n=user",
    b"y,,n=user,r=abc",  # channel binding flags are not accepted
    b"p=tls-unique,,n=user,r=abc",
    b"N,,n=user,r=abc",
    b"n,,n=,r=abc",
    b"n,,n=us=er,r=abc",  # a stray '=' in a saslname
    b"n,,n=us=2cer,r=abc",  # escapes are upper case
    b"n,a=,n=user,r=abc",
    b"n,,n=user,r=a b",
    b"n,,n=user,r=abc,",
    b"n,,n=user,r=abc,ext",
    b"n,,n=user,r=abc,1x=2",
    b"n,,n=user,r=abc,ext=",
    b"n,,m=,n=user,r=abc",
    "n,,n=üser,r=abc".encode(),
    b"n,,n=user,r=abc\xff",
    b" n,,n=user,r=abc",
    b"n,,n=user,r=abc\n",
])
def test_malformed_client_first_messages_are_hidden_failures(message: bytes) -> None:
    server = rfc_server()
    with pytest.raises(SaslMechanismError) as failure:
        server.evaluate(message)
    assert not isinstance(failure.value, SaslAuthenticationError)
    assert str(failure.value).startswith("Invalid SCRAM client first message format: ")
    with pytest.raises(SaslIllegalStateError):
        server.evaluate(RFC_CLIENT_FIRST)  # a failed exchange stays failed


def _after_first() -> ScramServer:
    server = rfc_server()
    server.evaluate(RFC_CLIENT_FIRST)
    return server


_PROOF = b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
_NONCE = RFC_NONCE.encode()


@pytest.mark.parametrize("message, error", [
    (b"", "Invalid SCRAM client final message format: "),
    (b"c=biws,r=" + _NONCE, "Invalid SCRAM client final message format: "),
    (b"r=" + _NONCE + b"," + _PROOF, "Invalid SCRAM client final message format: "),
    (b"c=biws,r=" + _NONCE + b",p=not base64!", "Invalid SCRAM client final message format: "),
    (b"c=biws,r=" + _NONCE + b",p=abc", "Invalid SCRAM client final message format: "),
    (b"c=bi,r=" + _NONCE + b"," + _PROOF, "Invalid SCRAM client final message format: "),
    (b"c=biws,r=" + _NONCE + b"," + _PROOF + b",x=y",
     "Invalid SCRAM client final message format: "),
    (b"c=biws,r=" + RFC_CLIENT_NONCE.encode() + b"," + _PROOF,
     "Invalid client nonce in the final client message."),
    (b"c=biws,r=" + _NONCE + b"x," + _PROOF, "Invalid client nonce in the final client message."),
    (b"c=biws,r=" + _NONCE + b",p=AAAA", "Invalid client credentials: proof of the wrong length"),
    (b"c=biws,r=" + _NONCE + b",p=" + base64.b64encode(bytes(32)), "Invalid client credentials"),
])
def test_bad_client_final_messages_are_hidden_failures(message: bytes, error: str) -> None:
    server = _after_first()
    with pytest.raises(SaslMechanismError) as failure:
        server.evaluate(message)
    assert not isinstance(failure.value, SaslAuthenticationError)
    assert str(failure.value).startswith(error)
    assert not server.complete


@pytest.mark.parametrize("final", [
    # Kafka neither checks the channel binding nor keeps final-message extensions in
    # the AuthMessage (it re-renders c= and r=), so these still verify.
    RFC_CLIENT_FINAL.replace(b",p=", b",ext=ignored,p="),
])
def test_final_message_variants_kafka_accepts(final: bytes) -> None:
    server = _after_first()
    assert server.evaluate(final) == RFC_SERVER_FINAL


def test_a_different_channel_binding_changes_the_auth_message() -> None:
    server = _after_first()
    with pytest.raises(SaslMechanismError, match="Invalid client credentials"):
        server.evaluate(RFC_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"))


def test_server_states() -> None:
    server = rfc_server()
    with pytest.raises(SaslIllegalStateError, match="not completed"):
        _ = server.authorization_id
    server.evaluate(RFC_CLIENT_FIRST)
    server.evaluate(RFC_CLIENT_FINAL)
    with pytest.raises(SaslIllegalStateError, match="state COMPLETE"):
        server.evaluate(RFC_CLIENT_FINAL)


def _client_after_first() -> ScramClient:
    client = rfc_client()
    client.initial_response()
    return client


@pytest.mark.parametrize("challenge, error", [
    (b"", "Invalid SCRAM server first message format: "),
    (b"r=" + _NONCE + b",s=W22ZaJ0SNY7soEsUEjb6gQ==", "Invalid SCRAM server first message"),
    (b"r=" + _NONCE + b",s=W22ZaJ0SNY7soEsUEjb6gQ=,i=4096", "Invalid SCRAM server first message"),
    (b"r=" + _NONCE + b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=-1", "Invalid SCRAM server first message"),
    (b"r=" + _NONCE + b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0",
     "Invalid SCRAM server first message format: invalid iterations 0"),
    (b"r=" + _NONCE + b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=2147483648",
     "Invalid SCRAM server first message format: invalid iterations"),
    (b"r=someone-else,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
     "Invalid server nonce: does not start with client nonce"),
    (b"r=" + _NONCE + b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095",
     "Requested iterations 4095 is less than the minimum 4096 for SCRAM_SHA_256"),
])
def test_client_checks_the_server_first_message(challenge: bytes, error: str) -> None:
    client = _client_after_first()
    with pytest.raises(SaslMechanismError) as failure:
        client.evaluate(challenge)
    assert str(failure.value).startswith(error)
    with pytest.raises(SaslIllegalStateError, match="state FAILED"):
        client.evaluate(RFC_SERVER_FIRST)


def test_client_accepts_reserved_and_extensions_in_the_server_first_message() -> None:
    client = _client_after_first()
    # Kafka's client re-renders the server-first message for its AuthMessage, so the
    # proof is the RFC's although the server sent more.
    assert client.evaluate(b"m=x," + RFC_SERVER_FIRST + b",foo=bar") == RFC_CLIENT_FINAL


def _client_after_final() -> ScramClient:
    client = _client_after_first()
    client.evaluate(RFC_SERVER_FIRST)
    return client


@pytest.mark.parametrize("challenge, error", [
    (b"", "Invalid SCRAM server final message format: "),
    (b"v=", "Invalid server signature in server final message"),
    (b"v=" + base64.b64encode(bytes(32)), "Invalid server signature in server final message"),
    (b"v=abc", "Invalid SCRAM server final message format: "),
    (b"e=invalid-proof",
     "Sasl authentication using SCRAM_SHA_256 failed with error: invalid-proof"),
    (b"e=a=b", "Invalid SCRAM server final message format: "),
])
def test_client_verifies_the_server_final_message(challenge: bytes, error: str) -> None:
    client = _client_after_final()
    with pytest.raises(SaslMechanismError) as failure:
        client.evaluate(challenge)
    assert str(failure.value).startswith(error)
    assert not client.complete


def test_client_accepts_server_final_extensions() -> None:
    client = _client_after_final()
    assert client.evaluate(RFC_SERVER_FINAL + b",x=y") is None
    assert client.complete


def test_client_states() -> None:
    client = rfc_client()
    with pytest.raises(SaslMechanismError, match="Expected empty challenge"):
        client.evaluate(b"r=x")
    client = rfc_client()
    assert client.evaluate(b"") == RFC_CLIENT_FIRST  # an empty challenge starts it too
    with pytest.raises(SaslIllegalStateError):
        client.initial_response()
    client.evaluate(RFC_SERVER_FIRST)
    client.evaluate(RFC_SERVER_FINAL)
    with pytest.raises(SaslIllegalStateError, match="state COMPLETE"):
        client.evaluate(RFC_SERVER_FINAL)


_ASCII_NAMES = st.text(st.characters(min_codepoint=1, max_codepoint=0x7F), min_size=1,
                       max_size=20)
_PASSWORDS = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)


@settings(max_examples=examples(12), deadline=None)
@given(mechanism=st.sampled_from(list(ScramMechanism)), username=_ASCII_NAMES,
       password=_PASSWORDS)
def test_round_trip_for_any_name_and_password(mechanism: ScramMechanism, username: str,
                                              password: str) -> None:
    stored = derive_credential(mechanism, password, 4096)
    server = ScramServer(mechanism, users(**{username: stored}))
    exchange(ScramClient(mechanism, username, password), server)
    assert server.authorization_id == username


@settings(max_examples=examples(12), deadline=None)
@given(username=_ASCII_NAMES, password=_PASSWORDS, other=_PASSWORDS)
def test_any_other_password_is_refused(username: str, password: str, other: str) -> None:
    if other == password:
        return
    server = ScramServer(SHA256, users(**{username: derive_credential(SHA256, password, 4096)}))
    client = ScramClient(SHA256, username, other)
    final = client.evaluate(server.evaluate(client.initial_response()))
    assert final is not None
    with pytest.raises(SaslMechanismError, match="Invalid client credentials"):
        server.evaluate(final)


@settings(max_examples=examples(60))
@given(first=st.binary(max_size=60), final=st.binary(max_size=60))
def test_arbitrary_bytes_only_raise_sasl_errors(first: bytes, final: bytes) -> None:
    server = ScramServer(SHA256, lambda _: credential())
    try:
        server.evaluate(first)
        server.evaluate(final)
    except (SaslAuthenticationError, SaslMechanismError):
        return
    pytest.fail("arbitrary bytes authenticated")
