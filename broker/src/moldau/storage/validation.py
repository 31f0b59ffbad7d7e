"""Validate produced record batches and assign their offsets (Kafka's LogValidator).

The fast path touches batch headers only: magic, sizes, CRC-32C, the count/offset-delta
agreement, timestamps bounds, then offsets (and LogAppendTime) are patched in place.
Per-record work happens only where Kafka's rules cannot be checked from the header: a
compacted topic (every record needs a key), a topic whose compression.type differs from
the producer's codec (the batch is re-encoded), and legacy message sets (converted to v2).

Header-level checks stand in for Kafka's per-record checks: the batch's first and max
timestamps bound the timestamps checked against message.timestamp.before/after.max.ms,
and lastOffsetDelta must equal recordsCount - 1 (what every producer writes).

On the fast path each header is unpacked once into a tuple and checked from it; no
RecordBatch is built. Everything else (legacy sets, recompression, compacted topics, and
malformed input, whose errors it reports) takes the general path, batch by RecordBatch.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from moldau.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from moldau.protocol import legacy
from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    TRANSACTIONAL_MASK,
    RecordBatch,
    build_batch,
    iter_batches,
    patch_batch,
    set_max_timestamp,
)

from .config import CODEC_IDS as _CODEC_IDS
from .config import LONG_MAX, LogConfig
from .crc import crc32c
from .segment import BatchHeader, batch_header

_INT32_MAX = 0x7FFFFFFF

_unpack_header = HEADER.unpack_from
# baseOffset, batchLength, partitionLeaderEpoch: the front of a batch, outside the CRC.
# Rewriting batchLength with its own value patches offset and epoch in one call.
_FRONT = struct.Struct(">qii")
_patch_front = _FRONT.pack_into
_pack_front = _FRONT.pack
_new_tuple = tuple.__new__  # a NamedTuple from a tuple, without its Python-level __new__


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
    # None, or the bytes written in place of data's first len(head) bytes: the patched
    # front of a read-only batch that was not copied (see validate_for_leader)
    head: bytes | None = None

    def stored(self) -> bytes:
        """The bytes the append writes (valid_bytes of them), as they land on disk."""
        data = bytes(self.data[: self.valid_bytes])
        return data if self.head is None else self.head + data[len(self.head) :]


def writable(records: bytes | bytearray | memoryview) -> bytearray | memoryview:
    """Offsets are patched in place; a read-only buffer is copied once."""
    kind = type(records)
    if kind is bytes:
        return bytearray(records)  # straight from bytes: cheaper than through a view
    if kind is bytearray:
        return memoryview(records)
    # type(records) again, not kind: mypy narrows a union only on the call itself
    view = records if type(records) is memoryview else memoryview(records)
    return view if not view.readonly else bytearray(view)


def _first_magic(records: bytes | bytearray | memoryview) -> int:
    return records[MAGIC_OFFSET] if len(records) > MAGIC_OFFSET else 2


def validate_for_leader(
    records: bytes | bytearray | memoryview,
    next_offset: int,
    leader_epoch: int,
    config: LogConfig,
    now_ms: int,
    from_client: bool = True,
) -> AppendInfo:
    """Validate records produced to the leader and assign offsets from next_offset.

    Raises CorruptRecordError, InvalidRecordError, RecordTooLargeError,
    RecordBatchTooLargeError or InvalidTimestampError, with nothing written.

    A writable buffer (what the network layer hands over: a view of the request frame)
    is patched in place. A read-only one holding one batch of a CreateTime topic (the
    common produce) is not copied: its new first 16 bytes (baseOffset, batchLength,
    partitionLeaderEpoch, outside the CRC) go to AppendInfo.head, written in their place.
    Any other read-only input is copied once and patched.
    """
    compact, target_codec, max_message_bytes, log_append, before, after, segment_bytes = (
        config.leader_checks
    )
    # The type is tested on the call itself, which mypy narrows, the common case first.
    buf: bytes | bytearray | memoryview
    if type(records) is memoryview:  # what the network layer hands over
        buf, readonly = records, records.readonly
    elif type(records) is bytes:
        buf, readonly = records, True
    elif type(records) is bytearray:
        buf, readonly = records, False
    else:
        buf = memoryview(records)
        readonly = buf.readonly
    # The fast path: well-formed v2 batches whose headers say all there is to check (no
    # compacted topic, no codec change), each header parsed once into a tuple. Anything
    # else, malformed input included, takes the general path, which reports it.
    headers: Sequence[tuple] | None = None
    end = len(buf)
    if end >= HEADER_SIZE and not compact:
        header = _unpack_header(buf, 0)
        # One well-formed batch, what a producer sends per partition, needs no _scan.
        # header[1] is the batchLength, header[3] the magic, header[5] the attributes.
        if (
            header[1] + LOG_OVERHEAD == end
            and header[3] == MAGIC
            and header[1] >= MIN_BATCH_LENGTH
            and (target_codec is None or header[5] & COMPRESSION_MASK == target_codec)
        ):
            headers = (header,)
        else:
            headers = _scan(buf, target_codec)
    if headers is None:
        return _validate_general(
            writable(records),
            next_offset=next_offset,
            leader_epoch=leader_epoch,
            config=config,
            now_ms=now_ms,
            from_client=from_client,
        )
    head = None
    if readonly and (log_append or len(headers) > 1):
        buf, readonly = bytearray(buf), False  # more than the front changes: one copy
    view = buf = buf if type(buf) is memoryview else memoryview(buf)

    # Check each batch from its header (the checks, order and errors of _check_batch),
    # patch its offsets (in place, or into head), and describe the append.
    offset = next_offset
    max_timestamp = offset_of_max_timestamp = -1
    record_count = 0
    batches = []
    producer_batches = []
    position = 0
    for header in headers:
        (
            base_offset,
            length,
            _epoch,
            _magic,
            crc,
            attributes,
            last_offset_delta,
            base_timestamp,
            batch_max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        ) = header
        size = length + LOG_OVERHEAD
        if size > max_message_bytes:
            raise _too_large(size, max_message_bytes)
        if crc32c(view[position + ATTRIBUTES_OFFSET : position + size]) != crc:
            raise _bad_crc(base_offset)
        if count <= 0 or last_offset_delta != count - 1:
            raise _bad_count(count, last_offset_delta)
        if from_client:
            if base_offset != 0:  # Kafka checks every batch, not only the first
                raise InvalidRecordError(
                    f"the baseOffset of a produced batch must be 0, not {base_offset}"
                )
            if attributes & CONTROL_MASK:
                raise InvalidRecordError("clients may not produce control batches")
        # CreateTime: Kafka bounds the timestamps (LogAppendTime: both bounds LONG_MAX)
        if ((before != LONG_MAX and 0 <= base_timestamp < now_ms - before)
                or (after != LONG_MAX and batch_max_timestamp > now_ms + after)):
            refused = _rejected_records(_batch_at(view, position, size), config, now_ms)
            if refused is not None:
                raise refused
        if readonly:  # one batch (see above)
            head = _pack_front(offset, length, leader_epoch)
        else:
            _patch_front(buf, position, offset, length, leader_epoch)
            if log_append:
                set_max_timestamp(buf, LOG_APPEND_TIME, now_ms, pos=position)
                batch_max_timestamp = now_ms
        last_offset = offset + last_offset_delta
        batches.append(
            _new_tuple(
                BatchHeader,
                (position, offset, last_offset, size, batch_max_timestamp, leader_epoch),
            )
        )
        record_count += count
        if batch_max_timestamp > max_timestamp:
            max_timestamp = batch_max_timestamp
            offset_of_max_timestamp = last_offset
        if producer_id >= 0:
            producer_batches.append(
                ProducerBatch(
                    producer_id,
                    producer_epoch,
                    base_sequence,
                    _last_sequence(base_sequence, last_offset_delta),
                    offset,
                    last_offset,
                    batch_max_timestamp,
                    bool(attributes & TRANSACTIONAL_MASK),
                )
            )
        position += size
        offset = last_offset + 1
    # Kafka checks this after validation, on the bytes to be written (recompression and
    # conversion change them), and after the per-batch max.message.bytes check.
    if position > segment_bytes:
        raise _set_too_large(position, segment_bytes)
    return AppendInfo(
        next_offset,
        offset - 1,
        max_timestamp,
        offset_of_max_timestamp,
        now_ms if log_append else -1,
        record_count,
        position,
        batches,
        producer_batches,
        buf,
        head,
    )


def _scan(buf: bytes | bytearray | memoryview, target_codec: int | None) -> list[tuple] | None:
    """The parsed headers of a well-formed blob of v2 batches, one HEADER tuple each, or
    None when the general path must handle it (legacy or malformed input, a codec change).
    """
    end = len(buf)
    headers = []
    position = 0
    while end - position >= HEADER_SIZE:
        header = _unpack_header(buf, position)
        length = header[1]
        # header[3] is the magic, header[5] the attributes.
        if header[3] != MAGIC or length < MIN_BATCH_LENGTH:
            return None
        if target_codec is not None and header[5] & COMPRESSION_MASK != target_codec:
            return None
        position += LOG_OVERHEAD + length
        if position > end:
            return None
        headers.append(header)
        if position == end:
            return headers
    return None  # nothing, or a tail shorter than a batch header


def _last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """Sequence of the last record; sequences wrap from INT32_MAX to 0."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (base_sequence + last_offset_delta) & _INT32_MAX


