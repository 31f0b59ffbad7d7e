"""Small helpers around confluent-kafka for the tests: topics, producing known records,
reading a topic back whole."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


def topic_name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)
    _wait_partitions(admin, name, partitions)


def add_partitions(bootstrap: str, name: str, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_partitions([NewPartitions(name, total)])[name].result(60)
    _wait_partitions(admin, name, total)


def _wait_partitions(admin: AdminClient, name: str, count: int) -> None:
    # Producing to an explicit partition needs it in the metadata, with a leader.
    def ready() -> bool:
        topic = admin.list_topics(name, timeout=10).topics[name]
        return len(topic.partitions) == count and all(
            p.leader >= 0 for p in topic.partitions.values())

    wait_until(ready, f"{name} has {count} partitions with leaders")


def produce(bootstrap: str, topic: str, records: Iterable[tuple[int, bytes | None, bytes]],
            headers: list[tuple[str, bytes]] | None = None,
            timestamp: int | None = None) -> None:
    """records: (partition, key, value)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    for partition, key, value in records:
        extra = {"timestamp": timestamp} if timestamp is not None else {}
        producer.produce(topic, value, key, partition=partition, headers=headers, **extra)
    assert producer.flush(60) == 0


def read_all(bootstrap: str, topic: str, timeout: float = 60.0) -> list:
    """Every record of every partition, from the log start to the end as it is now."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name("check"),
                         "enable.auto.commit": False})
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    ends = {}
    for p in meta.partitions:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        if high > low:
            ends[p] = high
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    got = []
    deadline = time.monotonic() + timeout
    done: set[int] = set()
    while len(done) < len(ends):
        assert time.monotonic() < deadline, f"reading {topic} timed out"
        for message in consumer.consume(1000, 1.0):
            assert message.error() is None, message.error()
            got.append(message)
            if message.offset() + 1 >= ends[message.partition()]:
                done.add(message.partition())
    consumer.close()
    return got


def wait_until(check: Callable[[], object], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting until {what}")
        time.sleep(0.2)
