"""Legacy message sets: message format v0 (magic 0) and v1 (magic 1).

Kafka 3.9 still accepts these from old producers and serves them to old consumers.
A message set is a sequence of entries:

    offset int64 | messageSize int32 | crc uint32 | magic int8 | attributes int8 |
    [timestamp int64, magic 1 only] | key bytes (int32 length, -1 = null) | value bytes

The CRC is CRC-32 (IEEE, zlib.crc32) over magic..end of the message. Attributes bits
0-2 are the codec (gzip, snappy or lz4; zstd needs magic 2) and bit 3 (magic 1) the
timestamp type. A compressed entry is a "wrapper": its value is a compressed message
set of inner messages. For magic 1 the inner offsets are relative (0..n-1) and the
wrapper holds the absolute offset of the last inner message; a wrapper offset of 0
(written by some producers, the broker assigns offsets anyway) means "use the inner
offsets as they are". For magic 0 the inner offsets are absolute.

Out of scope: lz4 in magic 0. Kafka 0.8-0.9 wrote those frames with a wrong frame
header checksum that standard LZ4 decoders reject; such messages raise ProtocolError.
"""

import itertools
import struct
import zlib
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, cast

from . import compression as codecs
from . import records
from .errors import ProtocolError

_HEAD_V0 = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_HEAD_V1 = struct.Struct(">qiIbbq")  # ... + timestamp
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
LOG_OVERHEAD = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 12
# Smallest messageSize: crc + magic + attributes (+ timestamp) + key and value lengths.
MIN_MESSAGE_SIZE = (14, 22)

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
NO_TIMESTAMP = -1
NO_TIMESTAMP_TYPE = -1  # magic 0 messages have no timestamp
CREATE_TIME = 0
LOG_APPEND_TIME = 1


class LegacyEntry(NamedTuple):
    """One entry of a message set as stored (a wrapper stays compressed)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    crc: int
    size: int  # bytes of the whole entry, including offset and messageSize

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        if self.magic == 0:
            return NO_TIMESTAMP_TYPE
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME


class LegacyMessage(NamedTuple):
    """One message with its absolute offset, after unwrapping compression."""

    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    magic: int


def detect_magic(buf: codecs.BytesLike) -> int:
    """The magic byte of the first entry of a records blob (0, 1 or 2)."""
    if len(buf) <= MAGIC_OFFSET:
        raise ProtocolError(
            f"records of {len(buf)} bytes are too short to hold a magic byte at offset 16"
        )
    magic = buf[MAGIC_OFFSET]
    if magic > 2:
        raise ProtocolError(f"unknown message format magic {magic}")
    return magic


def iter_entries(
    buf: codecs.BytesLike, *, verify_crc: bool = True, allow_partial: bool = False
) -> Iterator[LegacyEntry]:
    """The entries of a legacy message set as stored (shallow iteration).

    With allow_partial, a truncated trailing entry ends the iteration silently.
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    pos = 0
    while pos < end:
        entry = _read_entry(view, pos, end, verify_crc, allow_partial)
        if entry is None:
            return
        yield entry
        pos += entry.size


def _read_entry(view, pos: int, end: int, verify_crc: bool, allow_partial: bool):
    remaining = end - pos
    if remaining < LOG_OVERHEAD + 6:
        return _partial(pos, allow_partial, f"only {remaining} bytes remain")
    magic = view[pos + MAGIC_OFFSET]
    if magic > 1:
        raise ProtocolError(
            f"entry at byte {pos} has magic {magic}; v2 record batches are decoded "
            "by moldau.protocol.records"
        )
    size = _I32.unpack_from(view, pos + 8)[0]
    if size < MIN_MESSAGE_SIZE[magic]:
        raise ProtocolError(
            f"message at byte {pos} has size {size}, below the minimum of "
            f"{MIN_MESSAGE_SIZE[magic]} for magic {magic}"
        )
    stop = pos + LOG_OVERHEAD + size
    if stop > end:
        return _partial(pos, allow_partial, f"messageSize {size} but {remaining - 12} bytes")
    if magic == 0:
        offset, _, crc, _, attributes = _HEAD_V0.unpack_from(view, pos)
        timestamp = NO_TIMESTAMP
        key_pos = pos + _HEAD_V0.size
    else:
        offset, _, crc, _, attributes, timestamp = _HEAD_V1.unpack_from(view, pos)
        key_pos = pos + _HEAD_V1.size
    if verify_crc:
        actual = zlib.crc32(view[pos + MAGIC_OFFSET : stop])
        if actual != crc:
            raise ProtocolError(
                f"message at offset {offset} (byte {pos}) is corrupt: stored CRC {crc}, "
                f"computed {actual}"
            )
    key, value_pos = _read_bytes(view, key_pos, stop, "key", offset)
    value, value_end = _read_bytes(view, value_pos, stop, "value", offset)
    if value_end != stop:
        raise ProtocolError(
            f"message at offset {offset} has {stop - value_end} bytes after its value"
        )
    return LegacyEntry(offset, magic, attributes, timestamp, key, value, crc, stop - pos)


