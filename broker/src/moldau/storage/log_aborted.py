"""The aborted transactions a read_committed fetch answers with (Kafka's LocalLog
addAbortedTransactions): those overlapping [fetch offset, upper bound), where the upper
bound is an offset past the data the read returned. The consumer drops their batches
with this list and the ABORT markers; the broker sends aborted data as it is."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from .offset_index import OffsetPosition
from .txn_index import AbortedTxn, collect_aborted_transactions

if TYPE_CHECKING:
    from .log import FetchData, PartitionLog


def aborted_transactions(plog: PartitionLog, fetch_offset: int,
                         data: FetchData) -> list[AbortedTxn]:
    """The aborted transactions a read from fetch_offset that found `data` may show,
    from the txn indexes of the segment holding the read's start and those after it.
    The bound is the first offset index entry past the returned bytes (it may lie beyond
    the data: Kafka's choice, costing a longer list, never a wrong one), else the next
    segment's base offset, else the log end."""
    start = data.start
    found = data.slice
    if found is None or not found.size or not start.on_file:
        return []  # nothing returned: nothing to drop
    segments = plog.segments
    i = bisect.bisect_right(segments, start.segment_base_offset,
                            key=lambda s: s.base_offset) - 1
    if i < 0:
        return []
    indexes = [segments[j].txn_index for j in range(i, len(segments))]
    if not any(index.may_hold_entries() for index in indexes):
        return []  # no aborted transaction from here on: the common case, kept cheap
    segment = segments[i]
    bound = segment.offset_index.fetch_upper_bound_offset(
        OffsetPosition(start.offset, start.position), found.size)
    if bound is not None:
        upper = bound.offset
    elif i + 1 < len(segments):
        upper = segments[i + 1].base_offset
    else:
        upper = plog.log_end_offset
    return collect_aborted_transactions(indexes, fetch_offset, upper)
