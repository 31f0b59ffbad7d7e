"""Kafka's segment indexes: the offset index (`.index`) and the time index (`.timeindex`).

Both files are flat arrays of fixed-size big-endian entries, with offsets stored relative to
the segment's base offset (the 20-digit number in the file name):

- offset index, 8 bytes an entry: relative offset (int32), physical position in the `.log`
  (int32). Maps an offset to the file position of the batch holding it.
- time index, 12 bytes an entry: timestamp (int64), relative offset (int32). Entry (T, O)
  means every record with a timestamp greater than T sits at offset O or later.

As in Kafka the file of a new index is preallocated to the maximum index size
(`segment.index.bytes`, rounded down to whole entries) and memory-mapped; `close()` and
`trim_to_valid_size()` cut it back to the entries written, and reopening an existing file
derives the entry count from its size. Lookups are binary searches over the mapping with
`struct.unpack_from`: O(log n), nothing copied into Python lists.

Threading: appends, lookups, truncation and resizes belong to the owner of the index (the
event loop); `flush()` may run in a worker thread, so it and the remapping operations share
a lock.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, Self

__all__ = [
    "DEFAULT_MAX_INDEX_SIZE",
    "NO_TIMESTAMP",
    "OFFSET_INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "CorruptIndexError",
    "IndexAppendError",
    "IndexClosedError",
    "IndexFullError",
    "IndexOffsetOverflowError",
    "OffsetIndex",
    "OffsetPosition",
    "TimeIndex",
    "TimestampOffset",
    "base_offset_of",
    "segment_file_name",
]

OFFSET_INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
# segment.index.bytes default: 10 MiB.
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
# RecordBatch.NO_TIMESTAMP: what an empty time index reports as its last timestamp.
NO_TIMESTAMP = -1

_INT32_MAX = 2**31 - 1
# Kafka keeps the last 8 KiB of entries "warm": lookups near the tail touch only those pages.
_WARM_BYTES = 8192

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_new_tuple = tuple.__new__  # a NamedTuple from a tuple, without its Python-level __new__


class CorruptIndexError(Exception):
    """The index file fails a sanity check; the log layer rebuilds it from the segment."""


class IndexAppendError(ValueError):
    """An append that would break the index's ordering (Kafka's InvalidOffsetException)."""


class IndexOffsetOverflowError(IndexAppendError):
    """The offset does not fit in 4 bytes relative to the base offset."""


class IndexFullError(IndexAppendError):
    """No free slot is left; the segment must roll."""


class IndexClosedError(ValueError):
    """The index was closed (or deleted) and can no longer be used."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


def segment_file_name(base_offset: int, suffix: str) -> str:
    """`00000000000000000042.index` for (42, ".index"): 20 digits so `ls` sorts numerically."""
    if base_offset < 0:
        raise ValueError(f"base offset must not be negative, got {base_offset}")
    return f"{base_offset:020d}{suffix}"


def base_offset_of(path: str | os.PathLike[str]) -> int:
    """The base offset in a segment file name: the digits before the first dot.

    Works for every suffix Kafka uses (`.log`, `.index.deleted`, `.timeindex.swap`, ...).
    """
    name = os.path.basename(os.fspath(path))
    prefix = name.split(".", 1)[0]
    if not prefix.isascii() or not prefix.isdigit():
        raise ValueError(f"not a segment file name (expected <digits>.<suffix>): {name!r}")
    return int(prefix)


