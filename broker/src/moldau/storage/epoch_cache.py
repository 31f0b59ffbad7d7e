"""The leader epoch cache of a partition (Kafka's LeaderEpochFileCache).

An ordered list of (epoch, start offset): the first offset each leader epoch wrote. It
answers OffsetsForLeaderEpoch (where does epoch E end?) so a follower truncates exactly
the records a new leader does not have, and it is kept in `leader-epoch-checkpoint`,
rewritten on every change.

The memory is what counts while the broker runs; the file is for the next start. Its
writes (each fsynced before it replaces the file, so a crash leaves the old or the new
content, never a torn one) run in order on one background thread: a LeaderAndIsr
bumping the epochs of fifty partitions would otherwise hold the broker's event loop for
fifty fsyncs. A crash can lose the newest writes, which is safe as long as the log's
recovery point never passes records whose epoch is not on disk (recovery rebuilds the
epochs of the records after it): PartitionLog.flush calls flush() here first.
"""

from __future__ import annotations

import contextlib
import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor

from .checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    read_leader_epoch_checkpoint,
    write_leader_epoch_checkpoint,
)

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

log = logging.getLogger(__name__)
_writer: ThreadPoolExecutor | None = None  # shared by every log: writes stay in order


def _checkpoint_writer() -> ThreadPoolExecutor:
    global _writer
    if _writer is None:
        _writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="epoch-checkpoint")
    return _writer


class LeaderEpochCache:
    def __init__(self, directory: str, *, sync: bool = True) -> None:
        self.path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT)
        self.sync = sync
        self.entries: list[EpochEntry] = []
        self._written: Future[None] | None = None  # the latest background write
        # Loaded through the assign rules, as Kafka does, so a non-monotonic file is cleaned.
        for entry in read_leader_epoch_checkpoint(self.path):
            self._assign(entry.epoch, entry.start_offset)
        # as Kafka's CheckpointFile: the file exists, empty, from the log's creation on
        with contextlib.suppress(FileExistsError):
            open(self.path, "xb").close()

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that epoch starts at start_offset (called for every appended batch)."""
        if self._assign(epoch, start_offset):
            self._save()

    def _assign(self, epoch: int, start_offset: int) -> bool:
        # Kafka's rules: a change is needed unless the latest entry has the same epoch and
        # a start offset <= this one. The new entry then replaces, from the end, every entry
        # with an epoch >= its own or a start offset >= its own (the cache stays monotonic
        # in both). Negative epochs (batches without one) are not recorded.
        if epoch < 0 or start_offset < 0:
            return False
        if self.entries:
            latest = self.entries[-1]
            if latest.epoch == epoch and latest.start_offset <= start_offset:
                return False
        while self.entries and (
            self.entries[-1].epoch >= epoch or self.entries[-1].start_offset >= start_offset
        ):
            self.entries.pop()
        self.entries.append(EpochEntry(epoch, start_offset))
        return True

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetsForLeaderEpoch, as Kafka's endOffsetFor: the latest
        epoch ends at the log end; an older one at the start of the next larger epoch,
        reported with the largest cached epoch <= the asked one, or with the asked epoch
        itself when it is below every cached epoch; an epoch above every cached one (or
        UNDEFINED, or an empty cache) is (UNDEFINED_EPOCH, UNDEFINED_OFFSET)."""
        if epoch == UNDEFINED_EPOCH or not self.entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if epoch == self.entries[-1].epoch:
            return epoch, log_end_offset
        floor: EpochEntry | None = None
        for entry in self.entries:
            if entry.epoch > epoch:
                return (floor.epoch if floor else epoch), entry.start_offset
            floor = entry
        return UNDEFINED_EPOCH, UNDEFINED_OFFSET

    def epoch_for_offset(self, offset: int) -> int:
        epoch = UNDEFINED_EPOCH
        for entry in self.entries:
            if entry.start_offset > offset:
                break
            epoch = entry.epoch
        return epoch

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs that start at or after end_offset (the log was truncated there)."""
        kept = [e for e in self.entries if e.start_offset < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at start_offset: the epoch holding it starts there."""
        earlier = [e for e in self.entries if e.start_offset <= start_offset]
        if not earlier:
            return
        kept = [EpochEntry(earlier[-1].epoch, start_offset)]
        kept += [e for e in self.entries if e.start_offset > start_offset]
        if kept != self.entries:
            self.entries = kept
            self._save()

    def clear(self) -> None:
        self.entries = []
        self._save()

    def flush(self) -> None:
        """Wait until the file holds what memory holds; OSError when a write failed."""
        written, self._written = self._written, None
        if written is not None:
            written.result()

    def _save(self) -> None:
        if not self.sync:  # without fsync a write is cheap: do it now
            write_leader_epoch_checkpoint(self.path, self.entries, sync=False)
            return
        written = _checkpoint_writer().submit(
            write_leader_epoch_checkpoint, self.path, list(self.entries), sync=True)
        written.add_done_callback(self._report_failure)
        self._written = written

    def _report_failure(self, written: Future[None]) -> None:
        error = written.exception()
        if error is not None:
            log.error("Writing %s failed: %s", self.path, error)
