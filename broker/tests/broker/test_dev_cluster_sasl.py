"""`moldau dev-cluster up --sasl ...` (issue 35): a SASL_SSL dev cluster whose printed
client.properties logs real clients in as the admin user.

The files first (no processes: the CA, the broker certificate, the admin password, the
client.properties format, the setting in cluster.json), then one real cluster (one
ZooKeeper node, one broker, SCRAM-SHA-256) shared by the rest of the module."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from moldau import properties as java_properties
from moldau.devcluster.brokers import free_port
from moldau.devcluster.cluster import DevCluster, DevClusterConfigError
from moldau.devcluster.sasl import DevSasl, format_properties
from moldau.devcluster.tls import DevTls, DevTlsError
from moldau.security.sasl.jaas import (
    client_credentials,
    parse_single_login_module,
    plain_users,
)
from moldau.security.stores import load_keystore


def moldau(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau.cli", *args], capture_output=True,
                          text=True, timeout=120)


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


# -- the files, without processes -------------------------------------------------------------


def test_tls_ca_made_once_and_broker_certificate_for_localhost(tmp_path: Path) -> None:
    tls = DevTls.under(tmp_path)
    tls.ensure()
    assert mode(tls.ca_key) == 0o600 and mode(tls.broker_keystore) == 0o600
    ca_pem = tls.ca_cert.read_bytes()
    ca = x509.load_pem_x509_certificate(ca_pem)
    # what the broker loads, read as Kafka reads a PEM key store (no password)
    material = load_keystore({"ssl.keystore.type": "PEM",
                              "ssl.keystore.location": str(tls.broker_keystore)})
    assert material is not None
    leaf = material.chain[0]
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert isinstance(material.key, ec.EllipticCurvePrivateKey)
    tls.ensure()  # again: clients that trust the CA keep trusting it
    assert tls.ca_cert.read_bytes() == ca_pem


def test_tls_keystore_without_its_ca_is_refused(tmp_path: Path) -> None:
    tls = DevTls.under(tmp_path)
    tls.ensure()
    tls.ca_key.unlink()
    with pytest.raises(DevTlsError, match=r"its CA \(.*\) is missing"):
        tls.ensure()


@pytest.mark.parametrize("choice,module", [
    ("scram-sha-512", "org.apache.kafka.common.security.scram.ScramLoginModule"),
    ("plain", "org.apache.kafka.common.security.plain.PlainLoginModule"),
])
def test_client_properties_in_kafka_format(tmp_path: Path, choice: str, module: str) -> None:
    sasl = DevSasl.from_choice(tmp_path, choice)
    sasl.prepare()
    password = sasl.admin_password()
    assert len(password) >= 24 and mode(sasl.admin_password_path) == 0o600
    sasl.prepare()
    assert sasl.admin_password() == password  # drawn once
    path = sasl.write_client_properties("127.0.0.1:9192")
    assert mode(path) == 0o600
    props = java_properties.load(path)
    assert props["security.protocol"] == "SASL_SSL"
    assert props["sasl.mechanism"] == choice.upper()
    assert props["ssl.truststore.type"] == "PEM"
    assert props["ssl.truststore.location"] == str(tmp_path / "tls" / "ca.pem")
    assert props["bootstrap.servers"] == "127.0.0.1:9192"
    entry = parse_single_login_module(props["sasl.jaas.config"])
    assert entry.login_module == module
    assert client_credentials(entry) == ("admin", password)
    broker = sasl.broker_properties(9092, 9192)
    assert broker["listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9192"
    assert broker["sasl.enabled.mechanisms"] == choice.upper()
    server_jaas = parse_single_login_module(
        broker[f"listener.name.sasl_ssl.{choice}.sasl.jaas.config"])
    # PLAIN: the admin user in the JAAS line; SCRAM: in ZooKeeper, nothing in the line
    assert plain_users(server_jaas) == ({"admin": password} if choice == "plain" else {})


def test_properties_escaping_reads_back() -> None:
    values = {"a": "C:\\dir\\ca.pem", "b": " leading space", "c": "naïve é 🙂",
              "d": 'x="y"; #not a comment'}
    assert java_properties.parse(format_properties(values, header="test")) == values


def test_sasl_setting_is_kept_and_a_different_one_refused(tmp_path: Path) -> None:
    directory = tmp_path / "dev"
    cluster = DevCluster.create(directory, first_port=40000, sasl="scram-sha-256")
    assert cluster.sasl_bootstrap_servers == "127.0.0.1:40100"
    state = json.loads((directory / "cluster.json").read_text())
    assert state["sasl"] == "SCRAM-SHA-256"
    assert state["brokers"] == [{"id": 1, "port": 40000, "sasl_port": 40100}]
    with pytest.raises(DevClusterConfigError,
                       match="created with --sasl scram-sha-256, not with --sasl plain"):
        DevCluster.create(directory, sasl="plain")
    plain = tmp_path / "plain"
    DevCluster.create(plain, first_port=40000)
    with pytest.raises(DevClusterConfigError, match="created without --sasl"):
        DevCluster.create(plain, sasl="plain")


def test_sasl_ports_overlapping_the_plaintext_ones_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DevClusterConfigError, match="overlap the PLAINTEXT ports"):
        DevCluster.create(tmp_path / "dev", brokers=3, first_port=40000, sasl="plain",
                          first_sasl_port=40002)
    assert not (tmp_path / "dev").exists()


# -- one real SASL_SSL cluster --------------------------------------------------------------


def _two_free_ports() -> tuple[int, int]:
    """A PLAINTEXT and a SASL_SSL port for the one broker."""
    while True:
        plain, sasl = free_port(), free_port()
        if plain != sasl:
            return plain, sasl


@pytest.fixture(scope="module")
def sasl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    directory = tmp_path_factory.mktemp("devsasl") / "dev"
    plain, sasl = _two_free_ports()
    up = moldau("dev-cluster", "up", "--dir", str(directory), "--port", str(plain),
                "--sasl", "scram-sha-256", "--sasl-port", str(sasl))
    try:
        assert up.returncode == 0, up.stderr
        yield {"dir": str(directory), "stdout": up.stdout, "sasl": f"127.0.0.1:{sasl}",
               "plain": f"127.0.0.1:{plain}"}
    finally:
        moldau("dev-cluster", "down", "--dir", str(directory))


def _printed_client_properties(stdout: str) -> Path:
    lines = [line for line in stdout.splitlines() if line.startswith("client properties: ")]
    assert len(lines) == 1, stdout
    return Path(lines[0].removeprefix("client properties: "))


def _confluent_settings(client_properties: Path, password: str | None = None
                        ) -> dict[str, str]:
    """Kafka's client properties as librdkafka names them (as an application would)."""
    props = java_properties.load(client_properties)
    credentials = client_credentials(parse_single_login_module(props["sasl.jaas.config"]))
    assert credentials is not None
    assert props["ssl.truststore.type"] == "PEM"
    return {"bootstrap.servers": props["bootstrap.servers"],
            "security.protocol": props["security.protocol"],
            "sasl.mechanism": props["sasl.mechanism"],
            "sasl.username": credentials[0],
            "sasl.password": credentials[1] if password is None else password,
            "ssl.ca.location": props["ssl.truststore.location"]}


