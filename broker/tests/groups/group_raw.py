"""Raw group-protocol helpers for the group coordinator's component tests: members that
each own a connection (a JoinGroup or SyncGroup waits in the broker until the rebalance
moves on, so a member's connection is busy while it waits), the consumer protocol's
subscription and assignment bytes, and one-call wrappers for the group APIs.

Error codes are Kafka's (the `Errors` enumeration of the Java client), written out here so
the tests do not depend on the broker's own tables."""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Sequence
from typing import Any

from moldau.client.blocking import BlockingConnection
from moldau.protocol.generated.delete_groups_request import DeleteGroupsRequest
from moldau.protocol.generated.describe_groups_request import DescribeGroupsRequest
from moldau.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.generated.heartbeat_request import HeartbeatRequest
from moldau.protocol.generated.join_group_request import JoinGroupRequest
from moldau.protocol.generated.leave_group_request import LeaveGroupRequest
from moldau.protocol.generated.list_groups_request import ListGroupsRequest
from moldau.protocol.generated.offset_commit_request import OffsetCommitRequest
from moldau.protocol.generated.offset_delete_request import OffsetDeleteRequest
from moldau.protocol.generated.offset_fetch_request import OffsetFetchRequest
from moldau.protocol.generated.sync_group_request import SyncGroupRequest
from moldau.protocol.headers import decode_response

# API keys
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP = 8, 9, 10, 11
HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 12, 13, 14, 15, 16
DESCRIBE_CONFIGS, DELETE_GROUPS, OFFSET_DELETE = 32, 42, 47

# Kafka error codes
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_METADATA_TOO_LARGE = 12
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
NON_EMPTY_GROUP = 68
GROUP_ID_NOT_FOUND = 69
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82
GROUP_SUBSCRIBED_TO_TOPIC = 86

# the versions the tests speak unless a test is about another one
JOIN_V, SYNC_V, HEARTBEAT_V, LEAVE_V, COMMIT_V, FETCH_V = 9, 5, 4, 5, 8, 8
SESSION_MS, REBALANCE_MS = 10_000, 8_000
CONSUMER = "consumer"


OFFSETS_PARTITIONS = 5  # offsets.topic.num.partitions of the group brokers


def group_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def java_hash(text: str) -> int:
    """Java's String.hashCode: 31-polynomial over UTF-16 code units, as a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group: str, partitions: int = OFFSETS_PARTITIONS) -> int:
    """Kafka's GroupMetadataManager.partitionFor: Utils.abs(hashCode) % partitions, where
    Utils.abs maps Integer.MIN_VALUE to 0."""
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def ensure_coordinator(conn: BlockingConnection, partitions: int = OFFSETS_PARTITIONS) -> None:
    """What a client does first: FindCoordinator (which creates __consumer_offsets on
    first use) until it answers, then until groups of every offsets partition are
    loaded (DescribeGroups answers no NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS)."""
    probes: dict[int, str] = {}
    n = 0
    while len(probes) < partitions:
        probes.setdefault(partition_for(f"probe-{n}", partitions), f"probe-{n}")
        n += 1
    wait_for(lambda: find_coordinator(conn, probes[0]).error_code == NONE,
             "FindCoordinator to answer", timeout=20)

    def loaded() -> bool:
        answer = conn.request(DESCRIBE_GROUPS, 5, DescribeGroupsRequest(
            groups=list(probes.values()), include_authorized_operations=False))
        return all(g.error_code == NONE for g in answer.groups)

    wait_for(loaded, "the group coordinator to load every offsets partition", timeout=20)


# ---- the consumer protocol's embedded bytes (ConsumerProtocolSubscription/Assignment v0)

def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def subscription(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    return (struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics)
            + struct.pack(">i", -1))


def assignment(partitions: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: version, (topic, partitions) list, null user data."""
    out = [struct.pack(">hi", 0, len(partitions))]
    for topic, indexes in partitions.items():
        out.append(_string(topic) + struct.pack(f">i{len(indexes)}i", len(indexes), *indexes))
    out.append(struct.pack(">i", -1))
    return b"".join(out)


