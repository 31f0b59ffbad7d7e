"""Kafka's segment indexes: the offset index (`.index`) and the time index (`.timeindex`).

Both files are flat arrays of fixed-size big-endian entries, with offsets stored relative to
the segment's base offset (the 20-digit number in the file name):

- offset index (`offset_index.py`), 8 bytes an entry: relative offset (int32), physical
  position in the `.log` (int32). Maps an offset to the file position of the batch holding
  it.
- time index (`time_index.py`), 12 bytes an entry: timestamp (int64), relative offset
  (int32). Entry (T, O) means every record with a timestamp greater than T sits at offset
  O or later.

What they share (preallocation, the mapping, the search, trimming, sanity checks) is
`mapped_index.py`; the file names are `segment_files.py`. This module gathers the names
the other storage modules and the tools import.
"""

from __future__ import annotations

from .mapped_index import (
    DEFAULT_MAX_INDEX_SIZE,
    CorruptIndexError,
    IndexAppendError,
    IndexClosedError,
    IndexFullError,
    IndexOffsetOverflowError,
)
from .offset_index import OffsetIndex, OffsetPosition
from .segment_files import (
    OFFSET_INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    base_offset_of,
    segment_file_name,
)
from .time_index import NO_TIMESTAMP, TimeIndex, TimestampOffset

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
