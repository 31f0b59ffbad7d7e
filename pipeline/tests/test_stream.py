"""Streaming reads through Spark against a real broker: per-trigger limits, starting
offsets, partitions added while the query runs, and records lost to DeleteRecords."""

from __future__ import annotations

import json
from pathlib import Path

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from kafka_helpers import add_partitions, create_topic, produce, topic_name, wait_until
from pyspark.errors import StreamingQueryException

TIMEOUT_S = 240


def stream(spark, broker, topic: str, **options: str):
    reader = (spark.readStream.format("moldau")
              .option("kafka.bootstrap.servers", broker.bootstrap).option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def records(topic: str, partition: int, count: int, first: int = 0) -> list:
    return [(partition, None, f"{topic}/{partition}/{i}".encode())
            for i in range(first, first + count)]


def test_limit_per_trigger_and_json_start(spark, broker) -> None:
    topic = topic_name("limit")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, records(topic, 0, 50) + records(topic, 1, 50))
    starting = json.dumps({topic: {"0": 10, "1": -2}})
    query = (stream(spark, broker, topic, startingOffsets=starting, maxOffsetsPerTrigger="30")
             .selectExpr("cast(value as string) as v", "partition", "offset")
             .writeStream.format("memory").queryName("limit_q")
             .trigger(availableNow=True).start())
    assert query.awaitTermination(TIMEOUT_S)
    assert query.exception() is None
    got = sorted(r.v for r in spark.sql("select v from limit_q").collect())
    expected = sorted(v.decode() for _, _, v in records(topic, 0, 40, 10) + records(topic, 1, 50))
    assert got == expected  # every record from the start offsets on, once
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 90 and len(sizes) >= 3
    assert all(size <= 30 for size in sizes), sizes


def test_partition_added_mid_stream_is_read(spark, broker) -> None:
    topic = topic_name("grow")
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, records(topic, 0, 5))
    query = (stream(spark, broker, topic, startingOffsets="earliest")
             .selectExpr("cast(value as string) as v", "partition")
             .writeStream.format("memory").queryName("grow_q")
             .trigger(processingTime="500 milliseconds").start())
    try:
        def partitions_seen() -> set[int]:
            return {r.partition for r in spark.sql("select partition from grow_q").collect()}

        wait_until(lambda: partitions_seen() == {0}, "partition 0 is read", TIMEOUT_S)
        add_partitions(broker.bootstrap, topic, 3)
        produce(broker.bootstrap, topic, records(topic, 1, 4) + records(topic, 2, 3))
        wait_until(lambda: spark.sql("select v from grow_q").count() == 12,
                   "the added partitions are read", TIMEOUT_S)
        got = sorted(r.v for r in spark.sql("select v from grow_q").collect())
        assert got == sorted(v.decode() for _, _, v in
                             records(topic, 0, 5) + records(topic, 1, 4) + records(topic, 2, 3))
    finally:
        query.stop()
    assert query.exception() is None


def _run_to_parquet(spark, broker, topic: str, out: Path, checkpoint: Path, **options: str):
    query = (stream(spark, broker, topic, startingOffsets="earliest", **options)
             .selectExpr("cast(value as string) as v", "offset")
             .writeStream.format("parquet").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    try:
        query.awaitTermination(TIMEOUT_S)
    except StreamingQueryException:
        pass  # the caller looks at query.exception()
    finally:
        query.stop()
    return query


def test_data_loss_fails_or_is_skipped(spark, broker, tmp_path: Path) -> None:
    topic = topic_name("loss")
    create_topic(broker.bootstrap, topic, 1)
    produce(broker.bootstrap, topic, records(topic, 0, 20))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    first = _run_to_parquet(spark, broker, topic, out, checkpoint)
    assert first.exception() is None
    assert spark.read.parquet(str(out)).count() == 20

    # Offsets 20..29 arrive, then 20..24 are deleted before the stream reads them.
    produce(broker.bootstrap, topic, records(topic, 0, 10, 20))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    deleted = admin.delete_records([TopicPartition(topic, 0, 25)])
    assert next(iter(deleted.values())).result(30).low_watermark == 25

    failed = _run_to_parquet(spark, broker, topic, out, checkpoint)
    assert failed.exception() is not None
    message = str(failed.exception())
    assert f"{topic}-0: offsets 20..24 were deleted" in message
    assert "failOnDataLoss=false" in message
    assert spark.read.parquet(str(out)).count() == 20  # nothing written by the failed run

    skipped = _run_to_parquet(spark, broker, topic, out, checkpoint, failOnDataLoss="false")
    assert skipped.exception() is None
    offsets = sorted(r.offset for r in spark.read.parquet(str(out)).collect())
    assert offsets == list(range(20)) + list(range(25, 30))
