"""The stream writer's tail scan against a real broker (no Spark needed): it finds
exactly the records one (query, batch, task) already wrote, however far back they go,
among other tasks', other batches' and other writers' records."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import Producer
from kafka_helpers import create_topic, topic_name

from moldau_spark import replay
from moldau_spark.replay import Mark


def write(bootstrap: str, topic: str, mark: Mark | None, values: list[bytes],
          partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    headers = [("user", b"h")] + (mark.headers() if mark else [])
    for value in values:
        producer.produce(topic, value, b"k", partition=partition, headers=headers)
    assert producer.flush(60) == 0


@pytest.fixture(scope="module")
def written(broker) -> str:
    topic = topic_name("replay")
    create_topic(broker.bootstrap, topic, 2)
    b = broker.bootstrap
    write(b, topic, Mark("q1", 4, 0), [b"old"] * 3)
    write(b, topic, Mark("q1", 5, 0), [b"a"] * 700 + [b"b"] * 800)  # past two scan windows
    write(b, topic, Mark("q1", 5, 1), [b"a"] * 50)  # another task of the same batch
    write(b, topic, Mark("q2", 5, 0), [b"a"] * 40)  # another query
    write(b, topic, None, [b"a"] * 30)  # somebody else's records
    write(b, topic, Mark("q1", 5, 0), [b"c"] * 2, partition=1)
    return topic


def test_finds_every_record_of_the_batch_and_task(broker, written) -> None:
    found = replay.already_written({"bootstrap.servers": broker.bootstrap}, [written],
                                   Mark("q1", 5, 0), 1_000_000)
    user = (("user", b"h"),)
    assert found == {(written, b"k", b"a", user): 700, (written, b"k", b"b", user): 800,
                     (written, b"k", b"c", user): 2}


def test_a_new_batch_finds_nothing_and_missing_topics_are_skipped(broker, written) -> None:
    config = {"bootstrap.servers": broker.bootstrap}
    assert not replay.already_written(config, [written], Mark("q1", 6, 0), 1_000_000)
    assert not replay.already_written(config, [topic_name("absent")], Mark("q1", 0, 0), 10)


def test_scan_limit_stops_with_a_warning(broker, written, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="moldau_spark"):
        found = replay.already_written({"bootstrap.servers": broker.bootstrap}, [written],
                                       Mark("q1", 5, 0), 100)
    # Partition 0 holds 1623 records; the first window (its last 512) is all that is read:
    # 392 of the 800 b's. Partition 1 is read whole (two records).
    user = (("user", b"h"),)
    assert found == {(written, b"k", b"b", user): 392, (written, b"k", b"c", user): 2}
    assert "replay scan stopped after 512 records" in caplog.text
