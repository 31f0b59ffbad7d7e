"""A classic consumer-group member for the console consumer: join (with the member id
round trip of JoinGroup v4+), range assignment when elected leader, sync, heartbeats,
offset commits and a clean leave."""

from __future__ import annotations

import struct
import time

from moldau.protocol._runtime import Message
from moldau.protocol.generated.consumer_protocol_assignment import ConsumerProtocolAssignment
from moldau.protocol.generated.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from moldau.protocol.generated.join_group_request import JoinGroupRequest
from moldau.protocol.generated.leave_group_request import LeaveGroupRequest
from moldau.protocol.generated.offset_commit_request import OffsetCommitRequest
from moldau.protocol.generated.sync_group_request import SyncGroupRequest
from moldau.tools.admin import Admin, partition_leaders
from moldau.tools.group_queries import committed_offsets, decode_assignment
from moldau.tools.kafka_errors import check

MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID = 79, 27, 25
ILLEGAL_GENERATION = 22
TP = tuple[str, int]


def _versioned(message: Message, version: int = 0) -> bytes:
    return struct.pack(">h", version) + message.encode(version)


def range_assign(subscriptions: dict[str, list[str]],
                 partitions: dict[str, int]) -> dict[str, list[TP]]:
    """Kafka's RangeAssignor: per topic, consecutive ranges to the sorted members."""
    result: dict[str, list[TP]] = {m: [] for m in subscriptions}
    topics = sorted({t for ts in subscriptions.values() for t in ts})
    for topic in topics:
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        count = partitions.get(topic, 0)
        per, extra = divmod(count, len(members))
        start = 0
        for n, member in enumerate(members):
            take = per + (1 if n < extra else 0)
            result[member] += [(topic, p) for p in range(start, start + take)]
            start += take
    return result


class GroupMember:
    def __init__(self, admin: Admin, group: str, topics: list[str],
                 session_timeout_ms: int = 10000) -> None:
        self.admin, self.group, self.topics = admin, group, topics
        self.session_timeout_ms = session_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.coordinator = admin.find_coordinator(group)
        self.last_heartbeat = 0.0

    def join(self) -> list[TP]:
        """Join (or rejoin) the group; the partitions assigned to this member."""
        subscription = _versioned(ConsumerProtocolSubscription(topics=self.topics,
                                                               user_data=None))
        while True:
            answer = self.admin.call(
                "JoinGroup", 5, self.coordinator, group_id=self.group,
                session_timeout_ms=self.session_timeout_ms, rebalance_timeout_ms=30000,
                member_id=self.member_id, group_instance_id=None, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(
                    name="range", metadata=subscription)])
            if answer.error_code == MEMBER_ID_REQUIRED:
                self.member_id = answer.member_id
                continue
            if answer.error_code == UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            check(answer.error_code)
            break
        self.member_id, self.generation = answer.member_id, answer.generation_id
        assignments = []
        if answer.leader == self.member_id:
            subscriptions = {}
            for m in answer.members:
                data = bytes(m.metadata)
                sub, _ = ConsumerProtocolSubscription.decode_from(
                    memoryview(data), 2, min(struct.unpack(">h", data[:2])[0], 3))
                subscriptions[m.member_id] = list(sub.topics)
            all_topics = sorted({t for ts in subscriptions.values() for t in ts})
            counts: dict[str, int] = {}
            for topic, _ in partition_leaders(self.admin, all_topics):
                counts[topic] = counts.get(topic, 0) + 1
            for member, tps in range_assign(subscriptions, counts).items():
                by_topic: dict[str, list[int]] = {}
                for topic, partition in tps:
                    by_topic.setdefault(topic, []).append(partition)
                data = _versioned(ConsumerProtocolAssignment(
                    assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(
                        topic=t, partitions=ps) for t, ps in by_topic.items()],
                    user_data=None))
                assignments.append(SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=member, assignment=data))
        synced = self.admin.call(
            "SyncGroup", 5, self.coordinator, group_id=self.group,
            generation_id=self.generation, member_id=self.member_id, group_instance_id=None,
            protocol_type="consumer", protocol_name="range", assignments=assignments)
        if synced.error_code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
            return self.join()
        check(synced.error_code)
        self.last_heartbeat = time.monotonic()
        return decode_assignment(bytes(synced.assignment))

    def heartbeat_due(self) -> bool:
        return time.monotonic() - self.last_heartbeat > self.session_timeout_ms / 3000

    def heartbeat(self) -> bool:
        """False when the group rebalances and this member must join again."""
        answer = self.admin.call("Heartbeat", 4, self.coordinator, group_id=self.group,
                                 generation_id=self.generation, member_id=self.member_id,
                                 group_instance_id=None)
        self.last_heartbeat = time.monotonic()
        if answer.error_code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID):
            return False
        check(answer.error_code)
        return True

    def committed(self) -> dict[TP, int]:
        return committed_offsets(self.admin, self.group, self.coordinator)

    def commit(self, offsets: dict[TP, int]) -> None:
        topics: dict[str, list[OffsetCommitRequest.OffsetCommitRequestPartition]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=partition, committed_offset=offset,
                    committed_leader_epoch=-1, committed_metadata=""))
        answer = self.admin.call(
            "OffsetCommit", 8, self.coordinator, group_id=self.group,
            generation_id_or_member_epoch=self.generation, member_id=self.member_id,
            group_instance_id=None, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                name=t, partitions=ps) for t, ps in topics.items()])
        for t in answer.topics:
            for p in t.partitions:
                if p.error_code not in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
                    check(p.error_code)

    def leave(self) -> None:
        if self.member_id:
            self.admin.call("LeaveGroup", 4, self.coordinator, group_id=self.group,
                            members=[LeaveGroupRequest.MemberIdentity(
                                member_id=self.member_id, group_instance_id=None)])
