"""Validate produced record batches and assign their offsets (Kafka's LogValidator).

The fast path touches batch headers only: magic, sizes, CRC-32C, the count/offset-delta
agreement, timestamps bounds, then offsets (and LogAppendTime) are patched in place.
Per-record work happens only where Kafka's rules cannot be checked from the header: a
compacted topic (every record needs a key), a topic whose compression.type differs from
the producer's codec (the batch is re-encoded), and legacy message sets (converted to v2).

Header-level checks stand in for Kafka's per-record checks: the batch's first and max
timestamps bound the timestamps checked against message.timestamp.before/after.max.ms,
and lastOffsetDelta must equal recordsCount - 1 (what every producer writes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from crc32c import crc32c

from moldau.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from moldau.protocol import legacy
from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import (
    ATTRIBUTES_OFFSET,
    LOG_APPEND_TIME,
    MAGIC_OFFSET,
    RecordBatch,
    build_batch,
    iter_batches,
    patch_batch,
    set_max_timestamp,
)

from .config import LONG_MAX, LogConfig
from .segment import BatchHeader

_CODEC_IDS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@dataclass(slots=True)
class ProducerBatch:
    """The idempotence fields of one appended batch, for the producer state."""

    producer_id: int
    producer_epoch: int
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool


@dataclass(slots=True)
class AppendInfo:
    """What an append did (Kafka's LogAppendInfo)."""

    first_offset: int = -1
    last_offset: int = -1
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    log_append_time: int = -1
    record_count: int = 0
    valid_bytes: int = 0
    batches: list[BatchHeader] = field(default_factory=list)
    producer_batches: list[ProducerBatch] = field(default_factory=list)
    data: bytearray | memoryview | bytes = b""  # the bytes to write (patched in place)


def writable(records: bytes | bytearray | memoryview) -> bytearray | memoryview:
    """Offsets are patched in place; a read-only buffer is copied once."""
    view = records if isinstance(records, memoryview) else memoryview(records)
    return view if not view.readonly else bytearray(view)


def _first_magic(records: bytes | bytearray | memoryview) -> int:
    return records[MAGIC_OFFSET] if len(records) > MAGIC_OFFSET else 2


def validate_for_leader(
    records: bytes | bytearray | memoryview,
    *,
    next_offset: int,
    leader_epoch: int,
    config: LogConfig,
    now_ms: int,
    from_client: bool = True,
) -> AppendInfo:
    """Validate records produced to the leader and assign offsets from next_offset.

    Raises CorruptRecordError, InvalidRecordError, RecordTooLargeError,
    RecordBatchTooLargeError or InvalidTimestampError, with nothing written.
    """
    target_codec = _CODEC_IDS.get(config.compression_type)  # None: keep the producer's
    if _first_magic(records) in (0, 1):
        records = _convert_legacy(records, target_codec)
    log_append = config.message_timestamp_type == "LogAppendTime"
    buf = writable(records)
    info = AppendInfo(first_offset=next_offset, data=buf)
    offset = next_offset
    try:
        batches = list(iter_batches(buf))
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None
    if not batches:
        raise InvalidRecordError("the produce request carries no record batch")
    if target_codec is not None and any(b.compression != target_codec for b in batches):
        return validate_for_leader(
            _recompress(batches, target_codec, config),
            next_offset=next_offset,
            leader_epoch=leader_epoch,
            config=LogConfig.from_properties({"compression.type": "producer"}, config),
            now_ms=now_ms,
            from_client=from_client,
        )
    position = 0
    for batch in batches:
        _check_batch(batch, config, now_ms, from_client)
        patch_batch(batch.buffer, offset, partition_leader_epoch=leader_epoch)
        if log_append:
            set_max_timestamp(batch.buffer, LOG_APPEND_TIME, now_ms)
        batch.refresh()
        _record(info, batch, position)
        position += batch.size_in_bytes
        offset = batch.last_offset + 1
    if log_append:
        info.log_append_time = now_ms
    # Kafka checks this after validation, on the bytes to be written (recompression and
    # conversion change them), and after the per-batch max.message.bytes check.
    if info.valid_bytes > config.segment_bytes:
        raise RecordBatchTooLargeError(
            f"the record set of {info.valid_bytes} bytes exceeds segment.bytes "
            f"({config.segment_bytes})"
        )
    return info


def validate_for_follower(records: bytes | bytearray | memoryview, next_offset: int) -> AppendInfo:
    """A follower keeps the leader's offsets: check structure, CRC and monotonic offsets."""
    buf = writable(records)
    info = AppendInfo(first_offset=-1, data=buf)
    position = 0
    try:
        for batch in iter_batches(buf):
            _check_crc(batch)
            if batch.base_offset < next_offset:
                raise InvalidRecordError(
                    f"out of order offsets: batch at {batch.base_offset} after {next_offset - 1}"
                )
            if info.first_offset < 0:
                info.first_offset = batch.base_offset
            _record(info, batch, position)
            position += batch.size_in_bytes
            next_offset = batch.last_offset + 1
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None
    return info


def _record(info: AppendInfo, batch: RecordBatch, position: int) -> None:
    header = BatchHeader(
        position,
        batch.base_offset,
        batch.last_offset,
        batch.size_in_bytes,
        batch.max_timestamp,
        batch.partition_leader_epoch,
    )
    info.batches.append(header)
    info.last_offset = batch.last_offset
    info.record_count += batch.records_count
    info.valid_bytes += batch.size_in_bytes
    if batch.max_timestamp > info.max_timestamp:
        info.max_timestamp = batch.max_timestamp
        info.offset_of_max_timestamp = batch.last_offset
    if batch.producer_id >= 0:
        info.producer_batches.append(
            ProducerBatch(
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
                batch.last_sequence,
                batch.base_offset,
                batch.last_offset,
                batch.max_timestamp,
                batch.is_transactional,
            )
        )


def _check_crc(batch: RecordBatch) -> None:
    if crc32c(batch.buffer[ATTRIBUTES_OFFSET:]) != batch.crc:
        raise CorruptRecordError(
            f"record batch at offset {batch.base_offset} fails its CRC-32C check"
        )


def _check_size(batch: RecordBatch, config: LogConfig) -> None:
    if batch.size_in_bytes > config.max_message_bytes:
        raise RecordTooLargeError(
            f"the record batch of {batch.size_in_bytes} bytes is larger than "
            f"max.message.bytes ({config.max_message_bytes})"
        )


def _check_batch(batch: RecordBatch, config: LogConfig, now_ms: int, from_client: bool) -> None:
    _check_size(batch, config)
    _check_crc(batch)
    if batch.records_count <= 0:
        raise InvalidRecordError("a record batch must hold at least one record")
    if batch.last_offset_delta != batch.records_count - 1:
        raise InvalidRecordError(
            f"record batch holds {batch.records_count} records but its lastOffsetDelta is "
            f"{batch.last_offset_delta}"
        )
    if from_client:
        if batch.base_offset != 0:  # Kafka checks every batch, not only the first
            raise InvalidRecordError(
                f"the baseOffset of a produced batch must be 0, not {batch.base_offset}"
            )
        if batch.is_control:
            raise InvalidRecordError("clients may not produce control batches")
    # Kafka bounds timestamps when the topic (not the batch) uses CreateTime.
    if config.message_timestamp_type == "CreateTime":
        _check_timestamps(batch, config, now_ms)
    if config.compact:
        _check_keys(batch)


def _check_timestamps(batch: RecordBatch, config: LogConfig, now_ms: int) -> None:
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    # NO_TIMESTAMP (-1, e.g. converted magic 0 messages) is never out of bounds, as in Kafka.
    if before != LONG_MAX and 0 <= batch.base_timestamp < now_ms - before:
        raise InvalidTimestampError(
            f"timestamp {batch.base_timestamp} is more than message.timestamp.before.max.ms "
            f"({before}) before the broker's time {now_ms}"
        )
    if after != LONG_MAX and batch.max_timestamp > now_ms + after:
        raise InvalidTimestampError(
            f"timestamp {batch.max_timestamp} is more than message.timestamp.after.max.ms "
            f"({after}) after the broker's time {now_ms}"
        )


def _check_keys(batch: RecordBatch) -> None:
    try:
        for record in batch.records():
            if record.key is None:
                raise InvalidRecordError(
                    "Compacted topic cannot accept message without key in topic partition"
                )
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None


def _recompress(batches: list[RecordBatch], codec: int, config: LogConfig) -> bytearray:
    """Re-encode every batch with the topic's codec (slow path), keeping producer fields."""
    out = bytearray()
    try:
        for batch in batches:
            # Kafka checks the producer's batch (size, then CRC) before it recompresses.
            _check_size(batch, config)
            _check_crc(batch)
            records = list(batch.records())
            out += build_batch(
                [(r.key, r.value, r.headers, r.timestamp) for r in records],
                compression=codec,
                timestamp_type=batch.timestamp_type,
                producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence,
                is_transactional=batch.is_transactional,
                offset_deltas=[r.offset - batch.base_offset for r in records],
            )
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None
    return out


def _convert_legacy(records: bytes | bytearray | memoryview, target_codec: int | None) -> bytes:
    """Magic 0/1 message sets from old producers become one v2 batch (Kafka 3.x stores v2),
    compressed like the producer's set unless the topic names a codec (as Kafka's
    LogValidator: the source codec is kept with compression.type=producer)."""
    try:
        if target_codec is None:
            codecs = (entry.compression for entry in legacy.iter_entries(records))
            target_codec = next((c for c in codecs if c), 0)
        return legacy.convert_to_v2(records, compression=target_codec)
    except ProtocolError as exc:
        raise CorruptRecordError(f"invalid legacy message set: {exc}") from None


__all__ = [
    "AppendInfo",
    "ProducerBatch",
    "validate_for_follower",
    "validate_for_leader",
]
