"""The log of one partition: ordered segments, offsets, appends, reads, roll, retention,
truncation and crash recovery (Kafka's UnifiedLog and LocalLog, without tiering).

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
from moldau.protocol.records import HEADER, HEADER_SIZE, RecordBatch

from . import checkpoints
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .files import fsync_dir
from .index import base_offset_of
from .producer_state import ProducerStateManager
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    FileSlice,
    LogSegment,
    OffsetMetadata,
)
from .validation import AppendInfo, validate_for_follower, validate_for_leader

_INT32_MAX = 0x7FFFFFFF
# How many appends PartitionLog remembers the position of (see _recent)
RECENT_APPENDS = 16

# Fetch isolation levels (FetchRequest.IsolationLevel).
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class FetchData:
    """What a read found: where it started and the file range to send."""

    start: OffsetMetadata
    slice: FileSlice | None  # None: nothing to send

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
        self.topic, partition = os.path.basename(directory).rsplit("-", 1)
        self.partition = int(partition)
        self.config = config
        self.sync = sync
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []  # base offsets of segments, for bisect
        self.pending_deletes: list[tuple[int, LogSegment]] = []  # (due ms, segment)
        # Base offset -> (segment, file position, size) of the first batch of each recent
        # append to the active segment. A caught-up follower's next fetch starts at one of
        # them (as do a consumer's at the high watermark), and reading from there then
        # needs no index lookup and no pread of batch headers. Cleared whenever segments
        # roll, go, or are cut or replaced, so an entry is always right.
        self._recent: dict[int, tuple[LogSegment, int, int]] = {}
        self.unflushed_messages = 0
        self.last_flush_ms = now_ms()
        self.closed = False
        try:
            os.makedirs(directory, exist_ok=True)
            if topic_id is not None:
                self._write_topic_id(topic_id)
            self.topic_id = topic_id
            self.epochs = LeaderEpochCache(directory, sync=sync)
            self.producer_state = ProducerStateManager(
                directory, expiration_ms=producer_id_expiration_ms
            )
            self._load(recovery_point, clean_shutdown, log_start_offset)
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

    # --- loading and recovery ---------------------------------------------------------

    def _write_topic_id(self, topic_id: UUID) -> None:
        path = os.path.join(self.directory, checkpoints.PARTITION_METADATA)
        if os.path.exists(path):
            stored = checkpoints.read_partition_metadata(path).topic_id
            if stored != topic_id:
                raise KafkaStorageError(
                    f"{self.directory} belongs to topic id {stored}, not {topic_id}"
                )
            return
        checkpoints.write_partition_metadata(path, topic_id, sync=self.sync)

    def _load(self, recovery_point: int, clean_shutdown: bool, log_start_offset: int) -> None:
        self._remove_leftovers()
        bases = sorted(
            base_offset_of(name)
            for name in os.listdir(self.directory)
            if name.endswith(LOG_SUFFIX) and name[:20].isdigit()
        )
        for base in bases:
            # After a clean shutdown the inactive segments' indexes were trimmed and are
            # trusted: they are mapped on first use (Kafka's LazyIndex; each mapping holds
            # a file descriptor) and only a missing one is rebuilt now.
            lazy = clean_shutdown and base != bases[-1]
            segment = self._open_segment(base, lazy_indexes=lazy)
            suspect = segment.missing_index and segment.size > 0
            if suspect or (not lazy and not self._indexes_sound(segment)):
                segment.recover(max_batch_size=0)
            self._add(segment)
        if not clean_shutdown:
            self._recover_from(recovery_point)
        if self.segments and self._segment_end(self.active_segment) < log_start_offset:
            # Recovery cut the log below its start offset (or files were removed): like
            # Kafka, drop everything and start empty at the log start offset, rather than
            # report a log start beyond the log end.
            for segment in self.segments:
                segment.delete()
            self.segments, self._bases = [], []
            self.epochs.clear()
        if not self.segments:
            # A new (or emptied) log begins at its log start offset, not at 0.
            self._add(self._open_segment(log_start_offset))
        for segment in self.segments[:-1]:
            if not segment.inactive:  # checked or rebuilt above: trim and unmap like a roll
                segment.on_become_inactive()
        active = self.active_segment
        # Reopened indexes were trimmed on close; the active segment needs room again.
        active.offset_index.resize(self.config.segment_index_bytes)
        active.time_index.resize(self.config.segment_index_bytes)
        end = self._segment_end(active)
        self._log_end = OffsetMetadata(end, active.base_offset, active.size)

    @staticmethod
    def _segment_end(segment: LogSegment) -> int:
        """The next offset after the segment's last batch (its base offset when empty)."""
        last = segment.last_batch()
        return last.last_offset + 1 if last else segment.base_offset

    def _remove_leftovers(self) -> None:
        """Finish what a crash interrupted: pending deletes go, half-cleaned files go, and a
        completed swap replaces the segments it covers (renamed into place)."""
        names = os.listdir(self.directory)
        for name in names:
            path = os.path.join(self.directory, name)
            if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)) or name.endswith(".tmp"):
                os.remove(path)
        for name in sorted(os.listdir(self.directory)):
            if name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                self._complete_swap(base_offset_of(name))

    def _complete_swap(self, base: int) -> None:
        """A `.swap` segment is complete (written and flushed before its rename): the
        segments whose offsets it covers go, and it takes its final name. The cleaner keeps
        a group's last offset in its output, so the covered range is exactly its own."""
        swap = LogSegment(self.directory, base, suffix=SWAP_SUFFIX)
        last = swap.last_batch()
        swap.close()
        end = last.last_offset if last else base
        for name in os.listdir(self.directory):
            covered = name[:20].isdigit() and base <= int(name[:20]) <= end
            if covered and not name.endswith((SWAP_SUFFIX, ".snapshot")):
                os.remove(os.path.join(self.directory, name))
        for name in os.listdir(self.directory):
            if name.endswith(SWAP_SUFFIX) and int(name[:20]) == base:
                path = os.path.join(self.directory, name)
                os.replace(path, path.removesuffix(SWAP_SUFFIX))

    def _indexes_sound(self, segment: LogSegment) -> bool:
        if segment.missing_index and segment.size > 0:
            return False  # a freshly created, empty index would hide the segment's data
        try:
            segment.check_not_corrupt()
        except Exception:
            return False
        return True

    def _recover_from(self, recovery_point: int) -> None:
        """Rescan every segment holding offsets past the recovery point; at the first invalid
        batch cut the log there and drop every later segment."""
        start = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        for i in range(start, len(self.segments)):
            segment = self.segments[i]
            truncated = segment.recover(
                on_batch=self._on_recovered_batch, max_batch_size=0
            )
            if truncated:
                for later in self.segments[i + 1 :]:
                    later.delete()
                del self.segments[i + 1 :]
                del self._bases[i + 1 :]
                break

    def _on_recovered_batch(self, batch: RecordBatch) -> None:
        # Kafka's recovery only adds epochs newer than the latest cached one; assign() of an
        # older epoch would truncate the cache's newer entries.
        epoch = batch.partition_leader_epoch
        if epoch >= 0 and epoch > self.epochs.latest_epoch:
            self.epochs.assign(epoch, batch.base_offset)

    def _rebuild_producer_state(self) -> None:
        """Load the latest usable snapshot and replay the batch headers after it (Kafka's
        rebuildProducerState); a clean shutdown leaves a snapshot at the log end."""
        start = self.producer_state.load(self.log_start_offset, self.log_end_offset, now_ms())
        if start >= self.log_end_offset:
            return
        first = max(0, bisect.bisect_right(self._bases, start) - 1)
        for segment in self.segments[first:]:
            found = segment.translate_offset(start) if segment.base_offset < start else None
            for header in segment.scan_headers(found.position if found else 0):
                # The batch header alone holds the producer fields.
                fields = HEADER.unpack(segment.read_bytes(header.position, HEADER_SIZE))
                producer_id, epoch, first_seq = fields[9], fields[10], fields[11]
                if producer_id < 0:
                    continue
                last_seq = (first_seq + fields[6]) & _INT32_MAX if first_seq >= 0 else first_seq
                self._track_producer(producer_id, epoch, first_seq, last_seq,
                                     header.last_offset, header.max_timestamp)

    def _track_producer(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
                        last_offset: int, timestamp: int) -> None:
        if producer_id >= 0:
            self.producer_state.update(producer_id, epoch, first_seq, last_seq, last_offset,
                                       timestamp)

    def _check_producers(self, info: AppendInfo) -> AppendInfo | None:
        """Kafka's idempotence rules for a client's batches: a retried batch is answered
        with its original offsets (nothing is written); an older epoch or a gap in
        sequence numbers raises. Returns the duplicate's AppendInfo, if any."""
        pending: dict[int, tuple[int, int]] = {}
        for pb in info.producer_batches:
            duplicate = self.producer_state.find_duplicate(
                pb.producer_id, pb.producer_epoch, pb.first_sequence, pb.last_sequence
            )
            if duplicate is not None:
                return AppendInfo(
                    first_offset=duplicate.first_offset,
                    last_offset=duplicate.last_offset,
                    max_timestamp=duplicate.timestamp,
                )
            self.producer_state.check(pb.producer_id, pb.producer_epoch, pb.first_sequence,
                                      pb.first_offset, pending)
            pending[pb.producer_id] = (pb.producer_epoch, pb.last_sequence)
        return None

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
        """The first offset of an undecided transaction; without transactions (not yet
        supported) it is the high watermark, as in Kafka for non-transactional logs."""
        return self.high_watermark

    def fetch_upper_bound(self, isolation: int | None) -> int:
        """Where a read stops: the log end for a follower (None), the high watermark for
        READ_UNCOMMITTED (0), the last stable offset for READ_COMMITTED (1)."""
        if isolation is None:
            return self.log_end_offset
        return self.last_stable_offset if isolation == READ_COMMITTED else self.high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, clamped to [log start, log end]; returns it."""
        offset = min(max(offset, self.log_start_offset), self.log_end_offset)
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
            duplicate = self._check_producers(info)
            if duplicate is not None:
                return duplicate
        self._append(info, now)
        # epochs.assign(), called only when it would change something: its first test
        first_offset = info.first_offset
        epochs = self.epochs.entries
        latest = epochs[-1] if epochs else None
        if latest is None or latest.epoch != leader_epoch or latest.start_offset > first_offset:
            self.epochs.assign(leader_epoch, first_offset)
        for pb in info.producer_batches:
            self._track_producer(pb.producer_id, pb.producer_epoch, pb.first_sequence,
                                 pb.last_sequence, pb.last_offset, pb.max_timestamp)
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
            for pb in info.producer_batches:
                self._track_producer(pb.producer_id, pb.producer_epoch, pb.first_sequence,
                                     pb.last_sequence, pb.last_offset, pb.max_timestamp)
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
            recent = self._recent
            recent[first.base_offset] = (segment, position, first.size)
            if len(recent) > RECENT_APPENDS:
                del recent[next(iter(recent))]
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

    @staticmethod
    def _read_recent(start_offset: int, recent: tuple[LogSegment, int, int],
                     end: OffsetMetadata, max_bytes: int, min_one_batch: bool) -> FetchData:
        """LogSegment.read for a batch whose position _recent knows: the same slice."""
        segment, position, batch_size = recent
        # the batch is in the active segment, and end (past it) is there too
        size = max(max_bytes, batch_size) if min_one_batch else max_bytes
        size = max(0, min(size, end.position - position))
        return FetchData(OffsetMetadata(start_offset, segment.base_offset, position),
                         FileSlice(segment.fd, position, size))

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
        return os.pread(data.slice.fd, data.slice.size, data.slice.position)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int, int] | None:
        """ListOffsets: (timestamp, offset, leader epoch) or None when nothing matches."""
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            offset = self.log_start_offset
            return -1, offset, self.epochs.epoch_for_offset(offset)
        if timestamp == LATEST_TIMESTAMP:
            offset = self.log_end_offset
            return -1, offset, self.epochs.latest_epoch
        if timestamp == MAX_TIMESTAMP:
            return self._max_timestamp_entry()
        for segment in self.segments:
            if segment.max_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def _max_timestamp_entry(self) -> tuple[int, int, int] | None:
        best = max(self.segments, key=lambda s: s.max_timestamp)
        if best.max_timestamp < 0:
            return None
        return best.find_offset_by_timestamp(best.max_timestamp, self.log_start_offset)

    # --- retention and log start ------------------------------------------------------

    def delete_records(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset (not past the high watermark)."""
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records of {self.name} up to {offset}: above the high "
                f"watermark {self.high_watermark}"
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.epochs.truncate_from_start(offset)
        # Only the segments now below the log start go; time and size retention stay with
        # the retention check (they used to run here too, on the wall clock).
        self._delete_segments(self._below_log_start, now_ms())
        return self.log_start_offset

    def delete_old_segments(self, now: int) -> int:
        """Apply retention: segments past retention.ms, beyond retention.bytes, or wholly
        below the log start offset go. Returns the number of segments deleted."""
        deleted = self._delete_segments(self._below_log_start, now)
        if self.config.delete:
            # Kafka's order: size first, then time.
            deleted += self._delete_segments(self._retention_bytes_breached(), now)
            deleted += self._delete_segments(self._retention_ms_breached(now), now)
        return deleted

    def _below_log_start(self, segment: LogSegment, next_base: int) -> bool:
        return next_base <= self.log_start_offset

    def _retention_ms_breached(self, now: int):
        limit = self.config.retention_ms
        return lambda segment, _next: limit >= 0 and now - segment.largest_timestamp > limit

    def _retention_bytes_breached(self):
        limit = self.config.retention_bytes
        excess = self.size_in_bytes() - limit

        def breached(segment: LogSegment, _next: int) -> bool:
            nonlocal excess
            if limit < 0 or excess < segment.size:
                return False
            excess -= segment.size
            return True

        return breached

    def _delete_segments(self, predicate, now: int) -> int:
        """Delete the oldest segments while the predicate holds and they lie wholly below
        the high watermark; a non-empty active segment is rolled first so it can go too."""
        doomed: list[LogSegment] = []
        for i, segment in enumerate(self.segments):
            is_active = i == len(self.segments) - 1
            next_base = self.log_end_offset if is_active else self.segments[i + 1].base_offset
            if next_base > self.high_watermark or not predicate(segment, next_base):
                break
            if is_active and segment.size == 0:
                break
            doomed.append(segment)
        if not doomed:
            return 0
        self._recent.clear()
        if doomed[-1] is self.active_segment:
            self.roll()
        for segment in doomed:
            self.segments.remove(segment)
            self._bases.remove(segment.base_offset)
            segment.change_suffix(DELETED_SUFFIX)
            self.pending_deletes.append((now + self.config.file_delete_delay_ms, segment))
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.producer_state.delete_snapshots_below(self.segments[0].base_offset)
        self.epochs.truncate_from_start(self.log_start_offset)
        self.delete_due_files(now)
        return len(doomed)

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Swap compacted output (a `.swap` segment) in for the segments it replaces: the old
        ones are renamed `.deleted` (removed after file.delete.delay.ms), then the new one
        takes its final name. A crash in between is completed at the next load."""
        due = now_ms() + self.config.file_delete_delay_ms
        self._recent.clear()
        for segment in old:
            i = self.segments.index(segment)
            del self.segments[i]
            del self._bases[i]
            segment.change_suffix(DELETED_SUFFIX)
            self.pending_deletes.append((due, segment))
        new.change_suffix("")
        i = bisect.bisect_left(self._bases, new.base_offset)
        self.segments.insert(i, new)
        self._bases.insert(i, new.base_offset)

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
        end = min(offset, self._segment_end(segment))
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

    def close(self) -> None:
        self.closed = True  # a compaction pass built meanwhile is discarded, not installed
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
