"""Batch and streaming writers: rows with Spark's Kafka sink columns (topic, key, value,
headers, partition) produced by an idempotent confluent-kafka producer.

Replay safety without transactions. Spark runs a micro-batch's write again after a crash
(its output is at-least-once per batchId). Each record the stream writer produces carries
three headers: the query id, the batch id and the Spark partition (task) that wrote it.
Before a task writes batch N it scans the tail of the target partitions for records of
this query, batch N and this task (replay.py), and skips as many identical records as it
finds there, so a replay completes a partly written batch instead of duplicating it.
A replay of the same batch computes the same task contents: the source reads the
checkpointed offset ranges, and stateful operators restore their state at batch N-1.

The delivery step is one function (`_deliver`) on purpose: a transactional writer (once
the broker has transactions) replaces it with begin/produce/commit per task, keyed by a
transactional.id made of the same query id and task partition.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaException, Producer
from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from . import replay
from .options import OptionError, SinkOptions
from .replay import Record

log = logging.getLogger("moldau_spark")

FLUSH_TIMEOUT_S = 120.0


@dataclass
class Written(WriterCommitMessage):
    produced: int
    skipped: int  # already in the topic from an earlier attempt of the same batch


def check_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's Kafka sink columns, checked when the write is planned."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    text_or_bytes = (StringType(), BinaryType())
    expected: dict[str, tuple[DataType, ...]] = {
        "value": text_or_bytes, "key": text_or_bytes, "topic": (StringType(),),
        "partition": (IntegerType(),),
        "headers": (ArrayType(StructType().add("key", StringType()).add("value", BinaryType())),),
    }
    if "value" not in fields:
        raise OptionError("the data to write has no 'value' column (string or binary); "
                          f"columns: {', '.join(schema.fieldNames())}")
    if "topic" not in fields and options.topic is None:
        raise OptionError("no topic: give the option topic or a 'topic' column")
    for name, allowed in expected.items():
        if name in fields and not any(_same_type(fields[name], t) for t in allowed):
            wanted = " or ".join(t.simpleString() for t in allowed)
            raise OptionError(f"column {name!r} is {fields[name].simpleString()}, "
                              f"expected {wanted}")


def _same_type(actual: DataType, expected: DataType) -> bool:
    # Nullability does not matter for the check, only the shape.
    if isinstance(expected, ArrayType):
        return isinstance(actual, ArrayType) and _same_type(actual.elementType,
                                                            expected.elementType)
    if isinstance(expected, StructType):
        return isinstance(actual, StructType) and [
            (f.name, f.dataType) for f in actual.fields] == [
            (f.name, f.dataType) for f in expected.fields]
    return actual == expected


def _bytes(value: object) -> bytes | None:
    return value.encode() if isinstance(value, str) else value  # type: ignore[return-value]


def record_from_row(row: Row, default_topic: str | None) -> Record:
    data = row.asDict()
    topic = data.get("topic") or default_topic
    if topic is None:
        raise ValueError(f"row has no topic and the option topic is not set: {row}")
    headers = tuple((h["key"], h["value"]) for h in data.get("headers") or ())
    return Record(topic, _bytes(data.get("key")), _bytes(data.get("value")), headers,
                  data.get("partition"))


class _Producing:
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def _producer(self) -> Producer:
        return Producer({**self.options.client, "enable.idempotence": True, "acks": "all"})

    def _deliver(self, records: Iterable[Record], extra_headers: Sequence[tuple[str, bytes]],
                 ) -> int:
        """Produce and wait for every acknowledgement; any failed record fails the task."""
        producer = self._producer()
        errors: list[str] = []

        def report(err: object, msg: object) -> None:
            if err is not None:
                errors.append(str(err))

        count = 0
        for record in records:
            # -1 is produce()'s default: the producer's partitioner picks the partition
            partition = record.partition if record.partition is not None else -1
            while True:
                try:
                    producer.produce(record.topic, record.value, record.key, partition,
                                     headers=[*record.headers, *extra_headers],
                                     on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.05)
                except KafkaException as exc:
                    raise RuntimeError(f"cannot produce to {record.topic}: {exc}") from None
            count += 1
            if count % 1000 == 0:
                producer.poll(0)
        left = producer.flush(FLUSH_TIMEOUT_S)
        if left or errors:
            raise RuntimeError(f"{left} record(s) not acknowledged within {FLUSH_TIMEOUT_S}s, "
                               f"{len(errors)} failed (first: {errors[:1]})")
        return count


class BatchWriter(_Producing, DataSourceWriter):
    def write(self, iterator: Iterator[Row]) -> Written:
        records = (record_from_row(row, self.options.topic) for row in iterator)
        return Written(self._deliver(records, ()), 0)


def _local_property(context: TaskContext, name: str) -> str:
    """A local property Spark sets on the tasks of a streaming micro-batch."""
    value = context.getLocalProperty(name)
    if value is None:
        raise RuntimeError(f"the Spark task has no local property {name} (not a streaming "
                           "micro-batch?)")
    return value


class StreamWriter(_Producing, DataSourceStreamWriter):
    def write(self, iterator: Iterator[Row]) -> Written:
        records = [record_from_row(row, self.options.topic) for row in iterator]
        if not records:
            return Written(0, 0)  # nothing to write: no need to look at the tail either
        context = TaskContext.get()
        if context is None:
            raise RuntimeError("the stream writer writes in a Spark task, and there is none")
        query = _local_property(context, "sql.streaming.queryId")
        batch = int(_local_property(context, "streaming.sql.batchId"))
        task = context.partitionId()
        already = replay.already_written(
            self.options.client, sorted({r.topic for r in records}),
            replay.Mark(query, batch, task), self.options.replay_scan_max_records)
        fresh = []
        for record in records:
            if already[record.identity] > 0:
                already[record.identity] -= 1
            else:
                fresh.append(record)
        skipped = len(records) - len(fresh)
        if skipped:
            log.warning("batch %d task %d: %d record(s) already written by an earlier attempt "
                        "were skipped", batch, task, skipped)
        marks = replay.Mark(query, batch, task).headers()
        return Written(self._deliver(fresh, marks), skipped)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        done = [m for m in messages if isinstance(m, Written)]
        log.info("batch %d committed: %d produced, %d skipped as already written", batchId,
                 sum(m.produced for m in done), sum(m.skipped for m in done))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        # Records already produced stay; the replay of this batch will skip them.
        log.warning("batch %d aborted; its replay will skip what was written", batchId)
