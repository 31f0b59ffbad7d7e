"""Kafka record batches, message format v2 (magic 2).

Layout of a batch (all integers big-endian; 61-byte header, then the records):

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 |
    crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 |
    maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32 |
    recordsCount int32 | records...

batchLength counts the bytes after itself. The CRC-32C covers attributes through the
end of the batch, so the broker can assign baseOffset and partitionLeaderEpoch without
recomputing it. When the batch is compressed, everything after recordsCount is one
compressed blob holding the records back to back.

The broker's hot path only touches headers: RecordBatch is a view over the batch bytes
that parses the header once with one precompiled Struct and never decodes records
unless records() is called. Every malformed input raises ProtocolError.
"""

import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, NoReturn, Protocol

from crc32c import crc32c

from . import compression as codecs
from .errors import ProtocolError
from .primitives import read_varint, read_varlong, write_varint, write_varlong

BytesLike = bytes | bytearray | memoryview

MAGIC = 2

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61, Kafka's RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = 12  # baseOffset + batchLength: what precedes the counted bytes
BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # smallest valid batchLength (49)

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# Control record types (key of the single record of a control batch).
CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_INT32_MAX = 0x7FFFFFFF
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_ATTRS_LAST_DELTA = struct.Struct(">hi")
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")


class Record(NamedTuple):
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class SimpleRecord(NamedTuple):
    """Input of build_batch; timestamp None means "now"."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str | bytes, bytes | None]] = ()
    timestamp: int | None = None


RecordHeaders = Sequence[tuple[str | bytes, bytes | None]]


class RecordLike(Protocol):
    """A record given by attributes (Record, SimpleRecord); `headers` and `timestamp`
    are read when present."""

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


# One record for build_batch: a record-like object or a tuple
# (key, value[, headers[, timestamp]]).
RecordInput = (
    RecordLike
    | tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, RecordHeaders]
    | tuple[bytes | None, bytes | None, RecordHeaders, int | None]
)


class ControlRecord(NamedTuple):
    """The decoded record of a control batch (transaction marker)."""

    offset: int
    timestamp: int
    key_version: int
    control_type: int  # CONTROL_ABORT, CONTROL_COMMIT or another (KRaft) type
    marker_version: int | None  # EndTransactionMarker fields, for ABORT/COMMIT only
    coordinator_epoch: int | None


class RecordBatch:
    """A view over the bytes of one v2 batch: header fields only, records on demand.

    `buffer` is a memoryview of exactly this batch. The header fields are read once at
    construction; after patching the bytes in place, call refresh() (patch() does).
    """

    __slots__ = (
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "buffer",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "records_count",
    )

    def __init__(self, buffer: BytesLike) -> None:
        self.buffer = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        if len(self.buffer) < HEADER_SIZE:
            raise ProtocolError(
                f"record batch of {len(self.buffer)} bytes is shorter than the "
                f"{HEADER_SIZE}-byte batch header"
            )
        self.refresh()

    def refresh(self) -> None:
        """Re-read (and sanity-check) the header fields from the buffer."""
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = HEADER.unpack_from(self.buffer)
        if self.magic != MAGIC:
            raise _bad_magic(self.magic, 0)
        if self.batch_length + LOG_OVERHEAD != len(self.buffer):
            raise ProtocolError(
                f"record batch has batchLength {self.batch_length} but its buffer holds "
                f"{len(self.buffer) - LOG_OVERHEAD} bytes after the length field"
            )

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """Set by the log cleaner: baseTimestamp then holds the tombstone delete horizon."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap from INT32_MAX to 0."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & _INT32_MAX

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    def compute_crc(self) -> int:
        return crc32c(self.buffer[ATTRIBUTES_OFFSET:])

    def verify_crc(self) -> bool:
        return crc32c(self.buffer[ATTRIBUTES_OFFSET:]) == self.crc

    def records_data(self, max_size: int = codecs.DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
        """The bytes of the records, decompressed if the batch is compressed."""
        body = self.buffer[HEADER_SIZE:]
        codec = self.attributes & COMPRESSION_MASK
        return codecs.decompress(codec, body, max_size) if codec else bytes(body)

    def records(
        self, max_decompressed_size: int = codecs.DEFAULT_MAX_DECOMPRESSED_SIZE
    ) -> Iterator[Record]:
        """Decode the records lazily (decompressing on the first next())."""
        count = self.records_count
        if count < 0:
            raise ProtocolError(
                f"batch at offset {self.base_offset} has a negative record count {count}"
            )
        if count == 0:
            return iter(())
        append_time = self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else None
        return _decode_records(self, count, append_time, max_decompressed_size)

    def control_records(self) -> Iterator[ControlRecord]:
        """Decode the records of a control batch as transaction markers."""
        if not self.attributes & CONTROL_MASK:
            raise ProtocolError(f"batch at offset {self.base_offset} is not a control batch")
        return (decode_control_record(record) for record in self.records())

    def patch(
        self,
        base_offset: int,
        *,
        partition_leader_epoch: int | None = None,
        log_append_time: int | None = None,
    ) -> bool:
        """patch_batch() on this view's (writable) buffer; refreshes the fields."""
        changed = patch_batch(
            self.buffer,
            base_offset,
            partition_leader_epoch=partition_leader_epoch,
            log_append_time=log_append_time,
        )
        self.refresh()
        return changed

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, codec={self.compression}, "
            f"attributes={self.attributes:#x}, producer_id={self.producer_id}, "
            f"size={self.size_in_bytes})"
        )


