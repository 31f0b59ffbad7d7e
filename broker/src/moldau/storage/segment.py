"""A log segment: a `.log` file of v2 record batches with its offset and time indexes,
and the transaction index of the aborted transactions whose markers it holds.

Batches are stored byte for byte as they arrived (offsets already assigned). The offset
index maps the last offset of a batch to the batch's file position every
`index.interval.bytes`; the time index maps the largest timestamp seen so far to the last
offset of its batch at the same moments. Reads return file positions, never bytes, so
the network layer can `sendfile` them.

Beside it: the batch positions and header scans (`segment_positions.py`), the file names,
renames and deletes (`segment_files.py`), recovery and truncation (`segment_recovery.py`)
and the budget of mapped indexes (`index_mappings.py`). The append, roll and read paths
stay here, inlined where a request pays for each call.

All methods run on the owner's thread (the broker's event loop, or a cleaner/recovery
thread that owns the segment at that time).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from moldau.errors import CorruptRecordError, KafkaStorageError
from moldau.protocol.records import HEADER_SIZE, RecordBatch

from .index_mappings import MAPPED_INDEXES
from .mapped_index import CorruptIndexError, IndexFullError
from .offset_index import OffsetIndex
from .segment_files import (
    LOG_SUFFIX,
    OFFSET_INDEX_SUFFIX,
    SEGMENT_FILE_KINDS,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    delete_files,
    fsync_path,
    rename_if_present,
    segment_path,
)
from .segment_positions import (
    SCAN_CHUNK,
    BatchHeader,
    FileSlice,
    OffsetMetadata,
    find_batch,
    scan_batch_headers,
)
from .segment_recovery import recover_segment, truncate_segment
from .time_index import TimeIndex, read_last_entry
from .txn_index import TransactionIndex

# Imported from here by the tools, the benchmarks and the tests.
__all__ = ["MAPPED_INDEXES", "BatchHeader", "LogSegment", "scan_batch_headers"]

_INT32_MAX = 0x7FFFFFFF
_Index = TypeVar("_Index", OffsetIndex, TimeIndex)


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
        cleanly loaded log, as Kafka's LazyIndex: each mapping counts against
        vm.max_map_count)."""
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.suffix = suffix
        self.log_path = self._path(LOG_SUFFIX)
        # No file until the first aborted transaction: a segment without one has none.
        self.txn_index = TransactionIndex(self._path(TXN_INDEX_SUFFIX), base_offset)
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
        self._counted_mapped = False  # counted in MAPPED_INDEXES.mapped_segments
        self._check_when_mapped = lazy_indexes
        self._inactive = lazy_indexes  # inactive segments map their indexes on demand
        self._indexes_unsynced = False
        self.created_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        self.bytes_since_last_index_entry = 0
        last = (read_last_entry(self._path(TIME_INDEX_SUFFIX), base_offset) if lazy_indexes
                else self.time_index.last_entry)
        self.max_timestamp = last.timestamp
        self.offset_of_max_timestamp = last.offset
        # The max timestamp of the first append: segment.ms is timed from it (None: not known).
        self.rolling_timestamp: int | None = None

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
        if not self._counted_mapped:
            self._counted_mapped = True
            MAPPED_INDEXES.mapped_segments += 1
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

    def _path(self, kind: str) -> str:
        return segment_path(self.directory, self.base_offset, kind, self.suffix)

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
            self.rolling_timestamp = max(b.max_timestamp for b in batches)
        elif self.rolling_timestamp is None:
            self.rolling_timestamp = batches[0].max_timestamp
        # For each batch, with the state in locals (recovery's _index_batch does the same
        # one batch at a time): an index entry is written
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
                # Recovery's _add_index_entries, inlined: a full index raises IndexFullError
                # before it changes anything, as is_full() would have said (the next append
                # rolls).
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
            rolling = self.rolling_timestamp
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
        if self.rolling_timestamp is None and self.size > 0:
            first = next(self.scan_headers(0, first_chunk=HEADER_SIZE), None)
            self.rolling_timestamp = first.max_timestamp if first else None
        if self.rolling_timestamp is not None and self.rolling_timestamp >= 0:
            return incoming_timestamp - self.rolling_timestamp
        return now_ms - self.created_ms

    def on_become_inactive(self) -> None:
        """The segment stops being the active one: record the final max timestamp, trim,
        and unmap the indexes until a read needs them again (idle partitions' old segments
        would otherwise hold two mappings each against vm.max_map_count)."""
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
        self._uncount_mapped()
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.close()
        self._offset_index = self._time_index = None

    def _uncount_mapped(self) -> None:
        if self._counted_mapped:
            self._counted_mapped = False
            MAPPED_INDEXES.mapped_segments -= 1

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
        self, position: int, end: int | None = None, first_chunk: int = SCAN_CHUNK
    ) -> Iterator[BatchHeader]:
        """Batch headers from a batch boundary onwards, read in chunks (no record bytes):
        first_chunk bytes first (a lookup's target is near), then SCAN_CHUNK at a time."""
        return scan_batch_headers(
            self.fd, self.log_path, position, self.size if end is None else end, first_chunk
        )

    def _entry_span(self) -> int:
        """Bytes from an offset index entry that hold the header of every batch up to the
        next entry: entries are index.interval.bytes apart, give or take the last batch."""
        return min(self.index_interval_bytes + HEADER_SIZE, SCAN_CHUNK)

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchHeader | None:
        """The first batch whose last offset is >= offset, or None if there is none."""
        position = max(self.offset_index.lookup(offset).position, start_position)
        return find_batch(self.fd, self.log_path, position, self.size, offset, self._entry_span())

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
        return recover_segment(self, on_batch, max_batch_size)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= offset; returns the bytes removed."""
        return truncate_segment(self, offset)

    def read_largest_timestamp(self) -> tuple[int, int]:
        """(max timestamp, its offset): the last time index entry, unless a batch after it
        has a larger max timestamp. The time index is sparse, so it alone understates the
        max (Kafka's readLargestTimestamp); offset_for_timestamp and time retention rely
        on it."""
        last = self.time_index.last_entry
        best = (last.timestamp, last.offset)
        position = self.offset_index.lookup(last.offset).position
        for header in self.scan_headers(position, first_chunk=self._entry_span()):
            if header.max_timestamp > best[0]:
                best = (header.max_timestamp, header.last_offset)
        return best

    def truncate_file(self, size: int) -> None:
        """Cut the `.log` to size bytes (the indexes are the caller's to cut)."""
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
                    fsync_path(self._path(suffix))
                self._indexes_unsynced = False
            self.txn_index.flush()  # only when appended to since the last flush
        except OSError as exc:
            raise KafkaStorageError(f"flushing {self.log_path} failed: {exc}") from exc

    def close(self) -> None:
        if self.fd < 0:
            return
        MAPPED_INDEXES.discard(self)
        self._uncount_mapped()
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
        old_log = self._path(LOG_SUFFIX)
        old_offset_index = self._path(OFFSET_INDEX_SUFFIX)
        old_time_index = self._path(TIME_INDEX_SUFFIX)
        self.suffix = new_suffix
        try:
            os.rename(old_log, self._path(LOG_SUFFIX))
            for index, suffix, previous in (
                (self._offset_index, OFFSET_INDEX_SUFFIX, old_offset_index),
                (self._time_index, TIME_INDEX_SUFFIX, old_time_index),
            ):
                if index is not None:
                    index.rename_to(self._path(suffix))
                else:
                    rename_if_present(previous, self._path(suffix))
            self.txn_index.rename_to(self._path(TXN_INDEX_SUFFIX))
        except OSError as exc:
            raise KafkaStorageError(f"renaming {old_log} failed: {exc}") from exc
        self.log_path = self._path(LOG_SUFFIX)

    def delete(self) -> None:
        """Close and remove every file of the segment."""
        self.close()
        delete_files(self._path(kind) for kind in SEGMENT_FILE_KINDS)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, size={self.size})"
