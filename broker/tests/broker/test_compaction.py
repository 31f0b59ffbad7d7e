"""Log compaction in a running broker: the cleaner threads (log.cleaner.threads) compact a
`cleanup.policy=compact` topic produced with a real client, while the broker keeps
serving, and consumers then read the latest value of every key at its original offset."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .conftest import start_broker
from .raw import topic_name, wait_until

KEYS = 8
ROUNDS = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory, zk_ensemble) -> Iterator[Any]:
    process = start_broker(tmp_path_factory, zk_ensemble.connect_string, {
        "num.partitions": "1",
        "log.cleaner.threads": "2",
        "log.cleaner.backoff.ms": "200",
    })
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM\n{process.tail()}"


def read_from_start(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name("check"),
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes, bytes]] = []
    try:
        while not got or got[-1][0] < end - 1:
            messages = consumer.consume(500, 10.0)
            assert messages, f"no records after offset {got[-1][0] if got else None}"
            for m in messages:
                assert m.error() is None, m.error()
                got.append((m.offset(), m.key(), m.value()))
    finally:
        consumer.close()
    return got


def test_a_compacted_topic_keeps_the_latest_value_per_key(broker) -> None:
    topic = topic_name("compacted")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01"})])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "acks": "all"})
    for round_ in range(ROUNDS):
        for key in range(KEYS):
            producer.produce(topic, key=b"key-%d" % key, value=b"round-%d" % round_ + b"." * 50)
        producer.flush(30)
    end = ROUNDS * KEYS
    latest = {b"key-%d" % k: (end - KEYS + k, b"round-%d" % (ROUNDS - 1) + b"." * 50)
              for k in range(KEYS)}

    def compacted() -> list[tuple[int, bytes, bytes]] | None:
        records = read_from_start(broker.bootstrap, topic, end)
        return records if len(records) < end // 2 else None

    records = wait_until(compacted, timeout=60)
    assert records, "the cleaner did not compact the topic within 60 s"
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)) and offsets[-1] == end - 1  # offsets kept
    for key, (offset, value) in latest.items():
        assert (offset, key, value) in records  # every key's latest record survives
    seen: dict[bytes, int] = {}
    for offset, key, _ in records:
        seen[key] = offset
    assert {k: o for k, (o, _) in latest.items()} == seen
    # The broker kept serving through the passes: a new record is produced and read.
    producer.produce(topic, key=b"key-0", value=b"after")
    assert producer.flush(30) == 0
    assert read_from_start(broker.bootstrap, topic, end + 1)[-1] == (end, b"key-0", b"after")
