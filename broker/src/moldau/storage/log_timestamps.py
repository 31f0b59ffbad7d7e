"""ListOffsets against a partition log (Kafka's fetchOffsetByTimestamp): the special
timestamps (earliest, latest, max) and the first record at or after a timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .epoch_cache import LeaderEpochCache
    from .segment import LogSegment


class PartitionLog(Protocol):
    """What ListOffsets reads of the log (log.PartitionLog: a protocol, so that this
    module need not import it back)."""

    segments: list[LogSegment]
    log_start_offset: int
    epochs: LeaderEpochCache

    @property
    def log_end_offset(self) -> int: ...

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5  # v9 (KIP-1005): the highest offset in remote storage


def offset_for_timestamp(log: PartitionLog, timestamp: int) -> tuple[int, int, int] | None:
    """ListOffsets: (timestamp, offset, leader epoch) or None when nothing matches."""
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        offset = log.log_start_offset
        return -1, offset, log.epochs.epoch_for_offset(offset)
    if timestamp == LATEST_TIMESTAMP:
        offset = log.log_end_offset
        return -1, offset, log.epochs.latest_epoch
    if timestamp == MAX_TIMESTAMP:
        return _max_timestamp_entry(log)
    for segment in log.segments:
        if segment.max_timestamp >= timestamp:
            found = segment.find_offset_by_timestamp(timestamp, log.log_start_offset)
            if found is not None:
                return found
    return None


def _max_timestamp_entry(log: PartitionLog) -> tuple[int, int, int] | None:
    best = max(log.segments, key=lambda s: s.max_timestamp)
    if best.max_timestamp < 0:
        return None
    return best.find_offset_by_timestamp(best.max_timestamp, log.log_start_offset)
