"""SASL on a real broker: SASL_PLAINTEXT and SASL_SSL listeners with PLAIN (users in the
JAAS line of server.properties) and SCRAM-SHA-256/512 (credentials in ZooKeeper), served to
the real clients, and every way a client can get authentication wrong: each answered as
Kafka answers it, and none disturbing the broker or the other connections."""

from __future__ import annotations

import asyncio
import json
import shutil
import struct
import subprocess
import time
import uuid
from collections.abc import Iterator
from urllib.request import urlopen

import pytest
from tls_material import TlsMaterial, make_tls_material

from moldau.client.blocking import BlockingConnection
from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from moldau.security.sasl.plain import PlainClient
from moldau.security.sasl.scram import ScramClient
from moldau.security.sasl.scram_credentials import ScramMechanism, derive_credential

from .round_trip import confluent_round_trip

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" '
              'user_alice="alice-secret";')
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required;'
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
FAILURE_DELAY_MS = 300


def _scram_config(password: str, iterations: int = 4096) -> dict[str, str]:
    return {m.mechanism_name: derive_credential(m, password, iterations).to_config_value()
            for m in ScramMechanism}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory, zk_ensemble, tls: TlsMaterial) -> Iterator[dict]:
    chroot = f"/sasl-{uuid.uuid4().hex[:8]}"
    zk = KafkaZkClient(zk_ensemble.connect_string + chroot)
    zk.start()
    try:
        zk.ensure_path("/config/users")
        for user, password in (("bob", "bob-secret"), ("admin", "admin-secret")):
            zk.update_user_config(user, lambda c, p=password: {**c, **_scram_config(p)})
    finally:
        zk.close()
    plain, sasl, sasl_ssl = free_port(), free_port(), free_port()
    props = {
        "listeners": (f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl},"
                      f"SASL_SSL://127.0.0.1:{sasl_ssl}"),
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(tls.server_p12),
        "ssl.keystore.password": tls.store_password,
        # broker-wide; a SASL_SSL listener takes only its own (KIP-684): no client certificate
        "ssl.client.auth": "required",
        "connection.failed.authentication.delay.ms": str(FAILURE_DELAY_MS),
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms": "3000",
        "num.partitions": "1",
    }
    metrics_port = free_port()
    broker = BrokerProcess(str(tmp_path_factory.mktemp("saslbroker")), 1,
                           zk_ensemble.connect_string + chroot, port=plain, properties=props,
                           env={"MOLDAU_METRICS_PORT": str(metrics_port)})
    broker.start()
    yield {"broker": broker, "sasl": f"127.0.0.1:{sasl}", "sasl_port": sasl,
           "sasl_ssl": f"127.0.0.1:{sasl_ssl}", "zk": zk_ensemble.connect_string + chroot,
           "metrics_port": metrics_port}
    assert broker.stop() == 0, broker.tail()


def _confluent_round_trip(common: dict[str, str], topic: str) -> list[bytes]:
    return confluent_round_trip(common, common, topic)


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "bob", "bob-secret"),
    ("SCRAM-SHA-512", "bob", "bob-secret"),
])
def test_confluent_kafka_over_sasl_plaintext(sasl_broker, mechanism: str, user: str,
                                             password: str) -> None:
    topic = f"sasl-ck-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    common = {"bootstrap.servers": sasl_broker["sasl"], "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    assert _confluent_round_trip(common, topic) == [f"v{i}".encode() for i in range(10)]