def _partial(pos: int, allow_partial: bool, why: str) -> None:
    if allow_partial:
        return None
    raise ProtocolError(f"truncated message at byte {pos}: {why}")


def _read_bytes(view, pos: int, stop: int, what: str, offset: int):
    if pos + 4 > stop:
        raise ProtocolError(f"message at offset {offset}: {what} length runs past its end")
    size = _I32.unpack_from(view, pos)[0]
    pos += 4
    if size == -1:
        return None, pos
    if size < 0 or pos + size > stop:
        raise ProtocolError(f"message at offset {offset}: invalid {what} length {size}")
    return bytes(view[pos : pos + size]), pos + size


def iter_messages(
    buf: codecs.BytesLike,
    *,
    verify_crc: bool = True,
    allow_partial: bool = False,
    max_decompressed_size: int = codecs.DEFAULT_MAX_DECOMPRESSED_SIZE,
) -> Iterator[LegacyMessage]:
    """The messages of a legacy message set, compressed wrappers unwrapped."""
    for entry in iter_entries(buf, verify_crc=verify_crc, allow_partial=allow_partial):
        if entry.attributes & COMPRESSION_MASK:
            yield from _unwrap(entry, verify_crc, max_decompressed_size)
        else:
            yield LegacyMessage(
                entry.offset,
                entry.timestamp,
                entry.timestamp_type,
                entry.key,
                entry.value,
                entry.magic,
            )


def _unwrap(wrapper: LegacyEntry, verify_crc: bool, max_size: int) -> Iterator[LegacyMessage]:
    codec = wrapper.attributes & COMPRESSION_MASK
    where = f"compressed message at offset {wrapper.offset}"
    if codec == codecs.ZSTD or codec > codecs.ZSTD:
        raise codecs.UnsupportedCompressionError(
            f"{where} uses codec {codec}, which magic {wrapper.magic} cannot carry"
        )
    if codec == codecs.LZ4 and wrapper.magic == 0:
        raise ProtocolError(f"{where}: lz4 in magic 0 (non-standard framing) is not supported")
    if wrapper.value is None:
        raise ProtocolError(f"{where} has a null value")
    try:
        inner_bytes = codecs.decompress(codec, wrapper.value, max_size)
    except ProtocolError as exc:
        raise ProtocolError(f"{where}: {exc}") from None
    inner = list(iter_entries(inner_bytes, verify_crc=verify_crc))
    if not inner:
        raise ProtocolError(f"{where} holds no inner messages")
    for entry in inner:
        if entry.magic != wrapper.magic:
            raise ProtocolError(
                f"{where}: inner magic {entry.magic} does not match wrapper magic {wrapper.magic}"
            )
        if entry.attributes & COMPRESSION_MASK:
            raise ProtocolError(f"{where}: inner messages must not be compressed")
    base = 0
    if wrapper.magic == 1 and wrapper.offset != 0:
        last_inner = inner[-1].offset
        if wrapper.offset < last_inner:
            raise ProtocolError(
                f"{where}: wrapper offset is below the last inner offset {last_inner}"
            )
        base = wrapper.offset - last_inner
    append_time = wrapper.timestamp_type == LOG_APPEND_TIME
    for entry in inner:
        # The wrapper's timestamp type rules; LogAppendTime replaces inner timestamps.
        yield LegacyMessage(
            base + entry.offset,
            wrapper.timestamp if append_time else entry.timestamp,
            wrapper.timestamp_type,
            entry.key,
            entry.value,
            entry.magic,
        )


# --- building (down-conversion, tools, tests) -------------------------------------


def write_message(out: bytearray, offset: int, magic: int, attributes: int,
                  timestamp: int | None, key: bytes | None,
                  value: codecs.BytesLike | None) -> None:
    """Append one legacy message (its offset and size fields, then the CRC'd body); the
    timestamp is written for magic 1 only."""
    start = len(out)
    head = _HEAD_V0 if magic == 0 else _HEAD_V1
    out += bytes(head.size)
    for data in (key, value):
        if data is None:
            out += b"\xff\xff\xff\xff"
        else:
            out += _I32.pack(len(data))
            out += data
    fields = [offset, len(out) - start - LOG_OVERHEAD, 0, magic, attributes]
    if magic == 1:
        fields.append(NO_TIMESTAMP if timestamp is None else timestamp)
    head.pack_into(out, start, *fields)
    crc = zlib.crc32(memoryview(out)[start + MAGIC_OFFSET :])
    _U32.pack_into(out, start + CRC_OFFSET, crc)


