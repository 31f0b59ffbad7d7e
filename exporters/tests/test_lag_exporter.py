"""The lag exporter against a real broker and a real consumer group: after a group reads
60 of 100 records and commits, kafka_exporter's names report the offsets and a lag of
40, and every name served is one kafka_exporter serves (tests/data, copied from
the project's metric-name reference lists)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import NewTopic
from moldau_exporters.exposition import exposition
from moldau_exporters.lag_exporter import UP, collect, scrape

REFERENCE = Path(__file__).parent / "data" / "kafka-exporter.txt"


def values(samples: list, name: str, **labels: str) -> list[float]:
    wanted = set(labels.items())
    return [s.value for s in samples if s.name == name and wanted <= set(s.labels)]


def test_lag_offsets_and_partition_state(broker) -> None:
    process, _ = broker
    topic, group = f"lagged-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin_config = {"bootstrap.servers": process.bootstrap}
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(admin_config)
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    producer = Producer({**admin_config, "acks": "all"})
    for i in range(100):
        producer.produce(topic, b"%d" % i, partition=i % 2)
    assert producer.flush(20) == 0
    consumer = Consumer({**admin_config, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read, deadline = 0, time.monotonic() + 30
    while read < 60 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            read += 1
            if read == 60:
                consumer.commit(message=message, asynchronous=False)
    consumer.commit(asynchronous=False)
    committed_total = sum(tp.offset for tp in consumer.committed(
        consumer.assignment(), timeout=10) if tp.offset >= 0)
    try:
        samples = collect(admin_config)
        assert sum(values(samples, "kafka_topic_partition_current_offset", topic=topic)) == 100
        assert values(samples, "kafka_topic_partitions", topic=topic) == [2]
        assert values(samples, "kafka_brokers") == [1]
        assert values(samples, "kafka_consumergroup_members", consumergroup=group) == [1]
        assert sum(values(samples, "kafka_consumergroup_current_offset",
                          consumergroup=group, topic=topic)) == committed_total
        assert values(samples, "kafka_consumergroup_lag_sum", consumergroup=group,
                      topic=topic) == [100 - committed_total]
        known = {line.split("\t")[0] for line in REFERENCE.read_text().splitlines()
                 if line and not line.startswith("#")}
        assert {s.name for s in samples} <= known
        assert "kafka_consumergroup_lag{" in exposition(samples)
    finally:
        consumer.close()


def test_an_unreachable_cluster_is_reported_not_raised() -> None:
    from moldau.devcluster.brokers import free_port

    text = scrape({"bootstrap.servers": f"127.0.0.1:{free_port()}",
                   "socket.connection.setup.timeout.ms": 1000})()
    assert f"{UP} 0.0" in text.splitlines()