# ---- requests that wait in the broker: send now, read later

class Pending:
    """A request sent on a connection whose response is read later."""

    def __init__(self, conn: BlockingConnection, api_key: int, version: int, body: Any) -> None:
        self.conn, self.api_key, self.version = conn, api_key, version
        self.correlation = conn.send(api_key, version, body)

    def result(self) -> Any:
        got, response = decode_response(self.conn.read_frame(), self.api_key, self.version)
        assert got == self.correlation, (got, self.correlation)
        return response


class Member:
    """One group member speaking the classic protocol on its own connection."""

    def __init__(self, broker: Any, group: str, *, client_id: str = "member",
                 topics: Sequence[str] = ("topic-a",),
                 protocols: Sequence[tuple[str, bytes]] | None = None,
                 instance_id: str | None = None, protocol_type: str = CONSUMER,
                 session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS) -> None:
        self.broker, self.group, self.client_id = broker, group, client_id
        self.protocols = list(protocols if protocols is not None
                              else [("range", subscription(topics))])
        self.instance_id, self.protocol_type = instance_id, protocol_type
        self.session_ms, self.rebalance_ms = session_ms, rebalance_ms
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader = ""
        self.members: list[Any] = []  # the leader's member list of the last join
        self.conn = BlockingConnection("127.0.0.1", broker.port, timeout=20.0,
                                       client_id=client_id)
        self._pending: Pending | None = None

    def close(self) -> None:
        self.conn.close()

    def reconnect(self) -> None:
        """A fresh connection (as a restarted client would have)."""
        self.conn.close()
        self.conn = BlockingConnection("127.0.0.1", self.broker.port, timeout=20.0,
                                       client_id=self.client_id)

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.member_id == self.leader

    def join_request(self, version: int = JOIN_V) -> JoinGroupRequest:
        request = JoinGroupRequest(
            group_id=self.group, session_timeout_ms=self.session_ms,
            rebalance_timeout_ms=self.rebalance_ms, member_id=self.member_id,
            protocol_type=self.protocol_type,
            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=m)
                       for n, m in self.protocols])
        if version >= 5:
            request.group_instance_id = self.instance_id
        return request

    def send_join(self, version: int = JOIN_V) -> None:
        self._pending = Pending(self.conn, JOIN_GROUP, version, self.join_request(version))

    def read_join(self) -> Any:
        assert self._pending is not None
        response, self._pending = self._pending.result(), None
        if response.error_code in (NONE, MEMBER_ID_REQUIRED):
            self.member_id = response.member_id
        if response.error_code == NONE:
            self.generation = response.generation_id
            self.protocol = response.protocol_name
            self.leader = response.leader
            self.members = list(response.members)
        return response

    def join(self, version: int = JOIN_V) -> Any:
        """JoinGroup, answering MEMBER_ID_REQUIRED once with the id it hands out."""
        self.send_join(version)
        response = self.read_join()
        if response.error_code == MEMBER_ID_REQUIRED:
            self.send_join(version)
            response = self.read_join()
        return response

    def obtain_member_id(self) -> None:
        """The first half of a v4+ join: the broker hands out a member id."""
        self.send_join()
        response = self.read_join()
        assert response.error_code == MEMBER_ID_REQUIRED and response.member_id, response

    def sync_request(self, assignments: dict[str, bytes] | None = None,
                     version: int = SYNC_V) -> SyncGroupRequest:
        request = SyncGroupRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=k, assignment=v)
                         for k, v in (assignments or {}).items()])
        if version >= 3:
            request.group_instance_id = self.instance_id
        if version >= 5:
            request.protocol_type = self.protocol_type
            request.protocol_name = self.protocol
        return request

    def send_sync(self, assignments: dict[str, bytes] | None = None,
                  version: int = SYNC_V) -> None:
        self._pending = Pending(self.conn, SYNC_GROUP, version,
                                self.sync_request(assignments, version))

    def read_sync(self) -> Any:
        assert self._pending is not None
        response, self._pending = self._pending.result(), None
        return response

    def sync(self, assignments: dict[str, bytes] | None = None, version: int = SYNC_V) -> Any:
        self.send_sync(assignments, version)
        return self.read_sync()

    def heartbeat(self, conn: BlockingConnection | None = None, *,
                  generation: int | None = None, member_id: str | None = None) -> int:
        """Heartbeat's error code; on another connection when ours waits for a join."""
        return heartbeat(conn or self.conn, self.group,
                         self.generation if generation is None else generation,
                         self.member_id if member_id is None else member_id,
                         self.instance_id)

    def commit(self, offsets: dict[tuple[str, int], int], *,
               conn: BlockingConnection | None = None, generation: int | None = None,
               member_id: str | None = None, metadata: str = "") -> dict[tuple[str, int], int]:
        return commit(conn or self.conn, self.group, offsets,
                      generation=self.generation if generation is None else generation,
                      member_id=self.member_id if member_id is None else member_id,
                      instance_id=self.instance_id, metadata=metadata)


