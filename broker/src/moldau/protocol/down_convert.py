"""Down-conversion: the records of a Fetch answer rewritten for a consumer that reads only
message format v0 (Fetch v0-v1) or v1 (Fetch v2-v3), as Kafka's RecordsUtil.downConvert.

Kafka 3.x stores v2 batches only, and old consumers still fetch with these versions. Per
stored batch, in order:
- a batch the consumer can read already (its magic at most the target) is kept as it is;
- a control batch (transaction marker) is dropped: legacy formats have none;
- any other batch becomes a legacy message set with the batch's codec, timestamp type
  and offsets (gaps kept). An uncompressed batch loses the records before the fetch
  offset (the consumer would skip them); a compressed one stays whole, as in Kafka.

Headers, producer ids and sequences are lost (the legacy formats have none). Two
deliberate choices: a zstd batch cannot be expressed in magic 0 or 1 and raises
UnsupportedCompressionError (the handler answers UNSUPPORTED_COMPRESSION_TYPE, as Kafka
does); an lz4 batch converted to magic 0 is written uncompressed, because Kafka 0.8-0.9
consumers expect the wrongly computed frame checksum of their era, which no LZ4 library
here writes, and uncompressed messages every consumer reads.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from . import compression as codecs
from . import legacy
from .records import LOG_APPEND_TIME, RecordBatch

_SIZE = struct.Struct(">i")  # batchLength / messageSize, after the 8-byte offset
MAGIC_AT = 16  # the magic byte's position in a v2 batch and in a legacy entry alike
LENGTH_AT = 8
ENTRY_OVERHEAD = 12  # offset and length fields, which the length does not count
# the newest message format a Fetch version can read
FETCH_MAGIC = {0: 0, 1: 0, 2: 1, 3: 1}


class LegacyRecord(NamedTuple):
    """What a legacy message keeps of a record."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class Converted(NamedTuple):
    records: bytes
    converted: int  # records rewritten (Kafka's FetchMessageConversionsPerSec counts them)


def needs_conversion(fetch_version: int) -> int | None:
    """The message format a Fetch of this version reads when it is older than v2, else
    None."""
    return FETCH_MAGIC.get(fetch_version)


def down_convert(buf: codecs.BytesLike, to_magic: int, first_offset: int, *,
                 max_decompressed_size: int = codecs.DEFAULT_MAX_DECOMPRESSED_SIZE
                 ) -> Converted:
    """The entries of `buf` (v2 batches or legacy entries, as read from a log) readable at
    message format `to_magic`. A partial entry at the end (a read cut short) is left out."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    out = bytearray()
    converted = 0
    pos, end = 0, len(view)
    while end - pos > MAGIC_AT:
        size = ENTRY_OVERHEAD + _SIZE.unpack_from(view, pos + LENGTH_AT)[0]
        if size <= MAGIC_AT or pos + size > end:
            break
        entry = view[pos:pos + size]
        pos += size
        magic = entry[MAGIC_AT]
        if magic <= to_magic:
            out += entry
            continue
        if magic == 2:
            batch = RecordBatch(entry)
            if batch.is_control:
                continue
            compression = batch.compression
            records: Sequence[LegacyRecord] = [
                LegacyRecord(r.offset, r.timestamp, r.key, r.value)
                for r in batch.records(max_decompressed_size)
                if compression or r.offset >= first_offset]
            timestamp_type = batch.timestamp_type
            append_time = batch.max_timestamp if timestamp_type == LOG_APPEND_TIME else None
        else:  # a magic 1 entry for a magic 0 reader
            head = next(legacy.iter_entries(entry))
            compression = head.compression
            records = [LegacyRecord(m.offset, m.timestamp, m.key, m.value)
                       for m in legacy.iter_messages(
                           entry, max_decompressed_size=max_decompressed_size)
                       if compression or m.offset >= first_offset]
            timestamp_type = head.timestamp_type
            append_time = head.timestamp if timestamp_type == LOG_APPEND_TIME else None
        if records:
            out += message_set(records, to_magic, compression, timestamp_type, append_time)
            converted += len(records)
    return Converted(bytes(out), converted)


def message_set(records: Sequence[LegacyRecord], magic: int, compression: int,
                timestamp_type: int, log_append_time: int | None) -> bytes:
    """One legacy message set holding `records` at their own offsets (legacy.
    encode_message_set, Kafka's layout), in a codec the format can carry."""
    if compression == codecs.ZSTD:
        raise codecs.UnsupportedCompressionError(
            f"zstd batches cannot be down-converted to message format v{magic}")
    if compression == codecs.LZ4 and magic == 0:
        compression = codecs.NONE  # see the module docstring
    append_time = magic == 1 and timestamp_type == LOG_APPEND_TIME
    return legacy.encode_message_set(
        [(r.offset, _timestamp(r.timestamp, magic, log_append_time if append_time else None),
          r.key, r.value) for r in records],
        magic=magic, compression=compression, append_time=append_time)


def _timestamp(timestamp: int, magic: int, log_append_time: int | None) -> int:
    if magic == 0:
        return legacy.NO_TIMESTAMP
    return timestamp if log_append_time is None else log_append_time
