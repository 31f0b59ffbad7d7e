"""The budget of mapped indexes: which inactive segments keep their indexes mapped.

CPython's mmap keeps a duplicate of each mapped file's descriptor, so every mapped segment
costs two descriptors beyond its `.log`; Kafka's JVM mappings cost none.
"""

from __future__ import annotations

import resource
from typing import Protocol


class IndexHolder(Protocol):
    """A segment, as far as the budget sees it."""

    def release_indexes(self) -> None:
        """Unmap the indexes (a later use maps them again)."""


class MappedIndexes:
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
        self._segments: dict[IndexHolder, None] = {}

    @property
    def limit(self) -> int:
        if self.cap is not None:
            return self.cap
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return 1 << 30
        return max(16, (soft - self.open_segments - self.RESERVED) // 2)

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


MAPPED_INDEXES = MappedIndexes()
