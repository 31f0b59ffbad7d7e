"""A group's rebalance and the timers that drive it (Kafka's GroupCoordinator
prepareRebalance, the join and sync purgatories, and the member heartbeats).

PreparingRebalance waits for every member to join again, bounded by the initial delay
(a new group, so the first members arrive together) or the rebalance timeout; then the
group gets its next generation and the parked JoinGroups their answers, and the members
have the rebalance timeout to send their SyncGroup. A member whose session runs out, or
that does not join or sync in time, is removed, which starts the next rebalance.
"""

from __future__ import annotations

from functools import partial

from moldau.errors import RebalanceInProgressError, UnknownMemberIdError

from .config import NEW_MEMBER_JOIN_TIMEOUT_S, log, now_ms
from .group import Group, GroupState, Member
from .results import JoinResult, SyncResult
from .table import GroupTable
from .timers import CoordinatorTimers


def join_result(group: Group, member: Member, with_members: bool = True,
                skip_assignment: bool = False) -> JoinResult:
    """The member's answer for the group's current generation; the leader's lists every
    member's metadata for the assignor."""
    members: list[tuple[str, str | None, bytes]] = []
    if with_members and group.is_leader(member.member_id) and group.protocol:
        members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol))
                   for m in group.members.values()]
    return JoinResult(0, member.member_id, group.generation, group.protocol_type,
                      group.protocol, group.leader_id or "", skip_assignment, members)


def complete_join(member: Member, result: JoinResult) -> None:
    future, member.awaiting_join = member.awaiting_join, None
    if future is not None and not future.done():
        future.set_result(result)


def complete_sync(member: Member, result: SyncResult) -> None:
    future, member.awaiting_sync = member.awaiting_sync, None
    if future is not None and not future.done():
        future.set_result(result)


def fail_waiters(group: Group, error: int) -> None:
    """Answer every parked JoinGroup and SyncGroup of the group with the error."""
    for member in group.members.values():
        complete_join(member, JoinResult(error, member.member_id))
        complete_sync(member, SyncResult(error))


def reset_and_propagate_assignment_error(group: Group, error: int) -> None:
    for member in group.members.values():
        member.assignment = b""
        complete_sync(member, SyncResult(error))