def _validate_general(
    buf: bytearray | memoryview,
    *,
    next_offset: int,
    leader_epoch: int,
    config: LogConfig,
    now_ms: int,
    from_client: bool = True,
) -> AppendInfo:
    """Every case: legacy conversion, recompression, compacted topics, and the error
    reports of malformed input, with a RecordBatch view per batch. buf is writable()."""
    target_codec = _CODEC_IDS.get(config.compression_type)  # None: keep the producer's
    if _first_magic(buf) in (0, 1):
        buf = writable(_convert_legacy(buf, target_codec))
    log_append = config.message_timestamp_type == "LogAppendTime"
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
        raise _set_too_large(info.valid_bytes, config.segment_bytes)
    return info


def validate_for_follower(records: bytes | bytearray | memoryview, next_offset: int) -> AppendInfo:
    """A follower keeps the leader's offsets: check structure, CRC and monotonic offsets."""
    buf = writable(records)
    headers = _scan(buf, None)
    if headers is None:  # malformed (or empty): the general path reports it
        return _validate_follower_general(buf, next_offset)
    view = buf if type(buf) is memoryview else memoryview(buf)
    max_timestamp = offset_of_max_timestamp = -1
    record_count = 0
    batches = []
    producer_batches = []
    position = 0
    for header in headers:
        (
            base_offset,
            length,
            epoch,
            _magic,
            crc,
            attributes,
            last_offset_delta,
            _base_timestamp,
            batch_max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        ) = header
        size = length + LOG_OVERHEAD
        if crc32c(view[position + ATTRIBUTES_OFFSET : position + size]) != crc:
            raise _bad_crc(base_offset)
        if base_offset < next_offset:
            raise _out_of_order(base_offset, next_offset)
        last_offset = base_offset + last_offset_delta
        batches.append(
            _new_tuple(
                BatchHeader, (position, base_offset, last_offset, size, batch_max_timestamp, epoch)
            )
        )
        record_count += count
        if batch_max_timestamp > max_timestamp:
            max_timestamp = batch_max_timestamp
            offset_of_max_timestamp = last_offset
        if producer_id >= 0:
            producer_batches.append(
                ProducerBatch(
                    producer_id,
                    producer_epoch,
                    base_sequence,
                    _last_sequence(base_sequence, last_offset_delta),
                    base_offset,
                    last_offset,
                    batch_max_timestamp,
                    bool(attributes & TRANSACTIONAL_MASK),
                )
            )
        position += size
        next_offset = last_offset + 1
    return AppendInfo(
        headers[0][0],
        next_offset - 1,
        max_timestamp,
        offset_of_max_timestamp,
        -1,
        record_count,
        position,
        batches,
        producer_batches,
        buf,
    )


