"""`MoldauKafka`, the data source registered as format "moldau": Spark's Kafka source and
sink over confluent-kafka, so `format("kafka")` becomes `format("moldau")` and the options
stay as they are."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .cluster import Cluster
from .options import parse_sink, parse_source
from .positions import require_all
from .reader import BatchReader, StreamReader
from .writer import BatchWriter, StreamWriter, check_schema

NAME = "moldau"
SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int")
HEADERS = ", headers array<struct<key: string, value: binary>>"


class MoldauKafka(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        # Spark asks for the schema when a read is loaded: the earliest point to refuse bad
        # options and missing topics, before any query starts.
        options = parse_source(self.options)
        parts = Cluster(options.client).partitions(options.subscription, require=True)
        require_all(options.starting, parts, "startingOffsets")
        require_all(options.ending, parts, "endingOffsets")
        return SCHEMA + (HEADERS if options.include_headers else "")

    def reader(self, schema: StructType) -> DataSourceReader:
        options = parse_source(self.options)
        options.check_batch()
        return BatchReader(options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_source(self.options)
        options.check_streaming()
        return StreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_sink(self.options)
        check_schema(schema, options)
        return BatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_sink(self.options)
        check_schema(schema, options)
        return StreamWriter(options)
