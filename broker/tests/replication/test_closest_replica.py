"""Fetching from the closest replica (KIP-392): brokers in racks r1, r2, r3 with Kafka's
RackAwareReplicaSelector; librdkafka consumers with `client.rack` read from the replica
in their rack (librdkafka's statistics name the broker each partition is fetched from),
and from the leader when their rack holds none."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from moldau.server.config import RACK_AWARE_SELECTOR

from .conftest import Cluster, make_cluster, running

RECORDS = 300


@pytest.fixture(scope="module")
def racked(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[Cluster]:
    with running(make_cluster(tmp_path_factory, zk_ensemble, racks={1: "r1", 2: "r2", 3: "r3"},
                              **{"replica.selector.class": RACK_AWARE_SELECTOR})) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def topic(racked: Cluster) -> str:
    name = f"racks-{uuid.uuid4().hex[:8]}"
    admin = racked.admin()  # held until the answer: its destruction fails the future
    admin.create_topics([NewTopic(name, 1, replica_assignment=[[1, 2, 3]])])[name].result(30)
    racked.wait_for(lambda: sorted(racked.partitions(name)[0].isrs) == [1, 2, 3], 30,
                    "a full ISR")
    producer = Producer({"bootstrap.servers": racked.bootstrap, "acks": "all"})
    for i in range(RECORDS):
        producer.produce(name, value=b"r%d" % i, partition=0)
    assert producer.flush(20) == 0
    return name


def consume_in_rack(cluster: Cluster, topic: str, rack: str) -> tuple[list[bytes], int, int]:
    """Read the partition as a consumer in `rack`: (values, leader, broker fetched from),
    the last two from the client's own statistics."""
    seen: dict[str, int] = {}

    def on_stats(text: str) -> None:
        partition = json.loads(text)["topics"].get(topic, {}).get("partitions", {}).get("0")
        if partition:
            seen.update(leader=partition["leader"], broker=partition["broker"])

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{rack}",
                         "client.rack": rack, "enable.auto.commit": False,
                         "statistics.interval.ms": 200, "stats_cb": on_stats})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < RECORDS and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(message.value())
        settle = time.monotonic() + 1.0  # one more statistics round after the last fetch
        while time.monotonic() < settle:
            consumer.poll(0.2)
        return values, seen.get("leader", -1), seen.get("broker", -1)
    finally:
        consumer.close()


def test_a_consumer_reads_from_the_replica_in_its_rack(racked: Cluster, topic: str) -> None:
    values, leader, broker = consume_in_rack(racked, topic, "r3")
    assert values == [b"r%d" % i for i in range(RECORDS)]
    assert (leader, broker) == (1, 3)


def test_a_consumer_in_the_leaders_rack_or_in_no_replicas_rack_reads_from_the_leader(
        racked: Cluster, topic: str) -> None:
    for rack in ("r1", "elsewhere"):
        values, leader, broker = consume_in_rack(racked, topic, rack)
        assert len(values) == RECORDS, rack
        assert (leader, broker) == (1, 1), rack
