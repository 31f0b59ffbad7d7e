"""Spark's own Kafka connector (`format("kafka")`: spark-sql-kafka-0-10 4.2.0 on Kafka's
Java client 3.9.2, put on the shared SparkSession by conftest with `spark.jars`) against
a real Moldau broker: batch reads by offsets and by timestamps, a streaming query stopped
and restarted from its checkpoint, a write with keys, headers and partitions, and
subscribePattern with a consumer group id."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient
from kafka_connector_jars import LOCK, connector_jars
from kafka_helpers import create_topic, produce, read_all, topic_name, wait_until

TIMEOUT_S = 240
PER_PARTITION_OLD = 10
PER_PARTITION_NEW = 5
# Two hours and one hour ago: recent enough that retention (7 days) keeps the records.
STAMP_OLD = (int(time.time()) - 7200) * 1000
STAMP_NEW = STAMP_OLD + 3_600_000


def kafka_read(spark, broker, **options: str):
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def kafka_stream(spark, broker, **options: str):
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", broker.bootstrap))
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


@pytest.fixture(scope="module")
def stamped(broker) -> str:
    """Two partitions: offsets 0..9 written at STAMP_OLD, 10..14 at STAMP_NEW."""
    name = topic_name("jconn")
    create_topic(broker.bootstrap, name, 2)
    produce(broker.bootstrap, name,
            [(p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode())
             for i in range(PER_PARTITION_OLD) for p in range(2)], timestamp=STAMP_OLD)
    produce(broker.bootstrap, name,
            [(p, f"k{p}-{i}".encode(), f"v{p}-{i}".encode())
             for i in range(PER_PARTITION_OLD, PER_PARTITION_OLD + PER_PARTITION_NEW)
             for p in range(2)], timestamp=STAMP_NEW)
    return name


def test_batch_read_by_offsets_and_by_timestamp(spark, broker, stamped) -> None:
    starting = {stamped: {"0": 3, "1": -2}}
    ending = {stamped: {"0": 12, "1": 4}}
    rows = kafka_read(spark, broker, subscribe=stamped, startingOffsets=json.dumps(starting),
                      endingOffsets=json.dumps(ending)).collect()
    assert sorted((r.partition, r.offset, r.key, r.value) for r in rows) == sorted(
        [(0, o, f"k0-{o}".encode(), f"v0-{o}".encode()) for o in range(3, 12)]
        + [(1, o, f"k1-{o}".encode(), f"v1-{o}".encode()) for o in range(0, 4)])
    assert {r.topic for r in rows} == {stamped}

    # One timestamp for every partition: the first offset at or after it (ListOffsets).
    newer = kafka_read(spark, broker, subscribe=stamped,
                       startingTimestamp=str(STAMP_OLD + 1)).collect()
    assert sorted((r.partition, r.offset) for r in newer) == [
        (p, o) for p in range(2)
        for o in range(PER_PARTITION_OLD, PER_PARTITION_OLD + PER_PARTITION_NEW)]
    assert {(int(r.timestamp.timestamp() * 1000), r.timestampType) for r in newer} == {
        (STAMP_NEW, 0)}  # CreateTime, as produced

    # Per partition, ending by timestamp too: [first at STAMP_OLD, first at STAMP_NEW).
    by_partition = kafka_read(
        spark, broker, assign=json.dumps({stamped: [1]}),
        startingOffsetsByTimestamp=json.dumps({stamped: {"1": STAMP_OLD}}),
        endingOffsetsByTimestamp=json.dumps({stamped: {"1": STAMP_NEW}})).collect()
    assert sorted(r.offset for r in by_partition) == list(range(PER_PARTITION_OLD))


def test_stream_stopped_and_restarted_from_its_checkpoint(spark, broker, tmp_path: Path) -> None:
    topic = topic_name("jstream")
    create_topic(broker.bootstrap, topic, 2)

    def values(first: int, count: int) -> list[tuple[int, None, bytes]]:
        return [(i % 2, None, f"r{i}".encode()) for i in range(first, first + count)]

    produce(broker.bootstrap, topic, values(0, 40))
    batches: dict[int, list[tuple[int, int, bytes]]] = {}
    runs: list[set[int]] = []
    lock = threading.Lock()

    def sink(df, batch_id: int) -> None:
        rows = [(r.partition, r.offset, r.value) for r in df.collect()]
        with lock:
            # A batch the stop interrupted runs again with its id: it must read the same.
            assert batches.setdefault(batch_id, rows) == rows, f"batch {batch_id} changed"
            runs[-1].add(batch_id)

    def start():
        runs.append(set())
        return (kafka_stream(spark, broker, subscribe=topic, startingOffsets="earliest",
                             maxOffsetsPerTrigger="8")
                .writeStream.foreachBatch(sink)
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(processingTime="200 milliseconds").start())

    query = start()
    try:
        wait_until(lambda: len(batches) >= 2, "two batches are written", TIMEOUT_S)
    finally:
        query.stop()  # mid-stream: 40 records at 8 per batch need five
    assert query.exception() is None
    produce(broker.bootstrap, topic, values(40, 20))
    query = start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None

    read = [row for rows in batches.values() for row in rows]
    assert sorted(read) == sorted((i % 2, i // 2, f"r{i}".encode()) for i in range(60))
    first, second = runs
    assert max(first) <= min(second), runs  # the second run went on from the checkpoint
    assert all(len(rows) <= 8 for rows in batches.values())


def test_write_keys_values_headers_and_partitions(spark, broker) -> None:
    out = topic_name("jwrite")
    create_topic(broker.bootstrap, out, 3)
    rows = [(f"k{i}".encode() if i % 4 else None, f"v{i}".encode(),
             [("h", f"x{i}".encode()), ("empty", None)], i % 3) for i in range(12)]
    df = spark.createDataFrame(
        rows, "key binary, value binary, headers array<struct<key:string,value:binary>>, "
              "partition int")
    (df.write.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
     .option("topic", out).save())
    got = sorted((m.partition(), m.value(), m.key(), m.headers()) for m in read_all(
        broker.bootstrap, out))
    assert got == sorted((p, v, k, h) for k, v, h, p in rows)

    # Spark reads back what Spark wrote, headers included.
    back = kafka_read(spark, broker, subscribe=out, includeHeaders="true").collect()
    assert sorted((r.partition, r.value, r.key, [(h.key, h.value) for h in r.headers])
                  for r in back) == got


def test_subscribe_pattern_with_a_group_id(spark, broker) -> None:
    prefix = topic_name("jpat")
    for suffix in ("a", "b"):
        create_topic(broker.bootstrap, f"{prefix}-{suffix}", 1)
        produce(broker.bootstrap, f"{prefix}-{suffix}",
                [(0, None, f"{suffix}{i}".encode()) for i in range(5)])
    create_topic(broker.bootstrap, f"{prefix}x", 1)  # does not match the pattern
    produce(broker.bootstrap, f"{prefix}x", [(0, None, b"other")])
    options = {"subscribePattern": f"{prefix}-.*", "kafka.group.id": f"{prefix}-group",
               "startingOffsets": "earliest"}

    group = options["kafka.group.id"]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def group_state() -> tuple[ConsumerGroupState, list]:
        described = admin.describe_consumer_groups([group])[group].result(30)
        return described.state, described.members

    expected = sorted(f"{s}{i}".encode() for s in "ab" for i in range(5))
    assert sorted(r.value for r in kafka_read(spark, broker, **options).collect()) == expected
    # The default offset reader lists offsets with an AdminClient and the executors'
    # consumers assign partitions: the group id is only their client setting, never joined.
    assert group_state() == (ConsumerGroupState.DEAD, [])
    # Spark's older offset reader subscribes a consumer to the pattern on the driver, so the
    # Java client joins the group (JoinGroup/SyncGroup) before it lists any offsets.
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    try:
        joined = kafka_read(spark, broker, **options).collect()
    finally:
        spark.conf.unset("spark.sql.streaming.kafka.useDeprecatedOffsetFetching")
    assert sorted(r.value for r in joined) == expected
    assert group_state() == (ConsumerGroupState.EMPTY, [])  # it joined, then left

    query = (kafka_stream(spark, broker, **options).selectExpr("topic", "value")
             .writeStream.format("memory").queryName("jpattern_q")
             .trigger(processingTime="200 milliseconds").start())
    try:
        wait_until(lambda: spark.sql("select * from jpattern_q").count() == 10,
                   "both topics are read", TIMEOUT_S)
        # A topic created while the query runs matches too, and is read from its start.
        create_topic(broker.bootstrap, f"{prefix}-late", 1)
        produce(broker.bootstrap, f"{prefix}-late", [(0, None, b"late")])
        wait_until(lambda: spark.sql("select * from jpattern_q").count() == 11,
                   "the new topic is read", TIMEOUT_S)
    finally:
        query.stop()
    assert query.exception() is None
    topics = [r.topic for r in spark.sql("select topic from jpattern_q").collect()]
    assert sorted(set(topics)) == [f"{prefix}-a", f"{prefix}-b", f"{prefix}-late"]


def test_the_lock_pins_the_connector_and_the_cache_holds_exactly_it() -> None:
    pins = dict(reversed(line.split()) for line in LOCK.read_text().splitlines() if line.strip())
    assert sorted(pins) == ["commons-pool2-2.13.1.jar", "kafka-clients-3.9.2.jar",
                            "spark-sql-kafka-0-10_2.13-4.2.0.jar",
                            "spark-token-provider-kafka-0-10_2.13-4.2.0.jar"]
    jars = [Path(jar) for jar in connector_jars()]  # fetched only when missing, then checked
    assert {jar.name: hashlib.sha256(jar.read_bytes()).hexdigest() for jar in jars} == pins
