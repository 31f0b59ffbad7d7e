"""The log's side of idempotent and transactional producers: checking an append against
the producer state, recording what was appended (transaction markers close transactions,
and an aborted one goes into the txn index of the segment the marker was written to), and
rebuilding the state from the log after a restart or a truncation (Kafka's
rebuildProducerState)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from moldau.protocol.records import (
    CONTROL_ABORT,
    CONTROL_MASK,
    HEADER,
    HEADER_SIZE,
    TRANSACTIONAL_MASK,
    RecordBatch,
)

from .append_info import AppendInfo, ProducerBatch, end_txn_marker
from .producer_state import ProducerStateManager
from .producer_txns import CompletedTxn
from .segment import LogSegment
from .txn_index import AbortedTxn, TransactionIndex

_INT32_MAX = 0x7FFFFFFF


def find_duplicate_append(state: ProducerStateManager, info: AppendInfo, *,
                          from_client: bool = True) -> AppendInfo | None:
    """Kafka's idempotence rules for a client's batches: a retried batch is answered
    with its original offsets (nothing is written); an older epoch or a gap in
    sequence numbers raises. Returns the duplicate's AppendInfo, if any. A coordinator's
    batch (from_client False: TxnOffsetCommit's offsets) is checked for its epoch only,
    as Kafka's COORDINATOR origin: its sequences restart at 0 with every commit."""
    pending: dict[int, tuple[int, int]] = {}
    for pb in info.producer_batches:
        if pb.is_control:  # a coordinator's marker: epoch checks only, never a duplicate
            if pb.marker is not None:
                state.check_marker(pb.producer_id, pb.producer_epoch, pb.marker[1],
                                   pb.first_offset)
            continue
        if not from_client:
            state.check(pb.producer_id, pb.producer_epoch, pb.first_sequence, pb.first_offset,
                        is_transactional=pb.is_transactional, check_sequence=False)
            continue
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
                    pending, pb.is_transactional)
        pending[pb.producer_id] = (pb.producer_epoch, pb.last_sequence)
    return None


def track_appended(state: ProducerStateManager, batches: Iterable[ProducerBatch],
                   txn_index: TransactionIndex) -> None:
    """Record the producers' batches an append wrote, in log order; txn_index is the one
    of the segment they were written to."""
    for pb in batches:  # _track, inlined: the append path pays for each call
        if pb.is_control:
            if pb.marker is not None:  # None: an empty control batch changes nothing
                completed = state.apply_marker(
                    pb.producer_id, pb.producer_epoch, pb.marker[1],
                    pb.marker[0] == CONTROL_ABORT, pb.first_offset, pb.max_timestamp)
                if completed is not None:
                    complete_txn(state, completed, txn_index)
        elif pb.producer_id >= 0:
            state.update(pb.producer_id, pb.producer_epoch, pb.first_sequence,
                         pb.last_sequence, pb.last_offset, pb.max_timestamp,
                         first_offset=pb.first_offset, is_transactional=pb.is_transactional)


def complete_txn(state: ProducerStateManager, completed: CompletedTxn,
                 txn_index: TransactionIndex | None) -> None:
    """A marker closed a transaction: an aborted one is indexed with the LSO of that
    moment (computed before it completes, as Kafka does), then it waits for the high
    watermark. txn_index None: the index is not being written (replaying the log)."""
    if completed.is_aborted and txn_index is not None:
        txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                    completed.last_offset,
                                    state.txns.last_stable_offset(completed)))
    state.txns.complete(completed)


def rebuild_producer_state(state: ProducerStateManager, segments: list[LogSegment],
                           bases: list[int], log_start_offset: int, log_end_offset: int,
                           now_ms: int) -> None:
    """Load the latest usable snapshot and replay the batch headers after it (Kafka's
    rebuildProducerState); a clean shutdown leaves a snapshot at the log end. bases are
    the segments' base offsets."""
    start = state.load(log_start_offset, log_end_offset, now_ms)
    replay_headers(state, segments, bases, start, log_end_offset)


def replay_headers(state: ProducerStateManager, segments: list[LogSegment], bases: list[int],
                   start: int, end: int) -> None:
    """Feed the batches of [start, end) to the producer state, from their headers (and a
    marker's one record)."""
    if start >= end:
        return
    first = max(0, bisect.bisect_right(bases, start) - 1)
    for segment in segments[first:]:
        if segment.base_offset >= end:
            return
        found = segment.translate_offset(start) if segment.base_offset < start else None
        for header in segment.scan_headers(found.position if found else 0):
            if header.base_offset >= end:
                return
            # The batch header alone holds the producer fields.
            fields = HEADER.unpack(segment.read_bytes(header.position, HEADER_SIZE))
            producer_id, epoch, first_seq = fields[9], fields[10], fields[11]
            if producer_id < 0:
                continue
            attributes = fields[5]
            if attributes & CONTROL_MASK:
                _replay_marker(state, segment, header.position, header.size)
                continue
            last_seq = (first_seq + fields[6]) & _INT32_MAX if first_seq >= 0 else first_seq
            state.update(producer_id, epoch, first_seq, last_seq, header.last_offset,
                         header.max_timestamp, first_offset=fields[0],
                         is_transactional=bool(attributes & TRANSACTIONAL_MASK))


def _replay_marker(state: ProducerStateManager, segment: LogSegment, position: int,
                   size: int) -> None:
    """A marker found while replaying: it closes its transaction (the txn index on disk
    already holds it, so nothing is indexed)."""
    batch = RecordBatch(segment.read_bytes(position, size))
    marker = end_txn_marker(batch)
    if marker is None:
        return
    completed = state.apply_marker(batch.producer_id, batch.producer_epoch, marker[1],
                                   marker[0] == CONTROL_ABORT, batch.base_offset,
                                   batch.max_timestamp)
    if completed is not None:
        complete_txn(state, completed, None)