class Rebalancer:
    def __init__(self, table: GroupTable, timers: CoordinatorTimers) -> None:
        self._table = table
        self._timers = timers
        self._loop = table.loop

    # --- sessions -------------------------------------------------------------------

    def arm_session(self, group: Group, member: Member,
                    timeout_s: float | None = None) -> None:
        """A sign of life from the member: restart its session timer."""
        member.last_heartbeat = self._loop.time()
        timeout = member.session_timeout_ms / 1000 if timeout_s is None else timeout_s
        self._timers.start_member(group.group_id, member.member_id, timeout,
                                  partial(self._on_session_expired, group, member))

    def cancel_member_timer(self, group_id: str, member_id: str) -> None:
        self._timers.cancel_member(group_id, member_id)

    def retire(self, group: Group) -> None:
        """The group leaves the table (deleted, emptied out, unloaded): stop its timers."""
        self._timers.cancel_group(group)

    def _on_session_expired(self, group: Group, member: Member) -> None:
        self._timers.member_fired(group.group_id, member.member_id)
        if group.members.get(member.member_id) is not member:
            return
        now = self._loop.time()
        if member.awaiting_join is not None:
            if not member.is_new or member.last_heartbeat + NEW_MEMBER_JOIN_TIMEOUT_S > now:
                return  # parked in a rebalance: the rebalance timeout decides
        elif member.awaiting_sync is not None:
            return
        log.info("Member %s in group %s has failed, removing it from the group",
                 member.member_id, group.group_id)
        self.remove_member(group, member.member_id,
                           f"removing member {member.member_id} on heartbeat expiration")

    def arm_pending_member(self, group: Group, member_id: str, session_timeout_ms: int) -> None:
        """A member id handed out with MEMBER_ID_REQUIRED lapses if nobody joins with it
        within the session timeout."""
        self._timers.start_member(group.group_id, member_id, session_timeout_ms / 1000,
                                  partial(self._on_pending_member_expired, group, member_id))

    def _on_pending_member_expired(self, group: Group, member_id: str) -> None:
        self._timers.member_fired(group.group_id, member_id)
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            log.info("Pending member %s in group %s has been removed after session timeout "
                     "expiration.", member_id, group.group_id)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                self.try_complete_join(group)

    def remove_member(self, group: Group, member_id: str, reason: str) -> None:
        """The member leaves (LeaveGroup, session expiry, a full group): the group
        rebalances without it."""
        member = group.members.get(member_id)
        if member is None:
            return
        # a parked JoinGroup of the member learns it must join again
        complete_join(member, JoinResult(UnknownMemberIdError.code, ""))
        complete_sync(member, SyncResult(UnknownMemberIdError.code))
        self._timers.cancel_member(group.group_id, member_id)
        group.remove(member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.maybe_prepare(group, reason)
        elif group.is_in(GroupState.PREPARING_REBALANCE):
            self.try_complete_join(group)

    # --- rebalancing ----------------------------------------------------------------

    def maybe_prepare(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            self._prepare(group, reason)

    def _prepare(self, group: Group, reason: str) -> None:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # the members waiting for their assignment must join again
            reset_and_propagate_assignment_error(group, RebalanceInProgressError.code)
        timers = self._timers.of_group(group)
        if timers.pending_sync is not None:
            timers.pending_sync.cancel()
            timers.pending_sync = None
        group.pending_sync.clear()
        was_empty = group.is_in(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms())
        log.info("Preparing to rebalance group %s in state PreparingRebalance with old "
                 "generation %d (__consumer_offsets-%d) (reason: %s)", group.group_id,
                 group.generation, self._table.partition_of(group.group_id), reason)
        if timers.join is not None:
            timers.join.cancel()
        if was_empty:
            delay = self._table.config.initial_rebalance_delay_ms
            timers.initial_delay_left_ms = max(group.max_rebalance_timeout_ms() - delay, 0)
            timers.join = self._loop.call_later(delay / 1000, self._on_initial_delay, group)
        else:
            timers.initial_delay_left_ms = None
            timers.join = self._loop.call_later(group.max_rebalance_timeout_ms() / 1000,
                                                self._on_join_timeout, group)
            # Kafka's tryCompleteElseWatch: a group whose last member just left has
            # nobody to wait for and is Empty (and stored so) at once
            self.try_complete_join(group)

    def _on_initial_delay(self, group: Group) -> None:
        timers = self._timers.of_group(group)
        left = timers.initial_delay_left_ms or 0
        if group.new_member_added and left > 0:
            # members keep arriving: wait another delay (bounded by the rebalance timeout)
            group.new_member_added = False
            delay = min(self._table.config.initial_rebalance_delay_ms, left)
            timers.initial_delay_left_ms = left - delay
            timers.join = self._loop.call_later(delay / 1000, self._on_initial_delay, group)
            return
        timers.initial_delay_left_ms = None
        timers.join = None
        self._complete_join_phase(group)

    def _on_join_timeout(self, group: Group) -> None:
        self._timers.of_group(group).join = None
        self._complete_join_phase(group)

    def try_complete_join(self, group: Group) -> None:
        """End the join phase early when every member has joined."""
        timers = self._timers.of_group(group)
        if timers.initial_delay_left_ms is not None:
            return  # the initial delay completes only when it runs out
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.all_members_joined():
            if timers.join is not None:
                timers.join.cancel()
                timers.join = None
            self._complete_join_phase(group)

    def _complete_join_phase(self, group: Group) -> None:
        if not group.is_in(GroupState.PREPARING_REBALANCE):
            return
        for member in group.not_yet_rejoined():
            if not member.is_static:
                # dynamic members that did not rejoin in time are out
                self._timers.cancel_member(group.group_id, member.member_id)
                group.remove(member.member_id)
        if not group.elect_joined_leader() and group.members:
            log.error("Group %s could not complete rebalance because no members rejoined",
                      group.group_id)
            timers = self._timers.of_group(group)
            timers.join = self._loop.call_later(group.max_rebalance_timeout_ms() / 1000,
                                                self._on_join_timeout, group)
            return
        group.init_next_generation(now_ms())
        partition = self._table.partition_of(group.group_id)
        if group.is_in(GroupState.EMPTY):
            log.info("Group %s with generation %d is now empty (__consumer_offsets-%d)",
                     group.group_id, group.generation, partition)
            self._table.tasks.spawn(self._table.store_empty_group(group))
            return
        log.info("Stabilized group %s generation %d (__consumer_offsets-%d) with %d members",
                 group.group_id, group.generation, partition, len(group.members))
        for member in list(group.members.values()):
            complete_join(member, join_result(group, member))
            self.arm_session(group, member)
            member.is_new = False
        group.pending_sync = set(group.members)
        timers = self._timers.of_group(group)
        generation = group.generation
        timers.pending_sync = self._loop.call_later(
            group.max_rebalance_timeout_ms() / 1000, self._on_pending_sync_timeout, group,
            generation)

    def _on_pending_sync_timeout(self, group: Group, generation: int) -> None:
        self._timers.of_group(group).pending_sync = None
        if generation != group.generation or not group.pending_sync or not group.is_in(
                GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        missing = sorted(group.pending_sync)
        for member_id in missing:
            self._timers.cancel_member(group.group_id, member_id)
            group.remove(member_id)
        self._prepare(group, f"Removing {missing} from group {group.group_id} "
                      "since they failed to send a SyncGroup in time")