class BatchIterator:
    """Iterates the batches of a records blob, header parsing only.

    After iteration, `position` is the number of bytes of complete batches seen, and
    `truncated` tells whether the blob ended with a partial batch (only possible with
    allow_partial=True: fetch responses may cut the last batch short).
    """

    __slots__ = ("_end", "_view", "allow_partial", "position", "truncated")

    def __init__(self, buf: BytesLike, *, allow_partial: bool = False) -> None:
        self._view = buf if isinstance(buf, memoryview) else memoryview(buf)
        self._end = len(self._view)
        self.allow_partial = allow_partial
        self.position = 0
        self.truncated = False

    def __iter__(self) -> "BatchIterator":
        return self

    def __next__(self) -> RecordBatch:
        pos = self.position
        remaining = self._end - pos
        if remaining <= 0:
            raise StopIteration
        view = self._view
        if remaining > MAGIC_OFFSET:
            magic = view[pos + MAGIC_OFFSET]
            if magic != MAGIC:
                raise _bad_magic(magic, pos)
        if remaining < LOG_OVERHEAD:
            self._partial(pos, f"only {remaining} bytes remain")
        length = _I32.unpack_from(view, pos + LENGTH_OFFSET)[0]
        if length < MIN_BATCH_LENGTH:
            raise ProtocolError(
                f"record batch at byte {pos} has batchLength {length}, below the "
                f"minimum of {MIN_BATCH_LENGTH}"
            )
        end = pos + LOG_OVERHEAD + length
        if end > self._end:
            self._partial(pos, f"batchLength {length} but only {remaining - 12} bytes")
        self.position = end
        return RecordBatch(view[pos:end])

    def _partial(self, pos: int, why: str) -> NoReturn:
        if self.allow_partial:
            self.truncated = True
            self._end = pos  # stop for good
            raise StopIteration
        raise ProtocolError(f"truncated record batch at byte {pos}: {why}")


def iter_batches(buf: BytesLike, *, allow_partial: bool = False) -> BatchIterator:
    """Iterate the v2 batches of a records blob (memoryview/bytes/bytearray)."""
    return BatchIterator(buf, allow_partial=allow_partial)


