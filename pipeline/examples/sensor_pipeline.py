"""The plant sensor pipeline of "Kafka in Action" on Spark: assembly-line stages report
sensor readings (temperature, vibration) to a topic; a streaming query turns them into
10-second windowed aggregates per stage and sensor, with a watermark, and writes them to a
Parquet table; a second query sends the windows that run hot to an alerts topic, keyed by
stage as in the book, through the moldau data source's replay-safe writer.

    python pipeline/examples/sensor_pipeline.py --bootstrap 127.0.0.1:9092

simulates a few minutes of readings (unless --no-simulate), runs both queries until they
have processed everything (Trigger.AvailableNow), then prints the alerts and the table.
Run it again and it carries on from its checkpoints: only new readings are processed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

READINGS_TOPIC = "sensor-readings"
ALERTS_TOPIC = "sensor-alerts"
STAGES = ("stage-1", "stage-2", "stage-3")
SENSORS = ("temperature-a", "temperature-b")
INTERVAL_S = 2  # one reading per sensor every 2 s (the book's health checks: every 5 s)
WINDOW_S = 10
WATERMARK_S = 10
WARNING_C = 80.0
CRITICAL_C = 90.0
READING_SCHEMA = "stage string, sensor string, ts timestamp, temperature double, vibration double"


@dataclass(frozen=True)
class Reading:
    stage: str
    sensor: str
    ts_ms: int
    temperature: float
    vibration: float

    @property
    def key(self) -> bytes:
        return f"{self.stage}/{self.sensor}".encode()

    def value(self) -> bytes:
        return json.dumps({"stage": self.stage, "sensor": self.sensor,
                           "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(
                               self.ts_ms // 1000)) + f".{self.ts_ms % 1000:03d}Z",
                           "temperature": self.temperature,
                           "vibration": self.vibration}).encode()


def simulate(seconds: int, start_ms: int, seed: int = 7) -> list[Reading]:
    """Readings in time order; each sensor drifts and now and then runs hot."""
    rng = random.Random(seed)
    readings = []
    for step in range(seconds // INTERVAL_S):
        for index, (stage, sensor) in enumerate((s, n) for s in STAGES for n in SENSORS):
            hot = (step // 5 + index) % 3 == 0  # every third window runs hot, in turn
            temperature = round(rng.uniform(85, 95) if hot else rng.uniform(60, 75), 2)
            readings.append(Reading(stage, sensor, start_ms + step * INTERVAL_S * 1000,
                                    temperature, round(rng.uniform(0.1, 2.0), 3)))
    return readings


def partition_of(reading: Reading, partitions: int) -> int:
    # Sensors spread evenly over the partitions, so every partition covers the same span
    # of event time at the same offset: the watermark never runs ahead of a partition.
    return (STAGES.index(reading.stage) * len(SENSORS) + SENSORS.index(reading.sensor)) \
        % partitions


def produce_readings(bootstrap: str, topic: str, readings: list[Reading],
                     partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 10})
    for reading in readings:
        producer.produce(topic, reading.value(), reading.key,
                         partition=partition_of(reading, partitions),
                         timestamp=reading.ts_ms)
    if producer.flush(60):
        raise RuntimeError("readings were not all acknowledged")


def aggregates(spark, bootstrap: str, topic: str, max_per_trigger: int | None = None):
    """Windowed aggregates per stage and sensor, emitted once the watermark closes them."""
    from pyspark.sql import functions as F

    source = (spark.readStream.format("moldau").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    if max_per_trigger:
        source = source.option("maxOffsetsPerTrigger", str(max_per_trigger))
    readings = (source.load()
                .select(F.from_json(F.col("value").cast("string"), READING_SCHEMA).alias("r"))
                .select("r.*"))
    return (readings.withWatermark("ts", f"{WATERMARK_S} seconds")
            .groupBy(F.window("ts", f"{WINDOW_S} seconds"), "stage", "sensor")
            .agg(F.round(F.avg("temperature"), 3).alias("avg_temperature"),
                 F.max("vibration").alias("max_vibration"), F.count("*").alias("readings"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "stage", "sensor",
                    "avg_temperature", "max_vibration", "readings"))


def alerts(aggregated):
    """Hot windows as alert records: key = stage (the book's alert key), JSON value."""
    from pyspark.sql import functions as F

    level = F.when(F.col("avg_temperature") >= CRITICAL_C, "CRITICAL").otherwise("WARNING")
    return (aggregated.where(F.col("avg_temperature") >= WARNING_C)
            .select(F.col("stage").alias("key"),
                    F.to_json(F.struct(
                        "stage", "sensor", F.date_format("window_start", "HH:mm:ss")
                        .alias("window"), "avg_temperature", level.alias("level")))
                    .alias("value")))


def start(spark, bootstrap: str, table: Path, checkpoints: Path,
          readings_topic: str = READINGS_TOPIC, alerts_topic: str = ALERTS_TOPIC,
          max_per_trigger: int | None = None) -> list:
    """Both queries, Trigger.AvailableNow: they stop once everything present is processed."""
    import moldau_spark

    table_query = (aggregates(spark, bootstrap, readings_topic, max_per_trigger)
                   .writeStream.format("parquet").outputMode("append")
                   .option("path", str(table))
                   .option("checkpointLocation", str(checkpoints / "table"))
                   .trigger(availableNow=True).queryName("sensor_table").start())
    moldau_spark.activate(spark)
    alert_query = (alerts(aggregates(spark, bootstrap, readings_topic, max_per_trigger))
                   .writeStream.format("moldau").outputMode("append")
                   .option("kafka.bootstrap.servers", bootstrap).option("topic", alerts_topic)
                   .option("checkpointLocation", str(checkpoints / "alerts"))
                   .trigger(availableNow=True).queryName("sensor_alerts").start())
    return [table_query, alert_query]


# Spark's JVM starts two to three times faster on a busy machine with the C1 compiler
# only (measured: session 10-13 s instead of 32 s at load 10 on 2 cores), which suits a
# short-lived job like this one; leave it out for a long-running stream.
QUICK_JVM = "--driver-java-options -XX:TieredStopAtLevel=1 pyspark-shell"


def session(app: str = "sensor-pipeline"):
    """A local[2] session with the moldau data source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", QUICK_JVM)
    from pyspark.sql import SparkSession

    import moldau_spark

    spark = (SparkSession.builder.master("local[2]").appName(app)
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    moldau_spark.register(spark)
    return spark


def _ensure_topics(bootstrap: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=30).topics
    wanted = [NewTopic(t, partitions, 1) for t in (READINGS_TOPIC, ALERTS_TOPIC)
              if t not in existing]
    for future in admin.create_topics(wanted).values() if wanted else ():
        future.result(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--workdir", type=Path, default=Path(".moldau-dev/sensor-pipeline"),
                        help="where the Parquet table and the checkpoints live")
    parser.add_argument("--seconds", type=int, default=300,
                        help="seconds of readings to simulate (event time)")
    parser.add_argument("--no-simulate", action="store_true")
    args = parser.parse_args(argv)
    partitions = 3
    _ensure_topics(args.bootstrap, partitions)
    if not args.no_simulate:
        start_s = int(time.time() - args.seconds) // WINDOW_S * WINDOW_S  # window-aligned
        readings = simulate(args.seconds, start_s * 1000, seed=int(time.time()))
        produce_readings(args.bootstrap, READINGS_TOPIC, readings, partitions)
        print(f"produced {len(readings)} readings to {READINGS_TOPIC}")
    spark = session()
    table = args.workdir / "table"
    for query in start(spark, args.bootstrap, table, args.workdir / "checkpoints"):
        query.awaitTermination()
    from moldau_spark import NAME

    alert_rows = (spark.read.format(NAME).option("kafka.bootstrap.servers", args.bootstrap)
                  .option("subscribe", ALERTS_TOPIC).load()
                  .selectExpr("cast(key as string) as stage", "cast(value as string) as alert"))
    print(f"alerts in {ALERTS_TOPIC} (last 10 of {alert_rows.count()}):")
    for row in alert_rows.tail(10):
        print(f"  {row.stage}: {row.alert}")
    if table.exists():
        print(f"Parquet table {table}:")
        spark.read.parquet(str(table)).groupBy("stage").agg(
            {"readings": "sum", "avg_temperature": "max"}).orderBy("stage").show()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
