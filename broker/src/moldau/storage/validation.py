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

This module assigns the offsets and runs the two paths. The checks of a parsed batch and
the errors of both paths are `batch_checks.py`, the per-record checks `record_checks.py`,
recompression and legacy conversion `batch_conversion.py`, and the AppendInfo that
describes the result `append_info.py`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from moldau.errors import CorruptRecordError, InvalidRecordError
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
    TRANSACTIONAL_MASK,
    RecordBatch,
    iter_batches,
    patch_batch,
    set_max_timestamp,
)

from .append_info import (
    AppendInfo,
    ProducerBatch,
    add_batch,
    end_txn_marker,
    last_sequence,
)
from .batch_checks import (
    bad_count,
    bad_crc,
    check_batch,
    check_crc,
    out_of_order,
    set_too_large,
    too_large,
)
from .batch_conversion import convert_legacy, recompress
from .config import CODEC_IDS as _CODEC_IDS
from .config import LONG_MAX, LogConfig
from .crc import crc32c
from .record_checks import batch_at, rejected_records
from .segment_positions import BatchHeader

_unpack_header = HEADER.unpack_from
# baseOffset, batchLength, partitionLeaderEpoch: the front of a batch, outside the CRC.
# Rewriting batchLength with its own value patches offset and epoch in one call.
_FRONT = struct.Struct(">qii")
_patch_front = _FRONT.pack_into
_pack_front = _FRONT.pack
_new_tuple = tuple.__new__  # a NamedTuple from a tuple, without its Python-level __new__


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


def _producer_batch(view: memoryview, position: int, size: int, attributes: int,
                    producer_id: int, producer_epoch: int, base_sequence: int,
                    last_offset_delta: int, first_offset: int, last_offset: int,
                    max_timestamp: int) -> ProducerBatch:
    """The producer state's view of the batch at `position` of `view` (one with a
    producer id), as appended at `first_offset`; a control batch (a transaction marker,
    written by a coordinator) carries its marker."""
    producer_batch = ProducerBatch(
        producer_id, producer_epoch, base_sequence,
        last_sequence(base_sequence, last_offset_delta), first_offset, last_offset,
        max_timestamp, bool(attributes & TRANSACTIONAL_MASK))
    if attributes & CONTROL_MASK:
        producer_batch.is_control = True
        producer_batch.marker = end_txn_marker(RecordBatch(view[position : position + size]))
    return producer_batch


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

    # Check each batch from its header (the checks, order and errors of check_batch),
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
            raise too_large(size, max_message_bytes)
        if crc32c(view[position + ATTRIBUTES_OFFSET : position + size]) != crc:
            raise bad_crc(base_offset)
        if count <= 0 or last_offset_delta != count - 1:
            raise bad_count(count, last_offset_delta)
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
            refused = rejected_records(batch_at(view, position, size), config, now_ms)
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
            producer_batches.append(_producer_batch(
                view, position, size, attributes, producer_id, producer_epoch,
                base_sequence, last_offset_delta, offset, last_offset, batch_max_timestamp))
        position += size
        offset = last_offset + 1
    # Kafka checks this after validation, on the bytes to be written (recompression and
    # conversion change them), and after the per-batch max.message.bytes check.
    if position > segment_bytes:
        raise set_too_large(position, segment_bytes)
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
        buf = writable(convert_legacy(buf, target_codec))
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
            recompress(batches, target_codec, config),
            next_offset=next_offset,
            leader_epoch=leader_epoch,
            config=LogConfig.from_properties({"compression.type": "producer"}, config),
            now_ms=now_ms,
            from_client=from_client,
        )
    position = 0
    for batch in batches:
        check_batch(batch, config, now_ms, from_client)
        patch_batch(batch.buffer, offset, partition_leader_epoch=leader_epoch)
        if log_append:
            set_max_timestamp(batch.buffer, LOG_APPEND_TIME, now_ms)
        batch.refresh()
        add_batch(info, batch, position)
        position += batch.size_in_bytes
        offset = batch.last_offset + 1
    if log_append:
        info.log_append_time = now_ms
    # Kafka checks this after validation, on the bytes to be written (recompression and
    # conversion change them), and after the per-batch max.message.bytes check.
    if info.valid_bytes > config.segment_bytes:
        raise set_too_large(info.valid_bytes, config.segment_bytes)
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
            raise bad_crc(base_offset)
        if base_offset < next_offset:
            raise out_of_order(base_offset, next_offset)
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
            producer_batches.append(_producer_batch(
                view, position, size, attributes, producer_id, producer_epoch,
                base_sequence, last_offset_delta, base_offset, last_offset, batch_max_timestamp))
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
            check_crc(batch)
            if batch.base_offset < next_offset:
                raise out_of_order(batch.base_offset, next_offset)
            if info.first_offset < 0:
                info.first_offset = batch.base_offset
            add_batch(info, batch, position)
            position += batch.size_in_bytes
            next_offset = batch.last_offset + 1
    except ProtocolError as exc:
        raise CorruptRecordError(str(exc)) from None
    return info


__all__ = [
    "AppendInfo",
    "ProducerBatch",
    "validate_for_follower",
    "validate_for_leader",
]