def form_group(conn: BlockingConnection, members: Sequence[Member],
               assignments: dict[int, bytes] | None = None) -> list[Any]:
    """Bring members into one Stable generation, the Kafka way with a 0 ms initial delay:
    the first joins alone and syncs; the others obtain member ids (dynamic ones) and send JoinGroup
    (which waits in PreparingRebalance); once DescribeGroups lists all of them the first
    rejoins, which completes the rebalance for everybody. The leader then hands out
    assignments[i] to members[i] (default: empty). Returns the JoinGroup responses."""
    first, others = members[0], list(members[1:])
    response = first.join()
    assert response.error_code == NONE, response
    if others:
        sync = first.sync({first.member_id: b""})
        assert sync.error_code == NONE, sync
        for member in others:
            if member.instance_id is None:  # static members join without that round
                member.obtain_member_id()
            member.send_join()
        wait_for(lambda: len(describe(conn, first.group).members) == len(members),
                 f"{len(members)} members in {first.group}")
        first.send_join()
        responses = [first.read_join()] + [m.read_join() for m in others]
    else:
        responses = [response]
    for answer in responses:
        assert answer.error_code == NONE, answer
        assert answer.generation_id == responses[0].generation_id, responses
    leader = next(m for m in members if m.is_leader)
    plan = {m.member_id: (assignments or {}).get(i, b"") for i, m in enumerate(members)}
    for member in members:  # followers first: their SyncGroup waits for the leader's
        if member is not leader:
            member.send_sync()
    leader.send_sync(plan)
    for member in [leader] + [m for m in members if m is not leader]:
        answer = member.read_sync()
        assert answer.error_code == NONE, answer
        assert answer.assignment == plan[member.member_id], (answer, plan)
    return responses


