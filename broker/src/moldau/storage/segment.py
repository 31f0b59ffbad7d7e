"""A log segment: a `.log` file of v2 record batches with its offset and time indexes.

Batches are stored byte for byte as they arrived (offsets already assigned). The offset
index maps the last offset of a batch to the batch's file position every
`index.interval.bytes`; the time index maps the largest timestamp seen so far to the last
offset of its batch at the same moments. Reads return file positions, never bytes, so
the network layer can `sendfile` them.

All methods run on the owner's thread (the broker's event loop, or a cleaner/recovery
thread that owns the segment at that time).
"""

from __future__ import annotations

import contextlib
import os
import resource
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from moldau.errors import CorruptRecordError, KafkaStorageError
from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import (
    ATTRIBUTES_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    RecordBatch,
)

from .crc import crc32c
from .index import (
    OFFSET_INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    CorruptIndexError,
    IndexFullError,
    OffsetIndex,
    TimeIndex,
    TimestampOffset,
    segment_file_name,
)

LOG_SUFFIX = ".log"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
NO_TIMESTAMP = -1
_SCAN_CHUNK = 64 * 1024  # header scans read this much at a time
_RECOVERY_CHUNK = 4 * 1024 * 1024  # recovery reads whole batches in chunks of this size
_INT32_MAX = 0x7FFFFFFF
_TIME_ENTRY = struct.Struct(">qi")  # a time index entry: timestamp, relative offset
_Index = TypeVar("_Index", OffsetIndex, TimeIndex)
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
    fd: int, path: str, position: int, end: int, first_chunk: int = _SCAN_CHUNK
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
            chunk = _SCAN_CHUNK
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


