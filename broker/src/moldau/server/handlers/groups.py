"""The consumer group APIs of the classic protocol: FindCoordinator (10), OffsetCommit
(8), OffsetFetch (9), JoinGroup (11), Heartbeat (12), LeaveGroup (13), SyncGroup (14),
DescribeGroups (15), ListGroups (16), DeleteGroups (42) and OffsetDelete (47)
(TxnOffsetCommit, the group coordinator's side of transactions: txn_offset_commit.py).

These translate between the wire and `moldau.coordinator.group`; the coordinator holds
the behaviour. OffsetCommit v0 and OffsetFetch v0 keep their offsets in ZooKeeper, under
`/consumers/<group>/offsets/<topic>/<partition>`, as Kafka 3.9 in ZooKeeper mode still
does (KafkaApis.commitOffsetsToZookeeper, handleOffsetFetchRequestFromZookeeper): apart
from the group coordinator's, so a v0 commit is seen only by v0 fetches.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from moldau.coordinator.group.group import Group, GroupState
from moldau.coordinator.group.offsets_log import OFFSETS_TOPIC
from moldau.coordinator.group.records import OffsetAndMetadata
from moldau.coordinator.transaction.partitioning import TRANSACTION_STATE_TOPIC
from moldau.errors import (
    ClusterAuthorizationFailedError,
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    OffsetMetadataTooLargeError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
    UnsupportedVersionError,
    error_for,
)
from moldau.protocol.generated.delete_groups_response import DeleteGroupsResponse
from moldau.protocol.generated.describe_groups_response import DescribeGroupsResponse
from moldau.protocol.generated.find_coordinator_response import FindCoordinatorResponse
from moldau.protocol.generated.heartbeat_response import HeartbeatResponse
from moldau.protocol.generated.join_group_response import JoinGroupResponse
from moldau.protocol.generated.leave_group_response import LeaveGroupResponse
from moldau.protocol.generated.list_groups_response import ListGroupsResponse
from moldau.protocol.generated.offset_commit_response import OffsetCommitResponse
from moldau.protocol.generated.offset_delete_response import OffsetDeleteResponse
from moldau.protocol.generated.offset_fetch_response import OffsetFetchResponse
from moldau.protocol.generated.sync_group_response import SyncGroupResponse
from moldau.security.acls import AclOperation, ResourceType

from .cluster_info import CLUSTER_NAME

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from moldau.cluster.zk_async import AsyncZk
    from moldau.coordinator.group.coordinator import GroupCoordinator
    from moldau.coordinator.transaction.coordinator import TransactionCoordinator
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

    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext
    from ..topic_admin import TopicAdmin

log = logging.getLogger("kafka.server.KafkaApis")

GROUP_KEY, TRANSACTION_KEY, SHARE_KEY = 0, 1, 2  # Kafka's CoordinatorType
KEY_TYPES = frozenset({GROUP_KEY, TRANSACTION_KEY, SHARE_KEY})
SHARE_KEY_VERSION = 6  # the first FindCoordinator version that may ask for a share key
INVALID_REQUEST = InvalidRequestError.code
NO_OPERATIONS = -(2**31)  # DescribeGroups without include_authorized_operations
# one partition of an OffsetFetch answer: (index, offset, leader epoch, metadata, error)
OffsetRow = tuple[int, int, int, str, int]


class _GroupHandler:
    def __init__(self, coordinator: GroupCoordinator, metadata: MetadataCache) -> None:
        self.coordinator = coordinator
        self.metadata = metadata


# --- FindCoordinator --------------------------------------------------------------------

class FindCoordinatorHandler(_GroupHandler):
    """Kafka 3.9's KafkaApis.getCoordinator in ZooKeeper mode. v6 (KIP-932) adds key type 2,
    a share-group state key: asked below v6 it is INVALID_REQUEST, without Cluster
    CLUSTER_ACTION CLUSTER_AUTHORIZATION_FAILED, and else COORDINATOR_NOT_AVAILABLE, as a
    ZooKeeper broker has no share coordinator. The error messages are Kafka's too: v0-3
    carry the code's default message (NONE's is "NONE"), v4+ none, except for an unknown
    key type, which fails the whole request (Kafka's error response)."""

    MIN_VERSION, MAX_VERSION = 0, 6

    def __init__(self, coordinator: GroupCoordinator, metadata: MetadataCache,
                 topics: TopicAdmin, transactions: TransactionCoordinator) -> None:
        super().__init__(coordinator, metadata)
        # FindCoordinator creates the offsets and transaction state topics on first use
        self.topics = topics
        self.transactions = transactions

    def __call__(self, ctx: RequestContext,
                 request: FindCoordinatorRequest) -> FindCoordinatorResponse:
        version = ctx.api_version
        key_type = request.key_type if version >= 1 else GROUP_KEY
        keys = request.coordinator_keys if version >= 4 else [request.key]
        if key_type in KEY_TYPES:
            found = [self._find(ctx, key_type, key) for key in keys]
            # Kafka's v4+ answers set no message; v0-3 the code's default one
            message: str | None = None
        else:  # Kafka's CoordinatorType.forId throws: the error response, every key
            log.debug("FindCoordinator with unknown coordinator key type %d", key_type)
            found = [(-1, "", -1, INVALID_REQUEST)] * len(keys)
            message = InvalidRequestError.default_message
        if version >= 4:
            return FindCoordinatorResponse(coordinators=[
                FindCoordinatorResponse.Coordinator(
                    key=key, node_id=node, host=host, port=port, error_code=error,
                    error_message=message)
                for key, (node, host, port, error) in zip(keys, found, strict=True)])
        node, host, port, error = found[0]
        response = FindCoordinatorResponse(error_code=error, node_id=node, host=host,
                                           port=port)
        if version >= 1:
            response.error_message = error_for(error).default_message if error else "NONE"
        return response

    def _find(self, ctx: RequestContext, key_type: int, key: str) -> tuple[int, str, int, int]:
        """(node id, host, port, error code): the coordinator of one key, Node.noNode
        (-1, "", -1) with an error."""
        try:
            if key_type == SHARE_KEY and ctx.api_version < SHARE_KEY_VERSION:
                raise InvalidRequestError("share coordinator keys need FindCoordinator v6")
            # authorization first, for both key types: a transactional id the requester may
            # not describe answers 53 even before transactions exist here
            if key_type == GROUP_KEY and not ctx.authorize(AclOperation.DESCRIBE,
                                                           ResourceType.GROUP, key):
                raise GroupAuthorizationFailedError(f"not authorized to describe group {key}")
            if key_type == TRANSACTION_KEY:
                if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
                    raise TransactionalIdAuthorizationFailedError(
                        f"not authorized to describe transactional id {key}")
                node = self._leader_of(TRANSACTION_STATE_TOPIC,
                                       self.transactions.partition_for(key),
                                       self.topics.create_transaction_state_topic)
            elif key_type == GROUP_KEY:
                node = self._leader_of(OFFSETS_TOPIC, self.coordinator.partition_of(key),
                                       self.topics.create_offsets_topic)
            else:  # SHARE_KEY: asked by brokers' share-group persisters only
                if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                     CLUSTER_NAME):
                    raise ClusterAuthorizationFailedError("share coordinator lookups need "
                                                          "CLUSTER_ACTION")
                raise CoordinatorNotAvailableError("no share coordinator in ZooKeeper mode")
            endpoint = self.metadata.endpoint(node, ctx.listener)
            if endpoint is None:
                raise CoordinatorNotAvailableError(f"broker {node} has no {ctx.listener}")
            return node, endpoint[0], endpoint[1], 0
        except KafkaError as exc:
            return -1, "", -1, exc.code

    def _leader_of(self, topic: str, partition: int, create: Callable[[], bool]) -> int:
        """The leader of the key's partition of the internal topic (the coordinator);
        the topic is created on first use."""
        metadata = self.metadata
        info = metadata.topics.get(topic)
        if info is None:
            create()
            raise CoordinatorNotAvailableError(f"{topic} is being created")
        state = info.partitions.get(partition)
        if state is None or state.leader < 0 or state.leader not in metadata.brokers:
            raise CoordinatorNotAvailableError(f"{topic}-{partition} has no leader")
        return state.leader


