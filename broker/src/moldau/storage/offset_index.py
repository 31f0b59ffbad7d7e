"""Kafka's offset index (`.index`): offset -> position of its batch in the segment's `.log`.

8 bytes an entry: the offset relative to the segment's base offset (int32), then the
physical position in the `.log` (int32), one entry per `index.interval.bytes` appended.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from .mapped_index import I32, INT32_MAX, IndexAppendError, MappedIndex

_OFFSET_ENTRY = struct.Struct(">ii")
_new_tuple = tuple.__new__  # a NamedTuple from a tuple, without its Python-level __new__


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class OffsetIndex(MappedIndex):
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
        if not 0 <= position <= INT32_MAX:
            raise IndexAppendError(f"position {position} is not a valid int32 file position")
        if entries and position < self._last_position:
            raise IndexAppendError(
                f"attempt to append position {position} for offset {offset} to {self._path},"
                f" below the last position {self._last_position}"
            )
        relative = offset - self._base_offset
        if not 0 <= relative <= INT32_MAX:
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
        found = self._bisect(I32.unpack_from, 0, target_offset - base, right=True)
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
        found = self._bisect(I32.unpack_from, 4, fetch_offset.position + fetch_size, right=False)
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