def _round_down(number: int, factor: int) -> int:
    return factor * (number // factor)


class _Index:
    """What both index kinds share: the file, its mapping, the entry count, the search."""

    ENTRY_SIZE: int
    # Where the offset sits in an entry, and the struct used to read it.
    _REL_OFFSET_AT: int
    _KIND: str

    def __init__(
        self,
        path: str | os.PathLike[str],
        base_offset: int | None = None,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        writable: bool = True,
    ) -> None:
        self._path = os.fspath(path)
        self._base_offset = base_offset_of(self._path) if base_offset is None else base_offset
        self._max_index_size = max_index_size
        self._writable = writable
        self._mm: mmap.mmap | None = None
        self._closed = False
        self._remap_lock = threading.Lock()
        # Kafka's warm section: the last 8 KiB of entries.
        self._warm_entries = _WARM_BYTES // self.ENTRY_SIZE
        newly_created = self._open_file()
        self._max_entries = self._length // self.ENTRY_SIZE
        # A new file holds nothing yet; an existing one is trusted up to its size
        # (sanity_check is how the caller finds out whether that trust was misplaced).
        self._entries = 0 if newly_created else self._max_entries
        self._reload_last_entry()

    # -- opening and mapping -------------------------------------------------------

    def _open_file(self) -> bool:
        """Open (creating and preallocating if missing) and map the file; True if created."""
        created = False
        # Kafka validates the size only when it has to preallocate a new file.
        must_create = self._writable and not os.path.exists(self._path)
        if must_create and self._max_index_size < self.ENTRY_SIZE:
            raise ValueError(f"invalid max index size {self._max_index_size}")
        if self._writable:
            try:
                fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
                created = True
            except FileExistsError:
                fd = os.open(self._path, os.O_RDWR)
        else:
            fd = os.open(self._path, os.O_RDONLY)
        try:
            if created:
                os.ftruncate(fd, _round_down(self._max_index_size, self.ENTRY_SIZE))
            self._length = os.fstat(fd).st_size
            self._mm = self._map(fd, self._length)
        finally:
            # The mapping outlives the descriptor; keep as few files open as we can.
            os.close(fd)
        return created

    def _map(self, fd: int, length: int) -> mmap.mmap | None:
        if length == 0:
            return None  # mmap refuses empty files; an empty index needs no mapping
        access = mmap.ACCESS_WRITE if self._writable else mmap.ACCESS_READ
        mapping = mmap.mmap(fd, length, access=access)
        # Lookups touch a few pages; kernel read-ahead (8 MiB on some VMs) made the first
        # write to a fresh 10 MiB index cost milliseconds.
        mapping.madvise(mmap.MADV_RANDOM)
        return mapping

    def _unmap(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    # -- properties ----------------------------------------------------------------

    @property
    def path(self) -> str:
        return self._path

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def max_index_size(self) -> int:
        return self._max_index_size

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def length(self) -> int:
        """Size of the file in bytes (preallocated size while active)."""
        return self._length

    @property
    def size_in_bytes(self) -> int:
        """Bytes actually used by entries."""
        return self._entries * self.ENTRY_SIZE

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def closed(self) -> bool:
        return self._closed

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    # -- offsets -------------------------------------------------------------------

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self._base_offset <= _INT32_MAX

    def relative_offset(self, offset: int) -> int:
        relative = offset - self._base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise IndexOffsetOverflowError(
                f"offset {offset} does not fit in the index of base offset {self._base_offset}"
                f" ({self._path})"
            )
        return relative

    def _rel_offset_at(self, n: int) -> int:
        assert self._mm is not None
        return _I32.unpack_from(self._mm, n * self.ENTRY_SIZE + self._REL_OFFSET_AT)[0]

    def _offset_at(self, n: int) -> int:
        return self._base_offset + self._rel_offset_at(n)

    # -- search --------------------------------------------------------------------

    def _bisect(
        self,
        unpack: Callable[[Any, int], tuple[int]],  # Any: self._mm, None when nothing is mapped
        at: int,
        target: int,
        *,
        right: bool,
    ) -> int:
        """Number of entries whose key is < target (right=False) or <= target (right=True);
        the key of entry n is unpack(mapping, n * ENTRY_SIZE + at)[0].

        Keys must be non-decreasing. Like Kafka, first decide whether the answer lies in the
        warm tail so that lookups by in-sync readers keep touching the same few pages.
        """
        mm = self._mm
        size = self.ENTRY_SIZE
        limit = target if right else target - 1  # integer keys: key < t <=> key <= t - 1
        lo, hi = 0, self._entries
        first_warm = hi - 1 - self._warm_entries
        if first_warm > 0:
            if unpack(mm, first_warm * size + at)[0] <= limit:
                lo = first_warm + 1
            else:
                hi = first_warm
        while lo < hi:
            mid = (lo + hi) >> 1
            if unpack(mm, mid * size + at)[0] <= limit:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # -- mutation ------------------------------------------------------------------

    def truncate_to(self, offset: int) -> None:
        """Drop every entry whose offset is >= `offset` (no effect past the last entry)."""
        self._require_open()
        rel_target = offset - self._base_offset
        keep = self._bisect(_I32.unpack_from, self._REL_OFFSET_AT, rel_target, right=False)
        self._truncate_to_entries(keep)

    def truncate(self) -> None:
        """Drop all entries (the file keeps its size)."""
        self._require_open()
        self._truncate_to_entries(0)

    def _truncate_to_entries(self, entries: int) -> None:
        self._entries = min(entries, self._entries)
        self._reload_last_entry()

    def reset(self) -> None:
        """Drop all entries and grow the file back to the maximum index size."""
        self.truncate()
        self.resize(self._max_index_size)

    def resize(self, new_size: int) -> bool:
        """Set the file (and mapping) to `new_size` rounded down to whole entries.

        Used to trim on roll/close and to grow the active segment's index back to the
        maximum size when it is reopened for appends. Returns False if nothing changed.
        """
        self._require_open()
        rounded = _round_down(new_size, self.ENTRY_SIZE)
        if rounded == self._length:
            return False
        if not self._writable:
            raise ValueError(f"cannot resize the read-only index {self._path}")
        if rounded < self._entries * self.ENTRY_SIZE:
            raise ValueError(
                f"cannot resize {self._path} to {rounded} bytes: it holds {self._entries} entries"
            )
        with self._remap_lock:
            # Unmapping a shared mapping loses nothing: dirty pages stay in the page cache.
            self._unmap()
            fd = os.open(self._path, os.O_RDWR)
            try:
                os.ftruncate(fd, rounded)
                self._mm = self._map(fd, rounded)
            finally:
                os.close(fd)
            self._length = rounded
            self._max_entries = rounded // self.ENTRY_SIZE
        return True

    def trim_to_valid_size(self) -> None:
        """Cut the file down to the entries written (on roll and on close)."""
        if self._closed or not self._writable:
            return
        self.resize(self._entries * self.ENTRY_SIZE)

    def flush(self) -> None:
        """msync the mapping so the entries are on disk."""
        with self._remap_lock:
            if self._mm is not None and self._writable:
                self._mm.flush()

    def close(self) -> None:
        """Trim the file and unmap it; closing twice is harmless."""
        if self._closed:
            return
        self.trim_to_valid_size()
        self.close_handler()

    def close_handler(self) -> None:
        """Unmap without trimming (used before deleting or when the directory failed)."""
        with self._remap_lock:
            self._unmap()
            self._closed = True

    def delete_if_exists(self) -> bool:
        """Unmap and delete the file; False if it was already gone."""
        self.close_handler()
        try:
            os.unlink(self._path)
        except FileNotFoundError:
            return False
        return True

    def rename_to(self, new_path: str | os.PathLike[str]) -> None:
        """Rename the backing file (e.g. to `.deleted` or `.swap`); the mapping is unaffected."""
        new = os.fspath(new_path)
        try:
            os.replace(self._path, new)
        finally:
            self._path = new

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Only release the mapping; trimming is a decision for close(), not the GC.
        with contextlib.suppress(Exception):
            if self._mm is not None:
                self._mm.close()

    # -- checks ----------------------------------------------------------------------

    def _require_open(self) -> None:
        if self._closed:
            raise IndexClosedError(f"index {self._path} is closed")

    def _require_appendable(self, force: bool = False) -> None:
        self._require_open()
        if not self._writable:
            raise ValueError(f"index {self._path} is read-only")
        if not force and self.is_full():
            raise IndexFullError(
                f"attempt to append to a full index {self._path} ({self._entries} entries)"
            )

    def _require_entry(self, n: int) -> None:
        self._require_open()
        if not 0 <= n < self._entries:
            raise IndexError(f"entry {n} out of range: {self._path} has {self._entries} entries")

    def sanity_check(self, full: bool = False) -> None:
        """Raise CorruptIndexError if the file is obviously damaged.

        The default checks are O(1), like Kafka's: the size is whole entries, the last offset
        is not below the base offset, and the last entry is past the first (which catches
        the zero-filled tail of a preallocated file left by a crash). `full=True` also
        walks every entry and checks the ordering.
        """
        self._require_open()
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"{self._KIND} file {self._path} is corrupt: its size {self._length} is not a"
                f" multiple of the entry size {self.ENTRY_SIZE}"
            )
        if self._entries == 0:
            return
        self._check_ends()
        if full:
            self._check_all()

    def _corrupt(self, what: str) -> CorruptIndexError:
        return CorruptIndexError(f"corrupt {self._KIND} {self._path}: {what}")

    def _check_ends(self) -> None:
        raise NotImplementedError

    def _check_all(self) -> None:
        raise NotImplementedError

    def _reload_last_entry(self) -> None:
        raise NotImplementedError

    def _raw_entries(self) -> bytes:
        assert self._mm is not None
        return self._mm[: self._entries * self.ENTRY_SIZE]


class OffsetIndex(_Index):
    """Offset -> position in the segment's `.log`, one entry per `index.interval.bytes`."""

    ENTRY_SIZE = 8
    _REL_OFFSET_AT = 0
    _KIND = "offset index"

    _last_offset: int

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        return self._last_offset

    def _reload_last_entry(self) -> None:
        if self._entries == 0:
            self._last_offset = self._base_offset
            self._last_position = 0
        else:
            self._last_offset, self._last_position = self.entry(self._entries - 1)

    def entry(self, n: int) -> OffsetPosition:
        """The n-th entry as absolute (offset, position)."""
        self._require_entry(n)
        assert self._mm is not None
        rel, position = _OFFSET_ENTRY.unpack_from(self._mm, n * 8)
        return OffsetPosition(self._base_offset + rel, position)

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offsets strictly increase, positions never decrease."""
        # The append path: each check is one comparison; the helpers raise the errors.
        entries = self._entries
        if self._closed or not self._writable or entries >= self._max_entries:
            self._require_appendable()
        if entries and offset <= self._last_offset:
            raise IndexAppendError(
                f"attempt to append offset {offset} to slot {entries} of {self._path},"
                f" not larger than the last offset {self._last_offset}"
            )
        if not 0 <= position <= _INT32_MAX:
            raise IndexAppendError(f"position {position} is not a valid int32 file position")
        if entries and position < self._last_position:
            raise IndexAppendError(
                f"attempt to append position {position} for offset {offset} to {self._path},"
                f" below the last position {self._last_position}"
            )
        relative = offset - self._base_offset
        if not 0 <= relative <= _INT32_MAX:
            self.relative_offset(offset)  # raises IndexOffsetOverflowError
        mm = self._mm
        assert mm is not None  # past the guard above the index is open with a free slot
        _OFFSET_ENTRY.pack_into(mm, entries * 8, relative, position)
        self._entries = entries + 1
        self._last_offset = offset
        self._last_position = position

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The entry with the largest offset <= target, or (base_offset, 0) if there is none.

        The caller scans the log forward from the returned position.
        """
        if self._closed:
            self._require_open()  # raises
        base = self._base_offset
        found = self._bisect(_I32.unpack_from, 0, target_offset - base, right=True)
        if found == 0:
            return _new_tuple(OffsetPosition, (base, 0))
        mm = self._mm
        assert mm is not None  # an open index with an entry below the target is mapped
        rel, position = _OFFSET_ENTRY.unpack_from(mm, (found - 1) * 8)
        return _new_tuple(OffsetPosition, (base + rel, position))

    def fetch_upper_bound_offset(
        self, fetch_offset: OffsetPosition, fetch_size: int
    ) -> OffsetPosition | None:
        """The first entry at or past `fetch_offset.position + fetch_size`, if any.

        An offset guaranteed outside the fetched byte range (not necessarily the smallest).
        """
        self._require_open()
        found = self._bisect(_I32.unpack_from, 4, fetch_offset.position + fetch_size, right=False)
        if found == self._entries:
            return None
        return self.entry(found)

    def _check_ends(self) -> None:
        if self._last_offset < self._base_offset:
            raise self._corrupt(
                f"{self._entries} entries but the last offset {self._last_offset} is below"
                f" the base offset {self._base_offset}"
            )
        if self._entries > 1 and self._rel_offset_at(0) >= self._rel_offset_at(self._entries - 1):
            raise self._corrupt(
                f"offsets do not increase: the first entry's offset {self._offset_at(0)} is not"
                f" below the last entry's {self._last_offset}"
            )

    def _check_all(self) -> None:
        prev_rel, prev_pos = -1, -1
        for n, (rel, pos) in enumerate(_OFFSET_ENTRY.iter_unpack(self._raw_entries())):
            if rel <= prev_rel or pos < prev_pos or pos < 0:
                raise self._corrupt(
                    f"entry {n} (offset {self._base_offset + rel}, position {pos}) does not"
                    f" follow (offset {self._base_offset + prev_rel}, position {prev_pos})"
                )
            prev_rel, prev_pos = rel, pos


class TimeIndex(_Index):
    """Timestamp -> first offset that may hold a later timestamp (ListOffsets by time)."""

    ENTRY_SIZE = 12
    _REL_OFFSET_AT = 8
    _KIND = "time index"

    _last_entry: TimestampOffset
    last_timestamp: int  # _last_entry's timestamp, read by the append path without a call

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (NO_TIMESTAMP, base_offset) when empty."""
        return self._last_entry

    def is_full(self) -> bool:
        # Kafka keeps the last slot free for the entry written when the segment rolls.
        return self._entries >= self._max_entries - 1

    def _reload_last_entry(self) -> None:
        if self._entries == 0:
            self._last_entry = TimestampOffset(NO_TIMESTAMP, self._base_offset)
        else:
            self._last_entry = self.entry(self._entries - 1)
        self.last_timestamp = self._last_entry.timestamp

    def _timestamp_at(self, n: int) -> int:
        assert self._mm is not None
        return _I64.unpack_from(self._mm, n * 12)[0]

    def entry(self, n: int) -> TimestampOffset:
        """The n-th entry as (timestamp, absolute offset)."""
        self._require_entry(n)
        assert self._mm is not None
        timestamp, rel = _TIME_ENTRY.unpack_from(self._mm, n * 12)
        return TimestampOffset(timestamp, self._base_offset + rel)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is greater than the last one.

        Kafka's rules: an offset below the last entry's or a timestamp below the last one is
        an error; an equal timestamp is silently skipped (a re-append of the last entry on
        roll or close). `skip_full_check` is for that final entry written on roll, which may
        use the reserved last slot.
        """
        entries = self._entries
        # _require_appendable's checks, each one comparison here (is_full: the last slot
        # is reserved); the helper raises the error.
        if (
            self._closed
            or not self._writable
            or (not skip_full_check and entries >= self._max_entries - 1)
        ):
            self._require_appendable(force=skip_full_check)
        last_ts, last_offset = self._last_entry
        if entries:
            if offset < last_offset:
                raise IndexAppendError(
                    f"attempt to append offset {offset} to slot {entries} of {self._path},"
                    f" below the last offset {last_offset}"
                )
            if timestamp < last_ts:
                raise IndexAppendError(
                    f"attempt to append timestamp {timestamp} to slot {entries} of"
                    f" {self._path}, below the last timestamp {last_ts}"
                )
        if timestamp <= last_ts:
            return
        if entries >= self._max_entries:
            raise IndexFullError(f"no slot left in {self._path} ({entries} entries)")
        relative = self.relative_offset(offset)
        mm = self._mm
        assert mm is not None  # past the guards above the index is open with a free slot
        _TIME_ENTRY.pack_into(mm, entries * 12, timestamp, relative)
        self._entries = entries + 1
        self._last_entry = TimestampOffset(timestamp, offset)
        self.last_timestamp = timestamp

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The entry with the largest timestamp <= target, or (NO_TIMESTAMP, base_offset).

        For ListOffsets Kafka then looks the returned offset up in the offset index and scans
        the log from there for the first batch whose max timestamp is >= the target.
        """
        self._require_open()
        found = self._bisect(_I64.unpack_from, 0, target_timestamp, right=True)
        if found == 0:
            return TimestampOffset(NO_TIMESTAMP, self._base_offset)
        return self.entry(found - 1)

    def _check_ends(self) -> None:
        last_ts, last_offset = self._last_entry
        if last_offset < self._base_offset:
            raise self._corrupt(
                f"{self._entries} entries but the last offset {last_offset} is below the base"
                f" offset {self._base_offset}"
            )
        if self._entries > 1 and self._timestamp_at(0) >= last_ts:
            raise self._corrupt(
                f"timestamps do not increase: the first entry's timestamp {self._timestamp_at(0)}"
                f" is not below the last entry's {last_ts}"
            )

    def _check_all(self) -> None:
        prev_ts: int | None = None
        prev_rel = 0
        for n, (ts, rel) in enumerate(_TIME_ENTRY.iter_unpack(self._raw_entries())):
            if (prev_ts is not None and ts <= prev_ts) or rel < prev_rel:
                raise self._corrupt(
                    f"entry {n} (timestamp {ts}, offset {self._base_offset + rel}) does not"
                    f" follow (timestamp {prev_ts}, offset {self._base_offset + prev_rel})"
                )
            prev_ts, prev_rel = ts, rel
