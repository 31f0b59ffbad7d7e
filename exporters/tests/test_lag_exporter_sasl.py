"""The lag exporter over SASL, as roles/exporters runs it on a cluster whose clients log in:
the installed `moldau-lag-exporter` with its login in a `--client-config` file reads a
real broker's SASL_PLAINTEXT listener (PLAIN from the JAAS line, SCRAM-SHA-512 from the
credential in ZooKeeper) while the broker runs Kafka's AclAuthorizer and the exporter's
user holds only the ACLs the role grants it (Describe on every topic and every group),
and serves a consumer group's lag; its password is not on its command line. A wrong
password reports the cluster down; a user without those ACLs sees no group."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from moldau_exporters import lag_exporter
from moldau_exporters.client_config import client_config
from moldau_exporters.lag_exporter import UP, scrape_samples

from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.security.sasl.scram_credentials import ScramMechanism, derive_credential

EXPORTER = str(Path(sys.executable).parent / "moldau-lag-exporter")
USER, PASSWORD = "moldau-lag-exporter", "lag-Exporter-pw-7"
NO_ACLS, NO_ACLS_PASSWORD = "nobody", "nobody-pw"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              f'user_{USER}="{PASSWORD}" user_{NO_ACLS}="{NO_ACLS_PASSWORD}";')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[dict[str, str]]:
    """One broker with the authorizer on, PLAINTEXT for the test's own super user, and
    SASL_PLAINTEXT with PLAIN and SCRAM-SHA-512; a topic with a group that committed 3 of
    its 5 records, and the exporter's ACLs."""
    chroot = f"/lag-sasl-{uuid.uuid4().hex[:8]}"
    zk = KafkaZkClient(zk_ensemble.connect_string + chroot)
    zk.start()
    try:
        zk.ensure_path("/config/users")
        credential = derive_credential(ScramMechanism.SCRAM_SHA_512, PASSWORD, 4096)
        zk.update_user_config(USER, lambda c: {**c, "SCRAM-SHA-512": credential.to_config_value()})
    finally:
        zk.close()
    plain, sasl = free_port(), free_port()
    broker = BrokerProcess(str(tmp_path_factory.mktemp("lag-sasl")), 1,
                           zk_ensemble.connect_string + chroot, port=plain, properties={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener: this test's setup
        "num.partitions": "1", "offsets.topic.replication.factor": "1"})
    broker.start(wait=60)
    try:
        topic, group = f"lag-sasl-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        config = {"bootstrap.servers": broker.bootstrap}
        admin = AdminClient(config)
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        # what roles/access grants the exporter's user (roles/access/defaults/main.yml)
        for resource in (ResourceType.TOPIC, ResourceType.GROUP):
            binding = AclBinding(resource, "*", ResourcePatternType.LITERAL, f"User:{USER}",
                                 "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
            admin.create_acls([binding])[binding].result(30)
        producer = Producer({**config, "acks": "all"})
        for i in range(5):
            producer.produce(topic, b"%d" % i)
        assert producer.flush(20) == 0
        consumer = Consumer({**config, "group.id": group, "enable.auto.commit": False,
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        read, deadline = 0, time.monotonic() + 30
        while read < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                read += 1
                if read == 3:
                    consumer.commit(message=message, asynchronous=False)
        consumer.close()
        assert read == 3
        yield {"sasl": f"127.0.0.1:{sasl}", "topic": topic, "group": group}
    finally:
        assert broker.stop() == 0, broker.tail()


def login_file(tmp_path: Path, mechanism: str, user: str = USER,
               password: str = PASSWORD) -> str:
    path = tmp_path / f"{mechanism}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={mechanism}\nsasl.username={user}\nsasl.password={password}\n"
                    "socket.connection.setup.timeout.ms=5000\n", encoding="utf-8")
    path.chmod(0o600)
    return str(path)


def lag_line(text: str, group: str, topic: str) -> str | None:
    prefix = f'kafka_consumergroup_lag{{consumergroup="{group}",partition="0",topic="{topic}"}} '
    return next((line for line in text.splitlines() if line.startswith(prefix)), None)


def test_the_installed_exporter_logs_in_from_its_file(cluster: dict[str, str],
                                                      tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [EXPORTER, "--bootstrap-server", cluster["sasl"], "--listen", f"127.0.0.1:{port}",
         "--client-config", login_file(tmp_path, "SCRAM-SHA-512")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        assert PASSWORD.encode() not in Path(f"/proc/{process.pid}/cmdline").read_bytes()
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                            timeout=30) as response:
                    text = response.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(10)
    assert f"{UP} 1.0" in text.splitlines(), text[-2000:]
    assert lag_line(text, cluster["group"], cluster["topic"]) is not None, text[-3000:]
    assert lag_line(text, cluster["group"], cluster["topic"]).endswith(" 2.0")  # type: ignore[union-attr]


def values(samples: list, name: str, **labels: str) -> list[float]:
    wanted = set(labels.items())
    return [s.value for s in samples if s.name == name and wanted <= set(s.labels)]


def test_plain_login_reads_the_lag_too(cluster: dict[str, str], tmp_path: Path) -> None:
    samples = scrape_samples(client_config(cluster["sasl"], login_file(tmp_path, "PLAIN"), []))
    assert values(samples, UP) == [1.0]
    assert values(samples, "kafka_consumergroup_lag", consumergroup=cluster["group"],
                  topic=cluster["topic"]) == [2.0]


def test_a_user_without_the_acls_sees_no_group(cluster: dict[str, str], tmp_path: Path) -> None:
    samples = scrape_samples(client_config(
        cluster["sasl"], login_file(tmp_path, "PLAIN", NO_ACLS, NO_ACLS_PASSWORD), []))
    assert values(samples, UP) == [1.0]
    assert values(samples, "kafka_topic_partitions", topic=cluster["topic"]) == []
    assert values(samples, "kafka_consumergroup_lag", consumergroup=cluster["group"]) == []


def test_a_wrong_password_reports_the_cluster_down(cluster: dict[str, str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # librdkafka retries a refused login until the request times out: a shorter wait
    monkeypatch.setattr(lag_exporter, "TIMEOUT_S", 2.0)
    config = client_config(cluster["sasl"], login_file(tmp_path, "SCRAM-SHA-512",
                                                       password="not-the-password"), [])
    assert values(scrape_samples(config), UP) == [0.0]
