"""Unmodified Kafka clients produce to and consume from one Moldau broker: each codec,
keys, headers and timestamps, offsets by time, and an idempotent producer."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import pytest

from .raw import topic_name

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def expected_records(n: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]], int]]:
    # recent timestamps: older ones would be deleted by time retention (7 days) mid-test
    base = int(time.time() * 1000) - 60_000
    return [(f"key-{i}".encode(), f"value-{i}-".encode() * (i % 7 + 1),
             [("h", str(i).encode())], base + i) for i in range(n)]


# --- confluent-kafka (librdkafka 2.16) --------------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_round_trip(broker, codec: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = topic_name(f"ck-{codec}")
    records = expected_records(50)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec,
                         "linger.ms": 5, "enable.idempotence": True})
    errors = []
    for key, value, headers, ts in records:
        producer.produce(topic, value, key, timestamp=ts, headers=headers,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0
    assert errors == []

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(records) and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append((msg.key(), msg.value(), list(msg.headers() or []), msg.timestamp()[1],
                    msg.offset()))
    consumer.close()
    assert [(k, v, h, t) for k, v, h, t, _ in got] == records
    assert [o for *_, o in got] == list(range(len(records)))


def test_confluent_kafka_offsets_for_times(broker) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = topic_name("ck-times")
    base = int(time.time() * 1000) - 60_000
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce(topic, b"v", timestamp=base + i * 1000)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    found = consumer.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
    assert found[0].offset == 5
    low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    assert (low, high) == (0, 10)
    beyond = consumer.offsets_for_times([TopicPartition(topic, 0, base + 60_000)], timeout=10)
    assert beyond[0].offset == -1  # nothing at or after: the end (librdkafka reports -1)
    consumer.close()


# --- kafka-python 3 ---------------------------------------------------------------------

@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_round_trip(broker, codec: str | None) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = topic_name(f"kp-{codec}")
    records = expected_records(40)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec)
    futures = [producer.send(topic, value=v, key=k, headers=h, timestamp_ms=t)
               for k, v, h, t in records]
    offsets = [f.get(timeout=30).offset for f in futures]  # idempotent by default
    producer.close()
    assert offsets == list(range(len(records)))

    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    got = []
    for msg in consumer:
        got.append((msg.key, msg.value, list(msg.headers), msg.timestamp))
        if len(got) == len(records):
            break
    assert got == [(k, v, h, t) for k, v, h, t in records]
    found = consumer.offsets_for_times({tp: records[10][3]})
    assert found[tp].offset == 10
    consumer.close()


# --- aiokafka ------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [None, "gzip", "lz4", "zstd"])
def test_aiokafka_round_trip(broker, codec: str | None) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = topic_name(f"aio-{codec}")
    records = expected_records(30)

    async def run() -> list:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap,
                                    compression_type=codec, enable_idempotence=True)
        await producer.start()
        try:
            for k, v, h, t in records:
                await producer.send_and_wait(topic, v, key=k, headers=h, timestamp_ms=t)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = []
            deadline = time.monotonic() + 30
            while len(got) < len(records) and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=1000)
                for msgs in batch.values():
                    got.extend((m.key, m.value, list(m.headers), m.timestamp) for m in msgs)
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [(k, v, h, t) for k, v, h, t in records]


# --- kcat (librdkafka 2.0.2 from Debian) ---------------------------------------------------

def test_kcat_produce_consume_and_query(broker) -> None:
    kcat = shutil.which("kcat")
    assert kcat, "kcat is installed by make test (scripts/debian-packages.txt)"
    topic = topic_name("kcat")
    lines = "".join(f"k{i}:v{i}\n" for i in range(20))
    subprocess.run([kcat, "-b", broker.bootstrap, "-P", "-t", topic, "-K:", "-z", "lz4",
                    "-H", "origin=kcat"], input=lines.encode(), check=True, timeout=60)
    out = subprocess.run([kcat, "-b", broker.bootstrap, "-C", "-t", topic, "-e", "-o",
                          "beginning", "-f", "%k=%s;%h\n"], capture_output=True, check=True,
                         timeout=60).stdout.decode()
    assert out.splitlines() == [f"k{i}=v{i};origin=kcat" for i in range(20)]
    listing = subprocess.run([kcat, "-b", broker.bootstrap, "-L", "-t", topic],
                             capture_output=True, check=True, timeout=60).stdout.decode()
    assert "1 brokers:" in listing and f'topic "{topic}" with 1 partitions' in listing
    query = subprocess.run([kcat, "-b", broker.bootstrap, "-Q", "-t", f"{topic}:0:-1"],
                           capture_output=True, check=True, timeout=60).stdout.decode()
    assert f"{topic} [0] offset 20" in query
