"""The log of one partition: ordered segments, offsets, appends, reads, roll, retention,
truncation and crash recovery (Kafka's UnifiedLog and LocalLog, without tiering).

Here: the offsets, the append, roll and read paths, truncation, flush and close. Beside
it: loading and crash recovery (`log_loader.py`), retention, DeleteRecords and the
cleaner's swap (`log_retention.py`), the idempotent producers' checks and state
(`log_producers.py`), and ListOffsets by timestamp (`log_timestamps.py`).

Offsets: `log_start_offset` is the first offset readable, `log_end_offset` the next
offset to assign, `high_watermark` the first offset not yet replicated to the ISR (the
partition layer sets it; reads by consumers stop there), `recovery_point` the offset up
to which the log is known to be flushed, so recovery after a crash starts there.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar
from uuid import UUID

from moldau.errors import KafkaStorageError, OffsetOutOfRangeError, RecordBatchTooLargeError

from . import log_retention, log_timestamps
from .config import LogConfig
from .dir_names import topic_partition_of
from .epoch_cache import LeaderEpochCache
from .files import fsync_dir
from .log_loader import LogLoader, read_topic_id, segment_end, write_topic_id
from .log_producers import find_duplicate_append, rebuild_producer_state, track_appended

# Re-exported (X as X): the ListOffsets handler imports the special timestamps from here.
from .log_timestamps import EARLIEST_LOCAL_TIMESTAMP as EARLIEST_LOCAL_TIMESTAMP
from .log_timestamps import EARLIEST_TIMESTAMP as EARLIEST_TIMESTAMP
from .log_timestamps import LATEST_TIMESTAMP as LATEST_TIMESTAMP
from .log_timestamps import MAX_TIMESTAMP as MAX_TIMESTAMP
from .producer_state import ProducerStateManager
from .producer_txns import last_stable_offset
from .recent_appends import RECENT_APPENDS as RECENT_APPENDS
from .recent_appends import RecentAppends
from .segment import LogSegment
from .segment_positions import FileSlice, OffsetMetadata
from .validation import AppendInfo, validate_for_follower, validate_for_leader

# Fetch isolation levels (FetchRequest.IsolationLevel).
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class FetchData:
    """What a read found: where it started and the file range to send, and the range's
    bytes when the log still held them in memory (recent_appends.py)."""

    start: OffsetMetadata
    slice: FileSlice | None  # None: nothing to send
    memory: bytes | memoryview | None = None  # the slice's bytes, or None: in the file only

    @property
    def size(self) -> int:
        return self.slice.size if self.slice else 0


class PartitionLog:
    """One partition's log in `<log dir>/<topic>-<partition>`; see the module docstring."""

    # called with each flush's milliseconds (the broker's LogFlushRateAndTimeMs)
    flush_listener: ClassVar[Callable[[float], None] | None] = None

    def __init__(
        self,
        directory: str,
        config: LogConfig,
        *,
        topic_id: UUID | None = None,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        clean_shutdown: bool = True,
        sync: bool = True,
        producer_id_expiration_ms: int = 86_400_000,  # producer.id.expiration.ms
    ) -> None:
        self.directory = directory
        # `<topic>-<n>`, or a replica move's `<topic>-<n>.<hex>-future` (dir_names.py)
        self.topic, self.partition = topic_partition_of(directory)
        self.config = config
        self.sync = sync
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []  # base offsets of segments, for bisect
        self.pending_deletes: list[tuple[int, LogSegment]] = []  # (due ms, segment)
        # Where the recent appends to the active segment start, and the bytes of the
        # small ones: a caught-up follower's next fetch starts at one of them (as do a
        # consumer's at the high watermark), and reading from there then needs no index
        # lookup, and no pread at all while the bytes are held. Cleared whenever segments
        # roll, go, or are cut or replaced, so what it says is always right.
        self._recent = RecentAppends()
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms()
        self.closed = False
        try:
            os.makedirs(directory, exist_ok=True)
            if topic_id is not None:
                write_topic_id(directory, topic_id, sync)
            self.topic_id = topic_id if topic_id is not None else read_topic_id(directory)
            self.epochs = LeaderEpochCache(directory, sync=sync)
            self.producer_state = ProducerStateManager(
                directory, expiration_ms=producer_id_expiration_ms
            )
            loader = LogLoader(directory, config, self.epochs, self._open_segment)
            for segment in loader.load(recovery_point, clean_shutdown, log_start_offset):
                self._add(segment)
            active = self.active_segment
            self._log_end = OffsetMetadata(segment_end(active), active.base_offset, active.size)
        except OSError as exc:
            raise KafkaStorageError(f"cannot load log {directory}: {exc}") from exc
        self.log_start_offset = max(log_start_offset, self.segments[0].base_offset)
        if clean_shutdown:
            # Everything was flushed before the clean-shutdown marker was written (Kafka).
            self.recovery_point = self.log_end_offset
        else:
            self.recovery_point = min(
                max(recovery_point, self.log_start_offset), self.log_end_offset
            )
        self.epochs.truncate_from_end(self.log_end_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        self._high_watermark = OffsetMetadata(self.log_start_offset)
        self.update_high_watermark(high_watermark)
        try:
            if clean_shutdown and not self.producer_state.snapshot_offsets():
                pass  # close() snapshots whenever producers exist: there were none
            else:
                self._rebuild_producer_state()
        except OSError as exc:
            raise KafkaStorageError(f"cannot load producer state of {directory}: {exc}") from exc

    # --- segments and producer state, as loading leaves them (log_loader.py) -----------

    def _rebuild_producer_state(self) -> None:
        rebuild_producer_state(self.producer_state, self.segments, self._bases,
                               self.log_start_offset, self.log_end_offset, now_ms())
        # transactions decided below the high watermark are stable already
        self.producer_state.txns.on_high_watermark_updated(self.high_watermark)

    def _open_segment(self, base: int, lazy_indexes: bool = False) -> LogSegment:
        jitter_ms = min(self.config.segment_jitter_ms, self.config.segment_ms)  # as Kafka
        return LogSegment(
            self.directory,
            base,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            roll_jitter_ms=random.randrange(jitter_ms) if jitter_ms else 0,
            lazy_indexes=lazy_indexes,
        )

    def _add(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self._bases.append(segment.base_offset)

    # --- offsets ----------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self._log_end.offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark.offset

    @property
    def last_stable_offset(self) -> int:
        """The first offset of a transaction that is open or whose marker is not yet below
        the high watermark, capped at the high watermark (which it is for a log without
        transactions)."""
        return last_stable_offset(self.producer_state.first_unstable_offset(),
                                  self.high_watermark, self.log_start_offset)

    def fetch_upper_bound(self, isolation: int | None) -> int:
        """Where a read stops: the log end for a follower (None), the high watermark for
        READ_UNCOMMITTED (0), the last stable offset for READ_COMMITTED (1)."""
        if isolation is None:
            return self.log_end_offset
        return self.last_stable_offset if isolation == READ_COMMITTED else self.high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start, log end]; returns it."""
        offset = min(max(offset, self.log_start_offset), self.log_end_offset)
        if self.producer_state.txns.unreplicated:  # decided transactions may become stable
            self.producer_state.txns.on_high_watermark_updated(offset)
        if offset == self.log_end_offset:
            self._high_watermark = OffsetMetadata(offset, self._log_end.segment_base_offset,
                                                  self._log_end.position)
        elif offset != self._high_watermark.offset:
            self._high_watermark = OffsetMetadata(offset)  # located on the next read
        return offset

    def _locate(self, offset: int) -> OffsetMetadata:
        """Segment and file position of the batch that holds offset (or of the log end)."""
        if offset >= self.log_end_offset:
            return self._log_end
        recent = self._recent.get(offset)
        if recent is not None:
            return OffsetMetadata(offset, recent[0].base_offset, recent[1])
        segment = self.segments[max(0, bisect.bisect_right(self._bases, offset) - 1)]
        header = segment.translate_offset(offset)
        position = header.position if header else segment.size
        return OffsetMetadata(offset, segment.base_offset, position)

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # --- appends ----------------------------------------------------------------------

    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int, *,
        from_client: bool = True, now: int | None = None,
    ) -> AppendInfo:
        """Validate, assign offsets from the log end, and append. Raises a KafkaError with
        nothing written when the records are invalid."""
        if now is None:
            now = now_ms()
        info = validate_for_leader(
            records, self._log_end.offset, leader_epoch, self.config, now, from_client
        )
        if info.producer_batches:
            duplicate = find_duplicate_append(self.producer_state, info,
                                              from_client=from_client)
            if duplicate is not None:
                return duplicate
        self._append(info, now)
        # epochs.assign(), called only when it would change something: its first test
        first_offset = info.first_offset
        epochs = self.epochs.entries
        latest = epochs[-1] if epochs else None
        if latest is None or latest.epoch != leader_epoch or latest.start_offset > first_offset:
            self.epochs.assign(leader_epoch, first_offset)
        if info.producer_batches:
            track_appended(self.producer_state, info.producer_batches,
                           self.active_segment.txn_index)
        return info

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append batches with the leader's offsets (replica fetcher)."""
        info = validate_for_follower(records, self.log_end_offset)
        if info.valid_bytes > self.config.segment_bytes:  # checked for every append in Kafka
            raise RecordBatchTooLargeError(
                f"the record set of {info.valid_bytes} bytes exceeds segment.bytes "
                f"({self.config.segment_bytes})"
            )
        if info.batches:
            self._append(info, now_ms())
            for batch in info.batches:
                self.epochs.assign(batch.partition_leader_epoch, batch.base_offset)
            if info.producer_batches:
                track_appended(self.producer_state, info.producer_batches,
                               self.active_segment.txn_index)
        return info

    def _append(self, info: AppendInfo, now: int) -> None:
        segment = self.segments[-1]  # the active segment
        config = self.config
        if segment.roll_due(info.valid_bytes, info.last_offset, info.max_timestamp,
                            config.segment_bytes, config.segment_ms, now):
            segment = self.roll(info.first_offset)
        data = info.data
        if len(data) != info.valid_bytes:
            data = data[: info.valid_bytes]
        position = segment.size
        batches = info.batches
        segment.append(data, batches, info.head)
        if batches:
            first = batches[0]
            self._recent.add(first.base_offset, segment, position, first.size, data,
                             info.head)
        self._log_end = OffsetMetadata(info.last_offset + 1, segment.base_offset, segment.size)
        unflushed = self.unflushed_messages = self.unflushed_messages + info.record_count
        if unflushed >= config.flush_messages:
            self.flush()

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at base_offset (default: the log end offset)."""
        base = self.log_end_offset if base_offset is None else base_offset
        active = self.active_segment
        if active.base_offset == base and active.size == 0:
            return active  # rolling an empty segment to its own offset changes nothing
        active.on_become_inactive()
        self._recent.clear()
        segment = self._open_segment(base)
        self._add(segment)
        if self.log_end_offset == base:
            self._log_end = OffsetMetadata(base, base, 0)
        if self.producer_state.producers:
            # Kafka snapshots at every roll, so a restart replays at most one segment.
            self.producer_state.take_snapshot(base, sync=self.sync)
        return segment

    # --- reads ------------------------------------------------------------------------

    def read(
        self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchData:
        """File positions of up to max_bytes from start_offset, not past max_offset (the high
        watermark for consumers, the log end for followers: the default)."""
        end = self._log_end if max_offset is None else self._bound(max_offset)
        if start_offset > self.log_end_offset or start_offset < self.log_start_offset:
            raise OffsetOutOfRangeError(
                f"offset {start_offset} is outside the log's range "
                f"[{self.log_start_offset}, {self.log_end_offset}] of {self.name}"
            )
        if start_offset >= end.offset:
            return FetchData(OffsetMetadata(start_offset), None)
        recent = self._recent.get(start_offset)
        if recent is not None:
            return self._read_recent(start_offset, recent, end, max_bytes, min_one_batch)
        # Walk the segments by index: slicing the list would copy it, O(segment count).
        segments = self.segments
        end_base = end.segment_base_offset
        for i in range(max(0, bisect.bisect_right(self._bases, start_offset) - 1), len(segments)):
            segment = segments[i]
            if segment.base_offset == end_base:
                max_position = end.position
            elif segment.base_offset > end_base:
                break
            else:
                max_position = segment.size
            found = segment.read(start_offset, max_bytes, max_position, min_one_batch)
            if found is not None:
                return FetchData(*found)
        return FetchData(OffsetMetadata(start_offset), None)

    def _read_recent(self, start_offset: int, recent: tuple[LogSegment, int, int],
                     end: OffsetMetadata, max_bytes: int, min_one_batch: bool) -> FetchData:
        """LogSegment.read for a batch whose position _recent knows: the same slice, and
        its bytes when _recent holds them."""
        segment, position, batch_size = recent
        # the batch is in the active segment, and end (past it) is there too
        size = max(max_bytes, batch_size) if min_one_batch else max_bytes
        size = max(0, min(size, end.position - position))
        return FetchData(OffsetMetadata(start_offset, segment.base_offset, position),
                         FileSlice(segment.fd, position, size),
                         self._recent.bytes_at(position, size))

    def _bound(self, offset: int) -> OffsetMetadata:
        if offset == self._high_watermark.offset:
            if not self._high_watermark.on_file:
                self._high_watermark = self._locate(offset)
            return self._high_watermark
        return self._locate(offset)

    def read_bytes(self, data: FetchData) -> bytes:
        """The bytes of a read (for TLS connections and tests, where sendfile is no use)."""
        if data.slice is None:
            return b""
        if data.memory is not None:
            return bytes(data.memory)
        return os.pread(data.slice.fd, data.slice.size, data.slice.position)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets: (timestamp, offset, leader epoch) or None when nothing matches."""
        return log_timestamps.offset_for_timestamp(self, timestamp)

    # --- retention and log start (log_retention.py) -----------------------------------

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset (not past the high watermark)."""
        return log_retention.delete_records(self, offset, now_ms())

    def delete_old_segments(self, now: int) -> int:
        """Apply retention: segments past retention.ms, beyond retention.bytes, or wholly
        below the log start offset go. Returns the number of segments deleted."""
        return log_retention.delete_old_segments(self, now)

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Swap compacted output (a `.swap` segment) in for the segments it replaces: the old
        ones are renamed `.deleted` (removed after file.delete.delay.ms), then the new one
        takes its final name. A crash in between is completed at the next load."""
        log_retention.replace_segments(self, old, new, now_ms())

    def delete_due_files(self, now: int) -> None:
        """Remove `.deleted` segments whose file.delete.delay.ms has passed."""
        for segment in self.take_due_deletes(now):
            segment.delete()

    def take_due_deletes(self, now: int) -> list[LogSegment]:
        """The `.deleted` segments whose file.delete.delay.ms has passed, no longer the
        log's: the caller deletes them (the log manager, on its file worker thread)."""
        if not self.pending_deletes:
            return []
        due = [s for t, s in self.pending_deletes if t <= now]
        self.pending_deletes = [(t, s) for t, s in self.pending_deletes if t > now]
        return due

    # --- truncation -------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove every record at or after offset (a follower diverged from its leader)."""
        if offset >= self.log_end_offset:
            # Kafka still drops epoch entries past the log end (a leader that assigned an
            # epoch and lost leadership before appending).
            self.epochs.truncate_from_end(self.log_end_offset)
            return False
        if offset <= self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        self._recent.clear()
        while self.segments[-1].base_offset >= offset:
            self.segments.pop().delete()
            self._bases.pop()
        segment = self.active_segment
        segment.truncate_to(offset)
        # A target inside a batch removes the whole batch: the log then ends at that batch's
        # base offset. Claiming `offset` would leave a hole that a restart (which derives
        # the end from the last batch) disagrees with, and a follower would refetch from
        # the wrong place.
        end = min(offset, segment_end(segment))
        self._log_end = OffsetMetadata(end, segment.base_offset, segment.size)
        # Kafka: logStartOffset = min(target, logStartOffset).
        self.log_start_offset = min(self.log_start_offset, end)
        self._after_truncation(end)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._recent.clear()
        for segment in self.segments:
            segment.delete()
        self.segments, self._bases = [], []
        self._add(self._open_segment(offset))
        self.log_start_offset = offset
        self._log_end = OffsetMetadata(offset, offset, 0)
        self.epochs.clear()
        self._after_truncation(offset)

    def _after_truncation(self, offset: int) -> None:
        self.epochs.truncate_from_end(offset)
        self._rebuild_producer_state()  # snapshots past the new end are dropped
        self.recovery_point = min(self.recovery_point, offset)
        if self.high_watermark > offset:
            self._high_watermark = OffsetMetadata(offset)
        self.update_high_watermark(self.high_watermark)

    # --- flush and close --------------------------------------------------------------

    def flush(self, up_to: int | None = None) -> None:
        """fsync segments holding offsets below up_to (default: everything); moves the
        recovery point there."""
        try:  # the epochs of what the recovery point passes must be on disk first
            self.epochs.flush()
        except OSError as exc:
            raise KafkaStorageError(f"flushing {self.directory} failed: {exc}") from exc
        up_to = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        if up_to <= self.recovery_point:
            return
        started = time.perf_counter()
        first = max(0, bisect.bisect_right(self._bases, self.recovery_point) - 1)
        new_files = False
        for segment in self.segments[first:]:
            if segment.base_offset >= up_to:
                break
            segment.flush()
            new_files = new_files or segment.base_offset >= self.recovery_point
        if new_files:
            # A segment created since the last flush: its directory entry must be durable
            # too, or a power loss can lose the whole file (Kafka's LocalLog.flush).
            try:
                fsync_dir(self.directory)
            except OSError as exc:
                raise KafkaStorageError(f"flushing {self.directory} failed: {exc}") from exc
        self.recovery_point = up_to
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms()
        if PartitionLog.flush_listener is not None:  # LogFlushStats in the broker's metrics
            PartitionLog.flush_listener((time.perf_counter() - started) * 1000)

    def flush_if_due(self, now: int) -> None:
        if now - self.last_flush_ms >= self.config.flush_ms:
            self.flush()

    def check_or_set_topic_id(self, topic_id: UUID) -> None:
        """The controller names the topic id of a partition this log may already hold:
        a log without one takes it, a log of another topic raises
        InconsistentTopicIdError and is left as it is (Kafka's checkOrSetTopicId)."""
        if self.topic_id != topic_id:
            write_topic_id(self.directory, topic_id, self.sync)
            self.topic_id = topic_id

    def close(self) -> None:
        self.closed = True  # a compaction pass built meanwhile is discarded, not installed
        self._recent.clear()  # its bytes leave the broker-wide budget
        with contextlib.suppress(OSError):  # no write may land after a delete; flush() reports
            self.epochs.flush()
        if self.producer_state.producers:
            # A snapshot at the log end: the next start replays nothing.
            self.producer_state.take_snapshot(self.log_end_offset, sync=self.sync)
        for segment in self.segments:
            segment.close()
        for _, segment in self.pending_deletes:
            segment.close()

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.name}, start={self.log_start_offset}, "
            f"end={self.log_end_offset}, hw={self.high_watermark}, segments={len(self.segments)})"
        )
