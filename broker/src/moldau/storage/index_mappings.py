"""The budget of mapped indexes: which inactive segments keep their indexes mapped.

Each mapped index is a memory mapping (two per segment), and the kernel allows a process
`vm.max_map_count` of them. The mappings hold no file descriptor (file_mapping.py), except
on platforms where the mmap module's fallback keeps one per mapping.
"""

from __future__ import annotations

import resource
from typing import Protocol

from .file_mapping import KEEPS_DESCRIPTOR

_MAX_MAP_COUNT = "/proc/sys/vm/max_map_count"


class IndexHolder(Protocol):
    """A segment, as far as the budget sees it."""

    def release_indexes(self) -> None:
        """Unmap the indexes (a later use maps them again)."""


def max_map_count() -> int:
    """The kernel's limit of mappings per process (Linux's default when unreadable).
    Read from /proc by hand: psutil reads no sysctl."""
    try:
        with open(_MAX_MAP_COUNT) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 65530


class MappedIndexes:
    """Inactive segments whose indexes are mapped, oldest mapping first. Past the limit
    the oldest are unmapped again (the next read maps them anew): a consumer reading
    through old data would otherwise leave two mappings per segment it touched.

    The limit follows the mappings left over: `vm.max_map_count`, less a reserve for the
    interpreter's own (libraries, heap, thread stacks) and two per mapped active segment.
    Where mappings keep descriptors (KEEPS_DESCRIPTOR), the open-files limit bounds it
    as well: less one per open segment (its `.log`) and a reserve, two per mapped segment.
    Kafka maps without limit; here a log with more segments than that remaps indexes when
    reads jump around (docs/storage.md)."""

    RESERVED = 1024  # descriptors kept for sockets, checkpoints, ZooKeeper, ...
    RESERVED_MAPPINGS = 4096  # the interpreter's own mappings, with room to spare

    def __init__(self) -> None:
        self.open_segments = 0  # LogSegments with an open .log (kept by LogSegment)
        self.mapped_segments = 0  # LogSegments with mapped indexes, active ones too
        self.cap: int | None = None  # a fixed limit instead (tests)
        self._max_map_count: int | None = None
        self._segments: dict[IndexHolder, None] = {}

    @property
    def limit(self) -> int:
        if self.cap is not None:
            return self.cap
        if self._max_map_count is None:
            self._max_map_count = max_map_count()
        active = self.mapped_segments - len(self._segments)
        limit = (self._max_map_count - self.RESERVED_MAPPINGS) // 2 - active
        if KEEPS_DESCRIPTOR:
            soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            if soft != resource.RLIM_INFINITY:
                limit = min(limit, (soft - self.open_segments - self.RESERVED) // 2)
        return max(16, limit)

    def add(self, segment: IndexHolder) -> None:
        self._segments.pop(segment, None)
        self._segments[segment] = None
        limit = self.limit
        while len(self._segments) > limit:
            oldest = next(iter(self._segments))
            oldest.release_indexes()

    def discard(self, segment: IndexHolder) -> None:
        self._segments.pop(segment, None)

    def __len__(self) -> int:
        return len(self._segments)

    @property
    def mappings(self) -> int:
        """The memory mappings the mapped indexes hold (an offset and a time index per
        segment, active segments' too): the bulk of the process's, against vm.max_map_count."""
        return 2 * self.mapped_segments


MAPPED_INDEXES = MappedIndexes()
