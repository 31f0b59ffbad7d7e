"""kafka-mirror-maker copies a topic from the package's cluster to a second, one-broker
cluster (its own ZooKeeper chroot) with nothing lost, then stops on SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from moldau.devcluster.brokers import BrokerProcess

from .toolrun import BIN, ToolCluster, die_with_parent, wait_for


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[BrokerProcess]:
    connect = zk_ensemble.connect_string + f"/mirror-{uuid.uuid4().hex[:12]}"
    broker = BrokerProcess(str(tmp_path_factory.mktemp("mirror-target")), 1, connect)
    broker.start()
    try:
        yield broker
    finally:
        assert broker.stop() == 0


def _values(bootstrap: str, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(300):
            message = consumer.poll(0.1)
            if message is not None and not message.error():
                values.append(message.value())
            if len(values) >= count:
                break
    finally:
        consumer.close()
    return values


def test_mirror_a_topic(cluster: ToolCluster, target: BrokerProcess, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    cluster.ok("kafka-topics.sh", "--create", "--topic", "mirrored", "--partitions", "2")
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    sent = [b"record-%d" % i for i in range(200)]
    for value in sent:
        producer.produce("mirrored", value=value)
    assert producer.flush(30) == 0
    source = tmp_path / "source.properties"
    source.write_text(f"bootstrap.servers={cluster.bootstrap}\ngroup.id=mirror-test\n")
    sink = tmp_path / "target.properties"
    sink.write_text(f"bootstrap.servers={target.bootstrap}\n")
    mirror = subprocess.Popen([str(BIN / "kafka-mirror-maker.sh"), "--consumer.config",
                               str(source), "--producer.config", str(sink), "--whitelist",
                               "mirrored"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              preexec_fn=die_with_parent)
    try:
        copied = wait_for(lambda: _enough(target.bootstrap, len(sent)), 90,
                          "the mirror to copy every record")
    finally:
        mirror.send_signal(signal.SIGTERM)
        try:
            _out, err = mirror.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            mirror.kill()
            raise
    assert mirror.returncode == 0, err
    assert sorted(set(copied)) == sorted(sent)  # nothing lost


def _enough(bootstrap: str, count: int) -> list[bytes] | None:
    values = _values(bootstrap, "mirrored", count)
    return values if len(set(values)) >= count else None
