"""JoinGroup (Kafka's GroupCoordinator handleJoinGroup): who may join, the member id a
new member gets (KIP-394's MEMBER_ID_REQUIRED round trip), a known member rejoining in
each state, and a static member (KIP-345) taking over its instance id, which a Stable
group allows without a rebalance.

A join that must wait for the rest of the group parks on a future of its member; the
rebalance answers it."""

from __future__ import annotations

import asyncio
import uuid

from moldau.errors import (
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    UnknownMemberIdError,
)

from .config import NEW_MEMBER_JOIN_TIMEOUT_S, log, now_ms
from .group import Group, GroupState, Member
from .rebalance import Rebalancer, complete_join, complete_sync, join_result
from .results import JoinResult, SyncResult
from .table import GroupTable

Protocols = list[tuple[str, bytes]]  # (name, metadata) in the member's preference order


def _with_reason(text: str, reason: str | None) -> str:
    return text + (f"; client reason: {reason}" if reason else "")


class Joins:
    def __init__(self, table: GroupTable, rebalancer: Rebalancer) -> None:
        self._table = table
        self._rebalancer = rebalancer

    async def join_group(
        self, group_id: str, member_id: str, group_instance_id: str | None,
        require_known_member_id: bool, supports_skip_assignment: bool, client_id: str,
        client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
        protocol_type: str, protocols: Protocols, reason: str | None = None,
    ) -> JoinResult:
        self._table.check_group(group_id)
        c = self._table.config
        if not c.min_session_timeout_ms <= session_timeout_ms <= c.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session timeout {session_timeout_ms} ms is outside "
                f"[{c.min_session_timeout_ms}, {c.max_session_timeout_ms}]")
        unknown = member_id == ""
        groups = self._table.groups
        group = groups.get(group_id)
        if group is None:
            if not unknown:
                raise UnknownMemberIdError(f"group {group_id} does not exist")
            group = groups[group_id] = Group(group_id, state_timestamp=now_ms())
        if not self._accepts_joining_member(group, member_id):
            if not unknown:
                # a member the group cannot take any more is removed (Kafka does the same)
                self._rebalancer.remove_member(group, member_id, "the group is full")
            raise GroupMaxSizeReachedError(
                f"group {group_id} already has the maximum of {c.max_group_size} members")
        future: asyncio.Future[JoinResult] = self._table.loop.create_future()
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
            self._rebalancer.try_complete_join(group)
        return await future

    def _accepts_joining_member(self, group: Group, member_id: str) -> bool:
        limit = self._table.config.max_group_size
        if group.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if group.is_in(GroupState.PREPARING_REBALANCE):
            member = group.members.get(member_id)
            return ((member is not None and member.awaiting_join is not None)
                    or group.awaiting_join_count + len(group.pending_members) < limit)
        return group.has(member_id) or len(group.members) < limit

    @staticmethod
    def _may_join(group: Group, protocol_type: str, protocols: Protocols,
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
                         protocol_type: str, protocols: Protocols,
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
            self._rebalancer.arm_pending_member(group, new_id, session_timeout_ms)
            future.set_result(JoinResult(MemberIdRequiredError.code, member_id=new_id))
            return
        self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                       rebalance_timeout_ms, session_timeout_ms,
                                       protocol_type, protocols, reason, future)

    def _current_member_join(self, group: Group, member_id: str, instance_id: str | None,
                             client_id: str, client_host: str, rebalance_timeout_ms: int,
                             session_timeout_ms: int, protocol_type: str,
                             protocols: Protocols, reason: str | None,
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
                future.set_result(join_result(group, member))
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
                future.set_result(join_result(group, member, with_members=False))
        else:
            future.set_result(JoinResult(UnknownMemberIdError.code, member_id=member_id))

    def _add_member_and_rebalance(self, group: Group, member_id: str,
                                  instance_id: str | None, client_id: str, client_host: str,
                                  rebalance_timeout_ms: int, session_timeout_ms: int,
                                  protocol_type: str, protocols: Protocols,
                                  reason: str | None, future: asyncio.Future[JoinResult]) -> None:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                        session_timeout_ms, protocol_type, list(protocols),
                        awaiting_join=future, last_heartbeat=self._table.loop.time(),
                        is_new=True)
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.generation == 0:
            group.new_member_added = True
        group.add(member)
        # its pending-member timer
        self._rebalancer.cancel_member_timer(group.group_id, member_id)
        self._rebalancer.arm_session(group, member, NEW_MEMBER_JOIN_TIMEOUT_S)
        self._rebalancer.maybe_prepare(group, _with_reason(
            f"Adding new member {member_id} with group instance id {instance_id}", reason))

    def _update_member_and_rebalance(self, group: Group, member: Member,
                                     protocols: Protocols, rebalance_timeout_ms: int,
                                     session_timeout_ms: int, reason: str | None,
                                     future: asyncio.Future[JoinResult]) -> None:
        self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms,
                            future)
        self._rebalancer.maybe_prepare(group, _with_reason(
            f"Updating metadata for member {member.member_id} during {group.state.value}",
            reason))

    @staticmethod
    def _update_member(member: Member, protocols: Protocols, rebalance_timeout_ms: int,
                       session_timeout_ms: int,
                       future: asyncio.Future[JoinResult] | None) -> None:
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        previous = member.awaiting_join
        if previous is not None and not previous.done() and previous is not future:
            # a duplicate join replaces the parked one (the client gave up on it)
            previous.set_result(JoinResult(UnknownMemberIdError.code, member.member_id))
        member.awaiting_join = future

    # --- static members (KIP-345) ---------------------------------------------------

    def _update_static_member(self, group: Group, instance_id: str, old_id: str, new_id: str,
                              protocols: Protocols, rebalance_timeout_ms: int,
                              session_timeout_ms: int, skip_ok: bool, reason: str | None,
                              future: asyncio.Future[JoinResult]) -> None:
        current_leader = group.leader_id
        old = group.members[old_id]
        # the old incarnation's parked requests learn that they are fenced
        complete_join(old, JoinResult(FencedInstanceIdError.code, old_id))
        complete_sync(old, SyncResult(FencedInstanceIdError.code))
        old_state = (list(old.protocols), old.rebalance_timeout_ms, old.session_timeout_ms)
        self._rebalancer.cancel_member_timer(group.group_id, old_id)
        member = group.replace_static_member(instance_id, old_id, new_id)
        self._rebalancer.arm_session(group, member)
        if group.is_in(GroupState.STABLE):
            self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                None)
            if group.select_protocol() != group.protocol:
                member.awaiting_join = future
                self._rebalancer.maybe_prepare(
                    group, f"Group's selectedProtocol will change because static member "
                    f"{new_id} with instance id {instance_id} joined with change of protocol")
                return
            log.info("Static member %s of group %s rejoins during Stable: no rebalance",
                     instance_id, group.group_id)
            self._table.tasks.spawn(self._persist_static_replacement(
                group, member, instance_id, old_id, old_state, current_leader, skip_ok,
                future))
            return
        self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms,
                            future)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._rebalancer.maybe_prepare(group, _with_reason(
                f"Updating metadata for static member {new_id} with instance id "
                f"{instance_id}", reason))

    async def _persist_static_replacement(
        self, group: Group, member: Member, instance_id: str, old_id: str,
        old_state: tuple[Protocols, int, int], current_leader: str | None,
        skip_ok: bool, future: asyncio.Future[JoinResult],
    ) -> None:
        error = await self._table.store_group(group, {m.member_id: m.assignment
                                                      for m in group.members.values()})
        if future.done():
            return
        if error:
            # the new member id could not be persisted: put the old one back
            member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old_state
            group.replace_static_member(instance_id, member.member_id, old_id)
            self._rebalancer.arm_session(group, member)
            future.set_result(JoinResult(error, "", group.generation, group.protocol_type,
                                         group.protocol, current_leader or ""))
        elif skip_ok:
            # JoinGroup v9+: the leader learns it leads, but skips the assignor
            is_leader = group.is_leader(member.member_id)
            future.set_result(join_result(group, member, with_members=is_leader,
                                          skip_assignment=is_leader))
        else:
            # older clients get the old leader id, so a rejoining leader does not assign
            # (a Stable group would not broadcast its new assignment)
            future.set_result(JoinResult(0, member.member_id, group.generation,
                                         group.protocol_type, group.protocol,
                                         current_leader or ""))
