"""The membership manager: the member-facing requests of the classic protocol (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup) over the shared group table, and what the rest of the
coordinator may do to a group's members (restart a session, adopt a loaded group,
unload or retire one).

JoinGroup's rules are in `joining`, the rebalance and the timers that drive it in
`rebalance`; this module holds the short requests and the leader's assignment."""

from __future__ import annotations

import asyncio

from moldau.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

from .config import log, now_ms
from .group import Group, GroupState, Member
from .joining import Joins
from .rebalance import Rebalancer, complete_sync, fail_waiters, reset_and_propagate_assignment_error
from .results import JoinResult, SyncResult
from .table import GroupTable
from .timers import CoordinatorTimers


class Membership:
    def __init__(self, table: GroupTable, timers: CoordinatorTimers) -> None:
        self._table = table
        self._rebalancer = Rebalancer(table, timers)
        self._joins = Joins(table, self._rebalancer)

    # --- for the rest of the coordinator --------------------------------------------

    def arm_session(self, group: Group, member: Member) -> None:
        """A sign of life from the member (an offset commit): restart its session."""
        self._rebalancer.arm_session(group, member)

    def adopt(self, group: Group) -> None:
        """A group loaded from its partition: its members' sessions start afresh."""
        for member in group.members.values():
            self._rebalancer.arm_session(group, member)

    def unload(self, group: Group, error: int) -> None:
        """The group's partition moved away: its parked requests get the error, and the
        group is Dead without a transition (nothing is written)."""
        fail_waiters(group, error)
        group.state = GroupState.DEAD
        self._rebalancer.retire(group)

    def retire(self, group: Group) -> None:
        """The group is gone (deleted, or Empty without offsets): its timers stop."""
        self._rebalancer.retire(group)

    # --- JoinGroup and SyncGroup ----------------------------------------------------

    async def join_group(
        self, group_id: str, member_id: str, group_instance_id: str | None,
        require_known_member_id: bool, supports_skip_assignment: bool, client_id: str,
        client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]], reason: str | None = None,
    ) -> JoinResult:
        return await self._joins.join_group(
            group_id, member_id, group_instance_id, require_known_member_id,
            supports_skip_assignment, client_id, client_host, rebalance_timeout_ms,
            session_timeout_ms, protocol_type, protocols, reason)

    async def sync_group(self, group_id: str, generation: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None,
                         protocol: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        self._table.check_group(group_id)
        group = self._table.groups.get(group_id)
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
        self._rebalancer.arm_session(group, member)
        if group.is_in(GroupState.STABLE):
            return SyncResult(0, group.protocol_type, group.protocol, member.assignment)
        # CompletingRebalance: wait for the leader's assignment
        future: asyncio.Future[SyncResult] = self._table.loop.create_future()
        complete_sync(member, SyncResult(RebalanceInProgressError.code))
        member.awaiting_sync = future
        if group.is_leader(member_id):
            log.info("Assignment received from leader %s for group %s for generation %d. "
                     "The group has %d members, %d of which are static.", member_id,
                     group_id, group.generation, len(group.members),
                     len(group.static_members))
            complete = {m: assignments.get(m, b"") for m in group.members}
            self._table.tasks.spawn(self._store_assignment(group, group.generation, complete))
        return await future

    async def _store_assignment(self, group: Group, generation: int,
                                assignment: dict[str, bytes]) -> None:
        """Write the leader's assignment, then hand each member its part: the group is
        Stable (unless it moved on while the write was out)."""
        error = await self._table.store_group(group, assignment)
        if not (group.is_in(GroupState.COMPLETING_REBALANCE)
                and group.generation == generation):
            return
        if error:
            reset_and_propagate_assignment_error(group, error)
            self._rebalancer.maybe_prepare(group, f"Error {error} when storing the group "
                                           "assignment during SyncGroup")
            return
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
            complete_sync(member, SyncResult(0, group.protocol_type, group.protocol,
                                             member.assignment))
            self._rebalancer.arm_session(group, member)
        group.transition_to(GroupState.STABLE, now_ms())

    # --- Heartbeat and LeaveGroup ---------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation: int) -> None:
        """Raises the error a heartbeat answers with; returns for NONE."""
        self._table.check_group(group_id)
        group = self._table.groups.get(group_id)
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
        self._rebalancer.arm_session(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            raise RebalanceInProgressError(f"group {group_id} is rebalancing")

    def leave_group(self, group_id: str,
                    leaving: list[tuple[str, str | None, str | None]]) -> list[int]:
        """(member id, group instance id, reason) for each leaving member; the error of
        each. Raises for the whole request (not coordinator, dead group)."""
        self._table.check_group(group_id)
        group = self._table.groups.get(group_id)
        if group is None:
            return [UnknownMemberIdError.code for _ in leaving]
        if group.is_in(GroupState.DEAD):
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        return [self._leave(group, member_id, instance_id, reason)
                for member_id, instance_id, reason in leaving]

    def _leave(self, group: Group, member_id: str, instance_id: str | None,
               reason: str | None) -> int:
        why = f"removing member {member_id or instance_id} on LeaveGroup" + (
            f"; client reason: {reason}" if reason else "")
        if member_id == "":
            static_id = group.static_member_id(instance_id)
            if static_id is None:
                return UnknownMemberIdError.code
            member_id = static_id
        elif group.is_static_member_fenced(member_id, instance_id):
            return FencedInstanceIdError.code
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._rebalancer.cancel_member_timer(group.group_id, member_id)
            if group.is_in(GroupState.PREPARING_REBALANCE):
                self._rebalancer.try_complete_join(group)
            return 0
        if not group.has(member_id):
            return UnknownMemberIdError.code
        log.info("Member %s has left group %s through explicit `LeaveGroup`", member_id,
                 group.group_id)
        self._rebalancer.remove_member(group, member_id, why)
        return 0
