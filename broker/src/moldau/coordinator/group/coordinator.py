"""The group coordinator of Kafka's classic protocol (Kafka's GroupCoordinator, ZooKeeper
mode): membership, rebalances and committed offsets of the groups whose
`__consumer_offsets` partition this broker leads.

Everything runs on the broker's event loop. A JoinGroup or SyncGroup that must wait for
the rest of the group parks on a future of its member; timers (loop.call_later) stand in
for Kafka's purgatories: the join timer (initial delay, then the rebalance timeout), a
session timer per member, a timer per pending member id and the pending-sync timer.
State changes that must survive a restart (the group after a rebalance, offsets,
deletions) are appended to the group's partition through `OffsetsLog`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from moldau.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    GroupSubscribedToTopicError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidGroupIdError,
    InvalidSessionTimeoutError,
    KafkaError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

from .group import Group, GroupState, Member
from .offsets_log import OffsetsLog
from .records import (
    GroupKey,
    OffsetAndMetadata,
    OffsetKey,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_value,
    partition_for,
)

log = logging.getLogger("kafka.coordinator.group.GroupCoordinator")

NEW_MEMBER_JOIN_TIMEOUT_S = 300.0  # Kafka's NewMemberJoinTimeoutMs
TopicPartition = tuple[str, int]


@dataclass
class CoordinatorConfig:
    offsets_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_group_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600000


@dataclass
class JoinResult:
    error: int = 0
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class SyncResult:
    error: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    assignment: bytes = b""


@dataclass
class GroupTimers:
    join: asyncio.TimerHandle | None = None
    pending_sync: asyncio.TimerHandle | None = None
    initial_delay_left_ms: int | None = None  # set while the initial delay runs


def _now_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig, offsets_log: OffsetsLog,
                 loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.config = config
        self.offsets_log = offsets_log
        self.loop = loop or asyncio.get_event_loop()
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()  # offsets partitions loaded and served here
        self.loading: set[int] = set()
        # offsets partitions that a LeaderAndIsr being applied makes this broker lead
        self.expected: set[int] = set()
        # whether this broker's metadata names it the leader of an offsets partition
        # (the broker sets it; a LeaderAndIsr may not have reached the coordinator yet)
        self.named_leader: Callable[[int], bool] = lambda _partition: False
        self._timers: dict[str, GroupTimers] = {}
        self._member_timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Future[Any]] = set()
        self._expiry: asyncio.TimerHandle | None = None
        self.active = True

    # --- ownership (from LeaderAndIsr of __consumer_offsets) ---------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_partitions)

    def check_group(self, group_id: str | None, *, allow_empty_id: bool = False) -> None:
        """Kafka's validateGroupStatus: is this the group's coordinator, and ready?"""
        if group_id is None or (group_id == "" and not allow_empty_id):
            raise InvalidGroupIdError(f"the group id {group_id!r} is not valid")
        if not self.active:
            raise CoordinatorNotAvailableError("the group coordinator is not active")
        partition = self.partition_of(group_id)
        if partition in self.owned:
            return
        # A client that another broker's fresher metadata sends here, before this broker
        # has taken the partition on, must retry rather than look elsewhere: librdkafka
        # gives up a manual assignment's offset fetch on NOT_COORDINATOR for good.
        if (partition in self.loading or partition in self.expected
                or self.named_leader(partition)):
            raise CoordinatorLoadInProgressError(
                f"the coordinator is loading partition {partition} of the offsets topic")
        raise NotCoordinatorError(f"this broker is not the coordinator of {group_id}")

    def expect_elections(self, partitions: Iterable[int]) -> None:
        """A LeaderAndIsr that makes this broker lead these offsets partitions is being
        applied: their groups get COORDINATOR_LOAD_IN_PROGRESS until it is."""
        self.expected.update(p for p in partitions if p not in self.owned)

    def end_expected(self, partitions: Iterable[int]) -> None:
        self.expected.difference_update(partitions)

    def on_elected(self, partition: int) -> None:
        """This broker leads an offsets partition: load its groups and offsets, then serve
        them (COORDINATOR_LOAD_IN_PROGRESS until then)."""
        self.expected.discard(partition)
        if partition in self.owned or partition in self.loading:
            return
        self.loading.add(partition)
        self._spawn(self._load(partition))

    def on_resigned(self, partition: int) -> None:
        """Leadership of an offsets partition moved away: forget its groups (members get
        NOT_COORDINATOR and find the new coordinator)."""
        self.expected.discard(partition)
        self.loading.discard(partition)
        if partition not in self.owned:
            return
        self.owned.discard(partition)
        for group_id in [g for g in self.groups if self.partition_of(g) == partition]:
            group = self.groups.pop(group_id)
            self._fail_waiters(group, NotCoordinatorError.code)
            group.state = GroupState.DEAD
            self._cancel_group_timers(group)
        log.info("Unloaded the groups of __consumer_offsets-%d", partition)

    def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> None:
        """These partitions' topics were deleted (Kafka's onPartitionsDeleted, from
        UpdateMetadata): every group's committed offsets of them go, tombstoned, so a
        re-created topic starts without stale positions; an Empty group left with no
        offset is Dead (cleanupGroupMetadata)."""
        gone = set(partitions)
        if gone and self.active:
            self._spawn(self._remove_deleted(gone))

    async def _remove_deleted(self, gone: set[TopicPartition]) -> None:
        now = _now_ms()
        for group in list(self.groups.values()):
            stale = [tp for tp in group.offsets if tp in gone]
            if not stale or group.is_in(GroupState.DEAD):
                continue
            error = await self._remove_offsets(group, stale, now)
            if error:
                log.warning("Could not remove the offsets of deleted partitions from group "
                            "%s: error %d", group.group_id, error)
            else:
                log.info("Removed %d offsets of deleted partitions from group %s",
                         len(stale), group.group_id)

    async def _load(self, partition: int) -> None:
        started = time.monotonic()
        try:
            entries = await self.offsets_log.load(partition)
        except Exception as exc:
            log.error("Loading __consumer_offsets-%d failed: %s", partition, exc)
            self.loading.discard(partition)
            return
        if partition not in self.loading:
            return  # resigned while loading
        offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        records: dict[str, Any] = {}
        for key, value in entries:
            if isinstance(key, OffsetKey):
                group_offsets = offsets.setdefault(key.group, {})
                if value is None:
                    group_offsets.pop((key.topic, key.partition), None)
                else:
                    group_offsets[(key.topic, key.partition)] = value
            elif isinstance(key, GroupKey):
                records[key.group] = value
        now = self.loop.time()
        for group_id in set(offsets) | set(records):
            record = records.get(group_id)
            group_offsets = offsets.get(group_id, {})
            if record is None and group_id in records and not group_offsets:
                continue  # deleted
            group = (Group.from_record(group_id, record, now) if record is not None
                     else Group(group_id))
            group.offsets = dict(group_offsets)
            if not group.members and not group.offsets and record is None:
                continue
            self.groups[group_id] = group
            for member in group.members.values():
                self._arm_session(group, member)
        self.loading.discard(partition)
        self.owned.add(partition)
        self._ensure_expiry_timer()
        log.info("Finished loading offsets and group metadata from __consumer_offsets-%d in "
                 "%d milliseconds", partition, (time.monotonic() - started) * 1000)

    def shutdown(self) -> None:
        self.active = False
        for partition in list(self.owned):
            self.on_resigned(partition)
        if self._expiry is not None:
            self._expiry.cancel()
        for task in list(self._tasks):
            task.cancel()

    # --- JoinGroup ---------------------------------------------------------------------

    async def join_group(
        self, group_id: str, member_id: str, group_instance_id: str | None,
        require_known_member_id: bool, supports_skip_assignment: bool, client_id: str,
        client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]], reason: str | None = None,
    ) -> JoinResult:
        self.check_group(group_id)
        c = self.config
        if not c.min_session_timeout_ms <= session_timeout_ms <= c.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session timeout {session_timeout_ms} ms is outside "
                f"[{c.min_session_timeout_ms}, {c.max_session_timeout_ms}]")
        unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not unknown:
                raise UnknownMemberIdError(f"group {group_id} does not exist")
            group = self.groups[group_id] = Group(group_id, state_timestamp=_now_ms())
        if not self._accepts_joining_member(group, member_id):
            if not unknown:
                # a member the group cannot take any more is removed (Kafka does the same)
                self._remove_member_and_update(group, member_id, "the group is full")
            raise GroupMaxSizeReachedError(
                f"group {group_id} already has the maximum of {c.max_group_size} members")
        future: asyncio.Future[JoinResult] = self.loop.create_future()
        if unknown:
            self._new_member_join(group, group_instance_id, require_known_member_id,
                                  supports_skip_assignment, client_id, client_host,
                                  rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                  protocols, reason, future)
        else:
            self._current_member_join(group, member_id, group_instance_id, client_id,
                                      client_host, rebalance_timeout_ms, session_timeout_ms,
                                      protocol_type, protocols, reason, future)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        return await future

    def _accepts_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self.config.max_group_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return ((member is not None and member.awaiting_join is not None)
                    or group.awaiting_join_count + len(group.pending_members) < limit)
        return group.has(member_id) or len(group.members) < limit

    @staticmethod
    def _may_join(group: Group, protocol_type: str, protocols: list[tuple[str, bytes]],
                  future: asyncio.Future[JoinResult]) -> bool:
        """A dead group (being unloaded or deleted) or one without a protocol in common
        answers at once."""
        if group.is_in(GroupState.DEAD):
            future.set_result(JoinResult(CoordinatorNotAvailableError.code))
        elif not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            future.set_result(JoinResult(InconsistentGroupProtocolError.code))
        return not future.done()

    def _new_member_join(self, group: Group, instance_id: str | None, require_known: bool,
                         skip_ok: bool, client_id: str, client_host: str,
                         rebalance_timeout_ms: int, session_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]],
                         reason: str | None, future: asyncio.Future[JoinResult]) -> None:
        if not self._may_join(group, protocol_type, protocols, future):
            return
        # Kafka names a static member after its instance id, a dynamic one after its client
        new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                log.info("Static member with groupInstanceId=%s and unknown member id joins "
                         "group %s in %s state. Replacing previously mapped member %s with "
                         "this groupInstanceId.", instance_id, group.group_id,
                         group.state.value, old_id)
                self._update_static_member(group, instance_id, old_id, new_id, protocols,
                                           rebalance_timeout_ms, session_timeout_ms,
                                           skip_ok, reason, future)
                return
        elif require_known:
            # KIP-394: hand out the id first; the member joins again with it
            group.pending_members.add(new_id)
            self._arm_pending_member(group, new_id, session_timeout_ms)
            future.set_result(JoinResult(MemberIdRequiredError.code, member_id=new_id))
            return
        self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                       rebalance_timeout_ms, session_timeout_ms,
                                       protocol_type, protocols, reason, future)

    def _current_member_join(self, group: Group, member_id: str, instance_id: str | None,
                             client_id: str, client_host: str, rebalance_timeout_ms: int,
                             session_timeout_ms: int, protocol_type: str,
                             protocols: list[tuple[str, bytes]], reason: str | None,
                             future: asyncio.Future[JoinResult]) -> None:
        if not self._may_join(group, protocol_type, protocols, future):
            return
        if member_id in group.pending_members:
            self._add_member_and_rebalance(group, member_id, instance_id, client_id,
                                           client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols,
                                           reason, future)
            return
        if group.is_static_member_fenced(member_id, instance_id):
            future.set_result(JoinResult(FencedInstanceIdError.code, member_id=member_id))
            return
        if not group.has(member_id) or (
                instance_id is not None and group.static_member_id(instance_id) is None):
            future.set_result(JoinResult(UnknownMemberIdError.code, member_id=member_id))
            return
        member = group.members[member_id]
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms,
                                              session_timeout_ms, reason, future)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # a retry after a lost response: answer with the current generation
                future.set_result(self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, protocols,
                                                  rebalance_timeout_ms, session_timeout_ms,
                                                  reason, future)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # the leader rejoining (new subscription or metadata) or a changed member
                self._update_member_and_rebalance(group, member, protocols,
                                                  rebalance_timeout_ms, session_timeout_ms,
                                                  reason, future)
            else:
                # a follower rejoining with unchanged metadata gets the current generation
                future.set_result(self._join_result(group, member, with_members=False))
        else:
            future.set_result(JoinResult(UnknownMemberIdError.code, member_id=member_id))

    def _join_result(self, group: Group, member: Member, with_members: bool = True,
                     skip_assignment: bool = False) -> JoinResult:
        members: list[tuple[str, str | None, bytes]] = []
        if with_members and group.is_leader(member.member_id) and group.protocol:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol))
                       for m in group.members.values()]
        return JoinResult(0, member.member_id, group.generation, group.protocol_type,
                          group.protocol, group.leader_id or "", skip_assignment, members)

    def _add_member_and_rebalance(self, group: Group, member_id: str,
                                  instance_id: str | None, client_id: str, client_host: str,
                                  rebalance_timeout_ms: int, session_timeout_ms: int,
                                  protocol_type: str, protocols: list[tuple[str, bytes]],
                                  reason: str | None, future: asyncio.Future[JoinResult]) -> None:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                        session_timeout_ms, protocol_type, list(protocols),
                        awaiting_join=future, last_heartbeat=self.loop.time(), is_new=True)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        self._cancel_member_timer(group.group_id, member_id)  # its pending-member timer
        self._arm_session(group, member, NEW_MEMBER_JOIN_TIMEOUT_S)
        self._maybe_prepare_rebalance(
            group, f"Adding new member {member_id} with group instance id {instance_id}"
            + (f"; client reason: {reason}" if reason else ""))

    def _update_member_and_rebalance(self, group: Group, member: Member,
                                     protocols: list[tuple[str, bytes]],
                                     rebalance_timeout_ms: int, session_timeout_ms: int,
                                     reason: str | None,
                                     future: asyncio.Future[JoinResult]) -> None:
        self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms,
                            future)
        self._maybe_prepare_rebalance(
            group, f"Updating metadata for member {member.member_id} during "
            f"{group.state.value}" + (f"; client reason: {reason}" if reason else ""))

    @staticmethod
    def _update_member(member: Member, protocols: list[tuple[str, bytes]],
                       rebalance_timeout_ms: int, session_timeout_ms: int,
                       future: asyncio.Future[JoinResult] | None) -> None:
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous = member.awaiting_join
        if previous is not None and not previous.done() and previous is not future:
            # a duplicate join replaces the parked one (the client gave up on it)
            previous.set_result(JoinResult(UnknownMemberIdError.code, member.member_id))
        member.awaiting_join = future

    def _update_static_member(self, group: Group, instance_id: str, old_id: str, new_id: str,
                              protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                              session_timeout_ms: int, skip_ok: bool, reason: str | None,
                              future: asyncio.Future[JoinResult]) -> None:
        current_leader = group.leader_id
        old = group.members[old_id]
        # the old incarnation's parked requests learn that they are fenced
        self._complete_join(old, JoinResult(FencedInstanceIdError.code, old_id))
        self._complete_sync(old, SyncResult(FencedInstanceIdError.code))
        old_state = (list(old.protocols), old.rebalance_timeout_ms, old.session_timeout_ms)
        self._cancel_member_timer(group.group_id, old_id)
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._arm_session(group, member)
        if group.is_in(GroupState.STABLE):
            self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                None)
            if group.select_protocol() != group.protocol:
                member.awaiting_join = future
                self._maybe_prepare_rebalance(
                    group, f"Group's selectedProtocol will change because static member "
                    f"{new_id} with instance id {instance_id} joined with change of protocol")
                return
            log.info("Static member %s of group %s rejoins during Stable: no rebalance",
                     instance_id, group.group_id)
            self._spawn(self._persist_static_replacement(
                group, member, instance_id, old_id, old_state, current_leader, skip_ok,
                future))
            return
        self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms,
                            future)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(
                group, f"Updating metadata for static member {new_id} with instance id "
                f"{instance_id}" + (f"; client reason: {reason}" if reason else ""))

    async def _persist_static_replacement(
        self, group: Group, member: Member, instance_id: str, old_id: str,
        old_state: tuple[list[tuple[str, bytes]], int, int], current_leader: str | None,
        skip_ok: bool, future: asyncio.Future[JoinResult],
    ) -> None:
        error = await self._store_group(group, {m.member_id: m.assignment
                                                for m in group.members.values()})
        if future.done():
            return
        if error:
            # the new member id could not be persisted: put the old one back
            member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old_state
            group.replace_static_member(instance_id, member.member_id, old_id)
            self._arm_session(group, member)
            future.set_result(JoinResult(error, "", group.generation, group.protocol_type,
                                         group.protocol, current_leader or ""))
        elif skip_ok:
            # JoinGroup v9+: the leader learns it leads, but skips the assignor
            is_leader = group.is_leader(member.member_id)
            future.set_result(self._join_result(group, member, with_members=is_leader,
                                                skip_assignment=is_leader))
        else:
            # older clients get the old leader id, so a rejoining leader does not assign
            # (a Stable group would not broadcast its new assignment)
            future.set_result(JoinResult(0, member.member_id, group.generation,
                                         group.protocol_type, group.protocol,
                                         current_leader or ""))

    # --- rebalancing -------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # the members waiting for their assignment must join again
            self._reset_and_propagate_assignment_error(group, RebalanceInProgressError.code)
        timers = self._group_timers(group)
        if timers.pending_sync is not None:
            timers.pending_sync.cancel()
            timers.pending_sync = None
        group.pending_sync.clear()
        was_empty = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, _now_ms())
        log.info("Preparing to rebalance group %s in state PreparingRebalance with old "
                 "generation %d (__consumer_offsets-%d) (reason: %s)", group.group_id,
                 group.generation, self.partition_of(group.group_id), reason)
        if timers.join is not None:
            timers.join.cancel()
        if was_empty:
            delay = self.config.initial_rebalance_delay_ms
            timers.initial_delay_left_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            timers.join = self.loop.call_later(delay / 1000, self._on_initial_delay, group)
        else:
            timers.initial_delay_left_ms = None
            timers.join = self.loop.call_later(group.max_rebalance_timeout_ms() / 1000,
                                               self._on_join_timeout, group)
            # Kafka's tryCompleteElseWatch: a group whose last member just left has
            # nobody to wait for and is Empty (and stored so) at once
            self._try_complete_join(group)

    def _on_initial_delay(self, group: Group) -> None:
        timers = self._group_timers(group)
        left = timers.initial_delay_left_ms or 0
        if group.new_member_added and left > 0:
            # members keep arriving: wait another delay (bounded by the rebalance timeout)
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, left)
            timers.initial_delay_left_ms = left - delay
            timers.join = self.loop.call_later(delay / 1000, self._on_initial_delay, group)
            return
        timers.initial_delay_left_ms = None
        timers.join = None
        self._complete_rebalance_join(group)

    def _on_join_timeout(self, group: Group) -> None:
        self._group_timers(group).join = None
        self._complete_rebalance_join(group)

    def _try_complete_join(self, group: Group) -> None:
        timers = self._group_timers(group)
        if timers.initial_delay_left_ms is not None:
            return  # the initial delay completes only when it runs out
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.all_members_joined():
            if timers.join is not None:
                timers.join.cancel()
                timers.join = None
            self._complete_rebalance_join(group)

    def _complete_rebalance_join(self, group: Group) -> None:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined():
            if not member.is_static:
                # dynamic members that did not rejoin in time are out
                self._cancel_member_timer(group.group_id, member.member_id)
                group.remove(member.member_id)
        if not group.elect_joined_leader() and group.members:
            log.error("Group %s could not complete rebalance because no members rejoined",
                      group.group_id)
            timers = self._group_timers(group)
            timers.join = self.loop.call_later(group.max_rebalance_timeout_ms() / 1000,
                                               self._on_join_timeout, group)
            return
        group.init_next_generation(_now_ms())
        if group.is_in(GroupState.EMPTY):
            log.info("Group %s with generation %d is now empty (__consumer_offsets-%d)",
                     group.group_id, group.generation, self.partition_of(group.group_id))
            self._spawn(self._store_group_logged(group, {}))
            return
        log.info("Stabilized group %s generation %d (__consumer_offsets-%d) with %d members",
                 group.group_id, group.generation, self.partition_of(group.group_id),
                 len(group.members))
        for member in list(group.members.values()):
            self._complete_join(member, self._join_result(group, member))
            self._arm_session(group, member)
            member.is_new = False
        group.pending_sync = set(group.members)
        timers = self._group_timers(group)
        generation = group.generation
        timers.pending_sync = self.loop.call_later(
            group.max_rebalance_timeout_ms() / 1000, self._on_pending_sync_timeout, group,
            generation)

    def _on_pending_sync_timeout(self, group: Group, generation: int) -> None:
        self._group_timers(group).pending_sync = None
        if generation != group.generation or not group.pending_sync or not group.is_in(
                GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            self._cancel_member_timer(group.group_id, member_id)
            group.remove(member_id)
        self._prepare_rebalance(group, f"Removing {missing} from group {group.group_id} "
                                "since they failed to send a SyncGroup in time")

    @staticmethod
    def _complete_join(member: Member, result: JoinResult) -> None:
        future, member.awaiting_join = member.awaiting_join, None
        if future is not None and not future.done():
            future.set_result(result)

    @staticmethod
    def _complete_sync(member: Member, result: SyncResult) -> None:
        future, member.awaiting_sync = member.awaiting_sync, None
        if future is not None and not future.done():
            future.set_result(result)

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
            self._complete_sync(member, SyncResult(error))

    def _fail_waiters(self, group: Group, error: int) -> None:
        for member in group.members.values():
            self._complete_join(member, JoinResult(error, member.member_id))
            self._complete_sync(member, SyncResult(error))

    # --- SyncGroup ---------------------------------------------------------------------

    async def sync_group(self, group_id: str, generation: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None,
                         protocol: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {group_id} does not exist")
        if group.is_in(GroupState.DEAD):
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        if group.is_static_member_fenced(member_id, group_instance_id):
            raise FencedInstanceIdError(f"instance {group_instance_id} has a newer member id")
        if not group.has(member_id):
            raise UnknownMemberIdError(f"{member_id} is not a member of group {group_id}")
        if generation != group.generation:
            raise IllegalGenerationError(
                f"generation {generation} is not the group's generation {group.generation}")
        if ((protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol is not None and protocol != group.protocol)):
            raise InconsistentGroupProtocolError(
                f"{protocol_type}/{protocol} is not the group's "
                f"{group.protocol_type}/{group.protocol}")
        member = group.members[member_id]
        if group.is_in(GroupState.EMPTY):
            raise UnknownMemberIdError(f"group {group_id} is empty")
        if group.is_in(GroupState.PREPARING_REBALANCE):
            raise RebalanceInProgressError(f"group {group_id} is rebalancing")
        group.pending_sync.discard(member_id)
        self._arm_session(group, member)
        if group.is_in(GroupState.STABLE):
            return SyncResult(0, group.protocol_type, group.protocol, member.assignment)
        # CompletingRebalance: wait for the leader's assignment
        future: asyncio.Future[SyncResult] = self.loop.create_future()
        self._complete_sync(member, SyncResult(RebalanceInProgressError.code))
        member.awaiting_sync = future
        if group.is_leader(member_id):
            log.info("Assignment received from leader %s for group %s for generation %d. "
                     "The group has %d members, %d of which are static.", member_id,
                     group_id, group.generation, len(group.members),
                     len(group.static_members))
            complete = {m: assignments.get(m, b"") for m in group.members}
            self._spawn(self._store_assignment(group, group.generation, complete))
        return await future

    async def _store_assignment(self, group: Group, generation: int,
                                assignment: dict[str, bytes]) -> None:
        error = await self._store_group(group, assignment)
        if not (group.is_in(GroupState.COMPLETING_REBALANCE)
                and group.generation == generation):
            return
        if error:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group, f"Error {error} when storing the group "
                                          "assignment during SyncGroup")
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
            self._complete_sync(member, SyncResult(0, group.protocol_type, group.protocol,
                                                   member.assignment))
            self._arm_session(group, member)
        group.transition_to(GroupState.STABLE, _now_ms())

    # --- Heartbeat and LeaveGroup -------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation: int) -> None:
        """Raises the error a heartbeat answers with; returns for NONE."""
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            raise UnknownMemberIdError(f"group {group_id} does not exist")
        if group.is_static_member_fenced(member_id, group_instance_id):
            raise FencedInstanceIdError(f"instance {group_instance_id} has a newer member id")
        if group.is_in(GroupState.DEAD):
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        if not group.has(member_id):
            raise UnknownMemberIdError(f"{member_id} is not a member of group {group_id}")
        if generation != group.generation:
            raise IllegalGenerationError(
                f"generation {generation} is not the group's generation {group.generation}")
        if group.is_in(GroupState.EMPTY):
            raise UnknownMemberIdError(f"group {group_id} is empty")
        self._arm_session(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            raise RebalanceInProgressError(f"group {group_id} is rebalancing")

    def leave_group(self, group_id: str,
                    leaving: list[tuple[str, str | None, str | None]]) -> list[int]:
        """(member id, group instance id, reason) for each leaving member; the error of
        each. Raises for the whole request (not coordinator, dead group)."""
        self.check_group(group_id)
        group = self.groups.get(group_id)
        if group is None:
            return [UnknownMemberIdError.code for _ in leaving]
        if group.is_in(GroupState.DEAD):
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        errors = []
        for member_id, instance_id, reason in leaving:
            why = f"removing member {member_id or instance_id} on LeaveGroup" + (
                f"; client reason: {reason}" if reason else "")
            if member_id == "":
                static_id = group.static_member_id(instance_id)
                if static_id is None:
                    errors.append(UnknownMemberIdError.code)
                    continue
                member_id = static_id
            elif group.is_static_member_fenced(member_id, instance_id):
                errors.append(FencedInstanceIdError.code)
                continue
            if member_id in group.pending_members:
                group.pending_members.discard(member_id)
                self._cancel_member_timer(group_id, member_id)
                if group.is_in(GroupState.PREPARING_REBALANCE):
                    self._try_complete_join(group)
                errors.append(0)
                continue
            if not group.has(member_id):
                errors.append(UnknownMemberIdError.code)
                continue
            log.info("Member %s has left group %s through explicit `LeaveGroup`", member_id,
                     group_id)
            self._remove_member_and_update(group, member_id, why)
            errors.append(0)
        return errors

    def _remove_member_and_update(self, group: Group, member_id: str, reason: str) -> None:
        member = group.members.get(member_id)
        if member is None:
            return
        # a parked JoinGroup of the member learns it must join again
        self._complete_join(member, JoinResult(UnknownMemberIdError.code, ""))
        self._complete_sync(member, SyncResult(UnknownMemberIdError.code))
        self._cancel_member_timer(group.group_id, member_id)
        group.remove(member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # --- session timers ---------------------------------------------------------------

    def _arm_session(self, group: Group, member: Member,
                     timeout_s: float | None = None) -> None:
        """A sign of life from the member: restart its session timer."""
        member.last_heartbeat = self.loop.time()
        timeout = member.session_timeout_ms / 1000 if timeout_s is None else timeout_s
        key = (group.group_id, member.member_id)
        old = self._member_timers.pop(key, None)
        if old is not None:
            old.cancel()
        self._member_timers[key] = self.loop.call_later(
            timeout, self._on_session_expired, group, member)

    def _cancel_member_timer(self, group_id: str, member_id: str) -> None:
        timer = self._member_timers.pop((group_id, member_id), None)
        if timer is not None:
            timer.cancel()

    def _on_session_expired(self, group: Group, member: Member) -> None:
        self._member_timers.pop((group.group_id, member.member_id), None)
        if group.members.get(member.member_id) is not member:
            return
        now = self.loop.time()
        if member.awaiting_join is not None:
            if not member.is_new or member.last_heartbeat + NEW_MEMBER_JOIN_TIMEOUT_S > now:
                return  # parked in a rebalance: the rebalance timeout decides
        elif member.awaiting_sync is not None:
            return
        log.info("Member %s in group %s has failed, removing it from the group",
                 member.member_id, group.group_id)
        self._remove_member_and_update(
            group, member.member_id,
            f"removing member {member.member_id} on heartbeat expiration")

    def _arm_pending_member(self, group: Group, member_id: str, session_timeout_ms: int) -> None:
        key = (group.group_id, member_id)
        self._member_timers[key] = self.loop.call_later(
            session_timeout_ms / 1000, self._on_pending_member_expired, group, member_id)

    def _on_pending_member_expired(self, group: Group, member_id: str) -> None:
        self._member_timers.pop((group.group_id, member_id), None)
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            log.info("Pending member %s in group %s has been removed after session timeout "
                     "expiration.", member_id, group.group_id)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                self._try_complete_join(group)

    def _group_timers(self, group: Group) -> GroupTimers:
        timers = self._timers.get(group.group_id)
        if timers is None:
            timers = self._timers[group.group_id] = GroupTimers()
        return timers

    def _cancel_group_timers(self, group: Group) -> None:
        timers = self._timers.pop(group.group_id, None)
        if timers is not None:
            for handle in (timers.join, timers.pending_sync):
                if handle is not None:
                    handle.cancel()
        for member_id in list(group.members) + list(group.pending_members):
            self._cancel_member_timer(group.group_id, member_id)

    # --- offsets -----------------------------------------------------------------------

    async def commit_offsets(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, int]:
        """The error of each partition (0 = committed)."""
        self.check_group(group_id, allow_empty_id=True)
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0:
                # an old generation of a group this coordinator no longer has
                return dict.fromkeys(offsets, IllegalGenerationError.code)
            # a group that only stores offsets in Kafka (no group management)
            group = self.groups[group_id] = Group(group_id, state_timestamp=_now_ms())
        error = self._commit_error(group, member_id, group_instance_id, generation)
        if error:
            return dict.fromkeys(offsets, error)
        if member_id in group.members:
            self._arm_session(group, group.members[member_id])
        return await self._store_offsets(group, offsets)

    def _commit_error(self, group: Group, member_id: str, instance_id: str | None,
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
        limit = self.config.offset_metadata_max_bytes
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
            records: list[tuple[bytes, bytes | None]] = [
                (offset_commit_key(group.group_id, t, p), offset_commit_value(o))
                for (t, p), o in valid.items()]
            try:
                error = await self._append(group.group_id, records)
            finally:
                for tp in valid:
                    group.pending_offsets[tp] -= 1
                    if group.pending_offsets[tp] <= 0:
                        del group.pending_offsets[tp]
            if not error and not group.is_in(GroupState.DEAD):
                group.offsets.update(valid)
                if self.groups.get(group.group_id) is None:
                    self.groups[group.group_id] = group
            for tp in valid:
                errors[tp] = error
        return {tp: errors[tp] for tp in offsets}

    def fetch_offsets(self, group_id: str, partitions: list[TopicPartition] | None
                      ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets of the partitions (None: none committed), or of every
        partition the group has when partitions is None."""
        self.check_group(group_id, allow_empty_id=True)
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_in(
            GroupState.DEAD) else {}
        if partitions is None:
            return dict(offsets)
        return {tp: offsets.get(tp) for tp in partitions}

    # --- describe, list, delete --------------------------------------------------------

    def describe_group(self, group_id: str) -> Group | None:
        self.check_group(group_id, allow_empty_id=True)
        group = self.groups.get(group_id)
        return None if group is None or group.is_in(GroupState.DEAD) else group

    def list_groups(self) -> list[Group]:
        if not self.active:
            raise CoordinatorNotAvailableError("the group coordinator is not active")
        if self.loading:
            raise CoordinatorLoadInProgressError("the coordinator is loading groups")
        return [g for g in self.groups.values() if not g.is_in(GroupState.DEAD)]

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, int]:
        results: dict[str, int] = {}
        for group_id in group_ids:
            try:
                self.check_group(group_id, allow_empty_id=True)
                group = self.groups.get(group_id)
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
            error = await self._append(group_id, records)
            if not error and group.is_in(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD, _now_ms())
                self._cancel_group_timers(group)
                self.groups.pop(group_id, None)
                log.info("Group %s was deleted with its %d committed offsets", group_id,
                         len(group.offsets))
            results[group_id] = error
        return results

    async def delete_offsets(self, group_id: str, partitions: list[TopicPartition]
                             ) -> dict[TopicPartition, int]:
        """OffsetDelete: raises for the whole group; per-partition errors otherwise."""
        self.check_group(group_id)
        group = self.groups.get(group_id)
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
        error = await self._remove_offsets(group, present, _now_ms())
        for tp in deletable:
            errors[tp] = error
        return {tp: errors[tp] for tp in partitions}

    async def _remove_offsets(self, group: Group, partitions: list[TopicPartition],
                              now: int) -> int:
        """Kafka's cleanupGroupMetadata for one group: tombstones for these committed
        offsets, and for the group itself when it is Empty and keeps no other offset; such
        a group is Dead and gone. The error of the append, or 0."""
        records: list[tuple[bytes, bytes | None]] = [
            (offset_commit_key(group.group_id, t, p), None) for t, p in partitions]
        remove_group = (group.is_in(GroupState.EMPTY)
                        and not (set(group.offsets) - set(partitions))
                        and not group.pending_offsets)
        if remove_group:
            records.append((group_metadata_key(group.group_id), None))
        if not records:
            return 0
        error = await self._append(group.group_id, records)
        if error:
            return error
        for tp in partitions:
            group.offsets.pop(tp, None)
        if remove_group and group.is_in(GroupState.EMPTY) and not group.offsets:
            group.transition_to(GroupState.DEAD, now)
            self._cancel_group_timers(group)
            self.groups.pop(group.group_id, None)
            log.info("Group %s transitioned to Dead in generation %d", group.group_id,
                     group.generation)
        return 0

    # --- expiry ------------------------------------------------------------------------

    def _ensure_expiry_timer(self) -> None:
        if self._expiry is None and self.active:
            self._expiry = self.loop.call_later(
                self.config.offsets_retention_check_interval_ms / 1000, self._on_expiry_tick)

    def _on_expiry_tick(self) -> None:
        self._expiry = None
        self._spawn(self._expire_offsets())
        self._ensure_expiry_timer()

    async def _expire_offsets(self) -> None:
        """Kafka's cleanupGroupMetadata (KIP-211): drop expired offsets; an Empty group
        left without offsets is removed."""
        now = _now_ms()
        retention = self.config.offsets_retention_ms
        removed_total = 0
        for group in list(self.groups.values()):
            if group.is_in(GroupState.DEAD):
                continue
            expired = self._expired_offsets(group, now, retention)
            error = await self._remove_offsets(group, expired, now)
            if error:
                log.warning("Could not expire offsets of group %s: error %d", group.group_id,
                            error)
                continue
            removed_total += len(expired)
        if removed_total:
            log.info("Removed %d expired offsets", removed_total)

    @staticmethod
    def _expired_offsets(group: Group, now: int, retention: int) -> list[TopicPartition]:
        def expired(base: Callable[[OffsetAndMetadata], int],
                    keep_topics: set[str] | frozenset[str] = frozenset()) -> list[TopicPartition]:
            out = []
            for tp, offset in group.offsets.items():
                if tp[0] in keep_topics or tp in group.pending_offsets:
                    continue
                if offset.expire_timestamp is not None:
                    if now >= offset.expire_timestamp:
                        out.append(tp)
                elif now - base(offset) >= retention:
                    out.append(tp)
            return out

        if group.protocol_type is None:
            return expired(lambda o: o.commit_timestamp)  # standalone offsets
        if group.is_in(GroupState.EMPTY):
            state_ts = group.state_timestamp
            return expired(lambda o: state_ts if state_ts >= 0 else o.commit_timestamp)
        if (group.protocol_type == "consumer" and group.subscribed_topics is not None
                and group.is_in(GroupState.STABLE)):
            return expired(lambda o: o.commit_timestamp, group.subscribed_topics)
        return []

    # --- persistence -------------------------------------------------------------------

    async def _store_group(self, group: Group, assignment: dict[str, bytes]) -> int:
        record = group_metadata_value(group.to_record(assignment))
        return await self._append(group.group_id, [(group_metadata_key(group.group_id),
                                                    record)])

    async def _store_group_logged(self, group: Group, assignment: dict[str, bytes]) -> None:
        error = await self._store_group(group, assignment)
        if error:
            log.warning("Failed to write the empty group metadata of %s: error %d",
                        group.group_id, error)

    async def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> int:
        """Write to the group's partition and wait for the ISR; 0 or Kafka's error code
        for a failed offset or group write."""
        partition = self.partition_of(group_id)
        if partition not in self.owned:
            return NotCoordinatorError.code
        return await self.offsets_log.append(partition, records)

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("Group coordinator task failed", exc_info=task.exception())
