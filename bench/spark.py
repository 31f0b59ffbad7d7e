"""Records per second read by a Spark streaming query through the moldau data source
(pipeline/, issue 11), next to a plain confluent-kafka consumer reading the same topic in
the same run.

One broker, one topic of 6 partitions filled with MOLDAU_BENCH_SPARK_RECORDS (default
2,000,000) records of 100 B. The query is `readStream.format("moldau")` with
Trigger.AvailableNow into Spark's `noop` sink on local[2], timed from start() to its end
(planning included, Spark's start-up not); the consumer assigns the 6 partitions and
consumes to the end. Runs alternate (consumer, query, consumer, query, ...) and the
medians are reported.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import _support as s

ORDER = 60
PARTITIONS = 6
RECORD_BYTES = 100
RECORDS = int(os.environ.get("MOLDAU_BENCH_SPARK_RECORDS", 2_000_000))


def fill(bootstrap: str, topic: str, records: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20})
    value = os.urandom(RECORD_BYTES)
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.005)
    assert producer.flush(300) == 0


def consumer_seconds(bootstrap: str, topic: str, records: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "queued.max.messages.kbytes": 1 << 20})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    start = time.perf_counter()
    while got < records:
        # no more than is still due: a batch that cannot fill waits out the timeout
        got += len(consumer.consume(min(10_000, records - got), 1.0))
    seconds = time.perf_counter() - start
    consumer.close()
    return seconds


def query_seconds(spark, bootstrap: str, topic: str, checkpoint: Path, records: int) -> float:
    shutil.rmtree(checkpoint, ignore_errors=True)
    start = time.perf_counter()
    query = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest").load()
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()
    seconds = time.perf_counter() - start
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    assert rows == records, f"the query read {rows} records, not {records}"
    return seconds


def run() -> str:
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import moldau_spark
    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess

    clock = s.Stopwatch()
    quick = s.RUNS < 10
    records = min(RECORDS, 200_000) if quick else RECORDS
    rounds = 1 if quick else 3
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-spark-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()
    broker = BrokerProcess(str(workdir / "broker"), 1, ensemble.connect_string + "/bench",
                           properties={**s.AUTOTUNED_SOCKETS,
                                       "log.segment.bytes": str(1 << 30)})
    spark = None
    try:
        broker.start()
        fill(broker.bootstrap, "bench-spark", records)
        spark = (SparkSession.builder.master("local[2]").appName("moldau-bench")
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        moldau_spark.register(spark)
        query_seconds(spark, broker.bootstrap, "bench-spark", workdir / "warm-up", records)
        plain, spark_runs = [], []
        for i in range(rounds):
            plain.append(consumer_seconds(broker.bootstrap, "bench-spark", records))
            spark_runs.append(query_seconds(spark, broker.bootstrap, "bench-spark",
                                            workdir / f"checkpoint-{i}", records))
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return _report(clock, records, statistics.median(plain), statistics.median(spark_runs),
                   rounds)


def _report(clock: s.Stopwatch, records: int, plain: float, query: float, rounds: int) -> str:
    rate_plain, rate_query = records / plain, records / query
    rows = [("confluent-kafka consumer (assign, consume to the end)",
             f"{rate_plain:,.0f}", f"{plain:.1f}"),
            ("Spark streaming query, format moldau, AvailableNow -> noop sink",
             f"{rate_query:,.0f}", f"{query:.1f}")]
    ratio = rate_query / rate_plain
    return "\n".join([
        f"One broker, one topic of {PARTITIONS} partitions, {records:,} records of "
        f"{RECORD_BYTES} B; Spark local[2] (one task per partition, each its own "
        f"confluent-kafka consumer, records handed to Spark as Arrow batches); medians of "
        f"{rounds} alternating runs; everything shares the machine's 2 cores.",
        "",
        s.table(["reader", "records/s", "seconds"], rows),
        "",
        f"The query reads at {ratio:.2f}x the bare consumer's rate (issue 11 sets no goal; "
        "the query's time includes planning each run, and the per-record Python work of "
        "turning messages into Arrow columns).",
        "",
        s.environment(clock, ["pyspark", "confluent-kafka", "pyarrow"]),
    ])


if __name__ == "__main__":
    print(run())
