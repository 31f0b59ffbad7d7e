"""The group coordinator of Kafka's classic protocol (Kafka's GroupCoordinator, ZooKeeper
mode): membership, rebalances and committed offsets of the groups whose
`__consumer_offsets` partition this broker leads.

This is the façade the broker and the handlers call. It composes the parts, which share
one group table (`table`) and run on the broker's event loop:

- `loading`: which offsets partitions are served here (elections, resignations);
- `membership`: JoinGroup (`joining`), SyncGroup, Heartbeat, LeaveGroup, with the
  rebalance and its timers (`rebalance`, `timers`);
- `offsets`: OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups;
- `txn_commits`: TxnOffsetCommit and the transaction markers of `__consumer_offsets`;
- `cleanup`: offset expiry and the offsets of deleted topics.

State changes that must survive a restart (the group after a rebalance, offsets,
deletions) are appended to the group's partition through `OffsetsLog`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from moldau.errors import CoordinatorLoadInProgressError

from .cleanup import OffsetCleanup
from .config import CoordinatorConfig
from .group import Group, GroupState
from .loading import PartitionLoader
from .membership import Membership
from .offsets import OffsetManager
from .offsets_log import OffsetsLog
from .records import OffsetAndMetadata, TopicPartition
from .results import JoinResult, SyncResult
from .table import GroupTable
from .timers import CoordinatorTimers
from .txn_commits import TxnOffsetManager

__all__ = ["CoordinatorConfig", "GroupCoordinator", "JoinResult", "SyncResult",
           "TopicPartition"]


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig, offsets_log: OffsetsLog,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.config = config
        self.offsets_log = offsets_log
        self.loop = loop or asyncio.get_event_loop()
        self._table = GroupTable(config, offsets_log, self.loop)
        self._membership = Membership(self._table, CoordinatorTimers(self.loop))
        self._offsets = OffsetManager(self._table, self._membership)
        self._txn_offsets = TxnOffsetManager(self._table)
        self._cleanup = OffsetCleanup(self._table, self._offsets)
        self._loader = PartitionLoader(self._table, self._membership, self._cleanup)

    # --- the shared table, as the broker and tests see it ---------------------------

    @property
    def groups(self) -> dict[str, Group]:
        return self._table.groups

    @property
    def owned(self) -> set[int]:
        """Offsets partitions loaded and served here."""
        return self._table.owned

    @property
    def loading(self) -> set[int]:
        return self._table.loading

    @property
    def expected(self) -> set[int]:
        """Offsets partitions that a LeaderAndIsr being applied makes this broker lead."""
        return self._table.expected

    @property
    def named_leader(self) -> Callable[[int], bool]:
        """Whether this broker's metadata names it the leader of an offsets partition
        (the broker sets it; a LeaderAndIsr may not have reached the coordinator yet)."""
        return self._table.named_leader

    @named_leader.setter
    def named_leader(self, named: Callable[[int], bool]) -> None:
        self._table.named_leader = named

    @property
    def active(self) -> bool:
        return self._table.active

    @active.setter
    def active(self, active: bool) -> None:
        self._table.active = active

    def partition_of(self, group_id: str) -> int:
        return self._table.partition_of(group_id)

    def check_group(self, group_id: str | None, *, allow_empty_id: bool = False) -> None:
        """Kafka's validateGroupStatus: is this the group's coordinator, and ready?"""
        self._table.check_group(group_id, allow_empty_id=allow_empty_id)

    # --- ownership (from LeaderAndIsr and UpdateMetadata of __consumer_offsets) -----

    def expect_elections(self, partitions: Iterable[int]) -> None:
        """A LeaderAndIsr that makes this broker lead these offsets partitions is being
        applied: their groups get COORDINATOR_LOAD_IN_PROGRESS until it is."""
        self._loader.expect_elections(partitions)

    def end_expected(self, partitions: Iterable[int]) -> None:
        self._loader.end_expected(partitions)

    def on_elected(self, partition: int) -> None:
        """This broker leads an offsets partition: load its groups and offsets, then serve
        them (COORDINATOR_LOAD_IN_PROGRESS until then)."""
        self._loader.on_elected(partition)

    def on_resigned(self, partition: int) -> None:
        """Leadership of an offsets partition moved away: forget its groups (members get
        NOT_COORDINATOR and find the new coordinator)."""
        self._loader.on_resigned(partition)

    def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> None:
        """These partitions' topics were deleted (Kafka's onPartitionsDeleted, from
        UpdateMetadata): every group's committed offsets of them go, tombstoned, so a
        re-created topic starts without stale positions; an Empty group left with no
        offset is Dead (cleanupGroupMetadata)."""
        self._cleanup.on_partitions_deleted(partitions)

    def shutdown(self) -> None:
        self._table.active = False
        for partition in list(self._table.owned):
            self._loader.on_resigned(partition)
        self._cleanup.stop()
        self._table.tasks.cancel_all()

    # --- membership -----------------------------------------------------------------

    async def join_group(
        self, group_id: str, member_id: str, group_instance_id: str | None,
        require_known_member_id: bool, supports_skip_assignment: bool, client_id: str,
        client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]], reason: str | None = None,
    ) -> JoinResult:
        return await self._membership.join_group(
            group_id, member_id, group_instance_id, require_known_member_id,
            supports_skip_assignment, client_id, client_host, rebalance_timeout_ms,
            session_timeout_ms, protocol_type, protocols, reason)

    async def sync_group(self, group_id: str, generation: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None,
                         protocol: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        return await self._membership.sync_group(group_id, generation, member_id,
                                                 group_instance_id, protocol_type, protocol,
                                                 assignments)

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation: int) -> None:
        """Raises the error a heartbeat answers with; returns for NONE."""
        self._membership.heartbeat(group_id, member_id, group_instance_id, generation)

    def leave_group(self, group_id: str,
                    leaving: list[tuple[str, str | None, str | None]]) -> list[int]:
        """(member id, group instance id, reason) for each leaving member; the error of
        each. Raises for the whole request (not coordinator, dead group)."""
        return self._membership.leave_group(group_id, leaving)

    # --- offsets --------------------------------------------------------------------

    async def commit_offsets(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """The error of each partition (0 = committed)."""
        return await self._offsets.commit_offsets(group_id, member_id, group_instance_id,
                                                  generation, offsets)

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of the partitions (None: none committed), or of every
        partition the group has when partitions is None."""
        return self._offsets.fetch_offsets(group_id, partitions)

    def unstable_offsets(self, group_id: str, partitions: Iterable[TopicPartition]
                         ) -> set[TopicPartition]:
        """Those of the partitions with a commit in flight or in an open transaction
        (OffsetFetch's RequireStable answers UNSTABLE_OFFSET_COMMIT for them)."""
        return self._offsets.unstable_offsets(group_id, partitions)

    # --- transactions ---------------------------------------------------------------

    async def commit_transactional_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
        group_instance_id: str | None, generation: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit: the error of each partition (0 = written, pending until the
        transaction's marker). Raises for the whole request."""
        return await self._txn_offsets.commit(group_id, producer_id, producer_epoch,
                                              member_id, group_instance_id, generation,
                                              offsets)

    def in_transaction(self, group_id: str, producer_id: int) -> bool:
        """Whether the producer has a transaction open in the group's offsets partition
        (KIP-890: a TxnOffsetCommit is verified with the transaction coordinator only
        when it has not)."""
        return self.offsets_log.in_transaction(self.partition_of(group_id), producer_id)

    def on_transaction_marker(self, partition_index: int, producer_id: int,
                              commit: bool) -> None:
        """A COMMIT or ABORT marker of producer_id was written to __consumer_offsets
        partition_index (WriteTxnMarkers): the producer's pending offsets of that
        partition's groups become committed, or are dropped."""
        self._txn_offsets.on_marker(partition_index, producer_id, commit)

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> dict[TopicPartition, int]:
        """OffsetDelete: raises for the whole group; per-partition errors otherwise."""
        return await self._offsets.delete_offsets(group_id, partitions)

    # --- describe, list, delete -----------------------------------------------------

    def describe_group(self, group_id: str) -> Group | None:
        self._table.check_group(group_id, allow_empty_id=True)
        group = self._table.groups.get(group_id)
        return None if group is None or group.is_in(GroupState.DEAD) else group

    def list_groups(self) -> list[Group]:
        self._table.check_active()
        if self._table.loading:
            raise CoordinatorLoadInProgressError("the coordinator is loading groups")
        return [g for g in self._table.groups.values() if not g.is_in(GroupState.DEAD)]

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        return await self._offsets.delete_groups(group_ids)
