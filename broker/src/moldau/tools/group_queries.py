"""What kafka-consumer-groups asks about a group: its description from the coordinator,
its committed offsets, the groups of the cluster. Shared by the describe and list actions
(consumer_groups.py) and the offset resets (group_offsets.py)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from moldau.protocol.generated.consumer_protocol_assignment import ConsumerProtocolAssignment
from moldau.protocol.generated.offset_fetch_request import OffsetFetchRequest
from moldau.tools.admin import Admin
from moldau.tools.kafka_errors import check
from moldau.tools.options import Options


@dataclass
class Member:
    member_id: str
    instance_id: str
    client_id: str
    host: str
    assignment: list[tuple[str, int]]


@dataclass
class Group:
    group_id: str
    state: str
    protocol: str
    coordinator: int
    members: list[Member] = field(default_factory=list)


def decode_assignment(data: bytes) -> list[tuple[str, int]]:
    """A member's ConsumerProtocolAssignment: its (topic, partition) pairs."""
    if len(data) < 2:
        return []
    version = min(struct.unpack(">h", data[:2])[0], 3)
    assignment, _ = ConsumerProtocolAssignment.decode_from(memoryview(data), 2, version)
    return [(t.topic, p) for t in assignment.assigned_partitions for p in sorted(t.partitions)]


def describe_group(admin: Admin, group_id: str) -> Group:
    coordinator = admin.find_coordinator(group_id)
    answer = admin.call("DescribeGroups", 5, coordinator, groups=[group_id],
                        include_authorized_operations=False)
    found = answer.groups[0]
    check(found.error_code)
    group = Group(group_id, found.group_state, found.protocol_data, coordinator)
    for m in found.members:
        assignment = (decode_assignment(bytes(m.member_assignment))
                      if found.protocol_type == "consumer" else [])
        group.members.append(Member(m.member_id, m.group_instance_id or "", m.client_id,
                                    m.client_host, assignment))
    return group


def committed_offsets(admin: Admin, group: str, coordinator: int) -> dict[tuple[str, int], int]:
    answer = admin.call("OffsetFetch", 8, coordinator, require_stable=False, groups=[
        OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)])
    found = answer.groups[0]
    check(found.error_code)
    return {(t.name, p.partition_index): p.committed_offset
            for t in found.topics for p in t.partitions if p.committed_offset >= 0}


def list_group_ids(admin: Admin) -> list[tuple[str, str]]:
    """(group id, state) of every consumer group, asking every broker (each coordinates
    its own share of the groups)."""
    groups: dict[str, str] = {}
    for broker in admin.metadata([]).brokers:
        answer = admin.call("ListGroups", 4, broker.node_id, states_filter=[])
        check(answer.error_code)
        for g in answer.groups:
            if g.protocol_type in ("consumer", ""):
                groups[g.group_id] = g.group_state
    return sorted(groups.items())


def group_ids(admin: Admin, options: Options) -> list[str]:
    if options.has("all-groups"):
        return [g for g, _ in list_group_ids(admin)]
    return options.all("group")