def test_confluent_kafka_over_sasl_ssl_scram(sasl_broker, tls: TlsMaterial) -> None:
    topic = f"sasl-ssl-{uuid.uuid4().hex[:6]}"
    common = {"bootstrap.servers": sasl_broker["sasl_ssl"], "security.protocol": "SASL_SSL",
              "ssl.ca.location": str(tls.ca_cert), "sasl.mechanism": "SCRAM-SHA-256",
              "sasl.username": "bob", "sasl.password": "bob-secret"}
    assert _confluent_round_trip(common, topic) == [f"v{i}".encode() for i in range(10)]


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-512", "bob", "bob-secret"),
])
def test_kafka_python_and_aiokafka_over_sasl(sasl_broker, mechanism: str, user: str,
                                             password: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    bootstrap = sasl_broker["sasl"]
    auth = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"sasl-py-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, **auth)
    for i in range(5):
        producer.send(topic, f"kp{i}".encode())
    producer.flush(30)
    producer.close()

    async def with_aiokafka() -> list[bytes]:
        aproducer = AIOKafkaProducer(bootstrap_servers=bootstrap, **auth)
        await aproducer.start()
        try:
            for i in range(5):
                await aproducer.send_and_wait(topic, f"ak{i}".encode())
        finally:
            await aproducer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, **auth)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            batches = await consumer.getmany(timeout_ms=10000, max_records=10)
            return [r.value for records in batches.values() for r in records]
        finally:
            await consumer.stop()

    got = asyncio.run(with_aiokafka())
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=10000, **auth)
    consumer.assign([KTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got_kp = [m.value for _, m in zip(range(10), consumer, strict=False)]
    consumer.close()
    expected = [f"kp{i}".encode() for i in range(5)] + [f"ak{i}".encode() for i in range(5)]
    assert got == expected or len(got) < 10  # getmany may return one batch at a time
    assert got_kp == expected


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_with_scram(sasl_broker) -> None:
    topic = f"sasl-kcat-{uuid.uuid4().hex[:6]}"
    auth = ["-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=SCRAM-SHA-256",
            "-X", "sasl.username=bob", "-X", "sasl.password=bob-secret"]
    subprocess.run(["kcat", "-b", sasl_broker["sasl"], *auth, "-P", "-t", topic],
                   input=b"one\ntwo\n", check=True, timeout=60)
    out = subprocess.run(["kcat", "-b", sasl_broker["sasl"], *auth, "-C", "-t", topic,
                          "-o", "beginning", "-c", "2", "-e"],
                         capture_output=True, check=True, timeout=60)
    assert out.stdout.split() == [b"one", b"two"]


# --- the wire, as a client that gets it wrong sees it ------------------------------------


def _connect(sasl_broker) -> BlockingConnection:
    return BlockingConnection("127.0.0.1", sasl_broker["sasl_port"], timeout=10,
                              client_id="sasl-test")


def _closed(conn: BlockingConnection, within: float = 5.0) -> bool:
    """The broker closed the connection (reading gives EOF or a reset)."""
    conn.sock.settimeout(within)
    try:
        return conn.sock.recv(1) == b""
    except (ConnectionResetError, TimeoutError):
        return False


def _assert_still_serving(sasl_broker) -> None:
    """A good client authenticates and is served after the bad one."""
    conn = _connect(sasl_broker)
    with conn:
        assert _authenticate(conn, PlainClient("alice", "alice-secret")).error_code == 0
        response = conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
        assert response.brokers


def _authenticate(conn: BlockingConnection, client, version: int = 2):
    handshake = conn.request(ApiKey.SASL_HANDSHAKE, 1,
                             SaslHandshakeRequest(mechanism=client.mechanism))
    assert handshake.error_code == 0
    token: bytes | None = client.initial_response()
    response = None
    while token is not None:
        response = conn.request(ApiKey.SASL_AUTHENTICATE, version,
                                SaslAuthenticateRequest(auth_bytes=token))
        if response.error_code:
            return response
        token = None if client.complete else client.evaluate(response.auth_bytes)
    return response


def test_wrong_password_is_58_with_kafkas_text_then_closed_after_the_delay(sasl_broker) -> None:
    conn = _connect(sasl_broker)
    with conn:
        started = time.monotonic()
        response = _authenticate(conn, PlainClient("alice", "wrong"))
        assert response.error_code == 58
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert _closed(conn)
        assert time.monotonic() - started >= FAILURE_DELAY_MS / 1000 * 0.9
    _assert_still_serving(sasl_broker)


def test_scram_wrong_password_and_unknown_user_get_the_generic_text(sasl_broker) -> None:
    generic = ("Authentication failed during authentication due to invalid credentials "
               "with SASL mechanism SCRAM-SHA-256")
    for user, password in (("bob", "not-bob"), ("nobody", "x")):
        conn = _connect(sasl_broker)
        with conn:
            response = _authenticate(
                conn, ScramClient(ScramMechanism.SCRAM_SHA_256, user, password))
            assert (response.error_code, response.error_message) == (58, generic)
            assert _closed(conn)
    _assert_still_serving(sasl_broker)


def test_unknown_mechanism_is_33_with_the_enabled_list(sasl_broker) -> None:
    conn = _connect(sasl_broker)
    with conn:
        response = conn.request(ApiKey.SASL_HANDSHAKE, 1,
                                SaslHandshakeRequest(mechanism="GSSAPI"))
        assert response.error_code == 33
        assert response.mechanisms == MECHANISMS.split(",")
        assert _closed(conn)
    _assert_still_serving(sasl_broker)


def test_a_request_before_authentication_closes_without_an_answer(sasl_broker) -> None:
    for first in (ApiKey.METADATA, ApiKey.SASL_AUTHENTICATE):
        conn = _connect(sasl_broker)
        with conn:
            body = (MetadataRequest(topics=[]) if first == ApiKey.METADATA
                    else SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
            conn.send(first, 1 if first == ApiKey.SASL_AUTHENTICATE else 9, body)
            assert _closed(conn)
    _assert_still_serving(sasl_broker)


def test_another_request_during_the_exchange_gets_34_then_a_close(sasl_broker) -> None:
    conn = _connect(sasl_broker)
    with conn:
        assert conn.request(ApiKey.SASL_HANDSHAKE, 1,
                            SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        response = conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
        assert response.brokers == [] and not response.topics  # the 34 answer is empty
        assert _closed(conn)
    _assert_still_serving(sasl_broker)


def test_garbage_tokens_and_malformed_scram_fail_cleanly(sasl_broker) -> None:
    cases = [("PLAIN", b"\xff\xfe no separators"),
             ("SCRAM-SHA-256", b"this is not a client-first message"),
             ("SCRAM-SHA-512", b"p=tls-unique,,n=bob,r=abc")]
    for mechanism, token in cases:
        conn = _connect(sasl_broker)
        with conn:
            assert conn.request(ApiKey.SASL_HANDSHAKE, 1,
                                SaslHandshakeRequest(mechanism=mechanism)).error_code == 0
            response = conn.request(ApiKey.SASL_AUTHENTICATE, 2,
                                    SaslAuthenticateRequest(auth_bytes=token))
            assert response.error_code == 58, (mechanism, response)
            assert _closed(conn)
    _assert_still_serving(sasl_broker)


def test_an_oversized_frame_before_authentication_closes(sasl_broker) -> None:
    conn = _connect(sasl_broker)
    with conn:
        conn.send_raw(struct.pack(">i", 524288 + 1) + b"\0" * 64)
        assert _closed(conn)
    _assert_still_serving(sasl_broker)


def test_handshake_v0_raw_tokens(sasl_broker) -> None:
    """SaslHandshake v0: the tokens travel without Kafka headers (old clients)."""
    conn = _connect(sasl_broker)
    with conn:
        assert conn.request(ApiKey.SASL_HANDSHAKE, 0,
                            SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        conn.send_raw(struct.pack(">i", 24) + b"\0alice\0alice-secret".ljust(24, b"\0")[:24])
        # a PLAIN token with trailing NULs is malformed: closed without an answer
        assert _closed(conn)
    conn = _connect(sasl_broker)
    with conn:
        assert conn.request(ApiKey.SASL_HANDSHAKE, 0,
                            SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
        token = b"\0alice\0alice-secret"
        conn.send_raw(struct.pack(">i", len(token)) + token)
        assert conn.read_frame() == b""  # PLAIN's empty challenge, as a zero-length frame
        assert conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=[])).brokers


def test_after_authentication_sasl_requests_get_34(sasl_broker) -> None:
    conn = _connect(sasl_broker)
    with conn:
        assert _authenticate(conn, ScramClient(ScramMechanism.SCRAM_SHA_512, "bob",
                                               "bob-secret")).error_code == 0
        again = conn.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b""))
        assert again.error_code == 34
        assert again.error_message == ("SaslAuthenticate request received after successful "
                                       "authentication")
        # no session lifetime on SCRAM here: a handshake is refused too
        handshake = conn.request(ApiKey.SASL_HANDSHAKE, 1,
                                 SaslHandshakeRequest(mechanism="SCRAM-SHA-512"))
        assert handshake.error_code == 34
        assert conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=[])).brokers


