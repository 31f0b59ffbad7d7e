"""Where batches sit in a segment file: their headers, read without the records, and the
positions a read hands to the network layer (file ranges for `sendfile`, never bytes)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from moldau.errors import CorruptRecordError
from moldau.protocol.records import HEADER, HEADER_SIZE, LOG_OVERHEAD, MIN_BATCH_LENGTH, RecordBatch

SCAN_CHUNK = 64 * 1024  # header scans read this much at a time
_new_tuple = tuple.__new__  # a NamedTuple from a tuple, without its Python-level __new__


class BatchHeader(NamedTuple):
    """Where one batch sits in the segment file, and its header fields."""

    position: int
    base_offset: int
    last_offset: int
    size: int  # bytes of the whole batch
    max_timestamp: int
    partition_leader_epoch: int


def batch_header(batch: RecordBatch, position: int) -> BatchHeader:
    """The BatchHeader of a parsed batch that sits at `position`."""
    return BatchHeader(
        position,
        batch.base_offset,
        batch.last_offset,
        batch.size_in_bytes,
        batch.max_timestamp,
        batch.partition_leader_epoch,
    )


class FileSlice(NamedTuple):
    """A byte range of a segment file, for sendfile (or pread on TLS connections)."""

    fd: int
    position: int
    size: int


@dataclass(slots=True)
class OffsetMetadata:
    """An offset and where it sits (Kafka's LogOffsetMetadata): saves a lookup per fetch."""

    offset: int
    segment_base_offset: int = -1
    position: int = -1

    @property
    def on_file(self) -> bool:
        return self.segment_base_offset >= 0


def scan_batch_headers(
    fd: int, path: str, position: int, end: int, first_chunk: int = SCAN_CHUNK
) -> Iterator[BatchHeader]:
    """The headers of the batches in bytes [position, end) of a segment file open as fd
    (LogSegment.scan_headers; the cleaner reads through a descriptor of its own)."""
    buf = b""
    buf_start = position
    chunk = first_chunk
    while position + HEADER_SIZE <= end:
        rel = position - buf_start
        if rel < 0 or rel + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(chunk, end - position), position)
            buf_start, rel = position, 0
            chunk = SCAN_CHUNK
            if len(buf) < HEADER_SIZE:
                return
        fields = HEADER.unpack_from(buf, rel)
        if fields[1] < MIN_BATCH_LENGTH:
            # A bad length would never advance the scan: corruption not yet recovered.
            raise CorruptRecordError(
                f"batch at byte {position} of {path} has batchLength {fields[1]}"
            )
        size = LOG_OVERHEAD + fields[1]
        yield BatchHeader(position, fields[0], fields[0] + fields[6], size, fields[8], fields[2])
        position += size


def find_batch(
    fd: int, path: str, position: int, end: int, offset: int, first_chunk: int
) -> BatchHeader | None:
    """The first batch in bytes [position, end) of the file open as fd whose last offset is
    >= offset, or None (LogSegment.translate_offset, from an offset index entry)."""
    # scan_batch_headers, inlined for the read path: the batch sought starts at most
    # index.interval.bytes past its index entry, so the first pread reads first_chunk (that
    # much and one header); only the batch found becomes a BatchHeader.
    unpack = HEADER.unpack_from
    buf = b""
    buf_start = position
    chunk = first_chunk
    while position + HEADER_SIZE <= end:
        rel = position - buf_start
        if rel + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(chunk, end - position), position)
            buf_start, rel = position, 0
            chunk = SCAN_CHUNK
            if len(buf) < HEADER_SIZE:
                return None
        fields = unpack(buf, rel)
        length = fields[1]
        if length < MIN_BATCH_LENGTH:
            # A bad length would never advance the scan: corruption not yet recovered.
            raise CorruptRecordError(
                f"batch at byte {position} of {path} has batchLength {length}"
            )
        last_offset = fields[0] + fields[6]
        if last_offset >= offset:
            return _new_tuple(
                BatchHeader,
                (position, fields[0], last_offset, LOG_OVERHEAD + length, fields[8], fields[2]),
            )
        position += LOG_OVERHEAD + length
    return None
