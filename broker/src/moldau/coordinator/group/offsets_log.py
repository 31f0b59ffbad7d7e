"""The group coordinator's access to `__consumer_offsets`: append records to a partition
this broker leads and wait until the ISR has them, and read a partition back when its
leadership arrives (Kafka's GroupMetadataManager storeGroup/storeOffsets and
loadGroupsAndOffsets).

TxnOffsetCommit's records go in a transactional batch carrying the producer's id and
epoch; the load reports each record with its batch's position and producer, and each
transaction marker, so the loader can keep a transaction's offsets apart until its
COMMIT (or drop them at its ABORT)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.errors import (
    InvalidCommitOffsetSizeError,
    KafkaError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import (
    CONTROL_COMMIT,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RecordBatch,
    build_batch,
)

from ..internal_log import (
    COORDINATOR_APPEND_ERRORS,
    append_replicated,
    coordinator_error,
    read_batches,
)
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
    **COORDINATOR_APPEND_ERRORS,
    RecordTooLargeError: InvalidCommitOffsetSizeError,
    RecordBatchTooLargeError: InvalidCommitOffsetSizeError,
}



@dataclass(frozen=True, slots=True)
class LoadedOffset:
    """An offset commit record read back; a None value is a tombstone."""

    key: OffsetKey
    value: OffsetAndMetadata | None
    position: int = -1  # the base offset of its batch
    producer_id: int = NO_PRODUCER_ID  # a transactional batch's producer, else -1


@dataclass(frozen=True, slots=True)
class LoadedGroup:
    """A group metadata record read back; a None value is a tombstone."""

    key: GroupKey
    value: GroupRecord | None


@dataclass(frozen=True, slots=True)
class LoadedMarker:
    """A transaction marker: the producer's pending offsets in this partition end."""

    producer_id: int
    commit: bool


# what a load reports, in log order
Entry = LoadedOffset | LoadedGroup | LoadedMarker


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The transactional producer a TxnOffsetCommit writes for."""

    producer_id: int
    producer_epoch: int


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
        error, _ = await self.write(index, records, base_sequence=base_sequence)
        return error

    async def write(self, index: int, records: list[tuple[bytes, bytes | None]], *,
                    base_sequence: int = NO_SEQUENCE, producer: TxnProducer | None = None
                    ) -> tuple[int, int]:
        """append(), also answering the base offset of the batch (-1 when it failed); with
        a producer, the batch is transactional and carries its id and epoch (the log
        checks the epoch, not the sequence, of a coordinator's batch)."""
        try:
            batch = build_batch(
                records, compression=self.compression, base_sequence=base_sequence,
                producer_id=producer.producer_id if producer else NO_PRODUCER_ID,
                producer_epoch=producer.producer_epoch if producer else NO_PRODUCER_EPOCH,
                is_transactional=producer is not None)
            first_offset = await append_replicated(self._replica_manager, OFFSETS_TOPIC,
                                                   index, batch, self.commit_timeout_ms)
            return 0, first_offset
        except KafkaError as exc:
            log.warning("Appending to %s-%d failed: %s", OFFSETS_TOPIC, index, exc)
            return coordinator_error(exc, _COORDINATOR_ERRORS), -1

    def in_transaction(self, index: int, producer_id: int) -> bool:
        """Whether the producer has a transaction open in the partition (a leader's
        TxnOffsetCommit then needs no KIP-890 verification)."""
        try:
            entry = self._partition(index).log.producer_state.producers.get(producer_id)
        except KafkaError:
            return False
        return entry is not None and entry.current_txn_first_offset >= 0

    async def load(self, index: int) -> list[Entry]:
        """Every group record, offset commit and transaction marker of the partition up
        to its log end, in log order (the caller keeps the last of each key). As in
        Kafka, not only up to the high watermark: a new leader may not know the old
        one's yet, and what it holds beyond is the latest state, committed once the
        followers catch up. Yields to the event loop between reads, so a large partition
        does not stall the broker."""
        entries: list[Entry] = []
        async for batches in read_batches(self._partition(index).log, self.load_buffer_size):
            for batch in batches:
                if batch.is_control:
                    marker = self._marker(batch)
                    if marker is not None:
                        entries.append(marker)
                    continue
                producer_id = batch.producer_id if batch.is_transactional else NO_PRODUCER_ID
                for record in batch.records():
                    try:
                        entry = self._decode(record.key, record.value, batch.base_offset,
                                             producer_id)
                    except RecordFormatError as exc:
                        log.warning("Skipping record at offset %d of %s-%d: %s",
                                    record.offset, OFFSETS_TOPIC, index, exc)
                        continue
                    if entry is not None:
                        entries.append(entry)
        return entries

    @staticmethod
    def _decode(key: bytes | None, value: bytes | None, position: int = -1,
                producer_id: int = NO_PRODUCER_ID) -> Entry | None:
        parsed = read_key(key)
        if isinstance(parsed, OffsetKey):
            return LoadedOffset(parsed, read_offset_value(value), position, producer_id)
        if isinstance(parsed, GroupKey):
            return LoadedGroup(parsed, read_group_value(value))
        return None

    @staticmethod
    def _marker(batch: RecordBatch) -> LoadedMarker | None:
        """Kafka's loader reads a control batch's first record: COMMIT applies the
        producer's pending offsets, any other type drops them; an empty one (the cleaner
        leaves those) changes nothing."""
        try:
            record = next(iter(batch.control_records()), None)
        except ProtocolError as exc:
            log.warning("Skipping an unreadable control batch at offset %d: %s",
                        batch.base_offset, exc)
            return None
        if record is None:
            return None
        return LoadedMarker(batch.producer_id, record.control_type == CONTROL_COMMIT)
