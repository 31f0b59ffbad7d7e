"""Listener certificates rotate without a restart (KIP-226 dynamic listener TLS).

What an operator does with Kafka, done with unmodified clients against one broker process:
issue a new server certificate, then point the SSL listener at it with
`kafka-configs --bootstrap-server ... --entity-type brokers --entity-name 1 --alter
--add-config listener.name.ssl.ssl.keystore.location=...,
listener.name.ssl.ssl.keystore.password=...` (one argument, split here)
(IncrementalAlterConfigs on the BROKER resource "1"; confluent-kafka's AdminClient sends
the same request). New TLS connections get the new certificate at once, connections opened
before keep working, the process is never restarted. A key store the broker cannot use
(wrong password, another subject or other SubjectAltNames, a missing file) is refused with
INVALID_REQUEST before anything reaches ZooKeeper, as Kafka's DynamicBrokerConfig.validate
(SslFactory.validateReconfiguration) does, and the current certificate stays in use.
"""

from __future__ import annotations

import socket
import ssl
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from tls_material import SERVER_NAMES, SERVER_SUBJECT, TlsMaterial, make_tls_material

from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.metadata_request import MetadataRequest

SECRET = "rotation-test-encoder-secret"
LOCATION = "listener.name.ssl.ssl.keystore.location"
PASSWORD = "listener.name.ssl.ssl.keystore.password"
TIMEOUT = 15


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls-rotation"))


@pytest.fixture(scope="module")
def ssl_broker(tmp_path_factory, zk_ensemble, tls: TlsMaterial) -> Iterator[tuple]:
    """A broker with PLAINTEXT and SSL listeners (mutual TLS on SSL), the static key store
    in server.properties and a password encoder secret (dynamic passwords are stored
    encrypted in ZooKeeper)."""
    plain, secure = free_port(), free_port()
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(tls.server_p12),
        "ssl.keystore.password": tls.store_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca_cert),
        "ssl.client.auth": "required",
        "password.encoder.secret": SECRET,
        "num.partitions": "1",
    }
    broker = BrokerProcess(str(tmp_path_factory.mktemp("tls-rotation-broker")), 1,
                           zk_ensemble.connect_string + f"/rotation-{uuid.uuid4().hex[:8]}",
                           port=plain, properties=props)
    broker.start()
    yield broker, f"127.0.0.1:{secure}"
    assert broker.stop() == 0, broker.tail()


# --- helpers -------------------------------------------------------------------------


def client_context(tls: TlsMaterial) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    return context


def peer_serial(sock: ssl.SSLSocket) -> int:
    der = sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def served_serial(bootstrap: str, tls: TlsMaterial) -> int:
    """The serial number of the certificate a NEW TLS connection to the listener gets."""
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as raw, \
            client_context(tls).wrap_socket(raw, server_hostname=host) as conn:
        return peer_serial(conn)


def new_keystore(tls: TlsMaterial, name: str, password: str,
                 subject: tuple[tuple[str, str], ...] = SERVER_SUBJECT,
                 sans: tuple[str, ...] = SERVER_NAMES, path: Path | None = None
                 ) -> tuple[Path, int]:
    """A new key and server certificate signed by the same CA, as a PKCS12 key store
    (what keytool or openssl pkcs12 -export writes): (file, certificate serial)."""
    key_path, cert_path = tls.issue(name, subject, sans, server=True)
    key = serialization.load_pem_private_key(key_path.read_bytes(), None)
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    ca = x509.load_pem_x509_certificate(tls.ca_cert.read_bytes())
    target = path or tls.directory / f"{name}.p12"
    target.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", key, cert, [ca],  # type: ignore[arg-type]
        serialization.BestAvailableEncryption(password.encode())))
    return target, cert.serial_number


def admin_client(bootstrap: str, tls: TlsMaterial) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, **tls.confluent_config()})


