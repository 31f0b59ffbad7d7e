"""SASL/OAUTHBEARER on a real broker, served to real clients. One broker, two SASL
listeners: SASL_PLAINTEXT with Kafka's default unsecured-token validator, and JWKS (also
SASL_PLAINTEXT) with Kafka's OAuthBearerValidatorCallbackHandler against a `file:` JWKS
made here, an expected audience and issuer, and connections.max.reauth.ms=60000.

A refused token fails as Kafka fails it, in two steps: the broker answers the token with
error 0 and `{"status":"invalid_token"}`, the client replies 0x01, and the broker fails
with error 58 carrying that JSON, then closes."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from moldau.client.blocking import BlockingConnection
from moldau.client.security import client_security, librdkafka_settings
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from moldau.security.sasl.oauthbearer import OAuthBearerClient
from moldau.security.sasl.oauthbearer_unsecured import unsecured_login_token

from .round_trip import confluent_round_trip

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
AUDIENCE, ISSUER = "kafka-cluster", "https://issuer.example"
REAUTH_MS = 60_000
INVALID_TOKEN = '{"status":"invalid_token"}'


def _rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def keys() -> dict[str, rsa.RSAPrivateKey]:
    return {"trusted": _rsa_key(), "stranger": _rsa_key()}


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory, zk_ensemble, keys) -> Iterator[dict[str, Any]]:
    directory = tmp_path_factory.mktemp("oauth")
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(keys["trusted"].public_key()))
    jwks = directory / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "trusted", "use": "sig"}]}))
    plain, unsecured, signed = free_port(), free_port(), free_port()
    props = {
        "listeners": (f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{unsecured},"
                      f"JWKS://127.0.0.1:{signed}"),
        "listener.security.protocol.map": ("PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
                                           "JWKS:SASL_PLAINTEXT"),
        "sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
            f"{LOGIN_MODULE} required;",
        "listener.name.jwks.oauthbearer.sasl.jaas.config": f"{LOGIN_MODULE} required;",
        "listener.name.jwks.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "listener.name.jwks.sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "listener.name.jwks.oauthbearer.connections.max.reauth.ms": str(REAUTH_MS),
        "connection.failed.authentication.delay.ms": "100",
        "num.partitions": "1",
    }
    broker = BrokerProcess(str(directory / "broker"), 1,
                           f"{zk_ensemble.connect_string}/oauth-{uuid.uuid4().hex[:8]}",
                           port=plain, properties=props)
    broker.start()
    yield {"unsecured": f"127.0.0.1:{unsecured}", "unsecured_port": unsecured,
           "jwks": f"127.0.0.1:{signed}", "jwks_port": signed}
    assert broker.stop() == 0, broker.tail()


def signed_token(key: rsa.RSAPrivateKey, sub: str = "alice", lifetime_s: int = 600,
                 kid: str = "trusted", **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": sub, "iat": now, "exp": now + lifetime_s, "aud": AUDIENCE, "iss": ISSUER,
            **claims}
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})


def _round_trip(producer_config: dict[str, Any], consumer_config: dict[str, Any],
                n: int = 10) -> list[bytes]:
    return confluent_round_trip(producer_config, consumer_config,
                                f"oauth-{uuid.uuid4().hex[:8]}", n)


def test_confluent_kafka_with_unsecured_tokens(oauth_broker) -> None:
    """librdkafka's own unsecured tokens for the consumer; for the producer, Kafka's
    client properties (an OAuthBearerLoginModule JAAS line) as Moldau translates them."""
    librdkafka = {"bootstrap.servers": oauth_broker["unsecured"],
                  "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                  "enable.sasl.oauthbearer.unsecure.jwt": True,
                  "sasl.oauthbearer.config": "principal=alice scope=read,write"}
    kafka_style = librdkafka_settings({
        "bootstrap.servers": oauth_broker["unsecured"], "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": f'{LOGIN_MODULE} required unsecuredLoginStringClaim_sub="bob";'},
        environ={})
    assert kafka_style["sasl.oauthbearer.config"] == "principal=bob"
    assert _round_trip(kafka_style, librdkafka) == [f"v{i}".encode() for i in range(10)]


def test_confluent_kafka_with_signed_tokens(oauth_broker, keys) -> None:
    def token(_config: object) -> tuple[str, float]:
        return signed_token(keys["trusted"], "carol"), time.time() + 600

    config = {"bootstrap.servers": oauth_broker["jwks"], "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "OAUTHBEARER", "oauth_cb": token}
    assert _round_trip(config, dict(config)) == [f"v{i}".encode() for i in range(10)]


def test_kafka_python_with_a_token_provider(oauth_broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Unsecured(AbstractTokenProvider):
        def token(self) -> str:
            return unsecured_login_token({"unsecuredLoginStringClaim_sub": "dave"})

        def extensions(self) -> dict[str, str]:
            return {"traceId": "t-1"}

    auth = {"bootstrap_servers": oauth_broker["unsecured"],
            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
            "sasl_oauth_token_provider": Unsecured()}
    topic = f"oauth-kp-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(**auth)
    for i in range(5):
        producer.send(topic, f"kp{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(consumer_timeout_ms=10000, **auth)
    consumer.assign([TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got = [m.value for _, m in zip(range(5), consumer, strict=False)]
    consumer.close()
    assert got == [f"kp{i}".encode() for i in range(5)]


def test_moldaus_own_client_from_kafka_client_properties(oauth_broker) -> None:
    security = client_security({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": f'{LOGIN_MODULE} required unsecuredLoginStringClaim_sub="erin" '
                            'unsecuredLoginLifetimeSeconds="120";'}, environ={})
    assert security.sasl is not None
    conn = BlockingConnection("127.0.0.1", oauth_broker["unsecured_port"], timeout=10,
                              sasl=security.sasl)
    with conn:
        assert conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=[])).brokers


# --- the wire --------------------------------------------------------------------------


def _connect(port: int) -> BlockingConnection:
    return BlockingConnection("127.0.0.1", port, timeout=10, client_id="oauth-test")


def _closed(conn: BlockingConnection, within: float = 5.0) -> bool:
    conn.sock.settimeout(within)
    try:
        return conn.sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return False


def _send_token(conn: BlockingConnection, token: str):
    handshake = conn.request(ApiKey.SASL_HANDSHAKE, 1,
                             SaslHandshakeRequest(mechanism="OAUTHBEARER"))
    assert handshake.error_code == 0
    message = OAuthBearerClient(lambda: token).initial_response()
    return conn.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=message))


def test_a_signed_token_is_accepted_as_user_sub_for_the_shorter_of_exp_and_reauth_ms(
        oauth_broker, keys) -> None:
    conn = _connect(oauth_broker["jwks_port"])
    with conn:
        short = _send_token(conn, signed_token(keys["trusted"], "alice", lifetime_s=30))
        assert (short.error_code, bytes(short.auth_bytes)) == (0, b"")
        assert 25_000 < short.session_lifetime_ms <= 30_000
        assert conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=[])).brokers
        time.sleep(1.1)  # a re-authentication sooner than a second is refused
        long = _send_token(conn, signed_token(keys["trusted"], "alice", lifetime_s=3600))
        assert (long.error_code, long.session_lifetime_ms) == (0, REAUTH_MS)
        # the principal is User:<sub>: another subject may not take the connection over
        time.sleep(1.1)
        other = _send_token(conn, signed_token(keys["trusted"], "mallory"))
        assert (other.error_code, other.error_message) == (
            58, "Cannot change principals during re-authentication from User.alice: "
                "User.mallory")
        assert _closed(conn)


def _refused_in_two_steps(port: int, token: str) -> None:
    conn = _connect(port)
    with conn:
        first = _send_token(conn, token)
        assert (first.error_code, bytes(first.auth_bytes).decode()) == (0, INVALID_TOKEN)
        second = conn.request(ApiKey.SASL_AUTHENTICATE, 2,
                              SaslAuthenticateRequest(auth_bytes=b"\x01"))
        assert (second.error_code, second.error_message) == (58, INVALID_TOKEN)
        assert _closed(conn)


@pytest.mark.parametrize("case", ["expired", "wrongly signed", "wrong audience",
                                  "unknown key id", "unsigned"])
def test_refused_signed_tokens_fail_in_two_steps(oauth_broker, keys, case: str) -> None:
    trusted = keys["trusted"]
    token = {
        # past exp plus the default 30 s clock skew
        "expired": lambda: signed_token(trusted, lifetime_s=-60),
        "wrongly signed": lambda: signed_token(keys["stranger"]),
        "wrong audience": lambda: signed_token(trusted, aud="another-service"),
        "unknown key id": lambda: signed_token(trusted, kid="rotated-away"),
        "unsigned": lambda: unsecured_login_token({"unsecuredLoginStringClaim_sub": "alice"}),
    }[case]()
    _refused_in_two_steps(oauth_broker["jwks_port"], token)


@pytest.mark.parametrize("case", ["expired", "signed"])
def test_refused_unsecured_tokens_fail_in_two_steps(oauth_broker, keys, case: str) -> None:
    token = (unsecured_login_token({"unsecuredLoginStringClaim_sub": "alice"},
                                   now=int(time.time() * 1000) - 7_200_000)
             if case == "expired" else signed_token(keys["trusted"]))
    _refused_in_two_steps(oauth_broker["unsecured_port"], token)


def test_a_garbage_message_gets_the_generic_text_and_the_broker_goes_on(oauth_broker) -> None:
    conn = _connect(oauth_broker["jwks_port"])
    with conn:
        assert conn.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(
            mechanism="OAUTHBEARER")).error_code == 0
        response = conn.request(ApiKey.SASL_AUTHENTICATE, 2,
                                SaslAuthenticateRequest(auth_bytes=b"n,,\x01auth=Basic x\x01\x01"))
        assert (response.error_code, response.error_message) == (
            58, "Authentication failed during authentication due to invalid credentials with "
                "SASL mechanism OAUTHBEARER")
        assert _closed(conn)
    conn = _connect(oauth_broker["unsecured_port"])
    with conn:
        ok = _send_token(conn, unsecured_login_token({"unsecuredLoginStringClaim_sub": "a"}))
        assert ok.error_code == 0 and ok.session_lifetime_ms > 0  # exp alone sets it