def test_reauthentication_on_the_same_connection(sasl_broker) -> None:
    """PLAIN on this listener has connections.max.reauth.ms=3000: a v1+ client learns the
    lifetime, re-authenticates on the same connection and goes on; a client that does not
    is closed at its first request after the session ended."""
    before = _auth_metrics(sasl_broker)
    conn = _connect(sasl_broker)
    with conn:
        first = _authenticate(conn, PlainClient("alice", "alice-secret"))
        assert first.error_code == 0 and 0 < first.session_lifetime_ms <= 3000
        time.sleep(1.1)  # Kafka ignores a re-authentication within a second of the last
        again = _authenticate(conn, PlainClient("alice", "alice-secret"))
        assert again.error_code == 0 and again.session_lifetime_ms > 0
        assert conn.request(ApiKey.METADATA, 9, MetadataRequest(topics=[])).brokers
        # another principal on the same connection is refused
        time.sleep(1.1)
        other = _authenticate(conn, PlainClient("admin", "admin-secret"))
        assert (other.error_code, other.error_message) == (
            58, "Cannot change principals during re-authentication from User.alice: "
                "User.admin")
        assert _closed(conn)
    conn = _connect(sasl_broker)
    with conn:  # nor may the mechanism change
        assert _authenticate(conn, PlainClient("alice", "alice-secret")).error_code == 0
        time.sleep(1.1)
        assert conn.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(
            mechanism="SCRAM-SHA-256")).error_code == 0
        refused = conn.request(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(
            auth_bytes=ScramClient(ScramMechanism.SCRAM_SHA_256, "bob",
                                   "bob-secret").initial_response()))
        assert (refused.error_code, refused.error_message) == (
            58, "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
                "re-authentication of mechanism 'PLAIN'")
        assert _closed(conn)
    conn = _connect(sasl_broker)
    with conn:
        assert _authenticate(conn, PlainClient("alice", "alice-secret"), version=0) \
            .error_code == 0
        time.sleep(3.3)
        conn.send(ApiKey.METADATA, 9, MetadataRequest(topics=[]))
        assert _closed(conn)
    after = _auth_metrics(sasl_broker)
    assert after["successful-reauthentication-total"] >= before[
        "successful-reauthentication-total"] + 1
    assert after["failed-reauthentication-total"] >= before["failed-reauthentication-total"] + 2
    assert after["expired-connections-killed-count"] >= before[
        "expired-connections-killed-count"] + 1
    _assert_still_serving(sasl_broker)


