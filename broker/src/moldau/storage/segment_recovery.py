"""Cutting a segment back: recovery after a crash (keep the batches that pass the
structural and CRC-32C checks, up to the first that fails, and rebuild both indexes from
them) and truncation to an offset (a follower that diverged from its leader).

LogSegment.recover and LogSegment.truncate_to are these functions; the append and read
paths stay in the segment.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    RecordBatch,
)

from .crc import crc32c
from .segment_positions import BatchHeader, batch_header
from .time_index import NO_TIMESTAMP

if TYPE_CHECKING:
    from .offset_index import OffsetIndex
    from .time_index import TimeIndex
    from .txn_index import TransactionIndex


class LogSegment(Protocol):
    """What recovery and truncation use of a segment (segment.LogSegment, which calls
    these functions: a protocol, so that this module need not import it back)."""

    base_offset: int
    fd: int
    size: int
    created_ms: int
    index_interval_bytes: int
    bytes_since_last_index_entry: int
    max_timestamp: int
    offset_of_max_timestamp: int
    rolling_timestamp: int | None
    missing_index: bool

    @property
    def offset_index(self) -> OffsetIndex: ...

    @property
    def time_index(self) -> TimeIndex: ...

    txn_index: TransactionIndex

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None: ...

    def read_largest_timestamp(self) -> tuple[int, int]: ...

    def truncate_file(self, size: int) -> None: ...

_RECOVERY_CHUNK = 4 * 1024 * 1024  # recovery reads whole batches in chunks of this size


def scan_valid_batches(
    fd: int, file_size: int, max_batch_size: int
) -> Iterator[tuple[int, RecordBatch]]:
    """(position, batch) of the valid batches in the first file_size bytes of the file open
    as fd, until the first invalid one. max_batch_size: a larger batch is invalid (0: no
    limit)."""
    position = 0
    while position + LOG_OVERHEAD <= file_size:
        chunk = os.pread(fd, min(_RECOVERY_CHUNK, file_size - position), position)
        rel = 0
        while rel + LOG_OVERHEAD <= len(chunk):
            length = int.from_bytes(chunk[rel + 8 : rel + 12], "big", signed=True)
            size = LOG_OVERHEAD + length
            if length < MIN_BATCH_LENGTH or (max_batch_size and size > max_batch_size):
                return
            if position + rel + size > file_size:
                return  # torn write at the tail
            if rel + size > len(chunk):
                if rel == 0:  # one batch larger than the chunk: read it whole
                    chunk = os.pread(fd, size, position)
                else:
                    break
            view = memoryview(chunk)[rel : rel + size]
            if view[16] != MAGIC or crc32c(view[ATTRIBUTES_OFFSET:]) != int.from_bytes(
                view[17:21], "big"
            ):
                return
            try:
                batch = RecordBatch(view)
            except ProtocolError:
                return
            yield position + rel, batch
            rel += size
        position += rel


def recover_segment(
    segment: LogSegment, on_batch: Callable[[RecordBatch], None] | None, max_batch_size: int
) -> int:
    """Validate every batch, rebuild both indexes, and cut the file at the first invalid
    batch (bad length, magic, CRC or offsets). Returns the bytes truncated."""
    segment.offset_index.reset()
    segment.time_index.reset()
    segment.max_timestamp = NO_TIMESTAMP
    segment.offset_of_max_timestamp = segment.base_offset
    segment.rolling_timestamp = None
    segment.bytes_since_last_index_entry = 0
    valid = 0
    next_offset = segment.base_offset
    for position, batch in scan_valid_batches(segment.fd, segment.size, max_batch_size):
        if batch.base_offset < next_offset or batch.last_offset < batch.base_offset:
            break
        header = batch_header(batch, position)
        _index_batch(segment, header, position)
        if on_batch is not None:
            on_batch(batch)
        next_offset = batch.last_offset + 1
        valid = position + batch.size_in_bytes
    truncated = segment.size - valid
    if truncated:
        segment.truncate_file(valid)
        # markers cut off with their batches leave the index too (its rebuild from the
        # batches is the log loader's, with the producer state: see docs/transactions.md)
        segment.txn_index.truncate_to(next_offset)
    # As Kafka: trim both indexes, and first give the time index the final entry a clean
    # close would have written. Trimming it without that entry made close() raise
    # IndexFullError (no slot left for the final entry) after every recovery.
    segment.offset_index.trim_to_valid_size()
    segment.time_index.maybe_append(
        segment.max_timestamp, segment.offset_of_max_timestamp, skip_full_check=True
    )
    segment.time_index.trim_to_valid_size()
    segment.missing_index = False
    return truncated


def _index_batch(segment: LogSegment, batch: BatchHeader, position: int) -> None:
    """What LogSegment.append records for one batch (its timestamps and, every
    index.interval.bytes, index entries), for a batch recovery found in the file."""
    if segment.rolling_timestamp is None:
        segment.rolling_timestamp = batch.max_timestamp
    if batch.max_timestamp > segment.max_timestamp:
        segment.max_timestamp = batch.max_timestamp
        segment.offset_of_max_timestamp = batch.last_offset
    if segment.bytes_since_last_index_entry > segment.index_interval_bytes:
        _add_index_entries(segment, batch.last_offset, position)
        segment.bytes_since_last_index_entry = 0
    segment.bytes_since_last_index_entry += batch.size


def _add_index_entries(segment: LogSegment, last_offset: int, position: int) -> None:
    # The indexes are sparse: when one append of several batches fills one, skipping
    # an entry only lengthens a scan, while raising IndexFullError would leave the
    # written bytes unindexed and the append half done. The next append rolls.
    offset_index = segment.offset_index
    if not offset_index.is_full():
        offset_index.append(last_offset, position)
    time_index = segment.time_index
    if not time_index.is_full():
        time_index.maybe_append(segment.max_timestamp, segment.offset_of_max_timestamp)


def truncate_segment(segment: LogSegment, offset: int) -> int:
    """Remove every batch whose last offset is >= offset; returns the bytes removed."""
    header = segment.translate_offset(offset)
    segment.offset_index.truncate_to(offset)
    segment.time_index.truncate_to(offset)
    segment.txn_index.truncate_to(offset)  # no file, no work: most segments have none
    # The segment may become the active one again: its indexes were trimmed on roll and
    # would read as full, rolling on the next append. Kafka regrows them here too.
    segment.offset_index.resize(segment.offset_index.max_index_size)
    segment.time_index.resize(segment.time_index.max_index_size)
    removed = 0
    if header is not None:
        removed = segment.size - header.position
        segment.truncate_file(header.position)
    segment.bytes_since_last_index_entry = 0
    if segment.size == 0:
        segment.created_ms = int(time.time() * 1000)
        segment.rolling_timestamp = None
    segment.max_timestamp, segment.offset_of_max_timestamp = segment.read_largest_timestamp()
    return removed