def _fsync_path(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return  # an index that was never written
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _MappedIndexes:
    """Inactive segments whose indexes are mapped, oldest mapping first. Past the limit
    the oldest are unmapped again (the next read maps them anew): a consumer reading
    through old data would otherwise leave two descriptors mapped per segment it touched
    (CPython's mmap keeps a duplicate of each file's descriptor).

    The limit follows the descriptors left over: the open-files limit, less one per open
    segment (its `.log`) and a reserve for connections and other files, two per mapped
    segment. Kafka's mappings cost no descriptor; here a log with more segments than that
    remaps indexes when reads jump around (docs/storage.md)."""

    RESERVED = 1024  # descriptors kept for sockets, checkpoints, ZooKeeper, ...

    def __init__(self) -> None:
        self.open_segments = 0  # LogSegments with an open .log (kept by LogSegment)
        self.cap: int | None = None  # a fixed limit instead (tests)
        self._segments: dict[LogSegment, None] = {}

    @property
    def limit(self) -> int:
        if self.cap is not None:
            return self.cap
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return 1 << 30
        return max(16, (soft - self.open_segments - self.RESERVED) // 2)

    def add(self, segment: LogSegment) -> None:
        self._segments.pop(segment, None)
        self._segments[segment] = None
        limit = self.limit
        while len(self._segments) > limit:
            oldest = next(iter(self._segments))
            oldest.release_indexes()

    def discard(self, segment: LogSegment) -> None:
        self._segments.pop(segment, None)

    def __len__(self) -> int:
        return len(self._segments)


MAPPED_INDEXES = _MappedIndexes()


class LogSegment:
    """One segment of a partition log; see the module docstring."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_size: int = 10 * 1024 * 1024,
        roll_jitter_ms: int = 0,
        suffix: str = "",
        now_ms: int | None = None,
        lazy_indexes: bool = False,
    ) -> None:
        """lazy_indexes: map the index files only when first used (inactive segments of a
        cleanly loaded log, as Kafka's LazyIndex: each mapping costs a file descriptor)."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.suffix = suffix
        self.log_path = self._path(LOG_SUFFIX)
        # A missing index next to a non-empty .log must be rebuilt, not trusted as empty
        # (Kafka's sanityCheck raises NoSuchFileException and the loader recovers).
        self.missing_index = not (
            os.path.exists(self._path(OFFSET_INDEX_SUFFIX))
            and os.path.exists(self._path(TIME_INDEX_SUFFIX))
        )
        try:
            self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
            MAPPED_INDEXES.open_segments += 1
            self.size = os.fstat(self.fd).st_size
        except OSError as exc:
            raise KafkaStorageError(f"cannot open segment {self.log_path}: {exc}") from exc
        self.max_index_size = max_index_size
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._check_when_mapped = lazy_indexes
        self._inactive = lazy_indexes  # inactive segments map their indexes on demand
        self._indexes_unsynced = False
        self.created_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        self.bytes_since_last_index_entry = 0
        last = self._last_time_entry() if lazy_indexes else self.time_index.last_entry
        self.max_timestamp = last.timestamp
        self.offset_of_max_timestamp = last.offset
        self._rolling_timestamp: int | None = None  # max timestamp of the first append

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._open_indexes()
        return self._offset_index  # type: ignore[return-value]

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._open_indexes()
        return self._time_index  # type: ignore[return-value]

    def _open_indexes(self) -> None:
        self._offset_index = self._open_index(OffsetIndex, OFFSET_INDEX_SUFFIX)
        self._time_index = self._open_index(TimeIndex, TIME_INDEX_SUFFIX)
        if self._inactive:
            MAPPED_INDEXES.add(self)
        if self._check_when_mapped:
            # A lazily mapped index is checked when first mapped, and rebuilt from the log
            # if it fails: corrupt indexes are never trusted, only checked later.
            self._check_when_mapped = False
            try:
                self._offset_index.sanity_check()
                self._time_index.sanity_check()
            except CorruptIndexError:
                self.recover()

    def _open_index(self, kind: type[_Index], suffix: str) -> _Index:
        try:
            return kind(self._path(suffix), self.base_offset, self.max_index_size)
        except OSError as exc:
            raise KafkaStorageError(f"cannot open index {self._path(suffix)}: {exc}") from exc

    def _last_time_entry(self) -> TimestampOffset:
        """The last time index entry, read from the (trimmed) file without mapping it."""
        try:
            with open(self._path(TIME_INDEX_SUFFIX), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                entry = os.pread(f.fileno(), 12, size - 12) if size >= 12 else b""
        except OSError:
            entry = b""
        if len(entry) < 12:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        timestamp, relative = _TIME_ENTRY.unpack(entry)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def _path(self, kind: str) -> str:
        return os.path.join(self.directory, segment_file_name(self.base_offset, kind) + self.suffix)

    # --- appends ----------------------------------------------------------------------

    def append(
        self,
        data: bytes | bytearray | memoryview,
        batches: list[BatchHeader],
        head: bytes | None = None,
    ) -> None:
        """Append validated batches (offsets assigned). `batches` describes them, with
        positions relative to the start of data; `head`, if given, is written in place of
        data's first len(head) bytes (a read-only batch patched without a copy). One
        system call, unless a short write; a failed write leaves nothing behind."""
        start = self.size
        size = len(data)
        written = 0
        try:
            if head is not None:
                rest = (data if type(data) is memoryview else memoryview(data))[len(head) :]
                written = os.pwritev(self.fd, (head, rest), start)
                if written < size:  # a short write: go on from the patched bytes
                    data = head + bytes(rest)
            elif size:
                written = os.pwrite(self.fd, data, start)  # one call, unless a short write
            while written < size:
                written += os.pwrite(self.fd, memoryview(data)[written:], start + written)
        except OSError as exc:
            self._undo_write(start)
            raise KafkaStorageError(f"write to {self.log_path} failed: {exc}") from exc
        self.size = start + written
        if not batches:
            return
        if start == 0:
            # Kafka times segment.ms from the largest timestamp of the segment's first append
            self._rolling_timestamp = max(b.max_timestamp for b in batches)
        elif self._rolling_timestamp is None:
            self._rolling_timestamp = batches[0].max_timestamp
        # _index_batch for each batch, with the state in locals: an index entry is written
        # only once more than index.interval.bytes have gone by since the last one (Kafka's
        # rule: with batches larger than the interval, that is one entry per batch).
        interval = self.index_interval_bytes
        since = self.bytes_since_last_index_entry
        max_timestamp = self.max_timestamp
        for position, _base, last_offset, batch_size, batch_max_timestamp, _epoch in batches:
            if batch_max_timestamp > max_timestamp:
                max_timestamp = self.max_timestamp = batch_max_timestamp
                self.offset_of_max_timestamp = last_offset
            if since > interval:
                self.bytes_since_last_index_entry = since  # as it was, should this raise
                # _add_index_entries, inlined: a full index raises IndexFullError before it
                # changes anything, as is_full() would have said (the next append rolls).
                # A try is free here; contextlib.suppress would build an object per entry.
                try:  # noqa: SIM105
                    (self._offset_index or self.offset_index).append(
                        last_offset, start + position
                    )
                except IndexFullError:
                    pass
                time_index = self._time_index or self.time_index
                # maybe_append skips a timestamp not above its last one: skip the call too
                if max_timestamp > time_index.last_timestamp:
                    try:  # noqa: SIM105
                        time_index.maybe_append(max_timestamp, self.offset_of_max_timestamp)
                    except IndexFullError:
                        pass
                since = 0
            since += batch_size
        self.bytes_since_last_index_entry = since

    def _undo_write(self, size: int) -> None:
        # A partial write must never become visible: cut the file back.
        with contextlib.suppress(OSError):  # the dir goes offline; recovery cuts a torn tail
            os.ftruncate(self.fd, size)

    def _index_batch(self, batch: BatchHeader, position: int) -> None:
        if self._rolling_timestamp is None:
            self._rolling_timestamp = batch.max_timestamp
        if batch.max_timestamp > self.max_timestamp:
            self.max_timestamp = batch.max_timestamp
            self.offset_of_max_timestamp = batch.last_offset
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self._add_index_entries(batch.last_offset, position)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += batch.size

    def _add_index_entries(self, last_offset: int, position: int) -> None:
        # The indexes are sparse: when one append of several batches fills one, skipping
        # an entry only lengthens a scan, while raising IndexFullError would leave the
        # written bytes unindexed and the append half done. The next append rolls.
        offset_index = self.offset_index
        if not offset_index.is_full():
            offset_index.append(last_offset, position)
        time_index = self.time_index
        if not time_index.is_full():
            time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)

    @property
    def largest_timestamp(self) -> int:
        """For time retention: the max record timestamp, or the file's mtime without one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.fd).st_mtime * 1000)

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= _INT32_MAX

    # --- rolling ----------------------------------------------------------------------

    def should_roll(
        self,
        *,
        incoming_bytes: int,
        max_offset: int,
        max_timestamp: int,
        segment_bytes: int,
        segment_ms: int,
        now_ms: int,
    ) -> bool:
        """Kafka's roll rules, checked before an append (so an idle segment never rolls)."""
        return self.roll_due(
            incoming_bytes, max_offset, max_timestamp, segment_bytes, segment_ms, now_ms
        )

    def roll_due(
        self,
        incoming_bytes: int,
        max_offset: int,
        max_timestamp: int,
        segment_bytes: int,
        segment_ms: int,
        now_ms: int,
    ) -> bool:
        """should_roll with positional arguments, for the append path: the cheap
        comparisons first, then the index fullness checks."""
        size = self.size
        if size > segment_bytes - incoming_bytes:
            return True
        if size > 0:
            rolling = self._rolling_timestamp
            if rolling is not None and rolling >= 0:
                waited = max_timestamp - rolling  # time_waited_for_roll, inlined
            else:
                waited = self.time_waited_for_roll(now_ms, max_timestamp)
            if waited > segment_ms - self.roll_jitter_ms:
                return True
        if not 0 <= max_offset - self.base_offset <= _INT32_MAX:
            return True
        # is_full() of both indexes, without the calls (the time index keeps a last slot
        # for the entry written on roll)
        offset_index = self._offset_index or self.offset_index
        time_index = self._time_index or self.time_index
        return (
            offset_index._entries >= offset_index._max_entries
            or time_index._entries >= time_index._max_entries - 1
        )

    def time_waited_for_roll(self, now_ms: int, incoming_timestamp: int) -> int:
        # Like Kafka: measured in record time from the first batch when it has a timestamp,
        # otherwise in wall-clock time since the segment was created.
        if self._rolling_timestamp is None and self.size > 0:
            first = next(self.scan_headers(0, first_chunk=HEADER_SIZE), None)
            self._rolling_timestamp = first.max_timestamp if first else None
        if self._rolling_timestamp is not None and self._rolling_timestamp >= 0:
            return incoming_timestamp - self._rolling_timestamp
        return now_ms - self.created_ms

    def on_become_inactive(self) -> None:
        """The segment stops being the active one: record the final max timestamp, trim,
        and unmap the indexes until a read needs them again. CPython's mmap keeps a
        duplicate descriptor per mapping, so a mapped inactive segment would cost three
        descriptors instead of one (Kafka's JVM mappings cost none)."""
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self._inactive = True
        self.release_indexes()
        self._indexes_unsynced = True  # their entries sit in the page cache until flush

    def release_indexes(self) -> None:
        """Unmap the indexes (trimmed already); a later use maps them again."""
        MAPPED_INDEXES.discard(self)
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.close()
        self._offset_index = self._time_index = None

    @property
    def inactive(self) -> bool:
        """Rolled (or loaded as a rolled one): its indexes are mapped only while used."""
        return self._inactive

    @property
    def offset_index_bytes(self) -> int:
        """The offset index's size, without mapping it."""
        if self._offset_index is not None:
            return self._offset_index.size_in_bytes
        try:
            return os.path.getsize(self._path(OFFSET_INDEX_SUFFIX))
        except FileNotFoundError:
            return 0

    # --- reading ----------------------------------------------------------------------

    def scan_headers(
        self, position: int, end: int | None = None, first_chunk: int = _SCAN_CHUNK
    ) -> Iterator[BatchHeader]:
        """Batch headers from a batch boundary onwards, read in chunks (no record bytes):
        first_chunk bytes first (a lookup's target is near), then _SCAN_CHUNK at a time."""
        return scan_batch_headers(
            self.fd, self.log_path, position, self.size if end is None else end, first_chunk
        )

    def _entry_span(self) -> int:
        """Bytes from an offset index entry that hold the header of every batch up to the
        next entry: entries are index.interval.bytes apart, give or take the last batch."""
        return min(self.index_interval_bytes + HEADER_SIZE, _SCAN_CHUNK)

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """The first batch whose last offset is >= offset, or None if there is none."""
        # scan_headers, inlined for the read path: the batch sought starts at most
        # index.interval.bytes past its index entry, so the first pread reads that much
        # and one header; only the batch found becomes a BatchHeader.
        position = max(self.offset_index.lookup(offset).position, start_position)
        end = self.size
        fd = self.fd
        unpack = HEADER.unpack_from
        buf = b""
        buf_start = position
        chunk = self._entry_span()
        while position + HEADER_SIZE <= end:
            rel = position - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = os.pread(fd, min(chunk, end - position), position)
                buf_start, rel = position, 0
                chunk = _SCAN_CHUNK
                if len(buf) < HEADER_SIZE:
                    return None
            fields = unpack(buf, rel)
            length = fields[1]
            if length < MIN_BATCH_LENGTH:
                # A bad length would never advance the scan: corruption not yet recovered.
                raise CorruptRecordError(
                    f"batch at byte {position} of {self.log_path} has batchLength {length}"
                )
            last_offset = fields[0] + fields[6]
            if last_offset >= offset:
                return _new_tuple(
                    BatchHeader,
                    (position, fields[0], last_offset, LOG_OVERHEAD + length, fields[8], fields[2]),
                )
            position += LOG_OVERHEAD + length
        return None

    def read(
        self, start_offset: int, max_size: int, max_position: int, min_one_batch: bool
    ) -> tuple[OffsetMetadata, FileSlice] | None:
        """Positions of up to max_size bytes from the batch holding start_offset, never past
        max_position (the high watermark's position). None if start_offset is beyond this
        segment. Like Kafka, the slice may end inside a batch; clients expect that."""
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        metadata = OffsetMetadata(start_offset, self.base_offset, start.position)
        size = max(max_size, start.size) if min_one_batch else max_size
        size = max(0, min(size, max_position - start.position))
        return metadata, FileSlice(self.fd, start.position, size)

    def read_bytes(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int, int] | None:
        """(timestamp, offset, leader epoch) of the first record with a timestamp >=
        timestamp at or after starting_offset, or None (ListOffsets by time)."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for header in self.scan_headers(position, first_chunk=self._entry_span()):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            batch = RecordBatch(self.read_bytes(header.position, header.size))
            for record in batch.records():
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.timestamp, record.offset, header.partition_leader_epoch
        return None

    def last_batch(self) -> BatchHeader | None:
        entry = self.offset_index.lookup(_INT32_MAX + self.base_offset)
        last = None
        headers = self.scan_headers(entry.position, first_chunk=self._entry_span())
        for last in headers:  # noqa: B007 - we want the last one
            pass
        return last

    # --- recovery and truncation ------------------------------------------------------

    def recover(
        self, on_batch: Callable[[RecordBatch], None] | None = None, max_batch_size: int = 0
    ) -> int:
        """Validate every batch, rebuild both indexes, and cut the file at the first invalid
        batch (bad length, magic, CRC or offsets). Returns the bytes truncated."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self._rolling_timestamp = None
        self.bytes_since_last_index_entry = 0
        valid = 0
        next_offset = self.base_offset
        for position, batch in self._scan_valid_batches(max_batch_size):
            if batch.base_offset < next_offset or batch.last_offset < batch.base_offset:
                break
            header = batch_header(batch, position)
            self._index_batch(header, position)
            if on_batch is not None:
                on_batch(batch)
            next_offset = batch.last_offset + 1
            valid = position + batch.size_in_bytes
        truncated = self.size - valid
        if truncated:
            self._truncate_file(valid)
        # As Kafka: trim both indexes, and first give the time index the final entry a clean
        # close would have written. Trimming it without that entry made close() raise
        # IndexFullError (no slot left for the final entry) after every recovery.
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(
            self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
        )
        self.time_index.trim_to_valid_size()
        self.missing_index = False
        return truncated

    def _scan_valid_batches(self, max_batch_size: int) -> Iterator[tuple[int, RecordBatch]]:
        """Whole batches that pass the structural and CRC checks, until the first that fails."""
        position = 0
        while position + LOG_OVERHEAD <= self.size:
            chunk = os.pread(self.fd, min(_RECOVERY_CHUNK, self.size - position), position)
            rel = 0
            while rel + LOG_OVERHEAD <= len(chunk):
                length = int.from_bytes(chunk[rel + 8 : rel + 12], "big", signed=True)
                size = LOG_OVERHEAD + length
                if length < MIN_BATCH_LENGTH or (max_batch_size and size > max_batch_size):
                    return
                if position + rel + size > self.size:
                    return  # torn write at the tail
                if rel + size > len(chunk):
                    if rel == 0:  # one batch larger than the chunk: read it whole
                        chunk = os.pread(self.fd, size, position)
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

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= offset; returns the bytes removed."""
        header = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        # The segment may become the active one again: its indexes were trimmed on roll and
        # would read as full, rolling on the next append. Kafka regrows them here too.
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        removed = 0
        if header is not None:
            removed = self.size - header.position
            self._truncate_file(header.position)
        self.bytes_since_last_index_entry = 0
        if self.size == 0:
            self.created_ms = int(time.time() * 1000)
            self._rolling_timestamp = None
        self.max_timestamp, self.offset_of_max_timestamp = self._read_largest_timestamp()
        return removed

    def _read_largest_timestamp(self) -> tuple[int, int]:
        # The last time index entry, unless a batch after it has a larger max timestamp:
        # the time index is sparse, so it alone understates the max (Kafka's
        # readLargestTimestamp). offset_for_timestamp and time retention rely on it.
        last = self.time_index.last_entry
        best = (last.timestamp, last.offset)
        position = self.offset_index.lookup(last.offset).position
        for header in self.scan_headers(position, first_chunk=self._entry_span()):
            if header.max_timestamp > best[0]:
                best = (header.max_timestamp, header.last_offset)
        return best

    def _truncate_file(self, size: int) -> None:
        try:
            os.ftruncate(self.fd, size)
        except OSError as exc:
            raise KafkaStorageError(f"truncating {self.log_path} failed: {exc}") from exc
        self.size = size

    def check_not_corrupt(self) -> None:
        """Raise CorruptRecordError if the indexes fail their sanity checks."""
        try:
            self.offset_index.sanity_check()
            self.time_index.sanity_check()
        except Exception as exc:
            raise CorruptRecordError(f"corrupt index of {self.log_path}: {exc}") from exc

    # --- lifecycle --------------------------------------------------------------------

    def flush(self) -> None:
        try:
            os.fsync(self.fd)
            for index in (self._offset_index, self._time_index):
                if index is not None:
                    index.flush()
            if self._indexes_unsynced:  # unmapped at the roll, written before it
                for suffix in (OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                    _fsync_path(self._path(suffix))
                self._indexes_unsynced = False
        except OSError as exc:
            raise KafkaStorageError(f"flushing {self.log_path} failed: {exc}") from exc

    def close(self) -> None:
        if self.fd < 0:
            return
        MAPPED_INDEXES.discard(self)
        if self._time_index is not None:  # an index never mapped has nothing to add
            self._time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
            self._time_index.close()
        if self._offset_index is not None:
            self._offset_index.close()
        os.close(self.fd)
        MAPPED_INDEXES.open_segments -= 1
        self.fd = -1

    def change_suffix(self, new_suffix: str) -> None:
        """Rename the segment's files (e.g. to .deleted); open handles stay valid."""
        old = {kind: self._path(kind) for kind in (LOG_SUFFIX, TXN_INDEX_SUFFIX)}
        old_offset_index = self._path(OFFSET_INDEX_SUFFIX)
        old_time_index = self._path(TIME_INDEX_SUFFIX)
        self.suffix = new_suffix
        try:
            os.rename(old[LOG_SUFFIX], self._path(LOG_SUFFIX))
            for index, suffix, previous in (
                (self._offset_index, OFFSET_INDEX_SUFFIX, old_offset_index),
                (self._time_index, TIME_INDEX_SUFFIX, old_time_index),
            ):
                if index is not None:
                    index.rename_to(self._path(suffix))
                elif os.path.exists(previous):
                    os.rename(previous, self._path(suffix))
            if os.path.exists(old[TXN_INDEX_SUFFIX]):
                os.rename(old[TXN_INDEX_SUFFIX], self._path(TXN_INDEX_SUFFIX))
        except OSError as exc:
            raise KafkaStorageError(f"renaming {old[LOG_SUFFIX]} failed: {exc}") from exc
        self.log_path = self._path(LOG_SUFFIX)

    def delete(self) -> None:
        """Close and remove every file of the segment."""
        self.close()
        for kind in (LOG_SUFFIX, OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            try:
                os.remove(self._path(kind))
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise KafkaStorageError(f"deleting {self._path(kind)} failed: {exc}") from exc

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"
