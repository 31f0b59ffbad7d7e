"""A confluent-kafka round trip for the authentication tests: n records produced to a
one-partition topic and read back from its start."""

from __future__ import annotations

import time
from typing import Any


def confluent_round_trip(producer_config: dict[str, Any], consumer_config: dict[str, Any],
                         topic: str, n: int = 10) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer(producer_config)
    for i in range(n):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**consumer_config, "group.id": f"g-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    return got