def first_batch_is_transactional(records: BytesLike | None) -> bool:
    """Whether the first record batch in `records` has the transactional attribute (the
    low byte of the big-endian int16 attributes), read without parsing the batch: what
    a request's authorization looks at. Too short or an older magic: no."""
    return (records is not None and len(records) > ATTRIBUTES_OFFSET + 1
            and records[MAGIC_OFFSET] == MAGIC
            and bool(records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK))


def complete_length(buf: BytesLike) -> int:
    """The bytes of the whole batches at the start of buf: a fetch response may end with
    a batch cut short by the size limits, which its reader drops."""
    batches = BatchIterator(buf, allow_partial=True)
    for _ in batches:
        pass
    return batches.position


def _bad_magic(magic: int, pos: int) -> ProtocolError:
    if magic in (0, 1):
        return ProtocolError(
            f"entry at byte {pos} is a legacy message set (magic {magic}), not a v2 "
            "record batch; decode it with moldau.protocol.legacy"
        )
    return ProtocolError(f"record batch at byte {pos} has unknown magic {magic}")


# --- in-place patching (produce path) ---------------------------------------------


def patch_batch(
    buf: bytearray | memoryview,
    base_offset: int,
    *,
    partition_leader_epoch: int | None = None,
    log_append_time: int | None = None,
    pos: int = 0,
) -> bool:
    """Assign offsets (and leader epoch, log append time) to the batch at buf[pos:].

    baseOffset and partitionLeaderEpoch lie outside the CRC. With log_append_time, the
    timestamp type becomes LogAppendTime and maxTimestamp the append time, as Kafka's
    setMaxTimestamp does; the CRC is recomputed only if those bytes changed. Returns
    whether the CRC was recomputed.
    """
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)
    if partition_leader_epoch is not None:
        _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, partition_leader_epoch)
    if log_append_time is None:
        return False
    return set_max_timestamp(buf, LOG_APPEND_TIME, log_append_time, pos=pos)


def set_max_timestamp(
    buf: bytearray | memoryview, timestamp_type: int, max_timestamp: int, *, pos: int = 0
) -> bool:
    """Set the timestamp type bit and maxTimestamp; recompute the CRC if they changed."""
    attributes = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    new_attributes = (attributes & ~TIMESTAMP_TYPE_MASK) | (
        TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0
    )
    current = _I64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)[0]
    if new_attributes == attributes and current == max_timestamp:
        return False
    length = _I32.unpack_from(buf, pos + LENGTH_OFFSET)[0]
    end = pos + LOG_OVERHEAD + length
    if length < MIN_BATCH_LENGTH or end > len(buf):
        raise ProtocolError(f"record batch at byte {pos} has an invalid batchLength {length}")
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, new_attributes)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    _U32.pack_into(buf, pos + CRC_OFFSET, crc32c(view[pos + ATTRIBUTES_OFFSET : end]))
    return True


# --- record decoding ---------------------------------------------------------------


def _as_int64(value: int) -> int:
    """value in Java's 64-bit arithmetic, which wraps. A record's timestamp is its batch's
    base timestamp plus a delta: for timestamps more than 2**63 ms apart (Long.MIN_VALUE
    beside a real time) Kafka writes a delta that wrapped, and reads it back by wrapping."""
    if _INT64_MIN <= value <= _INT64_MAX:
        return value
    return (value - _INT64_MIN) % (1 << 64) + _INT64_MIN


def _decode_records(
    batch: RecordBatch, count: int, append_time: int | None, max_size: int
) -> Iterator[Record]:
    # A generator: nothing is decompressed or decoded before the first next().
    data = batch.records_data(max_size)
    base_offset = batch.base_offset
    base_timestamp = batch.base_timestamp
    end = len(data)
    pos = 0
    for index in range(count):
        try:
            record, pos = _decode_record(data, pos, end, base_offset, base_timestamp, append_time)
        except IndexError:
            raise ProtocolError(
                f"record {index} of batch at offset {base_offset} is truncated"
            ) from None
        except ProtocolError as exc:
            raise ProtocolError(f"record {index} of batch at offset {base_offset}: {exc}") from None
        yield record
    if pos != end:
        raise ProtocolError(
            f"batch at offset {base_offset} declares {count} records but {end - pos} bytes "
            "remain after them"
        )