def wait_for(check: Any, what: str, timeout: float = 10.0) -> Any:
    """Poll check() until it is true; fail with `what` after the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


# ---- one-call wrappers

def find_coordinator(conn: BlockingConnection, key: str, version: int = 3,
                     key_type: int = 0) -> Any:
    request = FindCoordinatorRequest()
    if version >= 4:
        request.coordinator_keys = [key]
    else:
        request.key = key
    if version >= 1:
        request.key_type = key_type
    return conn.request(FIND_COORDINATOR, version, request)


def heartbeat(conn: BlockingConnection, group: str, generation: int, member_id: str,
              instance_id: str | None = None, version: int = HEARTBEAT_V) -> int:
    request = HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id)
    if version >= 3:
        request.group_instance_id = instance_id
    return conn.request(HEARTBEAT, version, request).error_code


def commit(conn: BlockingConnection, group: str, offsets: dict[tuple[str, int], int], *,
           generation: int = -1, member_id: str = "", instance_id: str | None = None,
           metadata: str | dict[tuple[str, int], str] = "", version: int = COMMIT_V,
           leader_epoch: int = -1, retention_ms: int = -1,
           commit_timestamp: int = -1) -> dict[tuple[str, int], int]:
    """OffsetCommit; the error code of each partition. generation -1 and an empty member
    id are the standalone (simple consumer / admin) form."""
    topics: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        part = OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset,
            committed_metadata=metadata if isinstance(metadata, str)
            else metadata[(topic, partition)])
        if version >= 6:
            part.committed_leader_epoch = leader_epoch
        if version == 1:
            part.commit_timestamp = commit_timestamp
        topics.setdefault(topic, []).append(part)
    request = OffsetCommitRequest(group_id=group, topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
        for t, p in topics.items()])
    if version >= 1:
        request.generation_id_or_member_epoch = generation
        request.member_id = member_id
    if 2 <= version <= 4:
        request.retention_time_ms = retention_ms
    if version >= 7:
        request.group_instance_id = instance_id
    response = conn.request(OFFSET_COMMIT, version, request)
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


def fetch_offsets(conn: BlockingConnection, group: str,
                  partitions: dict[str, list[int]] | None, *, version: int = 7,
                  require_stable: bool = False) -> dict[tuple[str, int], tuple[int, str | None]]:
    """OffsetFetch in the single-group form (v7 and below); {(topic, partition):
    (offset, metadata)}; every partition and the group must answer without error.
    partitions None: all the group's committed partitions."""
    request = OffsetFetchRequest(group_id=group, topics=None if partitions is None else [
        OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=p)
        for t, p in partitions.items()])
    if version >= 7:
        request.require_stable = require_stable
    response = conn.request(OFFSET_FETCH, version, request)
    if version >= 2:
        assert response.error_code == NONE, response
    result = {}
    for topic in response.topics:
        for p in topic.partitions:
            assert p.error_code == NONE, response
            result[(topic.name, p.partition_index)] = (p.committed_offset, p.metadata)
    return result


def committed(conn: BlockingConnection, group: str, topic: str, partition: int = 0) -> int:
    """The committed offset of one partition (-1: none)."""
    return fetch_offsets(conn, group, {topic: [partition]})[(topic, partition)][0]


def describe(conn: BlockingConnection, group: str, version: int = 5,
             operations: bool = False) -> Any:
    response = conn.request(DESCRIBE_GROUPS, version, DescribeGroupsRequest(
        groups=[group], include_authorized_operations=operations))
    assert len(response.groups) == 1, response
    return response.groups[0]


def list_groups(conn: BlockingConnection, states: list[str] | None = None,
                types: list[str] | None = None, version: int = 4) -> dict[str, Any]:
    request = ListGroupsRequest()
    if version >= 4:
        request.states_filter = states or []
    if version >= 5:
        request.types_filter = types or []
    response = conn.request(LIST_GROUPS, version, request)
    assert response.error_code == NONE, response
    return {g.group_id: g for g in response.groups}


def delete_groups(conn: BlockingConnection, groups: list[str]) -> dict[str, int]:
    response = conn.request(DELETE_GROUPS, 2, DeleteGroupsRequest(groups_names=groups))
    return {r.group_id: r.error_code for r in response.results}


def delete_offsets(conn: BlockingConnection, group: str,
                   partitions: dict[str, list[int]]) -> tuple[int, dict[tuple[str, int], int]]:
    response = conn.request(OFFSET_DELETE, 0, OffsetDeleteRequest(group_id=group, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=t, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=i) for i in p])
        for t, p in partitions.items()]))
    return response.error_code, {(t.name, p.partition_index): p.error_code
                                 for t in response.topics for p in t.partitions}


def leave(conn: BlockingConnection, group: str, members: list[tuple[str, str | None]],
          version: int = LEAVE_V) -> Any:
    """LeaveGroup v3+ for a batch of (member id, group instance id)."""
    return conn.request(LEAVE_GROUP, version, LeaveGroupRequest(group_id=group, members=[
        LeaveGroupRequest.MemberIdentity(member_id=m, group_instance_id=i)
        for m, i in members]))