def build_message_set(
    messages: Iterable[records.RecordInput],
    *,
    magic: int,
    compression: int = 0,
    base_offset: int = 0,
    timestamp_type: int = CREATE_TIME,
    log_append_time: int | None = None,
    xerial_snappy: bool = True,
) -> bytes:
    """Encode messages (key, value[, headers[, timestamp]] like records.build_batch).

    Headers are dropped (the format has none). Compressed magic-1 sets use relative
    inner offsets and a wrapper at the last absolute offset; the wrapper timestamp is
    the largest inner timestamp (or log_append_time with LOG_APPEND_TIME). Snappy uses
    the xerial framing by default, as the Java producer did for these formats.
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    if compression not in (codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4):
        raise ValueError(f"codec {compression} is not available for magic {magic}")
    if compression == codecs.LZ4 and magic == 0:
        raise ValueError("lz4 in magic 0 is not supported")
    items = [records.record_fields(item) for item in messages]
    append_time = magic == 1 and timestamp_type == LOG_APPEND_TIME
    timestamps = [
        NO_TIMESTAMP if magic == 0 else (log_append_time if append_time else ts)
        for *_, ts in items
    ]
    if magic == 1 and any(ts is None for ts in timestamps):
        raise ValueError("magic 1 messages need timestamps (or log_append_time)")
    # cast: magic 0 timestamps are all NO_TIMESTAMP, and a magic 1 None raised above
    return encode_message_set(
        [(base_offset + i, cast(int, ts), key, value)
         for i, ((key, value, _, _), ts) in enumerate(zip(items, timestamps, strict=True))],
        magic=magic, compression=compression, append_time=append_time,
        xerial_snappy=xerial_snappy)


LegacyEntryInput = tuple[int, int, bytes | None, bytes | None]  # offset, timestamp, key, value


def encode_message_set(entries: Sequence[LegacyEntryInput], *, magic: int, compression: int,
                       append_time: bool, xerial_snappy: bool = True) -> bytes:
    """Messages at their own offsets, as Kafka's MemoryRecordsBuilder writes them: a
    compressed set is a wrapper at the last offset whose inner offsets are relative to
    the first (magic 1) or absolute (magic 0), and whose timestamp is the largest inner
    one; with LogAppendTime (magic 1) every message, inner ones too, carries the
    timestamp-type bit (the timestamps given are then the append time)."""
    if not entries:
        return b""
    ts_bit = TIMESTAMP_TYPE_MASK if append_time and magic == 1 else 0
    out = bytearray()
    if not compression:
        for offset, ts, key, value in entries:
            write_message(out, offset, magic, ts_bit, ts, key, value)
        return bytes(out)
    base = entries[0][0] if magic == 1 else 0
    inner = bytearray()
    for offset, ts, key, value in entries:
        write_message(inner, offset - base, magic, ts_bit, ts, key, value)
    payload = codecs.compress(compression, inner, xerial=xerial_snappy)
    wrapper_ts = max(ts for _, ts, _, _ in entries) if magic == 1 else NO_TIMESTAMP
    write_message(out, entries[-1][0], magic, compression | ts_bit, wrapper_ts, None, payload)
    return bytes(out)


def convert_to_v2(
    buf: codecs.BytesLike,
    *,
    compression: int = 0,
    base_offset: int = 0,
    keep_offsets: bool = False,
    verify_crc: bool = True,
    max_decompressed_size: int = codecs.DEFAULT_MAX_DECOMPRESSED_SIZE,
    xerial_snappy: bool = False,
) -> bytes:
    """Convert a legacy message set into one v2 batch.

    By default offsets are renumbered from base_offset (produce requests carry
    meaningless offsets; the broker assigns them). keep_offsets=True keeps the absolute
    offsets (e.g. reading an old log), gaps included. Magic 0 messages get timestamp -1
    (NO_TIMESTAMP) as in Kafka; a LogAppendTime set stays LogAppendTime.
    """
    messages = list(
        iter_messages(buf, verify_crc=verify_crc, max_decompressed_size=max_decompressed_size)
    )
    if not messages:
        raise ProtocolError("cannot convert an empty message set")
    append_times = [m.timestamp for m in messages if m.timestamp_type == LOG_APPEND_TIME]
    offset_deltas = None
    if keep_offsets:
        base_offset = messages[0].offset
        offset_deltas = [m.offset - base_offset for m in messages]
        if any(b <= a for a, b in itertools.pairwise(offset_deltas)):
            raise ProtocolError("message set offsets are not strictly increasing")
    return records.build_batch(
        [records.SimpleRecord(m.key, m.value, (), m.timestamp) for m in messages],
        base_offset=base_offset,
        compression=compression,
        timestamp_type=records.LOG_APPEND_TIME if append_times else records.CREATE_TIME,
        max_timestamp=max(append_times) if append_times else None,
        offset_deltas=offset_deltas,
        xerial_snappy=xerial_snappy,
    )
