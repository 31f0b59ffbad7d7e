"""The group coordinator's access to `__consumer_offsets`: append records to a partition
this broker leads and wait until the ISR has them, and read a partition back when its
leadership arrives (Kafka's GroupMetadataManager storeGroup/storeOffsets and
loadGroupsAndOffsets)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from moldau.errors import (
    CoordinatorNotAvailableError,
    InvalidCommitOffsetSizeError,
    KafkaError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    RequestTimedOutError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol.records import NO_SEQUENCE, build_batch, iter_batches

from .records import (
    GroupKey,
    GroupRecord,
    OffsetAndMetadata,
    OffsetKey,
    RecordFormatError,
    read_group_value,
    read_key,
    read_offset_value,
)

if TYPE_CHECKING:
    from moldau.replication.replica_manager import Partition, ReplicaManager

log = logging.getLogger("kafka.coordinator.group.GroupMetadataManager")

OFFSETS_TOPIC = "__consumer_offsets"

# What a failed append of offsets or group metadata answers (Kafka's mapping)
_COORDINATOR_ERRORS: dict[type[KafkaError], type[KafkaError]] = {
    UnknownTopicOrPartitionError: CoordinatorNotAvailableError,
    NotEnoughReplicasError: CoordinatorNotAvailableError,
    NotEnoughReplicasAfterAppendError: CoordinatorNotAvailableError,
    RequestTimedOutError: CoordinatorNotAvailableError,
    NotLeaderOrFollowerError: NotCoordinatorError,
    RecordTooLargeError: InvalidCommitOffsetSizeError,
    RecordBatchTooLargeError: InvalidCommitOffsetSizeError,
}

# a record of the partition, decoded; a None value is a tombstone
Entry = tuple[OffsetKey, OffsetAndMetadata | None] | tuple[GroupKey, GroupRecord | None]


class OffsetsLog:
    def __init__(self, replica_manager: Callable[[], ReplicaManager], *, compression: int = 0,
                 commit_timeout_ms: int = 5000, load_buffer_size: int = 5 * 1024 * 1024
                 ) -> None:
        self._replica_manager = replica_manager
        self.compression = compression
        self.commit_timeout_ms = commit_timeout_ms
        self.load_buffer_size = load_buffer_size

    def _partition(self, index: int) -> Partition:
        return self._replica_manager().leader_partition(OFFSETS_TOPIC, index, True)

    async def append(self, index: int, records: list[tuple[bytes, bytes | None]], *,
                     base_sequence: int = NO_SEQUENCE) -> int:
        """Append one batch and wait for the high watermark to pass it (acks=all, as
        offsets.commit.required.acks asks); 0 or the error code for the coordinator's
        callers. Kafka gives an offset commit's batch base sequence 0 (storeOffsets) and
        every other batch of the coordinator none."""
        try:
            partition = self._partition(index)
            if len(partition.state.isr) < partition.log.config.min_insync_replicas:
                raise NotEnoughReplicasError(f"the ISR of {partition.name} is too small")
            batch = build_batch(records, compression=self.compression,
                                base_sequence=base_sequence)
            info = partition.log.append_as_leader(batch, partition.leader_epoch,
                                                  from_client=False)
            partition.maybe_increment_high_watermark()
            partition.wake()
            needed = info.last_offset + 1
            deadline = time.monotonic() + self.commit_timeout_ms / 1000
            rm = self._replica_manager()
            while partition.log.high_watermark < needed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RequestTimedOutError(
                        f"the ISR of {partition.name} did not reach offset {needed}")
                await rm.wait_for_change([partition], remaining)
            return 0
        except KafkaError as exc:
            mapped = _COORDINATOR_ERRORS.get(type(exc))
            if mapped is None and not exc.code > 0:
                mapped = UnknownServerError
            log.warning("Appending to %s-%d failed: %s", OFFSETS_TOPIC, index, exc)
            return (mapped or type(exc)).code

    async def load(self, index: int) -> list[Entry]:
        """Every group record and committed offset of the partition up to its log end,
        in log order (the caller keeps the last of each key). As in Kafka, not only up to
        the high watermark: a new leader may not know the old one's yet, and what it
        holds beyond is the latest state, committed once the followers catch up. Yields
        to the event loop between reads, so a large partition does not stall the broker."""
        partition = self._partition(index)
        partition_log = partition.log
        offset = partition_log.log_start_offset
        entries: list[Entry] = []
        skipped = 0
        while offset < partition_log.log_end_offset:
            data = partition_log.read(offset, self.load_buffer_size)
            buffer = partition_log.read_bytes(data)
            if not buffer:
                break
            moved = False
            for batch in iter_batches(buffer, allow_partial=True):
                moved = True
                offset = batch.next_offset
                if batch.is_control:
                    continue
                for record in batch.records():
                    try:
                        entry = self._decode(record.key, record.value)
                    except RecordFormatError as exc:
                        skipped += 1
                        log.warning("Skipping record at offset %d of %s-%d: %s",
                                    record.offset, OFFSETS_TOPIC, index, exc)
                        continue
                    if entry is not None:
                        entries.append(entry)
            if not moved:
                break
            await asyncio.sleep(0)
        return entries

    @staticmethod
    def _decode(key: bytes | None, value: bytes | None) -> Entry | None:
        parsed = read_key(key)
        if isinstance(parsed, OffsetKey):
            return parsed, read_offset_value(value)
        if isinstance(parsed, GroupKey):
            return parsed, read_group_value(value)
        return None
