"""The offset manager: committed offsets over the shared group table (Kafka's
GroupCoordinator handleCommitOffsets, handleFetchOffsets, handleDeleteOffsets and
handleDeleteGroups, with GroupMetadataManager's storeOffsets and cleanupGroupMetadata).

A commit is applied to the group only once its partition's ISR has it; while it is out,
the partition counts as pending (OffsetFetch's require_stable, and expiry leaves it be).
Removal writes tombstones; an Empty group left without offsets is Dead and leaves the
table."""

from __future__ import annotations

from collections.abc import Iterable

from moldau.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    KafkaError,
    NonEmptyGroupError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

from .commit_order import commit_order
from .config import log, now_ms
from .group import Group, GroupState
from .membership import Membership
from .records import (
    OffsetAndMetadata,
    TopicPartition,
    group_metadata_key,
    offset_commit_key,
    offset_commit_value,
)
from .table import GroupTable

# Kafka's storeOffsets writes a commit's batch with base sequence 0 (producer id -1), so
# its records carry sequences 0..n-1; the coordinator's other batches have none (-1).
COMMIT_BASE_SEQUENCE = 0


class OffsetManager:
    def __init__(self, table: GroupTable, membership: Membership) -> None:
        self._table = table
        self._membership = membership

    # --- OffsetCommit and OffsetFetch -----------------------------------------------

    async def commit_offsets(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """The error of each partition (0 = committed)."""
        self._table.check_group(group_id, allow_empty_id=True)
        groups = self._table.groups
        group = groups.get(group_id)
        if group is None:
            if generation >= 0:
                # an old generation of a group this coordinator no longer has
                return dict.fromkeys(offsets, IllegalGenerationError.code)
            # a group that only stores offsets in Kafka (no group management)
            group = groups[group_id] = Group(group_id, state_timestamp=now_ms())
        error = self._commit_error(group, member_id, group_instance_id, generation)
        if error:
            return dict.fromkeys(offsets, error)
        if member_id in group.members:
            self._membership.arm_session(group, group.members[member_id])
        return await self._store_offsets(group, offsets)

    @staticmethod
    def _commit_error(group: Group, member_id: str, instance_id: str | None,
                      generation: int) -> int:
        if group.is_in(GroupState.DEAD):
            return CoordinatorNotAvailableError.code
        if group.is_static_member_fenced(member_id, instance_id):
            return FencedInstanceIdError.code
        if generation < 0 and group.is_in(GroupState.EMPTY):
            return 0
        if not group.has(member_id):
            return UnknownMemberIdError.code
        if generation != group.generation:
            return IllegalGenerationError.code
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # the member has the new generation but not its assignment yet
            return RebalanceInProgressError.code
        return 0

    async def _store_offsets(self, group: Group,
                             offsets: dict[TopicPartition, OffsetAndMetadata]
                             ) -> dict[TopicPartition, int]:
        limit = self._table.config.offset_metadata_max_bytes
        errors: dict[TopicPartition, int] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, offset in offsets.items():
            if offset.metadata is not None and len(offset.metadata) > limit:
                errors[tp] = OffsetMetadataTooLargeError.code
            else:
                valid[tp] = offset
        if valid:
            for tp in valid:
                group.pending_offsets[tp] += 1
            # Kafka's record order for the whole request, before the filter above
            records: list[tuple[bytes, bytes | None]] = [
                (offset_commit_key(group.group_id, t, p), offset_commit_value(valid[(t, p)]))
                for t, p in commit_order(offsets) if (t, p) in valid]
            try:
                error, position = await self._table.write(group.group_id, records,
                                                          base_sequence=COMMIT_BASE_SEQUENCE)
            finally:
                for tp in valid:
                    group.pending_offsets[tp] -= 1
                    if group.pending_offsets[tp] <= 0:
                        del group.pending_offsets[tp]
            if not error and not group.is_in(GroupState.DEAD):
                for tp, offset in valid.items():
                    group.put_offset(tp, offset, position)
                if self._table.groups.get(group.group_id) is None:
                    self._table.groups[group.group_id] = group
            for tp in valid:
                errors[tp] = error
        return {tp: errors[tp] for tp in offsets}

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of the partitions (None: none committed), or of every
        partition the group has when partitions is None."""
        self._table.check_group(group_id, allow_empty_id=True)
        group = self._table.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_in(
            GroupState.DEAD) else {}
        if partitions is None:
            return dict(offsets)
        return {tp: offsets.get(tp) for tp in partitions}

    def unstable_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                         ) -> set[TopicPartition]:
        """Those of the partitions whose commit is in flight or in an open transaction:
        OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT for them."""
        self._table.check_group(group_id, allow_empty_id=True)
        group = self._table.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return set()
        return {tp for tp in partitions if group.has_pending_commit(tp)}

    # --- DeleteGroups and OffsetDelete ----------------------------------------------

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        results: dict[str, int] = {}
        for group_id in group_ids:
            try:
                self._table.check_group(group_id, allow_empty_id=True)
                group = self._table.groups.get(group_id)
                if group is None or group.is_in(GroupState.DEAD):
                    raise GroupIdNotFoundError(f"group {group_id} does not exist")
                if not group.is_in(GroupState.EMPTY):
                    raise NonEmptyGroupError(f"group {group_id} has members")
            except KafkaError as exc:
                results[group_id] = exc.code
                continue
            records: list[tuple[bytes, bytes | None]] = [
                (offset_commit_key(group_id, t, p), None) for t, p in group.offsets]
            records.append((group_metadata_key(group_id), None))
            error = await self._table.append(group_id, records)
            if not error and group.is_in(GroupState.EMPTY):
                # its offsets of open transactions go with it (Kafka's removeAllOffsets
                # and the group's removal): their marker then finds no group
                group.transition_to(GroupState.DEAD, now_ms())
                self._membership.retire(group)
                self._table.groups.pop(group_id, None)
                log.info("Group %s was deleted with its %d committed offsets", group_id,
                         len(group.offsets))
            results[group_id] = error
        return results

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> dict[TopicPartition, int]:
        """OffsetDelete: raises for the whole group; per-partition errors otherwise."""
        self._table.check_group(group_id)
        group = self._table.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            raise GroupIdNotFoundError(f"group {group_id} does not exist")
        if not group.is_in(GroupState.EMPTY) and group.protocol_type != "consumer":
            raise NonEmptyGroupError(f"group {group_id} has members")
        errors: dict[TopicPartition, int] = {}
        deletable = []
        for tp in partitions:
            if not group.is_in(GroupState.EMPTY) and group.is_subscribed_to(tp[0]):
                errors[tp] = GroupSubscribedToTopicError.code
            else:
                deletable.append(tp)
        present = [tp for tp in deletable if tp in group.offsets]
        error = await self.remove_offsets(group, present, now_ms(), pending=deletable)
        for tp in deletable:
            errors[tp] = error
        return {tp: errors[tp] for tp in partitions}

    async def remove_offsets(self, group: Group, partitions: list[TopicPartition],
                             now: int, *, pending: Iterable[TopicPartition] = ()) -> int:
        """Kafka's cleanupGroupMetadata for one group: tombstones for these committed
        offsets, and for the group itself when it is Empty and keeps no other offset; such
        a group is Dead and gone. `pending`: partitions whose commits in open transactions
        go as well (Kafka's removeOffsets; expiry leaves them). The error of the append,
        or 0."""
        records: list[tuple[bytes, bytes | None]] = [
            (offset_commit_key(group.group_id, t, p), None) for t, p in partitions]
        group.txn_offsets.remove_partitions(pending)
        remove_group = (group.is_in(GroupState.EMPTY)
                        and not (set(group.offsets) - set(partitions))
                        and not group.pending_offsets and not group.txn_offsets)
        if remove_group:
            records.append((group_metadata_key(group.group_id), None))
        if not records:
            return 0
        error = await self._table.append(group.group_id, records)
        if error:
            return error
        for tp in partitions:
            group.pop_offset(tp)
        if remove_group and group.is_in(GroupState.EMPTY) and not group.has_offsets:
            group.transition_to(GroupState.DEAD, now)
            self._membership.retire(group)
            self._table.groups.pop(group.group_id, None)
            log.info("Group %s transitioned to Dead in generation %d", group.group_id,
                     group.generation)
        return 0