def test_up_prints_the_sasl_bootstrap_and_client_properties(sasl_cluster) -> None:
    out = sasl_cluster["stdout"]
    assert "healthy" in out
    assert f"bootstrap servers: {sasl_cluster['plain']}" in out
    assert f"SASL_SSL bootstrap servers: {sasl_cluster['sasl']} (SCRAM-SHA-256, user admin)" \
        in out
    path = _printed_client_properties(out)
    assert path == Path(sasl_cluster["dir"]) / "client.properties"
    for private in (path, path.parent / "admin.password", path.parent / "tls" / "ca.key",
                    path.parent / "broker-1" / "server.properties"):
        assert mode(private) == 0o600, private
    assert java_properties.load(path)["bootstrap.servers"] == sasl_cluster["sasl"]


def test_confluent_kafka_round_trip_with_the_client_properties(sasl_cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    settings = _confluent_settings(_printed_client_properties(sasl_cluster["stdout"]))
    topic = f"dev-sasl-{uuid.uuid4().hex[:6]}"
    producer = Producer(settings)
    for i in range(5):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**settings, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(5)]


def test_a_wrong_password_is_refused(sasl_cluster) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    errors: list[KafkaError] = []
    settings = _confluent_settings(_printed_client_properties(sasl_cluster["stdout"]),
                                   password="not-the-password")
    admin = AdminClient({**settings, "error_cb": errors.append})
    deadline = time.monotonic() + 20
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)
    assert errors, "no error reported for a wrong password"
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors[0]
    assert "invalid credentials" in errors[0].str()


def test_kafka_topics_with_the_client_properties(sasl_cluster) -> None:
    client_properties = str(_printed_client_properties(sasl_cluster["stdout"]))
    topic = f"dev-sasl-tool-{uuid.uuid4().hex[:6]}"
    create = moldau("topics", "--bootstrap-server", sasl_cluster["sasl"],
                    "--command-config", client_properties, "--create", "--topic", topic)
    assert create.returncode == 0, create.stderr
    listed = moldau("topics", "--bootstrap-server", sasl_cluster["sasl"],
                    "--command-config", client_properties, "--list")
    assert listed.returncode == 0, listed.stderr
    assert topic in listed.stdout.split()


def test_up_again_keeps_sasl_and_refuses_another_mechanism(sasl_cluster) -> None:
    again = moldau("dev-cluster", "up", "--dir", sasl_cluster["dir"])
    assert again.returncode == 0, again.stderr
    assert f"SASL_SSL bootstrap servers: {sasl_cluster['sasl']}" in again.stdout
    other = moldau("dev-cluster", "up", "--dir", sasl_cluster["dir"], "--sasl", "plain")
    assert other.returncode == 2
    assert "was created with --sasl scram-sha-256, not with --sasl plain" in other.stderr
    status = moldau("dev-cluster", "status", "--dir", sasl_cluster["dir"])
    assert status.returncode == 0 and "healthy" in status.stdout
    assert _printed_client_properties(status.stdout) == \
        _printed_client_properties(sasl_cluster["stdout"])


def test_down_keeps_the_setting(sasl_cluster) -> None:
    """Last: `down`, then what `up` would start again still has SASL (cluster.json)."""
    down = moldau("dev-cluster", "down", "--dir", sasl_cluster["dir"])
    assert down.returncode == 0, down.stderr
    status = moldau("dev-cluster", "status", "--dir", sasl_cluster["dir"])
    assert "stopped" in status.stdout and "healthy" not in status.stdout
    assert f"SASL_SSL bootstrap servers: {sasl_cluster['sasl']}" in status.stdout
    assert DevCluster.load(sasl_cluster["dir"]).sasl == \
        DevSasl(Path(sasl_cluster["dir"]), "SCRAM-SHA-256")
