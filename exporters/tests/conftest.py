"""Fixtures of the exporter suite: the real ZooKeeper ensemble of the broker tests and one
real Moldau broker serving its metrics endpoint."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "broker" / "tests"))

from zk_fixtures import zk_ensemble  # noqa: E402, F401  (the real ZooKeeper ensemble)

from moldau.devcluster.brokers import BrokerProcess, free_port  # noqa: E402


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory,
           zk_ensemble) -> Iterator[tuple[BrokerProcess, int]]:  # noqa: F811
    port = free_port()
    process = BrokerProcess(str(tmp_path_factory.mktemp("broker")), 1,
                            zk_ensemble.connect_string + f"/exporters-{uuid.uuid4().hex[:8]}",
                            properties={"num.partitions": "1",
                                        "offsets.topic.replication.factor": "1"},
                            env={"MOLDAU_METRICS_PORT": str(port)})
    process.start(wait=60)
    yield process, port
    assert process.stop() == 0


@pytest.fixture(scope="session")
def served(broker: tuple[BrokerProcess, int], zk_ensemble) -> set[str]:  # noqa: F811
    """Every name one real scrape of the three exporters serves: the broker exporter over
    the real broker (after a produce and a committed consumer group, so the per-topic and
    per-group names exist), the lag exporter over it, the ZooKeeper exporter over a member
    of the real ensemble."""
    import time

    from confluent_kafka import Consumer, Producer
    from moldau_exporters.broker_exporter import default_rules, scrape
    from moldau_exporters.lag_exporter import collect
    from moldau_exporters.zookeeper_exporter import (
        four_letter_word,
        parse_conf,
        parse_mntr,
        samples_from,
    )

    process, metrics_port = broker
    config = {"bootstrap.servers": process.bootstrap}
    topic, group = f"served-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    producer = Producer({**config, "acks": "all"})
    producer.produce(topic, b"one")
    assert producer.flush(20) == 0
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    message = None
    while message is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
    assert message is not None and not message.error()
    consumer.commit(message=message, asynchronous=False)
    try:
        text = scrape(f"http://127.0.0.1:{metrics_port}", default_rules())
        names = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
                 if line and not line.startswith("#")}
        names |= {s.name for s in collect(config)}
    finally:
        consumer.close()
    port = zk_ensemble.client_ports[0]
    server_id = parse_conf(four_letter_word("127.0.0.1", port, "conf"))["serverId"]
    names |= {s.name for s in samples_from(
        parse_mntr(four_letter_word("127.0.0.1", port, "mntr")), server_id, native=False)}
    return names
