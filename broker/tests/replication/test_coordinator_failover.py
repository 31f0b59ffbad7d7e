"""Group coordinators move with the leadership of their __consumer_offsets partition: when
the coordinator of a group is killed, another broker takes the group over with the
committed offsets, and the group's consumers go on from them."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .conftest import Cluster


def coordinator_of(cluster: Cluster, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(20)
    return description.coordinator.id


def test_committed_offsets_survive_the_coordinators_death(cluster: Cluster) -> None:
    cluster.ensure_all_running()
    topic = cluster.create_topic("coordinated", partitions=2)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(200):
        producer.produce(topic, value=b"v%d" % i, partition=i % 2)
    assert producer.flush(20) == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    # a short session: should the group record of the member's leave not have reached
    # the new coordinator, the stale member expires soon (as it would in Kafka)
    config = {"bootstrap.servers": cluster.bootstrap, "group.id": group,
              "enable.auto.commit": False, "auto.offset.reset": "earliest",
              "session.timeout.ms": 8000}
    consumer = Consumer(config)
    consumer.subscribe([topic])
    read = 0
    deadline = time.monotonic() + 30
    while read < 120 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            read += 1
    consumer.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in consumer.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)}
    consumer.close()
    assert sum(committed.values()) == read

    old = coordinator_of(cluster, group)
    cluster.brokers[old].kill()
    try:
        cluster.wait_for(lambda: coordinator_of(cluster, group) not in (old, -1), 30,
                         "another broker coordinating the group")
        again = Consumer(config)
        found = {tp.partition: tp.offset for tp in again.committed(
            [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=20)}
        assert found == committed
        again.subscribe([topic])
        rest = 0
        deadline = time.monotonic() + 45
        while rest < 200 - read and time.monotonic() < deadline:
            message = again.poll(0.5)
            if message is not None and not message.error():
                rest += 1
        again.close()
        assert rest == 200 - read  # the group went on from its committed offsets
    finally:
        cluster.ensure_all_running()
