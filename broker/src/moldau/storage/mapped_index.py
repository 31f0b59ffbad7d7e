"""What the offset and time indexes share: a file of fixed-size entries, memory-mapped.

As in Kafka the file of a new index is preallocated to the maximum index size
(`segment.index.bytes`, rounded down to whole entries) and memory-mapped; `close()` and
`trim_to_valid_size()` cut it back to the entries written, and reopening an existing file
derives the entry count from its size. Lookups are binary searches over the mapping with
`struct.unpack_from`: O(log n), nothing copied into Python lists. Offsets are stored
relative to the segment's base offset (the 20-digit number in the file name).

Threading: appends, lookups, truncation and resizes belong to the owner of the index (the
event loop); `flush()` may run in a worker thread, so it and the remapping operations share
a lock.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Callable
from typing import Any, Self

from .file_mapping import FileMapping
from .segment_files import base_offset_of

# segment.index.bytes default: 10 MiB.
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024

INT32_MAX = 2**31 - 1
# Kafka keeps the last 8 KiB of entries "warm": lookups near the tail touch only those pages.
_WARM_BYTES = 8192

I32 = struct.Struct(">i")


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


def _round_down(number: int, factor: int) -> int:
    return factor * (number // factor)


class MappedIndex:
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
        # The mapping, and its bytes as a buffer for struct (None: nothing mapped).
        self._mapping: FileMapping | None = None
        self._mm: memoryview | None = None
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
            self._map(fd, self._length)
        finally:
            # The mapping outlives the descriptor and holds none (file_mapping.py).
            os.close(fd)
        return created

    def _map(self, fd: int, length: int) -> None:
        if length == 0:
            return  # mmap refuses empty files; an empty index needs no mapping
        self._mapping = FileMapping(fd, length, self._writable)
        self._mm = self._mapping.view

    def _unmap(self) -> None:
        mapping = self._mapping
        if mapping is not None:
            self._mm = self._mapping = None
            mapping.close()

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
        return 0 <= offset - self._base_offset <= INT32_MAX

    def relative_offset(self, offset: int) -> int:
        relative = offset - self._base_offset
        if not 0 <= relative <= INT32_MAX:
            raise IndexOffsetOverflowError(
                f"offset {offset} does not fit in the index of base offset {self._base_offset}"
                f" ({self._path})"
            )
        return relative

    def _rel_offset_at(self, n: int) -> int:
        assert self._mm is not None
        return I32.unpack_from(self._mm, n * self.ENTRY_SIZE + self._REL_OFFSET_AT)[0]

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
        keep = self._bisect(I32.unpack_from, self._REL_OFFSET_AT, rel_target, right=False)
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
                self._map(fd, rounded)
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
            if self._mapping is not None and self._writable:
                self._mapping.flush()

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
        # Only release the mapping; trimming is a decision for close(), not the GC. No
        # module globals (contextlib): at interpreter exit they may be gone before the last
        # index is collected (the segments' budget lives in a module cleared after this one).
        try:
            if self._mapping is not None:
                self._mapping.close()
        except Exception:
            pass

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
        return self._mm[: self._entries * self.ENTRY_SIZE].tobytes()
