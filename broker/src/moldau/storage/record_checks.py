"""The checks that look at each record of a batch (KIP-467): keys in a compacted topic and
timestamps outside a CreateTime topic's bounds, reported per record as Kafka does. Only a
batch whose header says a record may fail them pays for reading its records."""

from __future__ import annotations

from moldau.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, KafkaError
from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import NO_TIMESTAMP, RecordBatch, iter_batches

from .config import LONG_MAX, LogConfig

KEYLESS = "Compacted topic cannot accept message without key in topic partition"


def check_keys(batch: RecordBatch, config: LogConfig, now_ms: int) -> None:
    try:
        keyless = any(record.key is None for record in batch.records())
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None
    refused = rejected_records(batch, config, now_ms) if keyless else None
    if refused is not None:
        raise refused


def batch_at(view: memoryview, position: int, size: int) -> RecordBatch:
    """The batch at position of a buffer the fast path checked from its headers."""
    return next(iter_batches(view[position : position + size]))


def rejected_records(batch: RecordBatch, config: LogConfig, now_ms: int) -> KafkaError | None:
    """KIP-467, as Kafka's LogValidator: each record gets at most one error, its key's (a
    compacted topic) before its timestamp's (a CreateTime topic), in record order. Any
    timestamp error makes the batch INVALID_TIMESTAMP with a fixed message; otherwise it
    is INVALID_RECORD, its message counting the errors and showing the first three. None
    when no record is refused (the batch's bounds only said one might be)."""
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    check_time = config.message_timestamp_type == "CreateTime"
    low, high = now_ms - before, now_ms + after
    errors: list[tuple[int, str]] = []
    timestamps = False
    try:
        for index, record in enumerate(batch.records()):
            if config.compact and record.key is None:
                errors.append((index, KEYLESS))
            elif check_time and record.timestamp != NO_TIMESTAMP and (
                    (before != LONG_MAX and record.timestamp < low)
                    or (after != LONG_MAX and record.timestamp > high)):
                timestamps = True
                errors.append((index, f"Timestamp {record.timestamp} of message with offset "
                                      f"{record.offset} is out of range. The timestamp should "
                                      f"be within [{low}, {high}]"))
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None
    if not errors:
        return None
    error: KafkaError
    if timestamps:
        error = InvalidTimestampError(
            "One or more records have been rejected due to invalid timestamp")
    else:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        error = InvalidRecordError(
            f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]")
    error.record_errors = tuple(errors)
    return error
