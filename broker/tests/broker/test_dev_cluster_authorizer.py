"""`moldau dev-cluster up --sasl scram-sha-512 --authorizer --brokers 2`: ACLs enforced as
in production. The brokers replicate over SASL_SSL as the admin (the super user); another
SCRAM user can do nothing until kafka-acls grants it; a PLAINTEXT client is
User:ANONYMOUS with no rights."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau import properties as java_properties
from moldau.devcluster.brokers import free_port
from moldau.security.sasl.jaas import client_credentials, parse_single_login_module


def moldau(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau.cli", *args], capture_output=True,
                          text=True, timeout=180, cwd=cwd)


def _free_block(size: int) -> int:
    """The first of `size` consecutive free ports (checked at the time of the call)."""
    for _ in range(50):
        first = free_port()
        ports = range(first, first + size)
        try:
            for port in ports:
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
    raise RuntimeError("no block of free ports")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    directory = tmp_path_factory.mktemp("devacl") / "dev"
    plain, sasl = _free_block(2), _free_block(2)
    up = moldau("dev-cluster", "up", "--dir", str(directory), "--brokers", "2",
                "--port", str(plain), "--sasl", "scram-sha-512", "--sasl-port", str(sasl),
                "--authorizer")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        properties = directory / "client.properties"
        props = java_properties.load(properties)
        credentials = client_credentials(parse_single_login_module(props["sasl.jaas.config"]))
        assert credentials is not None
        yield {"dir": str(directory), "stdout": up.stdout, "properties": str(properties),
               "sasl": props["bootstrap.servers"], "plain": f"127.0.0.1:{plain}",
               "ca": props["ssl.truststore.location"], "admin_password": credentials[1]}
    finally:
        moldau("dev-cluster", "down", "--dir", str(directory))


def _as(cluster: dict[str, str], user: str, password: str) -> dict[str, str]:
    return {"bootstrap.servers": cluster["sasl"], "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": password, "ssl.ca.location": cluster["ca"]}


def _produce(settings: dict[str, str], topic: str) -> KafkaError | None:
    """Produce one record; the delivery error, or None."""
    errors: list[KafkaError | None] = []
    producer = Producer({**settings, "message.timeout.ms": 10000, "acks": "all"})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    return errors[0] if errors else KafkaError(KafkaError._MSG_TIMED_OUT)


def _tool(cluster: dict[str, str], name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return moldau(name, "--bootstrap-server", cluster["sasl"], "--command-config",
                  cluster["properties"], *args)


def test_up_says_acls_are_enforced(cluster) -> None:
    assert "ACLs are enforced (AclAuthorizer); admin is the super user" in cluster["stdout"]


def test_admin_replicates_and_others_need_acls(cluster) -> None:
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    admin = _as(cluster, "admin", cluster["admin_password"])
    client = AdminClient(admin)  # kept until the future resolves (else _DESTROY)
    client.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)
    assert _produce(admin, topic) is None  # acks=all: the follower fetched over SASL_SSL
    created = _tool(cluster, "configs", "--alter", "--entity-type", "users", "--entity-name",
                    "bob", "--add-config", "SCRAM-SHA-512=[password=bob-secret]")
    assert created.returncode == 0, created.stdout + created.stderr
    bob = _as(cluster, "bob", "bob-secret")
    denied = None
    for _ in range(20):  # the credential reaches both brokers within a second or two
        denied = _produce(bob, topic)
        if denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            break
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    granted = _tool(cluster, "acls", "--add", "--allow-principal", "User:bob",
                    "--operation", "Write", "--topic", topic)
    assert granted.returncode == 0, granted.stdout + granted.stderr
    for _ in range(20):
        if _produce(bob, topic) is None:
            break
    else:
        pytest.fail("bob could not produce after the grant")


def test_plaintext_clients_are_anonymous_without_rights(cluster) -> None:
    anonymous = AdminClient({"bootstrap.servers": cluster["plain"]})
    topic = f"anon-{uuid.uuid4().hex[:6]}"
    with pytest.raises(KafkaException) as refused:
        anonymous.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    assert refused.value.args[0].code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                            KafkaError.CLUSTER_AUTHORIZATION_FAILED)


def test_authorizer_needs_sasl_and_is_kept(cluster, tmp_path: Path) -> None:
    refused = moldau("dev-cluster", "up", "--dir", str(tmp_path / "x"), "--authorizer")
    assert refused.returncode == 2 and "--authorizer needs --sasl" in refused.stderr
    status = moldau("dev-cluster", "status", "--dir", cluster["dir"])
    assert "ACLs are enforced" in status.stdout
