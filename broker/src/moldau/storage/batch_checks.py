"""Kafka's checks of one v2 batch, on a parsed RecordBatch (the general path of the
validation; its fast path makes the same checks from the header tuple), and the errors
both paths raise, with Kafka's messages."""

from __future__ import annotations

from moldau.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from moldau.protocol.records import ATTRIBUTES_OFFSET, RecordBatch

from .config import LONG_MAX, LogConfig
from .crc import crc32c
from .record_checks import check_keys, rejected_records


def check_crc(batch: RecordBatch) -> None:
    if crc32c(batch.buffer[ATTRIBUTES_OFFSET:]) != batch.crc:
        raise bad_crc(batch.base_offset)


def check_size(batch: RecordBatch, config: LogConfig) -> None:
    if batch.size_in_bytes > config.max_message_bytes:
        raise too_large(batch.size_in_bytes, config.max_message_bytes)


def check_batch(batch: RecordBatch, config: LogConfig, now_ms: int, from_client: bool) -> None:
    check_size(batch, config)
    check_crc(batch)
    if batch.records_count <= 0 or batch.last_offset_delta != batch.records_count - 1:
        raise bad_count(batch.records_count, batch.last_offset_delta)
    if from_client:
        if batch.base_offset != 0:  # Kafka checks every batch, not only the first
            raise InvalidRecordError(
                f"the baseOffset of a produced batch must be 0, not {batch.base_offset}"
            )
        if batch.is_control:
            raise InvalidRecordError("clients may not produce control batches")
    # Kafka bounds timestamps when the topic (not the batch) uses CreateTime; the
    # batch's bounds tell whether a record is out of them, and only then is each looked at
    if config.message_timestamp_type == "CreateTime" and outside_bounds(batch, config, now_ms):
        refused = rejected_records(batch, config, now_ms)
        if refused is not None:
            raise refused
    if config.compact:
        check_keys(batch, config, now_ms)


def outside_bounds(batch: RecordBatch, config: LogConfig, now_ms: int) -> bool:
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    # NO_TIMESTAMP (-1, e.g. converted magic 0 messages) is never out of bounds, as in Kafka.
    return ((before != LONG_MAX and 0 <= batch.base_timestamp < now_ms - before)
            or (after != LONG_MAX and batch.max_timestamp > now_ms + after))


# --- the errors, shared by the fast and the general path ------------------------------


def bad_crc(base_offset: int) -> CorruptRecordError:
    return CorruptRecordError(f"record batch at offset {base_offset} fails its CRC-32C check")


def too_large(size: int, max_message_bytes: int) -> RecordTooLargeError:
    return RecordTooLargeError(
        f"the record batch of {size} bytes is larger than "
        f"max.message.bytes ({max_message_bytes})"
    )


def set_too_large(size: int, segment_bytes: int) -> RecordBatchTooLargeError:
    return RecordBatchTooLargeError(
        f"the record set of {size} bytes exceeds segment.bytes ({segment_bytes})"
    )


def bad_count(count: int, last_offset_delta: int) -> InvalidRecordError:
    if count <= 0:
        return InvalidRecordError("a record batch must hold at least one record")
    return InvalidRecordError(
        f"record batch holds {count} records but its lastOffsetDelta is {last_offset_delta}"
    )


def out_of_order(base_offset: int, next_offset: int) -> InvalidRecordError:
    return InvalidRecordError(
        f"out of order offsets: batch at {base_offset} after {next_offset - 1}"
    )
