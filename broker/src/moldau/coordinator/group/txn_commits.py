"""The group coordinator's side of transactions (Kafka's GroupCoordinator
handleTxnCommitOffsets and GroupMetadataManager's storeOffsets with a producer, and
handleTxnCompletion).

TxnOffsetCommit: the offsets are written to the group's `__consumer_offsets` partition
as a transactional batch of the producer (id, epoch, base sequence 0) and wait in the
group, per producer, for the transaction's marker. The partition's log checks the
producer epoch (a stale one answers INVALID_PRODUCER_EPOCH). The marker, once written to
that partition, commits or drops them (`on_marker`)."""

from __future__ import annotations

from moldau.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    OffsetMetadataTooLargeError,
    UnknownMemberIdError,
)

from .commit_order import commit_order
from .config import log, now_ms
from .group import Group, GroupState
from .offsets import COMMIT_BASE_SEQUENCE
from .offsets_log import TxnProducer
from .records import OffsetAndMetadata, TopicPartition, offset_commit_key, offset_commit_value
from .table import GroupTable


def txn_commit_error(group: Group, member_id: str, instance_id: str | None,
                     generation: int) -> int:
    """Kafka's validateOffsetCommit for a transactional commit (KIP-447): v3+ clients name
    their member and generation and are checked like a consumer's commit; an old client
    names neither and may commit to any group, also one with members."""
    if group.is_in(GroupState.DEAD):
        return CoordinatorNotAvailableError.code
    if generation < 0 and group.is_in(GroupState.EMPTY):
        return 0
    if generation >= 0 or member_id or instance_id is not None:
        if instance_id is not None:
            current = group.static_member_id(instance_id)
            if current is None:
                return UnknownMemberIdError.code
            if current != member_id:
                return FencedInstanceIdError.code
        if not group.has(member_id):
            return UnknownMemberIdError.code
        if generation != group.generation:
            return IllegalGenerationError.code
    return 0


class TxnOffsetManager:
    def __init__(self, table: GroupTable) -> None:
        self._table = table

    async def commit(
        self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
        group_instance_id: str | None, generation: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """The error of each partition (0 = written, pending until the marker). Raises
        for the whole request (not the coordinator, loading, invalid group id)."""
        self._table.check_group(group_id)
        groups = self._table.groups
        group = groups.get(group_id)
        if group is None:
            # Kafka adds the group whatever the generation: a transactional producer
            # may commit for a group it is not a member of
            group = groups[group_id] = Group(group_id, state_timestamp=now_ms())
        error = txn_commit_error(group, member_id, group_instance_id, generation)
        if error:
            return dict.fromkeys(offsets, error)
        return await self._store(group, TxnProducer(producer_id, producer_epoch), offsets)

    async def _store(self, group: Group, producer: TxnProducer,
                     offsets: dict[TopicPartition, OffsetAndMetadata]
                     ) -> dict[TopicPartition, int]:
        limit = self._table.config.offset_metadata_max_bytes
        valid = {tp: o for tp, o in offsets.items()
                 if o.metadata is None or len(o.metadata) <= limit}
        errors = dict.fromkeys(offsets, OffsetMetadataTooLargeError.code)
        if not valid:
            return errors
        pid = producer.producer_id
        replaced = group.txn_offsets.prepare(pid, valid)
        records: list[tuple[bytes, bytes | None]] = [
            (offset_commit_key(group.group_id, t, p), offset_commit_value(valid[(t, p)]))
            for t, p in commit_order(offsets) if (t, p) in valid]
        error, position = await self._table.write(group.group_id, records,
                                                  base_sequence=COMMIT_BASE_SEQUENCE,
                                                  producer=producer)
        if not group.is_in(GroupState.DEAD):
            if error:
                group.txn_offsets.failed(pid, valid, replaced)
            else:
                group.txn_offsets.appended(pid, valid, position)
        for tp in valid:
            errors[tp] = error
        return errors

    def on_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT or ABORT marker of the producer is in the offsets partition: its
        pending offsets in that partition's groups are committed or dropped (Kafka's
        handleTxnCompletion). A partition not served here was loaded with the marker,
        or will be."""
        table = self._table
        for group in list(table.groups.values()):
            if (producer_id in group.txn_offsets.producers
                    and table.partition_of(group.group_id) == partition
                    and not group.is_in(GroupState.DEAD)):
                group.complete_txn(producer_id, commit)
                log.debug("Transactional offsets of producer %d in group %s %s",
                          producer_id, group.group_id, "committed" if commit else "aborted")
