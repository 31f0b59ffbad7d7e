"""The log's side of idempotent producers: checking an append against the producer state,
recording what was appended, and rebuilding the state from the log after a restart or a
truncation (Kafka's rebuildProducerState)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from moldau.protocol.records import HEADER, HEADER_SIZE

from .append_info import AppendInfo, ProducerBatch
from .producer_state import ProducerStateManager
from .segment import LogSegment

_INT32_MAX = 0x7FFFFFFF


def find_duplicate_append(state: ProducerStateManager, info: AppendInfo) -> AppendInfo | None:
    """Kafka's idempotence rules for a client's batches: a retried batch is answered
    with its original offsets (nothing is written); an older epoch or a gap in
    sequence numbers raises. Returns the duplicate's AppendInfo, if any."""
    pending: dict[int, tuple[int, int]] = {}
    for pb in info.producer_batches:
        duplicate = state.find_duplicate(
            pb.producer_id, pb.producer_epoch, pb.first_sequence, pb.last_sequence
        )
        if duplicate is not None:
            return AppendInfo(
                first_offset=duplicate.first_offset,
                last_offset=duplicate.last_offset,
                max_timestamp=duplicate.timestamp,
            )
        state.check(pb.producer_id, pb.producer_epoch, pb.first_sequence, pb.first_offset,
                    pending)
        pending[pb.producer_id] = (pb.producer_epoch, pb.last_sequence)
    return None


def track_appended(state: ProducerStateManager, batches: Iterable[ProducerBatch]) -> None:
    """Record the producers' batches an append wrote."""
    for pb in batches:  # _track, inlined: the append path pays for each call
        if pb.producer_id >= 0:
            state.update(pb.producer_id, pb.producer_epoch, pb.first_sequence,
                         pb.last_sequence, pb.last_offset, pb.max_timestamp)


def rebuild_producer_state(state: ProducerStateManager, segments: list[LogSegment],
                           bases: list[int], log_start_offset: int, log_end_offset: int,
                           now_ms: int) -> None:
    """Load the latest usable snapshot and replay the batch headers after it (Kafka's
    rebuildProducerState); a clean shutdown leaves a snapshot at the log end. bases are
    the segments' base offsets."""
    start = state.load(log_start_offset, log_end_offset, now_ms)
    if start >= log_end_offset:
        return
    first = max(0, bisect.bisect_right(bases, start) - 1)
    for segment in segments[first:]:
        found = segment.translate_offset(start) if segment.base_offset < start else None
        for header in segment.scan_headers(found.position if found else 0):
            # The batch header alone holds the producer fields.
            fields = HEADER.unpack(segment.read_bytes(header.position, HEADER_SIZE))
            producer_id, epoch, first_seq = fields[9], fields[10], fields[11]
            if producer_id < 0:
                continue
            last_seq = (first_seq + fields[6]) & _INT32_MAX if first_seq >= 0 else first_seq
            _track(state, producer_id, epoch, first_seq, last_seq, header.last_offset,
                   header.max_timestamp)


def _track(state: ProducerStateManager, producer_id: int, epoch: int, first_seq: int,
           last_seq: int, last_offset: int, timestamp: int) -> None:
    if producer_id >= 0:
        state.update(producer_id, epoch, first_seq, last_seq, last_offset, timestamp)
