"""What a read_committed consumer keeps of a fetched partition, as Kafka's consumer decides
it (CompletedFetch.nextFetchedRecord): the broker returns aborted data as it is, with the
aborted transactions of the range (producer id, first offset); a producer's transactional
batches are dropped from the first offset of one of its aborted transactions up to its
ABORT marker. Control batches (the markers) are never returned to the application."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import Protocol

from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import CONTROL_ABORT, RecordBatch, parse_control_key


class AbortedTransaction(Protocol):
    @property
    def producer_id(self) -> int: ...

    @property
    def first_offset(self) -> int: ...


def is_abort_marker(batch: RecordBatch) -> bool:
    """Kafka's containsAbortMarker: a control batch whose first record is an ABORT."""
    if not batch.is_control:
        return False
    try:
        first = next(iter(batch.records()), None)
        return first is not None and parse_control_key(first.key)[1] == CONTROL_ABORT
    except ProtocolError:
        return False


class AbortedFilter:
    """The batches of one partition's fetch response, in order, through `keep`."""

    def __init__(self, aborted: Iterable[AbortedTransaction] | None) -> None:
        # by first offset: a transaction aborts its producer's batches from there on
        self._pending = [(t.first_offset, t.producer_id) for t in aborted or ()]
        heapq.heapify(self._pending)
        self._aborted_producers: set[int] = set()

    def keep(self, batch: RecordBatch) -> bool:
        """Whether the batch's records go to the application."""
        if batch.producer_id >= 0:
            while self._pending and self._pending[0][0] <= batch.last_offset:
                self._aborted_producers.add(heapq.heappop(self._pending)[1])
            if is_abort_marker(batch):
                self._aborted_producers.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in self._aborted_producers:
                return False
        return not batch.is_control
