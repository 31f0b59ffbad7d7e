"""Reading exact offset ranges with a confluent-kafka consumer (on Spark's executors), and
turning the records into Arrow batches in Spark's Kafka schema."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import cast

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

log = logging.getLogger("moldau_spark")

ROWS_PER_ARROW_BATCH = 10_000
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
# Kafka's timestamp type ids, which Spark's `timestampType` column carries.
_TIMESTAMP_TYPE = {0: -1, 1: 0, 2: 1}  # librdkafka's NOT_AVAILABLE, CREATE_TIME, LOG_APPEND_TIME


class DataLossError(RuntimeError):
    """Records the query should read are gone (retention, DeleteRecords, a recreated topic)
    and failOnDataLoss is true."""


def consumer(client: Mapping[str, str], group_prefix: str = "spark-kafka-source") -> Consumer:
    """A consumer that only ever reads assigned exact ranges: no commits, no resets (an
    out-of-range position is reported, never silently moved)."""
    settings = {"group.id": f"{group_prefix}-{uuid.uuid4()}", **client,
                "enable.auto.commit": False, "auto.offset.reset": "error",
                "enable.partition.eof": True}
    return Consumer(settings)


def lost(message: str, fail: bool) -> None:
    if fail:
        raise DataLossError(message + " (set failOnDataLoss=false to skip lost records with "
                            "a warning)")
    log.warning("%s; skipped because failOnDataLoss=false", message)


def iter_messages(cons: Consumer, topic: str, partition: int, start: int, end: int, *,
                  timeout_s: float, fail_on_data_loss: bool = True) -> Iterator[Message]:
    """Every record with offset in [start, end) of one partition, in order. Records gone
    from the log are data loss (raise, or warn and skip); a gap inside the log is normal
    (compaction, transaction markers) and simply skipped."""
    low, high = cons.get_watermark_offsets(TopicPartition(topic, partition),
                                           timeout=timeout_s)
    if start < low:
        lost(f"{topic}-{partition}: offsets {start}..{min(end, low) - 1} were deleted "
             f"(the log now starts at {low})", fail_on_data_loss)
        start = low
    if end > high:
        lost(f"{topic}-{partition}: offsets {max(start, high)}..{end - 1} are gone (the log "
             f"now ends at {high}; was the topic recreated or truncated?)", fail_on_data_loss)
        end = high
    if start >= end:
        return
    cons.assign([TopicPartition(topic, partition, start)])
    position = start
    deadline = time.monotonic() + timeout_s
    try:
        while position < end:
            batch = cons.consume(min(end - position, 5000), 1.0)
            if not batch and time.monotonic() > deadline:
                raise TimeoutError(f"{topic}-{partition}: no record at offset {position} "
                                   f"within {timeout_s:.0f}s (kafkaConsumer.pollTimeoutMs)")
            for message in batch:
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        eof = message.offset()  # the partition's end offset
                        if eof is not None and eof >= end:
                            return  # the rest of the range was compacted away
                        continue
                    if error.code() == KafkaError._AUTO_OFFSET_RESET:
                        position = _after_reset(cons, topic, partition, position, end,
                                                timeout_s, fail_on_data_loss)
                        break
                    raise RuntimeError(f"{topic}-{partition}: {error.str()}")
                offset = message.offset()
                if offset is None:  # librdkafka gives every record it fetched its offset
                    raise RuntimeError(f"{topic}-{partition}: a record without an offset")
                if offset >= end:
                    return
                position = offset + 1
                deadline = time.monotonic() + timeout_s
                yield message
    finally:
        cons.unassign()


def _after_reset(cons: Consumer, topic: str, partition: int, position: int, end: int,
                 timeout_s: float, fail: bool) -> int:
    # The log start moved past our position while we read (retention ran meanwhile).
    low, _ = cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
    lost(f"{topic}-{partition}: offsets {position}..{min(end, low) - 1} were deleted "
         "while being read", fail)
    resume = min(max(low, position), end)
    cons.assign([TopicPartition(topic, partition, resume)])
    return resume


def to_arrow(messages: Iterator[Message], include_headers: bool) -> Iterator[pa.RecordBatch]:
    """Spark's Kafka schema as Arrow: key, value, topic, partition, offset, timestamp,
    timestampType (and headers), in batches of ROWS_PER_ARROW_BATCH."""
    while True:
        chunk = _take(messages, ROWS_PER_ARROW_BATCH)
        if not chunk:
            return
        stamps = [m.timestamp() for m in chunk]
        columns = {
            "key": pa.array([m.key() for m in chunk], pa.binary()),
            "value": pa.array([m.value() for m in chunk], pa.binary()),
            "topic": pa.array([m.topic() for m in chunk], pa.string()),
            "partition": pa.array([m.partition() for m in chunk], pa.int32()),
            "offset": pa.array([m.offset() for m in chunk], pa.int64()),
            "timestamp": pa.array([ms * 1000 if kind else None for kind, ms in stamps],
                                  pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([_TIMESTAMP_TYPE.get(kind, -1) for kind, _ in stamps],
                                      pa.int32()),
        }
        if include_headers:
            columns["headers"] = pa.array(
                [[{"key": k, "value": v} for k, v in h] if (h := record_headers(m)) else None
                 for m in chunk], HEADERS)
        yield pa.RecordBatch.from_pydict(columns)


def record_headers(message: Message) -> list[tuple[str, bytes | None]]:
    """A consumed record's headers ([] for none) as librdkafka hands them to a consumer:
    (key, value bytes or None) pairs. cast: the stub types headers() as produce takes
    them (a dict, or str values, too)."""
    return cast(list[tuple[str, bytes | None]], message.headers() or [])


def _take(messages: Iterator[Message], count: int) -> list[Message]:
    chunk = []
    for message in messages:
        chunk.append(message)
        if len(chunk) >= count:
            break
    return chunk
