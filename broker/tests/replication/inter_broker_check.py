"""What an inter-broker security test asserts once its two brokers run: a topic of RF 2
created through the controller, acks=all records (the follower fetched them), both
replicas in the ISR, and no failed authentication in either broker's log."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.devcluster.brokers import BrokerProcess


def assert_two_brokers_replicate(brokers: list[BrokerProcess], bootstrap: str,
                                 prefix: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(50):
        producer.produce(topic, f"v{i}".encode())
    assert producer.flush(30) == 0  # acks=all: the follower fetched them
    deadline = time.monotonic() + 20
    while True:
        metadata = admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        if sorted(metadata.isrs) == [1, 2]:
            break
        assert time.monotonic() < deadline, f"ISR {metadata.isrs}"
        time.sleep(0.2)
    for broker in brokers:
        assert "Failed authentication" not in broker.tail(400)