# --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ------------------------------------------

class JoinGroupHandler(_GroupHandler):
    MIN_VERSION, MAX_VERSION = 0, 9

    def __call__(self, ctx: RequestContext,
                 request: JoinGroupRequest) -> Awaitable[JoinGroupResponse]:
        return self._join(ctx, request)

    async def _join(self, ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
        version = ctx.api_version
        instance_id = request.group_instance_id if version >= 5 else None
        try:
            if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
                raise GroupAuthorizationFailedError(request.group_id)
            result = await self.coordinator.join_group(
                request.group_id, request.member_id, instance_id,
                require_known_member_id=version >= 4,
                supports_skip_assignment=version >= 9,
                client_id=ctx.client_id, client_host="/" + ctx.session.client_address,
                rebalance_timeout_ms=(request.rebalance_timeout_ms if version >= 1
                                      else request.session_timeout_ms),
                session_timeout_ms=request.session_timeout_ms,
                protocol_type=request.protocol_type,
                protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
                reason=request.reason if version >= 8 else None)
        except KafkaError as exc:
            return JoinGroupResponse(error_code=exc.code, generation_id=-1,
                                     protocol_name=None if version >= 7 else "",
                                     leader="", member_id=request.member_id, members=[])
        response = JoinGroupResponse(
            error_code=result.error, generation_id=result.generation,
            protocol_name=result.protocol if result.protocol is not None or version >= 7
            else "",
            leader=result.leader, member_id=result.member_id,
            members=[JoinGroupResponse.JoinGroupResponseMember(
                member_id=m, group_instance_id=i, metadata=meta)
                for m, i, meta in result.members])
        if version >= 7:
            response.protocol_type = result.protocol_type
        if version >= 9:
            response.skip_assignment = result.skip_assignment
        if result.error and version < 7:
            response.protocol_name = ""
        return response


class SyncGroupHandler(_GroupHandler):
    MIN_VERSION, MAX_VERSION = 0, 5

    def __call__(self, ctx: RequestContext,
                 request: SyncGroupRequest) -> Awaitable[SyncGroupResponse]:
        return self._sync(ctx, request)

    async def _sync(self, ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
        version = ctx.api_version
        try:
            if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
                raise GroupAuthorizationFailedError(request.group_id)
            result = await self.coordinator.sync_group(
                request.group_id, request.generation_id, request.member_id,
                request.group_instance_id if version >= 3 else None,
                request.protocol_type if version >= 5 else None,
                request.protocol_name if version >= 5 else None,
                {a.member_id: bytes(a.assignment) for a in request.assignments})
        except KafkaError as exc:
            return SyncGroupResponse(error_code=exc.code, assignment=b"")
        response = SyncGroupResponse(error_code=result.error, assignment=result.assignment)
        if version >= 5:
            response.protocol_type = result.protocol_type
            response.protocol_name = result.protocol
        return response


class HeartbeatHandler(_GroupHandler):
    MIN_VERSION, MAX_VERSION = 0, 4

    def __call__(self, ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
        try:
            if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
                raise GroupAuthorizationFailedError(request.group_id)
            self.coordinator.heartbeat(
                request.group_id, request.member_id,
                request.group_instance_id if ctx.api_version >= 3 else None,
                request.generation_id)
        except KafkaError as exc:
            return HeartbeatResponse(error_code=exc.code)
        return HeartbeatResponse(error_code=0)


class LeaveGroupHandler(_GroupHandler):
    MIN_VERSION, MAX_VERSION = 0, 5

    def __call__(self, ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
        version = ctx.api_version
        if version >= 3:
            leaving = [(m.member_id, m.group_instance_id,
                        m.reason if version >= 5 else None) for m in request.members]
        else:
            leaving = [(request.member_id, None, None)]
        try:
            if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
                raise GroupAuthorizationFailedError(request.group_id)
            errors = self.coordinator.leave_group(request.group_id, leaving)
        except KafkaError as exc:
            return LeaveGroupResponse(error_code=exc.code, members=[])
        if version < 3:
            return LeaveGroupResponse(error_code=errors[0])
        return LeaveGroupResponse(error_code=0, members=[
            LeaveGroupResponse.MemberResponse(member_id=m, group_instance_id=i, error_code=e)
            for (m, i, _), e in zip(leaving, errors, strict=True)])


# --- OffsetCommit, OffsetFetch, OffsetDelete -----------------------------------------------

class OffsetCommitHandler(_GroupHandler):
    MIN_VERSION, MAX_VERSION = 0, 9

    def __init__(self, coordinator: GroupCoordinator, metadata: MetadataCache,
                 zk: AsyncZk | None = None) -> None:
        super().__init__(coordinator, metadata)
        self.zk = zk  # v0's offsets; None: v0 answers UNSUPPORTED_VERSION, as Kafka in KRaft

    def __call__(self, ctx: RequestContext,
                 request: OffsetCommitRequest) -> Awaitable[OffsetCommitResponse]:
        return self._commit(ctx, request)

    async def _commit(self, ctx: RequestContext,
                      request: OffsetCommitRequest) -> OffsetCommitResponse:
        version = ctx.api_version
        now = int(time.time() * 1000)
        retention = request.retention_time_ms if 2 <= version <= 4 else -1
        expire = now + retention if retention != -1 else None
        group_allowed = ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id)
        errors: dict[tuple[str, int], int] = {}
        wanted: dict[tuple[str, int], OffsetAndMetadata] = {}
        # the generated fields type their elements loosely: name what they are
        topic: OffsetCommitRequest.OffsetCommitRequestTopic
        p: OffsetCommitRequest.OffsetCommitRequestPartition
        for topic in request.topics:
            topic_error = 0
            if not group_allowed:
                topic_error = GroupAuthorizationFailedError.code
            elif not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name):
                topic_error = TopicAuthorizationFailedError.code
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if topic_error:
                    errors[tp] = topic_error
                elif self.metadata.partition(topic.name, p.partition_index) is None:
                    errors[tp] = UnknownTopicOrPartitionError.code
                else:
                    timestamp = p.commit_timestamp if version == 1 else -1
                    wanted[tp] = OffsetAndMetadata(
                        p.committed_offset,
                        p.committed_leader_epoch if version >= 6 else -1,
                        p.committed_metadata or "",
                        now if timestamp == -1 else timestamp, expire)
        if wanted and version == 0:
            errors.update(await self._commit_to_zookeeper(request.group_id, wanted))
        elif wanted:
            try:
                errors.update(await self.coordinator.commit_offsets(
                    request.group_id, request.member_id,
                    request.group_instance_id if version >= 7 else None,
                    request.generation_id_or_member_epoch, wanted))
            except KafkaError as exc:
                errors.update(dict.fromkeys(wanted, exc.code))
        topics = []
        for topic in request.topics:
            topics.append(OffsetCommitResponse.OffsetCommitResponseTopic(
                name=topic.name, partitions=[
                    OffsetCommitResponse.OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors[(topic.name, p.partition_index)])
                    for p in topic.partitions]))
        return OffsetCommitResponse(topics=topics)

    async def _commit_to_zookeeper(self, group_id: str,
                                   wanted: dict[tuple[str, int], OffsetAndMetadata]
                                   ) -> dict[tuple[str, int], int]:
        """v0: each offset to its znode, with the coordinator's metadata limit; no group
        membership or generation is checked (Kafka's commitOffsetsToZookeeper)."""
        zk = self.zk
        if zk is None:
            return dict.fromkeys(wanted, UnsupportedVersionError.code)
        limit = self.coordinator.config.offset_metadata_max_bytes
        errors: dict[tuple[str, int], int] = {}
        for (topic, partition), offset in wanted.items():
            if len(offset.metadata) > limit:
                errors[(topic, partition)] = OffsetMetadataTooLargeError.code
                continue
            try:
                await zk.call(zk.client.set_or_create_consumer_offset, group_id, topic,
                              partition, offset.offset)
                errors[(topic, partition)] = 0
            except KafkaError as exc:
                errors[(topic, partition)] = exc.code
            except Exception:
                log.exception("OffsetCommit v0 of %s-%d for group %s to ZooKeeper failed",
                              topic, partition, group_id)
                errors[(topic, partition)] = KafkaError.code
        return errors


class OffsetFetchHandler(_GroupHandler):
    MIN_VERSION, MAX_VERSION = 0, 9

    def __init__(self, coordinator: GroupCoordinator, metadata: MetadataCache,
                 zk: AsyncZk | None = None) -> None:
        super().__init__(coordinator, metadata)
        self.zk = zk  # v0's offsets; None: v0 answers UNSUPPORTED_VERSION, as Kafka in KRaft

    def __call__(self, ctx: RequestContext, request: OffsetFetchRequest
                 ) -> OffsetFetchResponse | Awaitable[OffsetFetchResponse]:
        version = ctx.api_version
        if version == 0:
            return self._fetch_from_zookeeper(ctx, request)
        stable = version >= 7 and request.require_stable
        if version >= 8:
            groups = [self._group(ctx, g.group_id, self._wanted(g.topics), version, stable)
                      for g in request.groups]
            return OffsetFetchResponse(groups=[
                OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=g, topics=[
                        OffsetFetchResponse.OffsetFetchResponseTopics(
                            name=t, partitions=[
                                OffsetFetchResponse.OffsetFetchResponsePartitions(
                                    partition_index=i, committed_offset=o,
                                    committed_leader_epoch=e, metadata=m, error_code=pe)
                                for i, o, e, m, pe in parts])
                        for t, parts in topics],
                    error_code=error)
                for g, topics, error in groups])
        _, topics, error = self._group(ctx, request.group_id,
                                       self._wanted(request.topics), version, stable)
        if version < 2 and error:
            # no top-level error before v2: every partition carries it
            topics = [(t, [(i, -1, -1, "", error) for i, *_ in parts]) for t, parts in topics]
        response = OffsetFetchResponse(topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(name=t, partitions=[
                OffsetFetchResponse.OffsetFetchResponsePartition(
                    partition_index=i, committed_offset=o, committed_leader_epoch=e,
                    metadata=m, error_code=pe)
                for i, o, e, m, pe in parts])
            for t, parts in topics])
        if version >= 2:
            response.error_code = error
        return response

    async def _fetch_from_zookeeper(self, ctx: RequestContext, request: OffsetFetchRequest
                                    ) -> OffsetFetchResponse:
        """v0 (Kafka's handleOffsetFetchRequestFromZookeeper): a denied group puts
        GROUP_AUTHORIZATION_FAILED in every partition; a denied topic's partitions answer
        TOPIC_AUTHORIZATION_FAILED, a partition the metadata does not know, or without a
        znode, UNKNOWN_TOPIC_OR_PARTITION; the metadata is always empty."""
        wanted = self._wanted(request.topics) or []
        rows: list[tuple[tuple[str, int], tuple[int, int, str, int]]] = []
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id):
            rows = [(tp, (-1, -1, "", GroupAuthorizationFailedError.code)) for tp in wanted]
        elif self.zk is None:
            rows = [(tp, (-1, -1, "", UnsupportedVersionError.code)) for tp in wanted]
        else:
            zk = self.zk
            allowed: dict[str, bool] = {}
            for tp in wanted:
                topic, partition = tp
                if topic not in allowed:
                    allowed[topic] = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                   topic)
                if not allowed[topic]:
                    rows.append((tp, (-1, -1, "", TopicAuthorizationFailedError.code)))
                    continue
                if self.metadata.partition(topic, partition) is None:
                    rows.append((tp, (-1, -1, "", UnknownTopicOrPartitionError.code)))
                    continue
                try:
                    offset = await zk.call(zk.client.get_consumer_offset, request.group_id,
                                           topic, partition)
                except KafkaError as exc:
                    rows.append((tp, (-1, -1, "", exc.code)))
                    continue
                except Exception:
                    log.exception("OffsetFetch v0 of %s-%d for group %s from ZooKeeper failed",
                                  topic, partition, request.group_id)
                    rows.append((tp, (-1, -1, "", KafkaError.code)))
                    continue
                rows.append((tp, (-1, -1, "", UnknownTopicOrPartitionError.code)
                             if offset is None else (offset, -1, "", 0)))
        return OffsetFetchResponse(topics=[
            OffsetFetchResponse.OffsetFetchResponseTopic(name=t, partitions=[
                OffsetFetchResponse.OffsetFetchResponsePartition(
                    partition_index=i, committed_offset=o, committed_leader_epoch=e,
                    metadata=m, error_code=pe)
                for i, o, e, m, pe in parts])
            for t, parts in _by_topic(rows)])

    @staticmethod
    def _wanted(topics: list[OffsetFetchRequest.OffsetFetchRequestTopic]
                | list[OffsetFetchRequest.OffsetFetchRequestTopics] | None
                ) -> list[tuple[str, int]] | None:
        if topics is None:
            return None
        return [(t.name, p) for t in topics for p in t.partition_indexes]

    def _group(self, ctx: RequestContext, group_id: str, wanted: list[tuple[str, int]] | None,
               version: int, require_stable: bool
               ) -> tuple[str, list[tuple[str, list[OffsetRow]]], int]:
        try:
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                raise GroupAuthorizationFailedError(group_id)
            found = self.coordinator.fetch_offsets(group_id, wanted)
            # RequireStable (v7+): a partition whose commit is in flight or in an open
            # transaction answers 88, per partition, whatever the version
            unstable = (self.coordinator.unstable_offsets(group_id, found)
                        if require_stable else set())
        except KafkaError as exc:
            # v2+ carry a group's error by itself, without its partitions (Kafka's
            # OffsetFetchResponse.groupError); v1 has nowhere else to put it
            failed = [] if version >= 2 else [(tp, (-1, -1, "", exc.code)) for tp in wanted or []]
            return group_id, _by_topic(failed), exc.code
        rows = []
        for tp, offset in found.items():
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, tp[0]):
                if wanted is None:
                    continue  # the all-partitions form leaves unauthorized topics out
                rows.append((tp, (-1, -1, "", TopicAuthorizationFailedError.code)))
            elif tp in unstable:
                rows.append((tp, (-1, -1, "", UnstableOffsetCommitError.code)))
            elif offset is None:
                rows.append((tp, (-1, -1, "", 0)))
            else:
                rows.append((tp, (offset.offset, offset.leader_epoch, offset.metadata, 0)))
        return group_id, _by_topic(rows), 0


