"""moldau-spark: a PySpark (Spark 4) data source that reads and writes any Kafka-protocol
cluster through confluent-kafka. `register(spark)` makes it available as format "moldau"."""

from __future__ import annotations

from pyspark.sql import SparkSession

from .source import NAME, MoldauKafka

__all__ = ["NAME", "MoldauKafka", "register"]


def register(spark: SparkSession) -> None:
    spark.dataSource.register(MoldauKafka)