def _decode_record(
    data: bytes, pos: int, end: int, base_offset: int, base_timestamp: int, append_time
) -> tuple[Record, int]:
    # One-byte varints are the common case, so they are decoded inline.
    b = data[pos]
    length, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else read_varint(data, pos)
    record_end = pos + length
    if length < 0 or record_end > end:
        raise ProtocolError(
            f"record length {length} at byte {pos} runs past the {end} bytes of records"
        )
    pos += 1  # record attributes: unused
    b = data[pos]
    ts_delta, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else read_varlong(data, pos)
    b = data[pos]
    offset_delta, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else read_varint(data, pos)
    key, pos = _read_bytes(data, pos, record_end, "key")
    value, pos = _read_bytes(data, pos, record_end, "value")
    b = data[pos]
    header_count, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else read_varint(data, pos)
    headers = []
    if header_count:
        # Each header takes at least 2 bytes: reject absurd counts before looping.
        if header_count < 0 or header_count * 2 > record_end - pos:
            raise ProtocolError(f"invalid header count {header_count}")
        for _ in range(header_count):
            header_key, pos = _read_bytes(data, pos, record_end, "header key")
            if header_key is None:
                raise ProtocolError("header key is null")
            try:
                name = header_key.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ProtocolError(f"header key is not valid UTF-8: {exc}") from None
            header_value, pos = _read_bytes(data, pos, record_end, "header value")
            headers.append((name, header_value))
    if pos != record_end:
        raise ProtocolError(
            f"record length {length} does not match its fields ({length + pos - record_end} bytes)"
        )
    # LogAppendTime batches carry the broker's time in maxTimestamp for every record.
    if append_time is None:
        timestamp = base_timestamp + ts_delta
        if not _INT64_MIN <= timestamp <= _INT64_MAX:
            timestamp = _as_int64(timestamp)
    else:
        timestamp = append_time
    return Record(base_offset + offset_delta, timestamp, key, value, headers), pos


def _read_bytes(data: bytes, pos: int, limit: int, what: str) -> tuple[bytes | None, int]:
    b = data[pos]
    size, pos = ((b >> 1) ^ -(b & 1), pos + 1) if b < 0x80 else read_varint(data, pos)
    if size < 0:
        if size == -1:
            return None, pos
        raise ProtocolError(f"{what} has negative length {size}")
    stop = pos + size
    if stop > limit:
        raise ProtocolError(f"{what} of {size} bytes at byte {pos} runs past the record end")
    return data[pos:stop], stop


# --- control batches ---------------------------------------------------------------


