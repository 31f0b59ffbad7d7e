"""The copier of replica moves between log dirs (Kafka's ReplicaAlterLogDirsThread).

One asyncio task per broker, running while a future log exists
(storage/future_logs.py): for each hosted partition being moved, each pass copies up to
COPY_BYTES of the current log's batches into the future log as a follower appends them
(same offsets; epochs into the future log's leader-epoch cache; producer state), then
yields to the event loop, so the partition keeps taking produce traffic meanwhile. When
the future log has reached the current log's end, the swap happens in the same step:
nothing can be appended in between.

The current log can change under the copy as a follower's does: truncated after a
leader change (the future log is cut back to where their epochs agree), or started
later by retention or DeleteRecords (the future log follows).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from moldau.errors import (
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    LogDirNotFoundError,
    ReplicaNotAvailableError,
)
from moldau.protocol.records import complete_length
from moldau.storage.dir_names import future_dir_name
from moldau.storage.epoch_cache import UNDEFINED_EPOCH
from moldau.storage.log import PartitionLog

from .throttle import UNLIMITED, ByteRateQuota

if TYPE_CHECKING:
    from moldau.storage.future_logs import FutureLogs
    from moldau.storage.log_manager import LogManager

log = logging.getLogger("kafka.server.ReplicaAlterLogDirsThread")

TopicPartition = tuple[str, int]

COPY_BYTES = 1024 * 1024  # per partition and pass (replica.fetch.max.bytes's default)
IO_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
MAX_NAME_LENGTH = 255  # a future dir's name must fit a file name (Kafka's KAFKA-4893)
IDLE_S = 0.5  # how long to wait when no move can progress (partitions not hosted yet)


class HostedPartition(Protocol):
    """A partition of the replica manager, as far as a move sees it."""

    log: PartitionLog
    topic_id: UUID | None

    def wake(self) -> None: ...


class LogDirMover:
    def __init__(self, log_manager: LogManager,
                 partitions: Mapping[TopicPartition, HostedPartition]) -> None:
        # the replica manager's own map, read as it changes (no import of it: a cycle)
        self.log_manager = log_manager
        self.partitions = partitions
        # replica.alter.log.dirs.io.max.bytes.per.second (the broker sets the reader)
        self.quota = ByteRateQuota(lambda: UNLIMITED)
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self.failed: set[TopicPartition] = set()  # moves stopped by an error, until asked again

    @property
    def futures(self) -> FutureLogs:
        return self.log_manager.futures

    def alter(self, tp: TopicPartition, destination: str) -> int:
        """One partition of AlterReplicaLogDirs (Kafka's ReplicaManager.alterReplicaLogDirs):
        its error code."""
        try:
            if len(future_dir_name(*tp)) > MAX_NAME_LENGTH:
                raise InvalidTopicError("The topic name is too long.")
            path = self.futures.check_dir(destination)
            partition = self.partitions.get(tp)
            log_manager = self.log_manager
            if partition is not None:
                if log_manager.logs.get(tp) is not partition.log:
                    raise KafkaStorageError(f"Partition {tp[0]}-{tp[1]} is offline")
                if self.futures.dir_of(tp) not in (None, path):
                    self.futures.abandon(tp)  # a move elsewhere stops
            # a partition created later here gets its log in this dir
            self.futures.remember_preferred(tp, path)
            if partition is None:
                # Kafka keeps this error code here "for compatibility"
                raise ReplicaNotAvailableError(f"Replica of {tp[0]}-{tp[1]} is not hosted")
            if self.futures.create(tp, path, partition.topic_id):
                self.failed.discard(tp)
                self.wake()
            elif tp in self.failed and tp in self.futures.logs:
                self.failed.discard(tp)  # asked again: the stopped copy retries
                self.wake()
            return 0
        except (InvalidTopicError, LogDirNotFoundError, KafkaStorageError,
                ReplicaNotAvailableError) as exc:
            log.warning("Unable to alter log dirs for %s-%d: %s", tp[0], tp[1], exc)
            return exc.code

    def wake(self) -> None:
        """There is work (a new future log, a partition now hosted): run the copier."""
        self._wakeup.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(),
                                                                name="alter-log-dirs")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while self.futures.logs:
            self._wakeup.clear()
            progressed = False
            for tp in list(self.futures.logs):
                partition = self.partitions.get(tp)
                if partition is None or tp in self.failed:
                    continue  # the copy starts once the partition is hosted (LeaderAndIsr)
                try:
                    progressed = self.step(tp, partition) or progressed
                except KafkaError as exc:
                    # Kafka's fetcher marks the partition failed; a new request retries
                    log.error("moving %s-%d failed: %s", tp[0], tp[1], exc)
                    self.failed.add(tp)
                await asyncio.sleep(0)  # one partition's chunk per loop pass
            if not progressed:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), IDLE_S)

    def step(self, tp: TopicPartition, partition: HostedPartition) -> bool:
        """Copy one chunk into the partition's future log, and swap it in once it has
        caught up. True when something was copied or swapped."""
        future = self.futures.logs.get(tp)
        current = partition.log
        if future is None or current.closed:
            return False
        _follow_truncation(current, future)
        copied = False
        if future.log_end_offset < current.log_end_offset:
            allowed = self.quota.available()
            if allowed <= 0:
                return False  # throttled: the next passes refill the quota
            data = current.read(future.log_end_offset, int(min(COPY_BYTES, allowed)))
            records = current.read_bytes(data)
            # the size limit may cut the last batch (min_one_batch gives at least one)
            records = records[: complete_length(records)]
            if records:
                _append(future, records)
                self.quota.record(len(records))
                copied = True
        future.update_high_watermark(min(current.high_watermark, future.log_end_offset))
        if future.log_end_offset >= current.log_end_offset:
            partition.log = self.futures.replace_current(tp)
            partition.wake()  # a waiting fetch reads the new log
            return True
        return copied


def _follow_truncation(current: PartitionLog, future: PartitionLog) -> None:
    """Make the future log a prefix of the current one again (Kafka's alter-log-dirs
    fetcher truncates through OffsetsForLeaderEpoch against the current log)."""
    if current.log_start_offset > future.log_end_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)
        return
    end = current.log_end_offset
    epoch = future.epochs.latest_epoch
    if epoch != UNDEFINED_EPOCH:
        found_epoch, found_end = current.epochs.end_offset_for(epoch, current.log_end_offset)
        if found_epoch == UNDEFINED_EPOCH:
            end = min(end, future.epochs.entries[-1].start_offset)
        else:
            end = min(end, found_end)
    if future.log_end_offset > end:
        future.truncate_to(end)
    if future.log_start_offset < current.log_start_offset <= future.high_watermark:
        future.delete_records(current.log_start_offset)


def _append(future: PartitionLog, records: bytes) -> None:
    # A read from a log start inside a batch returns the whole batch, from before the
    # empty future log's start: the future log then starts at that batch (as Kafka's
    # follower does on UnexpectedAppendOffsetException).
    (first_offset,) = struct.unpack_from(">q", records)
    if first_offset < future.log_end_offset == future.log_start_offset:
        future.truncate_fully_and_start_at(first_offset)
    future.append_as_follower(records)