def _by_topic(rows: list[tuple[tuple[str, int], tuple[int, int, str, int]]]
              ) -> list[tuple[str, list[OffsetRow]]]:
    topics: dict[str, list[OffsetRow]] = {}
    for (topic, index), (offset, epoch, metadata, error) in rows:
        topics.setdefault(topic, []).append((index, offset, epoch, metadata, error))
    return list(topics.items())


class OffsetDeleteHandler(_GroupHandler):
    MIN_VERSION, MAX_VERSION = 0, 0

    def __call__(self, ctx: RequestContext,
                 request: OffsetDeleteRequest) -> Awaitable[OffsetDeleteResponse]:
        return self._delete(ctx, request)

    async def _delete(self, ctx: RequestContext,
                      request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
        try:
            if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
                raise GroupAuthorizationFailedError(request.group_id)
            errors = dict.fromkeys(wanted, 0)
            allowed = []
            for tp in wanted:
                if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, tp[0]):
                    errors[tp] = TopicAuthorizationFailedError.code
                elif self.metadata.partition(*tp) is None:
                    errors[tp] = UnknownTopicOrPartitionError.code
                else:
                    allowed.append(tp)
            errors.update(await self.coordinator.delete_offsets(request.group_id, allowed))
        except KafkaError as exc:
            return OffsetDeleteResponse(error_code=exc.code, topics=[])
        return OffsetDeleteResponse(error_code=0, topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(name=t.name, partitions=[
                OffsetDeleteResponse.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index,
                    error_code=errors[(t.name, p.partition_index)])
                for p in t.partitions])
            for t in request.topics])


