"""Log compaction (Kafka's LogCleaner): keep the latest record per key.

A compacted log has a clean head (already compacted: one record per key, offset gaps)
and a dirty tail. A pass over a log:

1. picks the dirty range: from the cleaner checkpoint (first dirty offset) up to the
   first uncleanable offset: the active segment, the last stable offset (so no open
   transaction is cleaned), or the first segment younger than `min.compaction.lag.ms`,
   whichever comes first;
2. runs only when dirty bytes / (clean + dirty bytes) reach `min.cleanable.dirty.ratio`;
3. builds a map key -> latest offset over the dirty range, aborted transactions left out;
4. rewrites every segment below the end of the range, in groups that fit one segment,
   dropping records whose key has a later offset, records without a key, tombstones
   whose delete horizon (set on the first pass that sees them: now +
   `delete.retention.ms`) has passed, the batches of aborted transactions, and markers
   by the same two-pass rule once their transaction has no data left (the transaction
   rules are `cleaner_txns.py`). Batches that lose nothing are copied byte for byte;
   others are re-encoded with their codec, base offset and offset span, so offsets are
   preserved (gaps allowed); a live producer's last batch stays, if only empty. Batches
   from the end of the range on are copied as they are. The ABORT markers that stay are
   indexed in the output's `.txnindex`;
5. swaps the result in crash-safely: `.cleaned` files become `.swap` files, the old
   segments are renamed `.deleted`, the swap files take their names. A crash leaves
   either `.cleaned` files (discarded at load) or `.swap` files (completed at load).

A pass has three steps so that the slow one runs off the event loop, on the cleaner
threads (`log.cleaner.threads`): `plan` (event loop: the groups, each segment's size and a
private descriptor), `build` (any thread: steps 3-4 into `.cleaned` files, never touching
the log), `install` (event loop: step 5, only if every planned segment is still in the
log with the same size; otherwise the output is discarded and the next pass redoes it).
`clean` runs the three in a row.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from moldau.errors import KafkaStorageError
from moldau.protocol.records import Record, RecordBatch, build_batch

from .cleaner_txns import (
    CleanedTransactions,
    ProducerLast,
    aborted_in,
    keeps_producer_state,
    producers_last_records,
)
from .segment import LogSegment
from .segment_files import CLEANED_SUFFIX, SWAP_SUFFIX
from .segment_positions import BatchHeader, batch_header, scan_batch_headers
from .txn_index import AbortedTxn

if TYPE_CHECKING:
    from .log import PartitionLog

log = logging.getLogger("moldau.log_cleaner")

_INT32_MAX = 0x7FFFFFFF


def cleanable_ratio(clean_bytes: int, dirty_bytes: int) -> float:
    """The dirty ratio compared against min.cleanable.dirty.ratio."""
    total = clean_bytes + dirty_bytes
    return dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanResult:
    first_dirty: int
    end_offset: int  # the new first dirty offset (checkpointed)
    bytes_read: int
    bytes_written: int
    records_removed: int


@dataclass(slots=True)
class DirtyRange:
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def ratio(self) -> float:
        return cleanable_ratio(self.clean_bytes, self.dirty_bytes)


def dirty_range(partition_log: PartitionLog, first_dirty: int, now: int) -> DirtyRange:
    """Where the dirty section starts and ends, and the byte sizes of both sections."""
    segments = partition_log.segments
    first_dirty = max(first_dirty, partition_log.log_start_offset)
    uncleanable = min(partition_log.active_segment.base_offset,
                      partition_log.last_stable_offset)
    lag = partition_log.config.min_compaction_lag_ms
    if lag > 0:
        for segment in segments:
            if segment.base_offset >= uncleanable:
                break
            if now - segment.largest_timestamp < lag:
                uncleanable = segment.base_offset
                break
    uncleanable = max(uncleanable, first_dirty)
    clean = dirty = 0
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if next_base is not None and next_base <= first_dirty:
            clean += segment.size
        elif segment.base_offset < uncleanable and segment.base_offset >= first_dirty:
            dirty += segment.size
        elif segment.base_offset < first_dirty:
            # The segment holding the first dirty offset (a pass whose key map filled up
            # ended inside it) counts on both sides, as Kafka's logSegments(from, to) do.
            clean += segment.size
            if first_dirty < uncleanable:
                dirty += segment.size
    return DirtyRange(first_dirty, uncleanable, clean, dirty)


def needs_cleaning(partition_log: PartitionLog, first_dirty: int, now: int) -> DirtyRange | None:
    """The dirty range if the log is due for compaction, else None."""
    config = partition_log.config
    if not config.compact:
        return None
    found = dirty_range(partition_log, first_dirty, now)
    if found.dirty_bytes == 0:
        return None
    if found.ratio < config.min_cleanable_dirty_ratio and not _compaction_overdue(
        partition_log, found, now
    ):
        return None
    return found


def _compaction_overdue(partition_log: PartitionLog, found: DirtyRange, now: int) -> bool:
    """max.compaction.lag.ms: a dirty segment older than this forces a pass."""
    limit = partition_log.config.max_compaction_lag_ms
    for segment in partition_log.segments:
        if found.first_dirty <= segment.base_offset < found.first_uncleanable:
            return now - segment.largest_timestamp > limit
    return False


@dataclass(slots=True)
class SegmentSnapshot:
    """One segment as a pass sees it when it is planned: its size then, and a private
    descriptor (a dup) that a cleaner thread reads through. The segment may be truncated,
    deleted or closed meanwhile; the dup can never turn into another file, and `install`
    notices the change and discards the output."""

    segment: LogSegment
    size: int
    fd: int

    def headers(self) -> Iterator[BatchHeader]:
        return scan_batch_headers(self.fd, self.segment.log_path, 0, self.size)

    def batch(self, header: BatchHeader) -> RecordBatch:
        return RecordBatch(os.pread(self.fd, header.size, header.position))

    def unchanged_in(self, partition_log: PartitionLog) -> bool:
        return self.segment.size == self.size and self.segment in partition_log.segments


@dataclass
class CleanPlan:
    """A pass over one log, taken on the event loop; `build` may run on another thread."""

    partition_log: PartitionLog
    found: DirtyRange
    now: int
    groups: list[list[SegmentSnapshot]]
    max_bytes_per_second: float = float("inf")  # log.cleaner.io.max.bytes.per.second
    max_keys: int | None = None  # offset_map_capacity; None: unbounded
    cancelled: bool = False  # set from the event loop; the pass stops at its next batch
    outputs: list[LogSegment] = field(default_factory=list)
    result: CleanResult | None = None
    # the aborted transactions overlapping the planned segments, and where each live
    # producer's state is: read on the event loop, as the log may change meanwhile
    aborted: list[AbortedTxn] = field(default_factory=list)
    producers: dict[int, ProducerLast] = field(default_factory=dict)

    def release(self) -> None:
        """Close the private descriptors (idempotent)."""
        for group in self.groups:
            for snapshot in group:
                if snapshot.fd >= 0:
                    os.close(snapshot.fd)
                    snapshot.fd = -1


def build_offset_map(
    segments: list[SegmentSnapshot], start: int, end: int, pace: _Pace | None = None,
    max_keys: int | None = None, aborted: Iterable[AbortedTxn] = (),
) -> tuple[dict[bytes, int], int]:
    """key -> the offset of its latest record in [start, end), and the end the map really
    covers: at most max_keys keys fit (Kafka's offset map), and the first record of a
    key that no longer fits ends the range there; the next pass continues from it.
    Records of the aborted transactions (those overlapping the range) are left out: they
    must not hide a key's committed value."""
    latest: dict[bytes, int] = {}
    txns = CleanedTransactions(t for t in aborted if t.last_offset >= start)
    for snapshot in segments:
        for header in snapshot.headers():
            if header.last_offset < start or header.base_offset >= end:
                continue
            batch = snapshot.batch(header)
            if pace is not None:
                pace.took(header.size)
            if batch.is_control:
                txns.on_control_batch(batch)
                continue
            if txns.on_data_batch(batch):
                continue
            for record in batch.records():
                key = record.key
                if key is None or not start <= record.offset < end:
                    continue
                if max_keys is not None and len(latest) >= max_keys and key not in latest:
                    return latest, record.offset
                latest[key] = record.offset
    return latest, end


def offset_map_capacity(dedupe_buffer_size: int, threads: int, load_factor: float) -> int:
    """Keys one pass may map: Kafka gives each cleaner thread dedupe.buffer.size / threads
    bytes of 24-byte slots (an MD5 hash and an offset), filled to the load factor."""
    memory = min(dedupe_buffer_size // max(1, threads), 0x7FFFFFFF)
    return max(1, int(memory // 24 * load_factor))


class CleanCancelled(Exception):
    """The pass was cancelled (the broker shuts down, the log goes away)."""


class _Pace:
    """Between batches: stops a cancelled pass, and keeps the bytes read and written under
    log.cleaner.io.max.bytes.per.second by sleeping the cleaner thread."""

    def __init__(self, pass_: CleanPlan) -> None:
        self.pass_ = pass_
        self.rate = pass_.max_bytes_per_second
        self.limited = self.rate < sys.float_info.max  # Kafka's default is Double.MAX_VALUE
        self.start = time.monotonic()
        self.bytes = 0

    def took(self, size: int) -> None:
        if self.pass_.cancelled:
            raise CleanCancelled(self.pass_.partition_log.directory)
        if not self.limited:
            return
        self.bytes += size
        ahead = self.bytes / self.rate - (time.monotonic() - self.start)
        if ahead > 0:
            time.sleep(ahead)


def _group(
    segments: list[LogSegment], max_bytes: int, max_index_bytes: int
) -> list[list[LogSegment]]:
    """Consecutive segments whose cleaned output fits one segment (Kafka's grouping)."""
    groups: list[list[LogSegment]] = []
    current: list[LogSegment] = []
    size = index_size = 0
    for segment in segments:
        next_index = segment.offset_index_bytes
        fits = (
            current
            and size + segment.size <= max_bytes
            and index_size + next_index <= max_index_bytes
            and segment.base_offset - current[0].base_offset <= _INT32_MAX
        )
        if current and not fits:
            groups.append(current)
            current, size, index_size = [], 0, 0
        current.append(segment)
        size += segment.size
        index_size += next_index
    if current:
        groups.append(current)
    return groups


def clean(partition_log: PartitionLog, found: DirtyRange, now: int,
          max_keys: int | None = None) -> CleanResult:
    """One compaction pass over partition_log, on the caller's thread (see the module
    docstring). Raises the storage error of a failed read or write."""
    pass_ = plan(partition_log, found, now, max_keys=max_keys)
    build(pass_)
    result = install(pass_)
    assert result is not None, "nothing can change the log between build and install here"
    return result


def plan(
    partition_log: PartitionLog, found: DirtyRange, now: int,
    max_bytes_per_second: float = float("inf"), max_keys: int | None = None,
) -> CleanPlan:
    """The segments a pass rewrites, grouped, each with a private descriptor."""
    config = partition_log.config
    end = found.first_uncleanable
    targets = [s for s in partition_log.segments if s.base_offset < end]
    groups = []
    for group in _group(targets, config.segment_bytes, config.segment_index_bytes):
        groups.append([SegmentSnapshot(s, s.size, os.dup(s.fd)) for s in group])
    pass_ = CleanPlan(partition_log, found, now, groups, max_bytes_per_second, max_keys)
    if targets:
        segments = partition_log.segments
        upper = (segments[len(targets)].base_offset if len(targets) < len(segments)
                 else partition_log.log_end_offset)
        pass_.aborted = aborted_in(segments, targets[0].base_offset, upper)
        pass_.producers = producers_last_records(partition_log.producer_state)
    return pass_


def build(pass_: CleanPlan) -> None:
    """Read the planned segments and write the cleaned output as `.cleaned` segments, without
    touching the log itself: safe on a cleaner thread while the log takes appends. The
    descriptors are closed when it returns; on an error the output is removed."""
    found = pass_.found
    pace = _Pace(pass_)
    try:
        targets = [snapshot for group in pass_.groups for snapshot in group]
        latest, end = build_offset_map(targets, found.first_dirty, found.first_uncleanable,
                                       pace, pass_.max_keys, pass_.aborted)
        result = CleanResult(found.first_dirty, end, 0, 0, 0)
        _drop_groups_from(pass_, end)
        _clean_groups(pass_, _Filter(pass_, latest, end, result), pace)
    except OSError as exc:
        discard(pass_)
        raise KafkaStorageError(
            f"compacting {pass_.partition_log.directory} failed: {exc}") from exc
    except BaseException:
        discard(pass_)
        raise
    finally:
        pass_.release()
    pass_.result = result


def _drop_groups_from(pass_: CleanPlan, end: int) -> None:
    """A map that filled up ends the pass early: groups from `end` on stay as they are."""
    keep = [g for g in pass_.groups if g[0].segment.base_offset < end]
    for group in pass_.groups[len(keep):]:
        for snapshot in group:
            os.close(snapshot.fd)
            snapshot.fd = -1
    pass_.groups = keep


def install(pass_: CleanPlan) -> CleanResult | None:
    """Swap the built output in, on the thread that owns the log. A group whose segments
    changed since the plan (truncated, deleted by retention, the log closed) is discarded
    with the rest of the pass, and None is returned: the next pass starts over from the
    same checkpoint, the groups already swapped in being clean."""
    partition_log = pass_.partition_log
    for i, (group, out) in enumerate(zip(pass_.groups, pass_.outputs, strict=True)):
        if partition_log.closed or not all(s.unchanged_in(partition_log) for s in group):
            log.info("compaction of %s discarded: the log changed during the pass",
                     partition_log.directory)
            for stale in pass_.outputs[i:]:
                stale.delete()
            return None
        # .cleaned until here: a crash before this point discards the output at load; a
        # .swap file is completed at load, and only install knows the log still matches.
        out.change_suffix(SWAP_SUFFIX)
        partition_log.replace_segments([s.segment for s in group], out)
    return pass_.result


def discard(pass_: CleanPlan) -> None:
    """Remove whatever output a pass wrote (the log is left as it was)."""
    for out in pass_.outputs:
        with contextlib.suppress(Exception):  # best effort: a load discards leftovers too
            out.delete()
    pass_.outputs.clear()
    pass_.release()


def _clean_groups(pass_: CleanPlan, keep: _Filter, pace: _Pace) -> None:
    """Clean the groups into output segments, one per group, except that a group whose
    records all went keeps its output open for the next group: runs of segments that
    compact to nothing become one segment, not one empty segment each. (Consumers get no
    record from an empty segment; librdkafka takes each such fetch for a too-small limit
    and fails the partition after ten in a row.) `pass_.groups` ends up as the merged
    groups, one per output."""
    merged: list[list[SegmentSnapshot]] = []
    out: LogSegment | None = None
    dropped: RecordBatch | None = None  # the last batch seen, when nothing of it was kept
    try:
        for group in pass_.groups:
            base = group[0].segment.base_offset
            if out is not None and (out.size > 0 or base - out.base_offset > _INT32_MAX):
                _finish_output(out, dropped)
                pass_.outputs.append(out)
                out = None
            if out is None:
                out = _open_output(pass_, base)
                keep.txns.cleaned_index = out.txn_index
                merged.append([])
            merged[-1] += group
            dropped = _clean_into(out, group, keep, pace, dropped)
        if out is not None:
            _finish_output(out, dropped)
            pass_.outputs.append(out)
            out = None
    except BaseException:
        if out is not None:
            with contextlib.suppress(Exception):  # the original error is the one to report
                out.delete()
        raise
    pass_.groups = merged


def _open_output(pass_: CleanPlan, base: int) -> LogSegment:
    partition_log = pass_.partition_log
    config = partition_log.config
    _remove_stale(partition_log.directory, base)
    return LogSegment(
        partition_log.directory,
        base,
        index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes,
        suffix=CLEANED_SUFFIX,
    )


def _clean_into(out: LogSegment, group: list[SegmentSnapshot], keep: _Filter, pace: _Pace,
                dropped: RecordBatch | None) -> RecordBatch | None:
    """Append what the group keeps to out; returns the new `dropped`."""
    result = keep.result
    for snapshot in group:
        for header in snapshot.headers():
            batch = snapshot.batch(header)
            result.bytes_read += header.size
            kept = keep.batch(batch)
            dropped = batch if kept is None else None
            if kept is not None:
                _write(out, kept)
                result.bytes_written += len(kept)
            pace.took(header.size + (len(kept) if kept is not None else 0))
    return dropped


def _finish_output(out: LogSegment, dropped: RecordBatch | None) -> None:
    if dropped is not None:
        # Keep the output's last offset (an empty batch spanning the dropped one), so the
        # offsets a .swap file covers are known after a crash.
        _write(out, _empty_like(dropped))
    out.on_become_inactive()
    out.flush()


def _write(out: LogSegment, data: bytes) -> None:
    out.append(data, [batch_header(RecordBatch(data), 0)])


def _empty_like(batch: RecordBatch) -> bytes:
    """The batch without its records: its offsets, producer fields and flags stay (Kafka's
    empty batch header, whose timestamps are the batch's max timestamp)."""
    return build_batch(
        [],
        base_offset=batch.base_offset,
        compression=0,
        timestamp_type=batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch,
        last_offset_delta=batch.last_offset_delta,
        base_timestamp=batch.max_timestamp,
        max_timestamp=batch.max_timestamp,
    )


class _Filter:
    """What a pass keeps of each batch, walking the planned segments in offset order."""

    def __init__(self, pass_: CleanPlan, latest: dict[bytes, int], end: int,
                 result: CleanResult) -> None:
        self.latest = latest
        self.end = end  # where the map ends: later batches are copied as they are
        self.now = pass_.now
        self.retention = pass_.partition_log.config.delete_retention_ms
        self.result = result
        self.txns = CleanedTransactions(pass_.aborted)
        self.producers = pass_.producers

    def batch(self, batch: RecordBatch) -> bytes | None:
        """The batch bytes to keep: the same bytes, a re-encoded subset, or None."""
        if batch.is_control:
            return self._marker(batch)
        aborted = self.txns.on_data_batch(batch)
        if batch.base_offset >= self.end:
            return bytes(batch.buffer)  # past the cleanable range (the LSO): untouched
        if aborted:
            self.result.records_removed += batch.records_count
            return self._emptied(batch)
        return self._records(batch)

    def _marker(self, batch: RecordBatch) -> bytes | None:
        """A marker whose transaction has no data left gets a delete horizon on the first
        pass that sees it so, and goes on the first pass past the horizon."""
        may_go = self.txns.on_control_batch(batch)
        horizon = batch.delete_horizon_ms
        if batch.base_offset >= self.end or not may_go:
            return bytes(batch.buffer)
        if batch.records_count == 0 or (horizon is not None and horizon <= self.now):
            self.result.records_removed += batch.records_count
            return self._emptied(batch)
        if horizon is None:
            return _rebuilt(batch, list(batch.records()), self.now + self.retention)
        return bytes(batch.buffer)

    def _records(self, batch: RecordBatch) -> bytes | None:
        horizon = batch.delete_horizon_ms
        records = list(batch.records())
        kept = []
        has_tombstone = False
        latest, end = self.latest, self.end
        for record in records:
            if record.offset < end and (
                record.key is None or latest.get(record.key, record.offset) > record.offset
            ):
                continue
            if record.value is None:
                if horizon is not None and horizon <= self.now:
                    continue
                has_tombstone = True
            kept.append(record)
        self.result.records_removed += len(records) - len(kept)
        if not kept:
            return self._emptied(batch)
        new_horizon = horizon if horizon is not None else (
            self.now + self.retention if has_tombstone else None
        )
        if len(kept) == len(records) and new_horizon == horizon:
            return bytes(batch.buffer)
        return _rebuilt(batch, kept, new_horizon)

    def _emptied(self, batch: RecordBatch) -> bytes | None:
        """Nothing of the batch stays: it goes, unless it holds a live producer's state."""
        if not keeps_producer_state(batch, self.producers):
            return None
        return bytes(batch.buffer) if batch.records_count == 0 else _empty_like(batch)


def _rebuilt(batch: RecordBatch, kept: list[Record], horizon: int | None) -> bytes:
    """The batch with only the kept records, at their offsets, with the offset span, the
    codec, the producer fields and the flags of the original."""
    return build_batch(
        [(r.key, r.value, r.headers, r.timestamp) for r in kept],
        base_offset=batch.base_offset,
        compression=batch.compression,
        timestamp_type=batch.timestamp_type,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        is_control=batch.is_control,
        partition_leader_epoch=batch.partition_leader_epoch,
        offset_deltas=[r.offset - batch.base_offset for r in kept],
        last_offset_delta=batch.last_offset_delta,  # keeps the batch's offset span
        max_timestamp=batch.max_timestamp,
        delete_horizon_ms=horizon,
    )


def _remove_stale(directory: str, base: int) -> None:
    """Leftovers of an interrupted pass for the same base offset."""
    prefix = f"{base:020d}."
    for name in os.listdir(directory):
        if name.startswith(prefix) and name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)):
            os.remove(os.path.join(directory, name))


__all__ = [
    "CleanCancelled",
    "CleanPlan",
    "CleanResult",
    "DirtyRange",
    "SegmentSnapshot",
    "build",
    "build_offset_map",
    "clean",
    "cleanable_ratio",
    "dirty_range",
    "discard",
    "install",
    "needs_cleaning",
    "offset_map_capacity",
    "plan",
]