def _validate_follower_general(buf: bytearray | memoryview, next_offset: int) -> AppendInfo:
    info = AppendInfo(first_offset=-1, data=buf)
    position = 0
    try:
        for batch in iter_batches(buf):
            _check_crc(batch)
            if batch.base_offset < next_offset:
                raise _out_of_order(batch.base_offset, next_offset)
            if info.first_offset < 0:
                info.first_offset = batch.base_offset
            _record(info, batch, position)
            position += batch.size_in_bytes
            next_offset = batch.last_offset + 1
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None
    return info


def _out_of_order(base_offset: int, next_offset: int) -> InvalidRecordError:
    return InvalidRecordError(
        f"out of order offsets: batch at {base_offset} after {next_offset - 1}"
    )


def _record(info: AppendInfo, batch: RecordBatch, position: int) -> None:
    info.batches.append(batch_header(batch, position))
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
        raise _bad_crc(batch.base_offset)


def _check_size(batch: RecordBatch, config: LogConfig) -> None:
    if batch.size_in_bytes > config.max_message_bytes:
        raise _too_large(batch.size_in_bytes, config.max_message_bytes)


def _check_batch(batch: RecordBatch, config: LogConfig, now_ms: int, from_client: bool) -> None:
    _check_size(batch, config)
    _check_crc(batch)
    if batch.records_count <= 0 or batch.last_offset_delta != batch.records_count - 1:
        raise _bad_count(batch.records_count, batch.last_offset_delta)
    if from_client:
        if batch.base_offset != 0:  # Kafka checks every batch, not only the first
            raise InvalidRecordError(
                f"the baseOffset of a produced batch must be 0, not {batch.base_offset}"
            )
        if batch.is_control:
            raise InvalidRecordError("clients may not produce control batches")
    # Kafka bounds timestamps when the topic (not the batch) uses CreateTime; the
    # batch's bounds tell whether a record is out of them, and only then is each looked at
    if config.message_timestamp_type == "CreateTime" and _outside_bounds(batch, config, now_ms):
        refused = _rejected_records(batch, config, now_ms)
        if refused is not None:
            raise refused
    if config.compact:
        _check_keys(batch, config, now_ms)