# --- DescribeGroups, ListGroups, DeleteGroups --------------------------------------------

class DescribeGroupsHandler(_GroupHandler):
    MIN_VERSION, MAX_VERSION = 0, 5

    def __call__(self, ctx: RequestContext,
                 request: DescribeGroupsRequest) -> DescribeGroupsResponse:
        version = ctx.api_version
        with_operations = version >= 3 and request.include_authorized_operations
        return DescribeGroupsResponse(groups=[
            self._describe(ctx, group_id, with_operations) for group_id in request.groups])

    def _describe(self, ctx: RequestContext, group_id: str,
                  with_operations: bool) -> DescribeGroupsResponse.DescribedGroup:
        Described = DescribeGroupsResponse.DescribedGroup
        try:
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                raise GroupAuthorizationFailedError(group_id)
            group = self.coordinator.describe_group(group_id)
        except KafkaError as exc:
            return Described(error_code=exc.code, group_id=group_id, group_state="",
                             protocol_type="", protocol_data="", members=[])
        operations = (ctx.authorized_operations(ResourceType.GROUP, group_id)
                      if with_operations else NO_OPERATIONS)
        if group is None:
            # Kafka 3.9 describes an unknown group as Dead, without an error
            return Described(error_code=0, group_id=group_id,
                             group_state=GroupState.DEAD.value, protocol_type="",
                             protocol_data="", members=[], authorized_operations=operations)
        stable = group.is_in(GroupState.STABLE) and group.protocol is not None
        protocol = group.protocol if stable else None
        members = [
            DescribeGroupsResponse.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata(protocol) if protocol is not None else b"",
                member_assignment=m.assignment if stable else b"")
            for m in group.members.values()]
        return Described(error_code=0, group_id=group_id, group_state=group.state.value,
                         protocol_type=group.protocol_type or "",
                         protocol_data=group.protocol if stable else "", members=members,
                         authorized_operations=operations)