def parse_control_key(key: bytes | None) -> tuple[int, int]:
    """(version, type) of a control record key."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise ProtocolError(f"control record key must hold 4 bytes, got {key!r}")
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise ProtocolError(f"control record key has negative version {version}")
    return version, control_type


def parse_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """(version, coordinatorEpoch) of an EndTransactionMarker record value."""
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise ProtocolError(f"end transaction marker must hold 6 bytes, got {value!r}")
    version, coordinator_epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise ProtocolError(f"end transaction marker has negative version {version}")
    return version, coordinator_epoch


def decode_control_record(record: Record) -> ControlRecord:
    key_version, control_type = parse_control_key(record.key)
    marker_version = coordinator_epoch = None
    if control_type in (CONTROL_ABORT, CONTROL_COMMIT):
        marker_version, coordinator_epoch = parse_end_txn_marker(record.value)
    return ControlRecord(
        record.offset,
        record.timestamp,
        key_version,
        control_type,
        marker_version,
        coordinator_epoch,
    )


# --- building ------------------------------------------------------------------------


def record_fields(
    item: Any,  # Any: a RecordInput; hasattr() below cannot tell mypy which
) -> tuple[bytes | None, bytes | None, RecordHeaders, int | None]:
    """(key, value, headers, timestamp) of a record-like object or a plain tuple."""
    if hasattr(item, "value"):
        return (
            item.key,
            item.value,
            getattr(item, "headers", ()) or (),
            getattr(item, "timestamp", None),
        )
    return SimpleRecord(*item)


def _write_nullable(out: bytearray, data) -> None:
    if data is None:
        out.append(1)  # zigzag(-1)
    else:
        write_varint(out, len(data))
        out += data


def _encode_record(
    out: bytearray, offset_delta: int, timestamp_delta: int, key, value, headers
) -> None:
    body = bytearray(b"\x00")  # record attributes
    write_varlong(body, timestamp_delta)
    write_varint(body, offset_delta)
    _write_nullable(body, key)
    _write_nullable(body, value)
    write_varint(body, len(headers))
    for name, header_value in headers:
        write_varint(body, len(name_bytes := name.encode() if isinstance(name, str) else name))
        body += name_bytes
        _write_nullable(body, header_value)
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Iterable[RecordInput],
    *,
    base_offset: int = 0,
    compression: int = 0,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
    compression_level: int | None = None,
    xerial_snappy: bool = False,
) -> bytes:
    """Encode one v2 batch.

    records: SimpleRecord/Record-like objects (key, value, headers, timestamp) or
    tuples (key, value[, headers[, timestamp]]); a None timestamp means now. Offsets
    are base_offset + position unless offset_deltas gives them (compacted batches keep
    gaps). baseTimestamp defaults to the first record's timestamp (the delete horizon
    when delete_horizon_ms is set); maxTimestamp to the largest record timestamp, or
    pass the log append time with timestamp_type=LOG_APPEND_TIME.
    """
    items = [record_fields(item) for item in records]
    now = None
    timestamps = []
    for _, _, _, timestamp in items:
        if timestamp is None:
            now = now if now is not None else int(time.time() * 1000)
            timestamp = now
        timestamps.append(timestamp)
    if offset_deltas is None:
        offset_deltas = range(len(items))
    elif len(offset_deltas) != len(items):
        raise ValueError("offset_deltas must give one delta per record")
    attributes = compression & COMPRESSION_MASK
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if delete_horizon_ms is not None:
        attributes |= DELETE_HORIZON_MASK
        base_timestamp = delete_horizon_ms
    if base_timestamp is None:
        base_timestamp = timestamps[0] if timestamps else NO_TIMESTAMP
    if max_timestamp is None:
        max_timestamp = max(timestamps) if timestamps else NO_TIMESTAMP
    if last_offset_delta is None:
        last_offset_delta = offset_deltas[-1] if items else 0

    body = bytearray()
    for (key, value, headers, _), timestamp, delta in zip(
        items, timestamps, offset_deltas, strict=True
    ):
        _encode_record(body, delta, _as_int64(timestamp - base_timestamp), key, value, headers)
    payload: bytes | bytearray
    if attributes & COMPRESSION_MASK and items:
        payload = codecs.compress(compression, body, level=compression_level, xerial=xerial_snappy)
    else:
        payload = body
        attributes &= ~COMPRESSION_MASK  # an empty batch is never compressed

    out = bytearray(HEADER_SIZE)
    HEADER.pack_into(
        out,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        partition_leader_epoch,
        MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(items),
    )
    out += payload
    _U32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_control_batch(
    control_type: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    timestamp: int | None = None,
) -> bytes:
    """A transaction marker batch (COMMIT or ABORT), as the coordinator writes it."""
    key = _CONTROL_KEY.pack(0, control_type)
    value = _END_TXN_MARKER.pack(0, coordinator_epoch)
    return build_batch(
        [SimpleRecord(key, value, (), timestamp)],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
