"""Batch reads and writes through Spark against a real broker: fixed offset ranges return
exactly their records, in Spark's Kafka schema."""

from __future__ import annotations

import json
import time

import pytest
from kafka_helpers import create_topic, produce, read_all, topic_name

import moldau_spark

PARTITIONS = 3
PER_PARTITION = 40
# Recent enough that retention (7 days by default) keeps the records.
STAMP = (int(time.time()) - 3600) * 1000


@pytest.fixture(scope="module")
def topic(broker) -> str:
    name = topic_name("batch")
    create_topic(broker.bootstrap, name, PARTITIONS)
    produce(broker.bootstrap, name,
            [(p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode())
             for i in range(PER_PARTITION) for p in range(PARTITIONS)],
            headers=[("source", b"test")], timestamp=STAMP)
    return name


def load(spark, broker, topic: str, **options: str):
    reader = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_fixed_ranges_return_exactly_those_records(spark, broker, topic) -> None:
    starting = {topic: {"0": 5, "1": -2, "2": 39}}
    ending = {topic: {"0": 12, "1": 3, "2": -1}}
    rows = load(spark, broker, topic, startingOffsets=json.dumps(starting),
                endingOffsets=json.dumps(ending), minPartitions="5").collect()
    got = sorted((r.partition, r.offset, r.key, r.value) for r in rows)
    expected = sorted([(0, o, f"k0-{o}".encode(), f"v0-{o}".encode()) for o in range(5, 12)]
                      + [(1, o, f"k1-{o}".encode(), f"v1-{o}".encode()) for o in range(0, 3)]
                      + [(2, 39, b"k2-39", b"v2-39")])
    assert got == expected
    assert {r.topic for r in rows} == {topic}


def test_schema_timestamps_and_headers(spark, broker, topic) -> None:
    df = load(spark, broker, topic, includeHeaders="true",
              endingOffsets=json.dumps({topic: {"0": 1, "1": 0, "2": 0}}))
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"),
        ("offset", "bigint"), ("timestamp", "timestamp"), ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>")]
    (row,) = df.collect()
    assert row.timestampType == 0  # CreateTime
    assert int(row.timestamp.timestamp() * 1000) == STAMP
    assert [(h.key, h.value) for h in row.headers] == [("source", b"test")]
    assert "headers" not in load(spark, broker, topic).columns


def test_whole_topic_by_default_and_by_timestamp(spark, broker, topic) -> None:
    assert load(spark, broker, topic).count() == PARTITIONS * PER_PARTITION
    later = load(spark, broker, topic, startingTimestamp=str(STAMP + 1))
    with pytest.raises(Exception, match="no record at or after the timestamp"):
        later.count()
    assert load(spark, broker, topic, startingTimestamp=str(STAMP + 1),
                startingOffsetsByTimestampStrategy="latest").count() == 0
    assign = (spark.read.format("moldau").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("assign", json.dumps({topic: [1]})).load())
    assert {r.partition for r in assign.collect()} == {1}


def test_batch_write_then_read_back(spark, broker, topic) -> None:
    out = topic_name("batch-out")
    create_topic(broker.bootstrap, out, 2)
    source = load(spark, broker, topic)
    moldau_spark.activate(spark)
    (source.selectExpr("key", "upper(cast(value as string)) as value", "partition % 2 as partition")
     .write.format("moldau").mode("append").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", out).save())
    written = read_all(broker.bootstrap, out)
    assert sorted(m.value() for m in written) == sorted(
        f"V{p}-{i}".encode() for p in range(PARTITIONS) for i in range(PER_PARTITION))
    assert all(int(m.key().decode()[1]) % 2 == m.partition() for m in written)


def test_write_needs_the_threads_active_session(spark, broker) -> None:
    # Spark looks a Python sink's name up in the JVM thread's active session; a py4j
    # thread without one fails, and activate() is the remedy the docs give.
    out = topic_name("batch-active")
    create_topic(broker.bootstrap, out, 1)
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    writer = (df.write.format("moldau").mode("append")
              .option("kafka.bootstrap.servers", broker.bootstrap).option("topic", out))
    jvm_session_class = type(spark)._get_j_spark_session_class(spark._jvm)
    jvm_session_class.clearActiveSession()
    with pytest.raises(Exception, match="DATA_SOURCE_NOT_FOUND"):
        writer.save()
    assert read_all(broker.bootstrap, out) == []
    moldau_spark.activate(spark)
    writer.save()
    assert [(m.key(), m.value()) for m in read_all(broker.bootstrap, out)] == [(b"k", b"v")]
