"""moldau-spark: a PySpark (Spark 4) data source that reads and writes any Kafka-protocol
cluster through confluent-kafka. `register(spark)` makes it available as format "moldau"."""

from __future__ import annotations

from pyspark.sql import SparkSession

from .source import NAME, MoldauKafka

__all__ = ["NAME", "MoldauKafka", "activate", "register"]


def register(spark: SparkSession) -> None:
    spark.dataSource.register(MoldauKafka)
    activate(spark)


def activate(spark: SparkSession) -> None:
    """Make `spark` the JVM's active session for the calling thread; call it right before
    `df.write...save()` or `writeStream...start()` on format "moldau".

    Spark resolves a Python data source's name for writes through the JVM thread's active
    session, not through the DataFrame's own session, and py4j may serve a Python thread
    from another JVM thread than the one that created the session (a new connection, for
    instance when a garbage-collection callback nests in a call). Without an active
    session there, the write fails with DATA_SOURCE_NOT_FOUND although the read works.
    PySpark's own createDataFrame pins the session the same way."""
    jvm_session_class = SparkSession._get_j_spark_session_class(spark._jvm)
    jvm_session_class.setActiveSession(spark._jsparkSession)
