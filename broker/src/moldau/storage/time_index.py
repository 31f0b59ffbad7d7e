"""Kafka's time index (`.timeindex`): timestamp -> the first offset that may hold a later one.

12 bytes an entry: timestamp (int64), then the offset relative to the segment's base offset
(int32). Entry (T, O) means every record with a timestamp greater than T sits at offset O
or later.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from .mapped_index import IndexAppendError, IndexFullError, MappedIndex

# RecordBatch.NO_TIMESTAMP: what an empty time index reports as its last timestamp.
NO_TIMESTAMP = -1

_I64 = struct.Struct(">q")
_TIME_ENTRY = struct.Struct(">qi")


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class TimeIndex(MappedIndex):
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


def read_last_entry(path: str, base_offset: int) -> TimestampOffset:
    """The last entry of a (trimmed) time index file, read without mapping it; (NO_TIMESTAMP,
    base_offset) when the file is empty or cannot be read."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            entry = os.pread(f.fileno(), 12, size - 12) if size >= 12 else b""
    except OSError:
        entry = b""
    if len(entry) < 12:
        return TimestampOffset(NO_TIMESTAMP, base_offset)
    timestamp, relative = _TIME_ENTRY.unpack(entry)
    return TimestampOffset(timestamp, base_offset + relative)
