"""Which segments leave a partition log, and how: retention by time, size and log start
offset (Kafka's deleteOldSegments), DeleteRecords, and the cleaner's swap of compacted
segments. A segment that goes is renamed `.deleted` and removed after
file.delete.delay.ms (PartitionLog.pending_deletes).

These are the bodies of PartitionLog's methods of the same names, kept apart from its
append and read paths; like the log's own code they keep its segment list, base offsets
and remembered appends (positions and bytes) consistent.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from moldau.errors import OffsetOutOfRangeError

from .segment import LogSegment
from .segment_files import DELETED_SUFFIX

if TYPE_CHECKING:
    from .config import LogConfig
    from .epoch_cache import LeaderEpochCache
    from .producer_state import ProducerStateManager
    from .recent_appends import RecentAppends


class PartitionLog(Protocol):
    """What these functions use of the log (log.PartitionLog, which calls them: a
    protocol, so that this module need not import it back)."""

    config: LogConfig
    segments: list[LogSegment]
    _bases: list[int]
    _recent: RecentAppends
    pending_deletes: list[tuple[int, LogSegment]]
    log_start_offset: int
    epochs: LeaderEpochCache
    producer_state: ProducerStateManager

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @property
    def active_segment(self) -> LogSegment: ...

    @property
    def name(self) -> str: ...

    def size_in_bytes(self) -> int: ...

    def roll(self, base_offset: int | None = None) -> LogSegment: ...

    def delete_due_files(self, now: int) -> None: ...

# Whether a segment goes, given the base offset of the one after it (the log end offset
# for the active segment). Predicates are asked oldest segment first, and stop at the
# first that stays.
SegmentPredicate = Callable[[LogSegment, int], bool]


def delete_records(log: PartitionLog, offset: int, now: int) -> int:
    """DeleteRecords: advance the log start offset (not past the high watermark)."""
    if offset > log.high_watermark:
        raise OffsetOutOfRangeError(
            f"cannot delete records of {log.name} up to {offset}: above the high "
            f"watermark {log.high_watermark}"
        )
    if offset > log.log_start_offset:
        log.log_start_offset = offset
        log.epochs.truncate_from_start(offset)
    # Only the segments now below the log start go; time and size retention stay with
    # the retention check (they used to run here too, on the wall clock).
    _delete_segments(log, _below_log_start(log), now)
    return log.log_start_offset


def delete_old_segments(log: PartitionLog, now: int) -> int:
    """Apply retention: segments past retention.ms, beyond retention.bytes, or wholly
    below the log start offset go. Returns the number of segments deleted."""
    deleted = _delete_segments(log, _below_log_start(log), now)
    if log.config.delete:
        # Kafka's order: size first, then time.
        deleted += _delete_segments(log, _retention_bytes_breached(log), now)
        deleted += _delete_segments(log, _retention_ms_breached(log, now), now)
    return deleted


def _below_log_start(log: PartitionLog) -> SegmentPredicate:
    # Kafka's deleteLogStartOffsetBreachedSegments: a segment goes once the *next segment*
    # starts at or below the log start, so the active segment stays (DeleteRecords up to
    # the high watermark keeps its bytes until it rolls)
    return lambda segment, next_base: (segment is not log.segments[-1]
                                       and next_base <= log.log_start_offset)


def _retention_ms_breached(log: PartitionLog, now: int) -> SegmentPredicate:
    limit = log.config.retention_ms
    return lambda segment, _next: limit >= 0 and now - segment.largest_timestamp > limit


def _retention_bytes_breached(log: PartitionLog) -> SegmentPredicate:
    limit = log.config.retention_bytes
    excess = log.size_in_bytes() - limit

    def breached(segment: LogSegment, _next: int) -> bool:
        nonlocal excess
        if limit < 0 or excess < segment.size:
            return False
        excess -= segment.size
        return True

    return breached


def _delete_segments(log: PartitionLog, predicate: SegmentPredicate, now: int) -> int:
    """Delete the oldest segments while the predicate holds and they lie wholly below
    the high watermark; a non-empty active segment is rolled first so it can go too."""
    doomed: list[LogSegment] = []
    for i, segment in enumerate(log.segments):
        is_active = i == len(log.segments) - 1
        next_base = log.log_end_offset if is_active else log.segments[i + 1].base_offset
        if next_base > log.high_watermark or not predicate(segment, next_base):
            break
        if is_active and segment.size == 0:
            break
        doomed.append(segment)
    if not doomed:
        return 0
    log._recent.clear()
    if doomed[-1] is log.active_segment:
        log.roll()
    for segment in doomed:
        log.segments.remove(segment)
        log._bases.remove(segment.base_offset)
        segment.change_suffix(DELETED_SUFFIX)
        log.pending_deletes.append((now + log.config.file_delete_delay_ms, segment))
    log.log_start_offset = max(log.log_start_offset, log.segments[0].base_offset)
    log.producer_state.delete_snapshots_below(log.segments[0].base_offset)
    log.epochs.truncate_from_start(log.log_start_offset)
    log.delete_due_files(now)
    return len(doomed)


def replace_segments(log: PartitionLog, old: list[LogSegment], new: LogSegment,
                     now: int) -> None:
    """Swap compacted output (a `.swap` segment) in for the segments it replaces: the old
    ones are renamed `.deleted` (removed after file.delete.delay.ms), then the new one
    takes its final name. A crash in between is completed at the next load."""
    due = now + log.config.file_delete_delay_ms
    log._recent.clear()
    for segment in old:
        i = log.segments.index(segment)
        del log.segments[i]
        del log._bases[i]
        segment.change_suffix(DELETED_SUFFIX)
        log.pending_deletes.append((due, segment))
    new.change_suffix("")
    i = bisect.bisect_left(log._bases, new.base_offset)
    log.segments.insert(i, new)
    log._bases.insert(i, new.base_offset)
