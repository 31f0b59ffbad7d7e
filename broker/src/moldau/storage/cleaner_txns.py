"""The log cleaner's transaction rules (Kafka 3.9's CleanedTransactionMetadata and its
`lastRecordsOfActiveProducers`).

As a pass walks the batches in offset order, `CleanedTransactions` tells it which data
batches belong to aborted transactions (they go) and which markers may go. Which
transactions were aborted comes from the `.txnindex` files, collected when the pass is
planned; an aborted transaction is "current" for its producer from its first offset to its
ABORT marker. A marker may go once the pass saw no batch of the transaction it closes
(its data is gone); the pass then sets its delete horizon and a later pass past it removes
the marker, as for tombstones. An ABORT marker that stays (its data is still there) is
written into the cleaned segment's txn index.

A producer's last batch stays, emptied if nothing of it is kept, so its epoch and last
sequence survive in the log (`keeps_producer_state`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, RecordBatch

from .producer_state import ProducerStateManager
from .segment import LogSegment
from .txn_index import AbortedTxn, TransactionIndex, collect_aborted_transactions


@dataclass(frozen=True, slots=True)
class ProducerLast:
    """Where a producer's state lives in the log: the last offset of its last data batch
    (None when its latest epoch came from a marker), and its epoch."""

    last_data_offset: int | None
    epoch: int


def producers_last_records(state: ProducerStateManager) -> dict[int, ProducerLast]:
    """Kafka's lastRecordsOfActiveProducers, taken when a pass is planned."""
    return {
        pid: ProducerLast(entry.batches[-1].last_offset if entry.batches else None, entry.epoch)
        for pid, entry in state.producers.items()
    }


def keeps_producer_state(batch: RecordBatch, producers: dict[int, ProducerLast]) -> bool:
    """True for the batch that holds a live producer's last sequence (its last data
    batch), or its latest epoch when that came from a marker: it stays, if only as an
    empty batch, or a retried produce could fail with an out-of-order sequence."""
    if batch.producer_id < 0:
        return False
    last = producers.get(batch.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return batch.last_offset == last.last_data_offset
    return batch.is_control and batch.producer_epoch == last.epoch


def aborted_in(segments: Sequence[LogSegment], start: int, end: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [start, end), from the txn indexes of the
    segment holding start and the later ones (the marker may lie past end)."""
    bases = [s.base_offset for s in segments]
    first = max(0, bisect.bisect_right(bases, start) - 1)
    indexes = [s.txn_index for s in segments[first:]]
    if not any(index.may_hold_entries() for index in indexes):
        return []
    return collect_aborted_transactions(indexes, start, end)


class CleanedTransactions:
    """The transactions a walk over the log is inside of (see the module docstring).
    `aborted` must only hold transactions whose marker lies at or after the walk's first
    batch: a transaction whose marker the walk never reaches would stay current."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        # by first offset; a transaction overlapping several collected ranges comes once
        self._pending = sorted(set(aborted), key=lambda t: (t.first_offset, t.last_offset))
        self._next = 0
        self._aborted: dict[int, _CurrentAbort] = {}  # producer id -> its current abort
        self._committed: set[int] = set()  # producers with data of a current transaction
        # where the ABORT markers that stay are indexed (the current output segment)
        self.cleaned_index: TransactionIndex | None = None

    def on_data_batch(self, batch: RecordBatch) -> bool:
        """A data batch the walk reached: True when it belongs to an aborted transaction."""
        self._start_aborts_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        current = self._aborted.get(batch.producer_id)
        if current is not None:
            current.data_seen = True
            return True
        self._committed.add(batch.producer_id)
        return False

    def on_control_batch(self, batch: RecordBatch) -> bool:
        """A marker the walk reached: True when the transaction it closes has no data left
        (or it is an empty, already removed, marker). A kept ABORT goes to the index."""
        self._start_aborts_up_to(batch.last_offset)
        try:
            record = next(iter(batch.control_records()), None)
        except ProtocolError:
            return False  # a marker that does not decode is kept as it is
        if record is None:
            return True
        pid = batch.producer_id
        if record.control_type == CONTROL_ABORT:
            current = self._aborted.pop(pid, None)
            if current is None or not current.data_seen:
                return True
            if self.cleaned_index is not None:
                self.cleaned_index.append(current.txn)
            return False
        if record.control_type == CONTROL_COMMIT:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False  # another control type (KRaft's): kept as it is

    def _start_aborts_up_to(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._next += 1
            self._aborted.setdefault(txn.producer_id, _CurrentAbort(txn))


@dataclass(slots=True)
class _CurrentAbort:
    txn: AbortedTxn
    data_seen: bool = False  # the walk met a batch of it: its marker and entry stay


__all__ = [
    "CleanedTransactions",
    "ProducerLast",
    "aborted_in",
    "keeps_producer_state",
    "producers_last_records",
]
