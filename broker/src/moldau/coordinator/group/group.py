"""A consumer group's membership and state (Kafka's GroupMetadata and MemberMetadata of
the classic protocol). Plain data and the rules that only look at it; the coordinator's
rebalance drives the transitions and the timers.

States and the moves between them (Kafka's):
  Empty -> PreparingRebalance (a member joins) -> CompletingRebalance (every member
  joined; the leader computes the assignment) -> Stable (the leader's SyncGroup
  delivered it) -> PreparingRebalance (a member joins, leaves or fails) ...
  Any state -> Dead (the group is deleted or its partition unloaded); PreparingRebalance
  -> Empty when the last member leaves.
"""

from __future__ import annotations

import asyncio
import enum
from collections import Counter
from dataclasses import dataclass, field

from .records import GroupRecord, MemberRecord, OffsetAndMetadata, TopicPartition
from .results import JoinResult, SyncResult
from .txn_offsets import UNKNOWN_POSITION, TransactionalOffsets, is_newer


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# state -> the states it may be entered from
VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.EMPTY, GroupState.STABLE,
                                     GroupState.COMPLETING_REBALANCE},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: {GroupState.STABLE, GroupState.PREPARING_REBALANCE,
                      GroupState.COMPLETING_REBALANCE, GroupState.EMPTY, GroupState.DEAD},
}


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's preference order
    assignment: bytes = b""
    # a parked JoinGroup / SyncGroup waiting for the rebalance to move on
    awaiting_join: asyncio.Future[JoinResult] | None = None
    awaiting_sync: asyncio.Future[SyncResult] | None = None
    last_heartbeat: float = 0.0  # event-loop time
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return protocols == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        return next(name for name in self.protocol_names if name in candidates)


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # MEMBER_ID_REQUIRED handed out
    pending_sync: set[str] = field(default_factory=set)  # joined but not yet synced
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # commits written to the log but not yet acknowledged (OffsetFetch require_stable)
    pending_offsets: Counter[tuple[str, int]] = field(default_factory=Counter)
    # the log offset of the batch behind each committed offset (txn_offsets.py)
    offset_positions: dict[tuple[str, int], int] = field(default_factory=dict)
    # offsets of open transactions, per producer (TxnOffsetCommit)
    txn_offsets: TransactionalOffsets = field(default_factory=TransactionalOffsets)
    state_timestamp: int = -1  # ms, when the state last changed
    new_member_added: bool = False  # a member joined during the initial delay
    subscribed_topics: set[str] | None = None  # None: unknown (not a consumer group)

    # --- state ------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id} cannot move from {self.state.value} "
                               f"to {state.value}")
        self.state = state
        self.state_timestamp = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                              GroupState.EMPTY)

    # --- members ----------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        if member is None:
            return None
        if (member.group_instance_id is not None
                and self.static_members.get(member.group_instance_id) == member_id):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def static_member_id(self, instance_id: str | None) -> str | None:
        return None if instance_id is None else self.static_members.get(instance_id)

    def is_static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """A static instance id now belongs to another member id: the old one is fenced."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    @property
    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def all_members_joined(self) -> bool:
        return (self.awaiting_join_count == len(self.members) and not self.pending_members)

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if m.awaiting_join is None]

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else take any member that did."""
        leader = self.members.get(self.leader_id or "")
        if leader is not None and leader.awaiting_join is not None:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join is not None), None)
        self.leader_id = joined.member_id if joined is not None else None
        return joined is not None

    # --- protocols --------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        """A joining member must share the protocol type and at least one protocol with
        every current member (an empty group takes anything non-empty)."""
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(
            self.candidate_protocols() & set(names))

    def candidate_protocols(self) -> set[str]:
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names)
        for member in members[1:]:
            common &= set(member.protocol_names)
        return common

    def select_protocol(self) -> str:
        """Kafka's vote: every member votes for its most preferred common protocol; the
        most votes wins (ties go to the first counted)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise RuntimeError(f"group {self.group_id} has no protocol every member supports")
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def init_next_generation(self, now_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol = self.select_protocol()
            self.subscribed_topics = self._subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol = None
            self.subscribed_topics = set() if self.protocol_type == "consumer" else None
            self.transition_to(GroupState.EMPTY, now_ms)

    def _subscribed_topics(self) -> set[str] | None:
        """The topics of the consumers' subscriptions (for OffsetDelete); None when a
        subscription does not parse or the group is not a consumer group."""
        if self.protocol_type != "consumer" or self.protocol is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription_topics(member.metadata(self.protocol))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        """Whether OffsetDelete must refuse the topic (unknown subscriptions count)."""
        if self.subscribed_topics is None:
            return self.state != GroupState.EMPTY
        return topic in self.subscribed_topics

    # --- committed offsets ------------------------------------------------------------

    def put_offset(self, tp: TopicPartition, offset: OffsetAndMetadata,
                   position: int = UNKNOWN_POSITION) -> bool:
        """A commit written at `position` becomes the committed offset unless the one
        committed already came from a later batch. Whether it did."""
        if tp in self.offsets and not is_newer(position, self.offset_positions.get(
                tp, UNKNOWN_POSITION)):
            return False
        self.offsets[tp] = offset
        self.offset_positions[tp] = position
        return True

    def pop_offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        self.offset_positions.pop(tp, None)
        return self.offsets.pop(tp, None)

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended in this group's partition (Kafka's
        completePendingTxnOffsetCommit): a commit's offsets replace older ones."""
        pending = self.txn_offsets.complete(producer_id)
        if commit:
            for tp, entry in pending.items():
                self.put_offset(tp, entry.offset, entry.position)

    def has_pending_commit(self, tp: TopicPartition) -> bool:
        """A commit of the partition is in flight or in an open transaction: OffsetFetch
        with RequireStable answers UNSTABLE_OFFSET_COMMIT."""
        return tp in self.pending_offsets or self.txn_offsets.has_partition(tp)

    @property
    def has_offsets(self) -> bool:
        """Kafka's hasOffsets: an Empty group without any is Dead."""
        return bool(self.offsets or self.pending_offsets or self.txn_offsets)

    # --- persistence ------------------------------------------------------------------

    def to_record(self, assignment: dict[str, bytes] | None = None) -> GroupRecord:
        protocol = self.protocol
        members = [
            MemberRecord(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                         m.rebalance_timeout_ms, m.session_timeout_ms,
                         m.metadata(protocol) if protocol else b"",
                         (assignment or {}).get(m.member_id, m.assignment))
            for m in self.members.values()
        ]
        return GroupRecord(self.protocol_type or "", self.generation, protocol,
                           self.leader_id, self.state_timestamp, members)

    @classmethod
    def from_record(cls, group_id: str, record: GroupRecord, now: float) -> Group:
        """A group loaded from its log: Empty without members, else Stable with its
        members' sessions starting afresh."""
        group = cls(group_id, generation=record.generation,
                    protocol_type=record.protocol_type or None, protocol=record.protocol,
                    leader_id=record.leader, state_timestamp=record.current_state_timestamp)
        for m in record.members:
            member = Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                            m.rebalance_timeout, m.session_timeout, record.protocol_type,
                            [(record.protocol or "", m.subscription)], m.assignment,
                            last_heartbeat=now)
            group.members[m.member_id] = member
            if m.group_instance_id is not None:
                group.static_members[m.group_instance_id] = m.member_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        group.subscribed_topics = group._subscribed_topics()
        return group

    def summary_state(self) -> str:
        return self.state.value


def parse_subscription_topics(metadata: bytes) -> list[str] | None:
    """The topics of a consumer protocol subscription (ConsumerProtocolSubscription: int16
    version, then an array of int16-length strings); None when it does not parse."""
    try:
        if len(metadata) < 6:
            return None
        count = int.from_bytes(metadata[2:6], "big", signed=True)
        pos, topics = 6, []
        for _ in range(max(count, 0)):
            length = int.from_bytes(metadata[pos:pos + 2], "big", signed=True)
            pos += 2
            if length < 0 or pos + length > len(metadata):
                return None
            topics.append(metadata[pos:pos + length].decode())
            pos += length
        return topics
    except (UnicodeDecodeError, ValueError):
        return None