def _carol_logs_in(sasl_broker) -> bool:
    conn = _connect(sasl_broker)
    with conn:
        client = ScramClient(ScramMechanism.SCRAM_SHA_256, "carol", "carol-secret")
        return _authenticate(conn, client).error_code == 0


def _within(seconds: float, condition, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_a_scram_user_added_on_a_running_broker_logs_in_within_2_s(sasl_broker) -> None:
    zk = KafkaZkClient(sasl_broker["zk"])
    zk.start()
    try:
        zk.update_user_config("carol", lambda c: {**c, **_scram_config("carol-secret")})
        _within(2.0, lambda: _carol_logs_in(sasl_broker), "carol could not log in within 2 s")
        # deleted: new connections are refused
        zk.update_user_config("carol", lambda c: {k: v for k, v in c.items()
                                                  if not k.startswith("SCRAM-")})
        _within(2.0, lambda: not _carol_logs_in(sasl_broker),
                "carol could still log in after 2 s")
    finally:
        zk.close()


def _auth_metrics(sasl_broker) -> dict:
    url = (f"http://127.0.0.1:{sasl_broker['metrics_port']}/jmx?qry=kafka.server:"
           "type=socket-server-metrics,listener=SASL_PLAINTEXT,networkProcessor=0")
    with urlopen(url, timeout=10) as answer:
        (bean,) = json.load(answer)["beans"]
    return bean


def test_authentication_metrics(sasl_broker) -> None:
    """socket-server-metrics of the SASL listener count logins under Kafka's attribute
    names."""
    before = _auth_metrics(sasl_broker)
    conn = _connect(sasl_broker)
    with conn:
        client = ScramClient(ScramMechanism.SCRAM_SHA_512, "bob", "bob-secret")
        assert _authenticate(conn, client).error_code == 0
    conn = _connect(sasl_broker)
    with conn:
        assert _authenticate(conn, PlainClient("alice", "wrong")).error_code == 58
    after = _auth_metrics(sasl_broker)
    for name in ("successful-authentication-total", "failed-authentication-total",
                 "successful-authentication-no-reauth-total"):  # SCRAM: no session lifetime
        assert after[name] == before[name] + 1, name
    for name in ("successful-authentication-rate", "failed-authentication-rate",
                 "successful-reauthentication-total", "failed-reauthentication-total",
                 "successful-reauthentication-rate", "failed-reauthentication-rate",
                 "reauthentication-latency-avg", "reauthentication-latency-max",
                 "expired-connections-killed-count"):
        assert name in after, name
