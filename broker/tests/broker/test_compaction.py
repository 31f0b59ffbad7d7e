"""Log compaction in a running broker: the cleaner threads (log.cleaner.threads) compact a
`cleanup.policy=compact` topic produced with a real client, while the broker keeps
serving, and consumers then read the latest value of every key at its original offset.
A transactional producer's aborted batches are removed and its committed records compacted
(read_committed consumers see the latest committed value of every key)."""

from __future__ import annotations

import time
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
        "transaction.state.log.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
    })
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM\n{process.tail()}"


def read_from_start(bootstrap: str, topic: str, end: int | None = None,
                    isolation: str = "read_uncommitted",
                    last_key: bytes | None = None) -> list[tuple[int, bytes, bytes]]:
    """Every record up to offset end - 1, or up to the one with last_key."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic_name("check"),
                         "enable.auto.commit": False, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes, bytes]] = []

    def done() -> bool:
        if last_key is not None:
            return bool(got) and got[-1][1] == last_key
        return bool(got) and end is not None and got[-1][0] >= end - 1

    deadline = time.monotonic() + 10.0
    try:
        while not done():
            # short polls: consume() waits its whole timeout unless it fills num_messages
            messages = consumer.consume(500, 0.2)
            if not messages:
                assert time.monotonic() < deadline, (
                    f"no records after offset {got[-1][0] if got else None}")
                continue
            deadline = time.monotonic() + 10.0
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


def test_aborted_transactions_are_removed_and_committed_ones_compacted(broker) -> None:
    topic = topic_name("compacted-txn")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01"})])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0,
                         "transactional.id": topic_name("txn")})
    producer.init_transactions(30)
    padding = b"." * 50
    committed: dict[bytes, bytes] = {}
    for round_ in range(ROUNDS):  # even rounds commit, odd ones abort: the last aborts
        producer.begin_transaction()
        for key in range(KEYS):
            producer.produce(topic, key=b"key-%d" % key, value=b"round-%d" % round_ + padding)
        if round_ % 2:
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed.update({b"key-%d" % k: b"round-%d" % round_ + padding
                              for k in range(KEYS)})
    producer.begin_transaction()  # a last committed record, so reads end on a known offset
    producer.produce(topic, key=b"last", value=b"last")
    producer.commit_transaction(30)
    committed[b"last"] = b"last"
    aborted = ROUNDS // 2 * KEYS

    def cleaned() -> list[tuple[int, bytes, bytes]] | None:
        records = read_from_start(broker.bootstrap, topic, last_key=b"last")
        left = sum(1 for _, k, v in records if k != b"last" and int(v[6:v.index(b".")]) % 2)
        return records if left < aborted // 2 else None  # the active segment keeps a few

    assert wait_until(cleaned, timeout=60), "the cleaner did not remove aborted batches in 60 s"
    records = read_from_start(broker.bootstrap, topic, None, "read_committed", b"last")
    latest = {key: value for _, key, value in records}
    assert latest == committed  # no aborted value hides a committed one
    assert len(records) < (ROUNDS // 2 + 1) * KEYS  # committed records were compacted too
