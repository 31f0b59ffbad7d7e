"""Opening a partition's log directory (Kafka's LogLoader): check the topic id, finish
what a crash interrupted, open the segments, check or rebuild their indexes, and after an
unclean shutdown recover every batch past the recovery point."""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Callable
from uuid import UUID

from moldau.errors import InconsistentTopicIdError
from moldau.protocol.records import RecordBatch

from . import checkpoints
from .config import LogConfig
from .epoch_cache import LeaderEpochCache
from .segment import LogSegment
from .segment_files import CLEANED_SUFFIX, DELETED_SUFFIX, LOG_SUFFIX, SWAP_SUFFIX, base_offset_of
from .txn_index_recovery import TxnIndexRebuild

# Opens the segment of a base offset, mapping its indexes lazily when told to.
OpenSegment = Callable[[int, bool], LogSegment]


def read_topic_id(directory: str) -> UUID | None:
    """The topic id partition.metadata holds, or None for a log written before topic ids
    (or one whose id has not been written yet)."""
    try:
        return checkpoints.read_partition_metadata(
            os.path.join(directory, checkpoints.PARTITION_METADATA)).topic_id
    except FileNotFoundError:
        return None


def write_topic_id(directory: str, topic_id: UUID, sync: bool) -> None:
    """Write partition.metadata with the topic id, or check that the one it holds is the
    same. A directory of another topic of the same name (one deleted while this broker
    was away, or created after a ZooKeeper backup that was restored) is never taken
    over: InconsistentTopicIdError, as Kafka answers in LeaderAndIsr."""
    stored = read_topic_id(directory)
    if stored is None:
        checkpoints.write_partition_metadata(
            os.path.join(directory, checkpoints.PARTITION_METADATA), topic_id, sync=sync)
    elif stored != topic_id:
        held, named = checkpoints.kafka_uuid_to_str(stored), checkpoints.kafka_uuid_to_str(topic_id)
        raise InconsistentTopicIdError(
            f"Topic ID in memory: {held} does not match the topic ID for partition "
            f"{os.path.basename(directory)} received: {named}.")


def segment_end(segment: LogSegment) -> int:
    """The next offset after the segment's last batch (its base offset when empty)."""
    last = segment.last_batch()
    return last.last_offset + 1 if last else segment.base_offset


class LogLoader:
    """Loads the segments of one log directory; see the module docstring."""

    def __init__(self, directory: str, config: LogConfig, epochs: LeaderEpochCache,
                 open_segment: OpenSegment) -> None:
        self.directory = directory
        self.config = config
        self.epochs = epochs  # recovery adds the epochs of the batches it finds
        self._open_segment = open_segment
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []  # base offsets of segments, for bisect

    def load(self, recovery_point: int, clean_shutdown: bool,
             log_start_offset: int) -> list[LogSegment]:
        """The log's segments, oldest first, never none: the last is the active one, with
        room in its indexes again. Raises OSError when the directory cannot be read."""
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
            segment = self._open_segment(base, lazy)
            suspect = segment.missing_index and segment.size > 0
            if suspect or (not lazy and not _indexes_sound(segment)):
                segment.recover(max_batch_size=0)
            self._add(segment)
        if not clean_shutdown:
            self._recover_from(recovery_point, log_start_offset)
        if self.segments and segment_end(self.segments[-1]) < log_start_offset:
            # Recovery cut the log below its start offset (or files were removed): like
            # Kafka, drop everything and start empty at the log start offset, rather than
            # report a log start beyond the log end.
            for segment in self.segments:
                segment.delete()
            self.segments, self._bases = [], []
            self.epochs.clear()
        if not self.segments:
            # A new (or emptied) log begins at its log start offset, not at 0.
            self._add(self._open_segment(log_start_offset, False))
        for segment in self.segments[:-1]:
            if not segment.inactive:  # checked or rebuilt above: trim and unmap like a roll
                segment.on_become_inactive()
        active = self.segments[-1]
        # Reopened indexes were trimmed on close; the active segment needs room again.
        active.offset_index.resize(self.config.segment_index_bytes)
        active.time_index.resize(self.config.segment_index_bytes)
        return self.segments

    def _add(self, segment: LogSegment) -> None:
        self.segments.append(segment)
        self._bases.append(segment.base_offset)

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

    def _recover_from(self, recovery_point: int, log_start_offset: int) -> None:
        """Rescan every segment holding offsets past the recovery point, rebuilding their
        transaction indexes; at the first invalid batch cut the log there and drop every
        later segment."""
        start = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        txn_indexes = TxnIndexRebuild(self.directory, log_start_offset, int(time.time() * 1000))

        def on_batch(batch: RecordBatch) -> None:
            self._on_recovered_batch(batch)
            txn_indexes.on_batch(batch)

        for i in range(start, len(self.segments)):
            segment = self.segments[i]
            truncated = segment.recover(on_batch=on_batch, max_batch_size=0)
            txn_indexes.finish_segment(segment, self.segments[:i], self._bases[:i])
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


def _indexes_sound(segment: LogSegment) -> bool:
    if segment.missing_index and segment.size > 0:
        return False  # a freshly created, empty index would hide the segment's data
    try:
        segment.check_not_corrupt()
    except Exception:
        return False
    return True