def _outside_bounds(batch: RecordBatch, config: LogConfig, now_ms: int) -> bool:
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    # NO_TIMESTAMP (-1, e.g. converted magic 0 messages) is never out of bounds, as in Kafka.
    return ((before != LONG_MAX and 0 <= batch.base_timestamp < now_ms - before)
            or (after != LONG_MAX and batch.max_timestamp > now_ms + after))


# --- the errors, shared by the fast and the general path ------------------------------


def _bad_crc(base_offset: int) -> CorruptRecordError:
    return CorruptRecordError(f"record batch at offset {base_offset} fails its CRC-32C check")


def _too_large(size: int, max_message_bytes: int) -> RecordTooLargeError:
    return RecordTooLargeError(
        f"the record batch of {size} bytes is larger than "
        f"max.message.bytes ({max_message_bytes})"
    )


def _set_too_large(size: int, segment_bytes: int) -> RecordBatchTooLargeError:
    return RecordBatchTooLargeError(
        f"the record set of {size} bytes exceeds segment.bytes ({segment_bytes})"
    )


def _bad_count(count: int, last_offset_delta: int) -> InvalidRecordError:
    if count <= 0:
        return InvalidRecordError("a record batch must hold at least one record")
    return InvalidRecordError(
        f"record batch holds {count} records but its lastOffsetDelta is {last_offset_delta}"
    )


KEYLESS = "Compacted topic cannot accept message without key in topic partition"


def _check_keys(batch: RecordBatch, config: LogConfig, now_ms: int) -> None:
    try:
        keyless = any(record.key is None for record in batch.records())
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None
    refused = _rejected_records(batch, config, now_ms) if keyless else None
    if refused is not None:
        raise refused


def _batch_at(view: memoryview, position: int, size: int) -> RecordBatch:
    """The batch at position of a buffer the fast path checked from its headers."""
    return next(iter_batches(view[position : position + size]))


def _rejected_records(batch: RecordBatch, config: LogConfig, now_ms: int) -> KafkaError | None:
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
                compression_level=_compression_level(codec, config),
            )
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None
    return out


def _compression_level(codec: int, config: LogConfig) -> int | None:
    """The topic's compression.<codec>.level (KIP-390) for a codec that has levels."""
    if codec == _CODEC_IDS["gzip"]:
        return config.compression_gzip_level  # -1: zlib's default, as Kafka's
    if codec == _CODEC_IDS["lz4"]:
        # Kafka's LZ4 levels run to 17; the lz4 library's high-compression ones stop at 16
        return min(config.compression_lz4_level, 16)
    if codec == _CODEC_IDS["zstd"]:
        return config.compression_zstd_level
    return None


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