class ListGroupsHandler(_GroupHandler):
    MIN_VERSION, MAX_VERSION = 0, 5

    def __call__(self, ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
        version = ctx.api_version
        states = {s.lower() for s in request.states_filter} if version >= 4 else set()
        types = {t.lower() for t in request.types_filter} if version >= 5 else set()
        try:
            groups: list[Group] = self.coordinator.list_groups()
        except KafkaError as exc:
            return ListGroupsResponse(error_code=exc.code, groups=[])
        # DESCRIBE on the cluster lists every group; else only the groups the requester may
        # describe, silently (a filter: neither denial is logged as one)
        every_group = ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME,
                                    log_if_denied=False)
        listed = []
        for group in groups:
            if states and group.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            if not every_group and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP,
                                                     group.group_id, log_if_denied=False):
                continue
            item = ListGroupsResponse.ListedGroup(group_id=group.group_id,
                                                  protocol_type=group.protocol_type or "")
            if version >= 4:
                item.group_state = group.state.value
            if version >= 5:
                item.group_type = "classic"
            listed.append(item)
        return ListGroupsResponse(error_code=0, groups=listed)


class DeleteGroupsHandler(_GroupHandler):
    MIN_VERSION, MAX_VERSION = 0, 2

    def __call__(self, ctx: RequestContext,
                 request: DeleteGroupsRequest) -> Awaitable[DeleteGroupsResponse]:
        return self._delete(ctx, request)

    async def _delete(self, ctx: RequestContext,
                      request: DeleteGroupsRequest) -> DeleteGroupsResponse:
        allowed = [g for g in request.groups_names
                   if ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, g)]
        results = await self.coordinator.delete_groups(allowed)
        return DeleteGroupsResponse(results=[
            DeleteGroupsResponse.DeletableGroupResult(
                group_id=g, error_code=results.get(g, GroupAuthorizationFailedError.code))
            for g in request.groups_names])