def alter_keystore(admin: Any, location: Path | str, password: str,
                   validate_only: bool = False) -> None:
    """kafka-configs --entity-type brokers --entity-name 1 --alter --add-config
    listener.name.ssl.ssl.keystore.location=...,listener.name.ssl.ssl.keystore.password=...
    (IncrementalAlterConfigs SET). Raises KafkaException when the broker refuses."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    resource = ConfigResource("BROKER", "1", incremental_configs=[
        ConfigEntry(LOCATION, str(location), incremental_operation=AlterConfigOpType.SET),
        ConfigEntry(PASSWORD, password, incremental_operation=AlterConfigOpType.SET)])
    futures = admin.incremental_alter_configs([resource], validate_only=validate_only,
                                              request_timeout=TIMEOUT)
    futures[resource].result(timeout=TIMEOUT)


def refused(call: Any) -> tuple[int, str]:
    """(error code, message) of an AdminClient call the broker must refuse."""
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as info:
        call()
    error = info.value.args[0]
    return error.code(), error.str()


def broker_configs(admin: Any) -> dict[str, Any]:
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource("BROKER", "1")
    return admin.describe_configs([resource], request_timeout=TIMEOUT)[resource].result(
        timeout=TIMEOUT)


def produce(common: dict[str, str], producer: Any, topic: str, values: list[bytes]) -> None:
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(TIMEOUT) == 0


def consume(common: dict[str, str], topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({**common, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        return got
    finally:
        consumer.close()


# --- tests ---------------------------------------------------------------------------


def test_listener_certificate_rotates_without_restart(ssl_broker, tls: TlsMaterial) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import ConfigSource

    broker, bootstrap = ssl_broker
    pid = broker.pid()
    assert pid is not None
    original = x509.load_pem_x509_certificate(tls.server_cert.read_bytes())
    old_serial = served_serial(bootstrap, tls)
    assert old_serial == original.serial_number

    common = {"bootstrap.servers": bootstrap, **tls.confluent_config()}
    topic = f"rotation-{uuid.uuid4().hex[:6]}"
    # a producer and a raw connection opened before the rotation, kept across it
    producer = Producer(common)
    produce(common, producer, topic, [f"before-{i}".encode() for i in range(5)])
    host, port = bootstrap.split(":")
    with BlockingConnection(host, int(port), ssl_context=client_context(tls),
                            timeout=TIMEOUT) as old_conn:
        assert peer_serial(old_conn.sock) == old_serial  # type: ignore[arg-type]

        # the new certificate: same subject and SANs, new key and serial, same CA
        new_path, new_serial = new_keystore(tls, "rotated", "rotated-secret")
        assert new_serial != old_serial
        admin = admin_client(bootstrap, tls)
        alter_keystore(admin, new_path, "rotated-secret")

        # applied when the response arrives: a new connection gets the new certificate
        assert served_serial(bootstrap, tls) == new_serial
        # the connection opened before keeps its session (old certificate) and works
        response = old_conn.request(3, 1, MetadataRequest(topics=[]))
        assert [b.node_id for b in response.brokers] == [1]
        assert peer_serial(old_conn.sock) == old_serial  # type: ignore[arg-type]

    # the producer's connections survive; a consumer connecting now reads everything
    produce(common, producer, topic, [f"after-{i}".encode() for i in range(5)])
    assert consume(common, topic, 10) == (
        [f"before-{i}".encode() for i in range(5)] + [f"after-{i}".encode() for i in range(5)])

    # what kafka-configs --describe shows: the per-broker dynamic value, password hidden
    configs = broker_configs(admin)
    assert configs[LOCATION].value == str(new_path)
    assert configs[LOCATION].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert configs[PASSWORD].is_sensitive and configs[PASSWORD].value is None

    # Kafka's other way: replace the file in place and name it again (reloaded although
    # the config value did not change)
    _, third_serial = new_keystore(tls, "rotated-again", "rotated-secret", path=new_path)
    alter_keystore(admin, new_path, "rotated-secret")
    assert served_serial(bootstrap, tls) == third_serial
    produce(common, producer, topic, [b"third"])
    assert consume(common, topic, 11)[-1] == b"third"

    # never restarted
    assert broker.pid() == pid and broker.process.poll() is None


def test_unusable_key_stores_are_refused_and_the_certificate_stays(
        ssl_broker, tls: TlsMaterial) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import ConfigResource

    broker, bootstrap = ssl_broker
    pid = broker.pid()
    admin = admin_client(bootstrap, tls)
    # a known starting point (this test may run alone)
    start_path, current = new_keystore(tls, "refusal-start", "start-secret")
    alter_keystore(admin, start_path, "start-secret")
    assert served_serial(bootstrap, tls) == current

    # wrong password
    path, _ = new_keystore(tls, "wrong-password", "right-secret")
    code, message = refused(lambda: alter_keystore(admin, path, "wrong-secret"))
    assert code == KafkaError.INVALID_REQUEST
    assert PASSWORD in message and "wrong password" in message

    # another subject (Kafka: only with ssl.allow.dn.changes)
    other = (("C", "US"), ("O", "acme"), ("OU", "brokers"), ("CN", "impostor"))
    path, _ = new_keystore(tls, "other-subject", "other-secret", subject=other)
    code, message = refused(lambda: alter_keystore(admin, path, "other-secret"))
    assert code == KafkaError.INVALID_REQUEST
    assert LOCATION in message and "ssl.allow.dn.changes" in message

    # the same through the legacy AlterConfigs (which replaces the whole override set)
    resource = ConfigResource("BROKER", "1", set_config={LOCATION: str(path),
                                                          PASSWORD: "other-secret"})

    def legacy_alter() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            futures = admin.alter_configs([resource], request_timeout=TIMEOUT)
        futures[resource].result(timeout=TIMEOUT)

    code, message = refused(legacy_alter)
    assert code == KafkaError.INVALID_REQUEST and "ssl.allow.dn.changes" in message

    # other SubjectAltNames (Kafka: only with ssl.allow.san.changes)
    path, _ = new_keystore(tls, "other-sans", "sans-secret", sans=("localhost",))
    code, message = refused(lambda: alter_keystore(admin, path, "sans-secret"))
    assert code == KafkaError.INVALID_REQUEST and "ssl.allow.san.changes" in message

    # a file that does not exist
    code, message = refused(lambda: alter_keystore(admin, tls.directory / "missing.p12",
                                                   "start-secret"))
    assert code == KafkaError.INVALID_REQUEST and "missing.p12" in message

    # validate_only with a good key store: accepted, nothing changes
    path, unused_serial = new_keystore(tls, "validate-only", "vo-secret")
    alter_keystore(admin, path, "vo-secret", validate_only=True)

    # nothing reached ZooKeeper, the listener still serves the same certificate
    assert broker_configs(admin)[LOCATION].value == str(start_path)
    assert served_serial(bootstrap, tls) == current != unused_serial
    common = {"bootstrap.servers": bootstrap, **tls.confluent_config()}
    from confluent_kafka import Producer

    topic = f"after-refusals-{uuid.uuid4().hex[:6]}"
    produce(common, Producer(common), topic, [b"still-serving"])
    assert consume(common, topic, 1) == [b"still-serving"]
    assert broker.pid() == pid and broker.process.poll() is None


def test_rotated_certificate_survives_a_restart(ssl_broker, tls: TlsMaterial) -> None:
    """The dynamic key store lives in /config/brokers/1: a restarted broker serves the
    rotated certificate, not the one server.properties names (Kafka applies the dynamic
    configs before its listeners start)."""
    broker, bootstrap = ssl_broker
    admin = admin_client(bootstrap, tls)
    path, serial = new_keystore(tls, "before-restart", "restart-secret")
    alter_keystore(admin, path, "restart-secret")
    assert served_serial(bootstrap, tls) == serial
    assert broker.stop() == 0, broker.tail()
    broker.start()
    assert served_serial(bootstrap, tls) == serial
