"""Rebuilding the transaction indexes of the segments crash recovery rescans (what Kafka's
LogSegment.recover does with the producer state LogLoader rebuilds up to the segment).

Recovery hands every valid batch of a segment to `on_batch`; the transactional and
control ones are kept. When a segment has any, or has a `.txnindex`, its index is emptied
and rebuilt: a producer state is loaded from the latest snapshot at or below the segment
(nothing pruned: the log's own state is loaded later) and brought up to the segment's base
by replaying headers, then the kept batches open and close transactions, and every
aborted one is indexed with the LSO of its marker. The state carries on to the next
recovered segment. A segment with neither costs nothing beyond a check for the file, so a
log without transactions recovers as before.
"""

from __future__ import annotations

from moldau.protocol.records import RecordBatch

from .append_info import AppendInfo, ProducerBatch, add_batch
from .log_producers import replay_headers, track_appended
from .producer_state import ProducerStateManager
from .segment import LogSegment


class TxnIndexRebuild:
    def __init__(self, directory: str, log_start_offset: int, now_ms: int) -> None:
        self._directory = directory
        self._log_start_offset = log_start_offset
        self._now_ms = now_ms
        self._state: ProducerStateManager | None = None
        self._batches: list[ProducerBatch] = []

    def on_batch(self, batch: RecordBatch) -> None:
        """A valid batch of the segment being recovered, in log order."""
        if batch.producer_id >= 0 and (batch.is_transactional or batch.is_control):
            info = AppendInfo()
            add_batch(info, batch, 0)
            self._batches.extend(info.producer_batches)

    def finish_segment(self, segment: LogSegment, earlier: list[LogSegment],
                       earlier_bases: list[int]) -> None:
        """The segment is recovered: rebuild its index if it has transactions or had an
        index. earlier: the log's segments before it, oldest first, with their bases."""
        batches, self._batches = self._batches, []
        if not batches and not segment.txn_index.exists():
            return
        state = self._state
        if state is None:
            state = self._state = ProducerStateManager(self._directory)
            start = state.load(self._log_start_offset, segment.base_offset, self._now_ms,
                               prune=False)
            replay_headers(state, earlier, earlier_bases, start, segment.base_offset)
        segment.txn_index.reset()
        track_appended(state, batches, segment.txn_index)
