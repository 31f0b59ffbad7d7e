"""Helpers shared by the storage tests: batch builders, a crash simulator, and readers of
segment and index files that parse the bytes on disk independently of moldau.storage.

The file readers use only `struct` and the record batch codec, so an assertion built on
them checks what is on disk, not what the storage classes believe is there.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from typing import NamedTuple

from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder

from moldau.protocol.records import build_batch, iter_batches
from moldau.storage.log import PartitionLog
from moldau.storage.segment import LogSegment

T0 = 1_700_000_000_000  # a fixed record time (ms) so time rules are deterministic
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class DiskBatch(NamedTuple):
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    leader_epoch: int
    data: bytes


def batch(
    count: int = 3,
    *,
    value_size: int = 50,
    timestamp: int = T0,
    timestamps: Iterable[int] | None = None,
    codec: int = 0,
    key: bytes | None = b"k",
    seed: int = 0,
    **kwargs,
) -> bytes:
    """A v2 batch of `count` records with explicit timestamps (CreateTime)."""
    stamps = list(timestamps) if timestamps is not None else [timestamp + i for i in range(count)]
    records = [
        (key + b"%d" % i if key is not None else None, value_of(seed + i, value_size), (), ts)
        for i, ts in enumerate(stamps)
    ]
    return build_batch(records, compression=codec, **kwargs)


def kafka_python_batch(
    count: int, *, value_size: int = 50, timestamps: Iterable[int], codec: int = 0, seed: int = 0
) -> bytes:
    """The same shape of batch written by kafka-python's own builder (an independent writer)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 24,
    )
    for i, ts in enumerate(timestamps):
        builder.append(i, timestamp=ts, key=b"k%d" % i, value=value_of(seed + i, value_size),
                       headers=[])
    return bytes(builder.build())


def value_of(seed: int, size: int) -> bytes:
    """Deterministic, not very compressible bytes."""
    out = bytearray()
    x = (seed * 2654435761 + 12345) & 0xFFFFFFFF
    while len(out) < size:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out += x.to_bytes(4, "big")
    return bytes(out[:size])


def as_stored(raw: bytes, base_offset: int, leader_epoch: int) -> bytes:
    """What a leader must store for a CreateTime batch: only the two fields outside the CRC
    (baseOffset, partitionLeaderEpoch) change."""
    out = bytearray(raw)
    struct.pack_into(">q", out, 0, base_offset)
    struct.pack_into(">i", out, 12, leader_epoch)
    return bytes(out)


def parse_log_file(path: str) -> list[DiskBatch]:
    """Every batch of a .log file; asserts the file is whole batches with valid CRCs."""
    with open(path, "rb") as f:
        data = f.read()
    out = []
    position = 0
    for b in iter_batches(data):
        raw = bytes(b.buffer)
        assert crc32c(raw[21:]) == b.crc, f"bad CRC at {position} of {path}"
        out.append(
            DiskBatch(position, b.base_offset, b.last_offset, b.max_timestamp,
                      b.partition_leader_epoch, raw)
        )
        position += len(raw)
    return out


def read_offset_index(path: str, base_offset: int, entries: int | None = None) -> list[tuple]:
    """(absolute offset, position) entries of a .index file (the first `entries` if given)."""
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // 8 if entries is None else entries
    return [(base_offset + rel, pos) for rel, pos in _OFFSET_ENTRY.iter_unpack(data[: n * 8])]


def read_time_index(path: str, base_offset: int, entries: int | None = None) -> list[tuple]:
    """(timestamp, absolute offset) entries of a .timeindex file."""
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // 12 if entries is None else entries
    return [(ts, base_offset + rel) for ts, rel in _TIME_ENTRY.iter_unpack(data[: n * 12])]


def check_segment_indexes(segment: LogSegment, batches: list[DiskBatch]) -> None:
    """Every offset index entry names the last offset of the batch at its position; every
    time index entry (T, O) names a batch ending at O whose max timestamp T is the first
    time the segment reached T; both kinds are strictly increasing."""
    by_position = {b.position: b for b in batches}
    offset_entries = read_offset_index(
        segment.offset_index.path, segment.base_offset, segment.offset_index.entries
    )
    previous = None
    for offset, position in offset_entries:
        assert position in by_position, f"index entry {offset}->{position} is not a batch"
        assert by_position[position].last_offset == offset, (offset, position)
        if previous is not None:
            assert offset > previous[0] and position > previous[1]
        previous = (offset, position)
    time_entries = read_time_index(
        segment.time_index.path, segment.base_offset, segment.time_index.entries
    )
    by_last = {b.last_offset: i for i, b in enumerate(batches)}
    previous_ts = None
    for ts, offset in time_entries:
        assert offset in by_last, f"time index entry ({ts}, {offset}) names no batch end"
        i = by_last[offset]
        assert batches[i].max_timestamp == ts
        assert all(b.max_timestamp < ts for b in batches[:i])
        if previous_ts is not None:
            assert ts > previous_ts
        previous_ts = ts


def crash(log: PartitionLog) -> None:
    """Kill the writer: release the descriptors and mappings without the clean path, so
    nothing is flushed, trimmed or given a final time index entry. The active segment's
    index files stay preallocated (zero-filled tails), as after a real crash."""
    for segment in [*log.segments, *(s for _, s in log.pending_deletes)]:
        segment.offset_index.close_handler()
        segment.time_index.close_handler()
        if segment.fd >= 0:
            os.close(segment.fd)
            segment.fd = -1


def read_all(log: PartitionLog, start: int, *, max_offset: int | None = None) -> list[DiskBatch]:
    """Every whole batch from start to the bound, through log.read in small steps."""
    out: list[DiskBatch] = []
    end = log.log_end_offset if max_offset is None else max_offset
    offset = start
    while offset < end:
        fetched = log.read(offset, 700, max_offset=max_offset)
        data = log.read_bytes(fetched)
        got = list(iter_batches(data, allow_partial=True))
        if not got:
            break
        for b in got:
            out.append(DiskBatch(-1, b.base_offset, b.last_offset, b.max_timestamp,
                                 b.partition_leader_epoch, bytes(b.buffer)))
        offset = got[-1].last_offset + 1
    return out
