"""Every API the broker advertises authorizes as Kafka 3.9 does (issue 36): one table, one
row per API key, each sent raw at the newest version the broker serves, first by a
principal with no ACL at all, then with the ACLs that allow it.

One broker with the AclAuthorizer: its PLAINTEXT listener's principal, User:ANONYMOUS,
is no super user and is the one every row asks as; an SSL listener with a client
certificate mapped to User:admin (in `super.users`) sets the scene and grants and revokes
the ACLs. The assertions are per partition, per resource and per listing: a denied topic
among allowed ones answers 29 while the others succeed, a denied unknown topic answers 29
rather than 3, and listings leave out what may not be described. Inter-broker APIs answer
31 to a principal without CLUSTER_ACTION; with it, they are asked with a stale broker
epoch (or for an unknown broker) so that nothing on the broker changes.
"""

from __future__ import annotations

import ssl
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tls_material import make_tls_material

from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol._runtime import Message
from moldau.protocol.generated import (
    AllocateProducerIdsRequest,
    AlterClientQuotasRequest,
    AlterConfigsRequest,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    AlterUserScramCredentialsRequest,
    ApiVersionsRequest,
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    ControlledShutdownRequest,
    CreateAclsRequest,
    CreateDelegationTokenRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeDelegationTokenRequest,
    DescribeGroupsRequest,
    DescribeLogDirsRequest,
    DescribeUserScramCredentialsRequest,
    ElectLeadersRequest,
    EnvelopeRequest,
    ExpireDelegationTokenRequest,
    FetchRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    IncrementalAlterConfigsRequest,
    InitProducerIdRequest,
    JoinGroupRequest,
    LeaderAndIsrRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    ListOffsetsRequest,
    ListPartitionReassignmentsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    ProduceRequest,
    RenewDelegationTokenRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    StopReplicaRequest,
    SyncGroupRequest,
    UpdateFeaturesRequest,
    UpdateMetadataRequest,
)
from moldau.protocol.generated.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from moldau.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from moldau.protocol.generated.alter_replica_log_dirs_request import (
    AlterReplicaLogDirsRequest,
)
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.describe_producers_request import DescribeProducersRequest
from moldau.protocol.generated.describe_transactions_request import (
    DescribeTransactionsRequest,
)
from moldau.protocol.generated.end_txn_request import EndTxnRequest
from moldau.protocol.generated.list_transactions_request import ListTransactionsRequest
from moldau.protocol.generated.txn_offset_commit_request import TxnOffsetCommitRequest
from moldau.protocol.generated.write_txn_markers_request import WriteTxnMarkersRequest
from moldau.protocol.records import build_batch
from moldau.security.acls import AclOperation, AclPermissionType, PatternType, ResourceType
from moldau.server.api_table import API_TABLE

from .raw import create_topic, records, topic_name, wait_until

# Kafka's error codes the rows expect
NONE, UNKNOWN_TOPIC, LEADER_NOT_AVAILABLE, BROKER_NOT_AVAILABLE = 0, 3, 5, 8
COORDINATOR_NOT_AVAILABLE, UNKNOWN_MEMBER_ID = 15, 25
OPERATION_NOT_ATTEMPTED = 55
# what a transaction coordinator answers an authorized request here: its own errors
# (producer 1 is nobody's; the id's partition may still be loading) but no denial
COORDINATOR_ANSWERS = frozenset({0, 14, 15, 16, 47, 48, 49, 51, 90})
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED = 29, 30, 31
INVALID_REQUEST, TXN_ID_DENIED, STALE_BROKER_EPOCH = 42, 53, 77
MEMBER_ID_REQUIRED, ELECTION_NOT_NEEDED, NO_REASSIGNMENT = 79, 84, 85
UNKNOWN_TOPIC_ID = 100
BROKER_ID_NOT_REGISTERED = 102
RESOURCE_NOT_FOUND = 91
NO_OPERATIONS = -(2**31)  # an authorized-operations field left at its default
TOPIC_RESOURCE, BROKER_RESOURCE, LOGGER_RESOURCE = 2, 4, 8  # ConfigResource types
CLUSTER = "kafka-cluster"
ZERO_ID = uuid.UUID(int=0)
# far ahead of any controller epoch, so that an allowed controller request is refused
# for its stale broker epoch (0) instead of being applied
FUTURE_CONTROLLER_EPOCH = 2**31 - 1


def bits(*operations: AclOperation) -> int:
    """KIP-430's authorized-operations bit field."""
    return sum(1 << op.value for op in operations)


# --------------------------------------------------------------------------- the broker


@dataclass(frozen=True)
class Grant:
    """An ALLOW ACL for User:ANONYMOUS from any host."""

    resource: ResourceType
    name: str
    operation: AclOperation


class Names:
    """The topics and groups the module sets up, named afresh per run."""

    def __init__(self) -> None:
        self.ok = topic_name("allowed")  # 2 partitions, records; the rows allow it
        self.no = topic_name("denied")  # 2 partitions, records; never allowed
        self.rec = topic_name("records")  # records, for DeleteRecords
        self.del1 = topic_name("delete-by-name")
        self.del2 = topic_name("delete-by-id")
        self.missing = topic_name("missing")  # never created
        self.group = f"group-{uuid.uuid4().hex[:8]}"  # offsets on ok and no
        self.group_delete = f"group-delete-{uuid.uuid4().hex[:8]}"  # for DeleteGroups
        self.group_offsets = f"group-offsets-{uuid.uuid4().hex[:8]}"  # for OffsetDelete
        self.txn = f"txn-{uuid.uuid4().hex[:8]}"


class World:
    """The module's broker, as the anonymous principal sees it and as the admin runs it."""

    def __init__(self, broker: BrokerProcess, admin: BlockingConnection,
                 anon: BlockingConnection, names: Names) -> None:
        self.broker = broker
        self.admin = admin
        self.anon = anon
        self.n = names
        self.versions: dict[int, int] = {}  # newest served, from ApiVersions
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.granted: set[tuple[str, str]] = set()  # (resource, operation) of this row

    def ask(self, key: ApiKey, body: Message, version: int | None = None) -> Any:
        """The anonymous principal's request, at the newest version unless told."""
        return self.anon.request(key, self.versions[key] if version is None else version,
                                 body)

    def as_admin(self, key: ApiKey, body: Message) -> Any:
        return self.admin.request(key, self.versions[key], body)

    def grant(self, *grants: Grant) -> None:
        A = CreateAclsRequest.AclCreation
        answer = self.as_admin(ApiKey.CREATE_ACLS, CreateAclsRequest(creations=[
            A(resource_type=g.resource.value, resource_name=g.name,
              resource_pattern_type=PatternType.LITERAL.value, principal="User:ANONYMOUS",
              host="*", operation=g.operation.value,
              permission_type=AclPermissionType.ALLOW.value) for g in grants]))
        assert [r.error_code for r in answer.results] == [NONE] * len(grants), answer
        self.granted |= {(g.resource.name, g.operation.name) for g in grants}

    def revoke_all(self) -> None:
        """Every ACL goes: the admin needs none, and each row starts from nothing."""
        answer = self.as_admin(ApiKey.DELETE_ACLS, DeleteAclsRequest(filters=[
            DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=ResourceType.ANY.value, resource_name_filter=None,
                pattern_type_filter=PatternType.ANY.value, principal_filter=None,
                host_filter=None, operation=AclOperation.ANY.value,
                permission_type=AclPermissionType.ANY.value)]))
        assert answer.filter_results[0].error_code == NONE, answer


def _admin_context(tls: Any) -> ssl.SSLContext:
    key, cert = tls.issue("admin", (("C", "US"), ("O", "acme"), ("OU", "eng"), ("CN", "admin")))
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    context.load_cert_chain(str(cert), str(key))
    return context


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[World]:
    tls = make_tls_material(tmp_path_factory.mktemp("per-api-tls"))
    plain, secure = free_port(), free_port()
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}",
        **tls.server_settings("PKCS12", client_auth="required"),
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=.*$/$1/,DEFAULT",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "num.partitions": "1", "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": "1", "offsets.topic.num.partitions": "1",
    }
    broker = BrokerProcess(str(tmp_path_factory.mktemp("per-api-broker")), 1,
                           f"{zk_ensemble.connect_string}/per-api-{uuid.uuid4().hex[:8]}",
                           port=plain, properties=props)
    broker.start(wait=60)
    admin = BlockingConnection("127.0.0.1", secure, ssl_context=_admin_context(tls))
    anon = BlockingConnection("127.0.0.1", plain)
    try:
        w = World(broker, admin, anon, Names())
        versions = anon.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="moldau-tests", client_software_version="1.0"))
        w.versions = {k.api_key: k.max_version for k in versions.api_keys}
        _set_the_scene(w)
        yield w
    finally:
        admin.close()
        anon.close()
        assert broker.stop() == 0, broker.tail()


def _set_the_scene(w: World) -> None:
    n = w.n
    for name, partitions in ((n.ok, 2), (n.no, 2), (n.rec, 1), (n.del1, 1), (n.del2, 1)):
        create_topic(w.admin, name, partitions)
    for name in (n.ok, n.no, n.rec):
        answer = w.as_admin(ApiKey.PRODUCE, ProduceRequest(
            transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
                ProduceRequest.TopicProduceData(name=name, partition_data=[
                    ProduceRequest.PartitionProduceData(index=0, records=records(2))])]))
        assert answer.responses[0].partition_responses[0].error_code == NONE, answer
    listed = w.as_admin(ApiKey.METADATA, MetadataRequest(
        topics=None, allow_auto_topic_creation=False))
    w.topic_ids = {t.name: t.topic_id for t in listed.topics}

    def coordinator() -> bool:  # the first ask creates __consumer_offsets
        answer = w.as_admin(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
            key_type=0, coordinator_keys=[n.group]))
        return answer.coordinators[0].error_code == NONE
    assert wait_until(coordinator, 30), "no group coordinator"
    for group in (n.group, n.group_delete, n.group_offsets):
        answer = w.as_admin(ApiKey.OFFSET_COMMIT, _commit(group, [(n.ok, 0), (n.no, 0)]))
        assert {p.error_code for t in answer.topics for p in t.partitions} == {NONE}, answer


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Row:
    """One API: the request(s) it sends (the answers go to the assertions), the ACLs that
    allow it, and what must hold without any ACL and with them. `allowed` is None where
    nothing can be allowed without disturbing the broker."""

    key: ApiKey
    request: Callable[[World], Any]
    grants: Callable[[Names], tuple[Grant, ...]]
    denied: Callable[[World, Any], None]
    allowed: Callable[[World, Any], None] | None


def topic(name: str, *operations: AclOperation) -> tuple[Grant, ...]:
    return tuple(Grant(ResourceType.TOPIC, name, op) for op in operations)


def group(name: str, operation: AclOperation) -> Grant:
    return Grant(ResourceType.GROUP, name, operation)


def cluster(operation: AclOperation) -> Grant:
    return Grant(ResourceType.CLUSTER, CLUSTER, operation)


def codes(answer_topics: Any, name_field: str = "name", partitions: str = "partitions",
          code: str = "error_code", index: str = "partition_index"
          ) -> dict[tuple[Any, int], int]:
    """{(topic, partition): error code} of a per-partition answer."""
    return {(getattr(t, name_field), getattr(p, index)): getattr(p, code)
            for t in answer_topics for p in getattr(t, partitions)}


# ---- Produce (0)


def produce(w: World) -> tuple[Any, ...]:
    n = w.n

    def request(txn_id: str | None, batch: bytes, *topics: str) -> ProduceRequest:
        return ProduceRequest(transactional_id=txn_id, acks=1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=t, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)]) for t in topics])
    three = w.ask(ApiKey.PRODUCE, request(None, records(1), n.ok, n.no, n.missing))
    # the one-partition shape the fast path takes: a denial is the general path's
    single = w.ask(ApiKey.PRODUCE, request(None, records(1), n.no))
    # transactional batches need WRITE on the transactional id, checked before any topic:
    # without it (or without an id) every partition answers 53
    txn_batch = build_batch([(None, b"t")], producer_id=1, producer_epoch=0, base_sequence=0,
                            is_transactional=True)
    no_id = w.ask(ApiKey.PRODUCE, request(None, txn_batch, n.ok, n.no))
    with_id = w.ask(ApiKey.PRODUCE, request(n.txn, txn_batch, n.ok, n.no))
    return three, single, no_id, with_id


def _produced(answer: Any) -> dict[tuple[Any, int], int]:
    return codes(answer.responses, partitions="partition_responses", index="index")


def produce_denied(w: World, answers: tuple[Any, ...]) -> None:
    three, single, no_id, with_id = answers
    n = w.n
    assert _produced(three) == {(n.ok, 0): TOPIC_DENIED, (n.no, 0): TOPIC_DENIED,
                                (n.missing, 0): TOPIC_DENIED}
    assert _produced(single) == {(n.no, 0): TOPIC_DENIED}
    assert _produced(no_id) == _produced(with_id) == {(n.ok, 0): TXN_ID_DENIED,
                                                      (n.no, 0): TXN_ID_DENIED}


def produce_allowed(w: World, answers: tuple[Any, ...]) -> None:
    three, single, no_id, with_id = answers
    n = w.n
    assert _produced(three) == {(n.ok, 0): NONE, (n.no, 0): TOPIC_DENIED,
                                (n.missing, 0): UNKNOWN_TOPIC}
    assert three.responses[0].partition_responses[0].base_offset >= 2
    assert _produced(single) == {(n.no, 0): TOPIC_DENIED}
    assert set(_produced(no_id).values()) == {TXN_ID_DENIED}
    # authorized: the leader asks producer 1's transaction coordinator (KIP-890), which
    # knows no such transaction (or is not there yet: NOT_ENOUGH_REPLICAS), but no denial
    found = _produced(with_id)
    assert found[(n.no, 0)] == TOPIC_DENIED
    assert found[(n.ok, 0)] in {19, 47, 48, 49}, found


# ---- Fetch (1)


def fetch(w: World) -> tuple[Any, Any]:
    n = w.n
    F = FetchRequest
    unknown_id = uuid.uuid4()

    def request(replica_id: int) -> FetchRequest:
        return F(replica_state=F.ReplicaState(replica_id=replica_id, replica_epoch=-1),
                 max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                 session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                 topics=[F.FetchTopic(topic_id=i, partitions=[F.FetchPartition(
                     partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])
                     for i in (w.topic_ids[n.ok], w.topic_ids[n.no], unknown_id)])
    consumer = w.ask(ApiKey.FETCH, request(-1))
    follower = w.ask(ApiKey.FETCH, request(99))
    return consumer, follower


def _fetch_codes(w: World, answer: Any) -> dict[str, int]:
    names = {i: name for name, i in w.topic_ids.items()}
    return {names.get(t.topic_id, "unknown"): p.error_code
            for t in answer.responses for p in t.partitions}


def fetch_denied(w: World, answers: tuple[Any, Any]) -> None:
    consumer, follower = answers
    n = w.n
    assert _fetch_codes(w, consumer) == {n.ok: TOPIC_DENIED, n.no: TOPIC_DENIED,
                                         "unknown": UNKNOWN_TOPIC_ID}
    # a follower without CLUSTER_ACTION: 29 in every partition (Kafka's answer, not 31)
    assert set(_fetch_codes(w, follower).values()) == {TOPIC_DENIED}


def fetch_allowed(w: World, answers: tuple[Any, Any]) -> None:
    consumer, follower = answers
    n = w.n
    assert _fetch_codes(w, consumer) == {n.ok: NONE, n.no: TOPIC_DENIED,
                                         "unknown": UNKNOWN_TOPIC_ID}
    assert consumer.responses[0].partitions[0].records  # the records came back
    # READ on topics does not make a follower
    assert set(_fetch_codes(w, follower).values()) == {TOPIC_DENIED}


# ---- ListOffsets (2)


def list_offsets(w: World) -> Any:
    L = ListOffsetsRequest
    return w.ask(ApiKey.LIST_OFFSETS, L(replica_id=-1, isolation_level=0, topics=[
        L.ListOffsetsTopic(name=t, partitions=[L.ListOffsetsPartition(
            partition_index=0, timestamp=-1)]) for t in (w.n.ok, w.n.no, w.n.missing)]))


def list_offsets_denied(w: World, answer: Any) -> None:
    assert set(codes(answer.topics).values()) == {TOPIC_DENIED}
    assert {p.offset for t in answer.topics for p in t.partitions} == {-1}


def list_offsets_allowed(w: World, answer: Any) -> None:
    n = w.n
    assert codes(answer.topics) == {(n.ok, 0): NONE, (n.no, 0): TOPIC_DENIED,
                                    (n.missing, 0): UNKNOWN_TOPIC}
    assert answer.topics[0].partitions[0].offset >= 2


# ---- Metadata (3)

AUTO_TOPIC = topic_name("auto-created")
DESCRIBED_MISSING = topic_name("described-missing")


def metadata(w: World) -> tuple[Any, Any, Any, Any, Any]:
    n = w.n
    M = MetadataRequest
    every = w.ask(ApiKey.METADATA, M(topics=None, allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=True))
    named = w.ask(ApiKey.METADATA, M(
        topics=[M.MetadataRequestTopic(name=t) for t in (n.ok, n.no, AUTO_TOPIC,
                                                          DESCRIBED_MISSING)],
        allow_auto_topic_creation=True, include_topic_authorized_operations=True))
    no_create = w.ask(ApiKey.METADATA, M(
        topics=[M.MetadataRequestTopic(name=DESCRIBED_MISSING)],
        allow_auto_topic_creation=False))
    by_id = w.ask(ApiKey.METADATA, M(
        topics=[M.MetadataRequestTopic(name=None, topic_id=w.topic_ids[t]) for t in (n.ok, n.no)],
        allow_auto_topic_creation=False))
    # the cluster's authorized operations are in v8-10 only
    old = w.ask(ApiKey.METADATA, M(topics=[], allow_auto_topic_creation=False,
                                   include_cluster_authorized_operations=True), version=10)
    return every, named, no_create, by_id, old


def metadata_denied(w: World, answers: tuple[Any, ...]) -> None:
    every, named, no_create, by_id, old = answers
    n = w.n
    assert [t.name for t in every.topics] == []  # nothing describable, no error
    assert {t.name: t.error_code for t in named.topics} == {
        n.ok: TOPIC_DENIED, n.no: TOPIC_DENIED, AUTO_TOPIC: TOPIC_DENIED,
        DESCRIBED_MISSING: TOPIC_DENIED}
    # no id, no internal flag, no operations: nothing about a denied topic leaks
    assert {(t.topic_id, t.is_internal, t.topic_authorized_operations)
            for t in named.topics} == {(ZERO_ID, False, NO_OPERATIONS)}
    assert [t.error_code for t in no_create.topics] == [TOPIC_DENIED]
    # asked by id: the id comes back, the name does not
    assert [(t.error_code, t.name, t.topic_id) for t in by_id.topics] == [
        (TOPIC_DENIED, None, w.topic_ids[n.ok]), (TOPIC_DENIED, None, w.topic_ids[n.no])]
    assert old.cluster_authorized_operations == 0


def metadata_allowed(w: World, answers: tuple[Any, ...]) -> None:
    every, named, no_create, by_id, old = answers
    n = w.n
    assert [(t.name, t.topic_authorized_operations) for t in every.topics] == [
        (n.ok, bits(AclOperation.DESCRIBE))]
    found = {t.name: t for t in named.topics}
    assert {name: t.error_code for name, t in found.items()} == {
        n.ok: NONE, n.no: TOPIC_DENIED,
        # CREATE on the topic creates it; it has no leader yet
        AUTO_TOPIC: LEADER_NOT_AVAILABLE,
        # DESCRIBE without CREATE: auto-creation is refused
        DESCRIBED_MISSING: TOPIC_DENIED}
    assert len(found[n.ok].partitions) == 2
    assert found[n.ok].topic_authorized_operations == bits(AclOperation.DESCRIBE)
    assert found[AUTO_TOPIC].topic_authorized_operations == bits(AclOperation.DESCRIBE,
                                                                 AclOperation.CREATE)
    assert found[n.no].topic_authorized_operations == NO_OPERATIONS
    assert [t.error_code for t in no_create.topics] == [UNKNOWN_TOPIC]
    assert [(t.error_code, t.name) for t in by_id.topics] == [(NONE, n.ok),
                                                               (TOPIC_DENIED, None)]
    assert old.cluster_authorized_operations == bits(AclOperation.DESCRIBE)


# ---- the controller's requests: LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6),
# ControlledShutdown (7)


def leader_and_isr(w: World) -> Any:
    L = LeaderAndIsrRequest
    ok_id = w.topic_ids[w.n.ok]
    return w.ask(ApiKey.LEADER_AND_ISR, L(
        controller_id=1, controller_epoch=FUTURE_CONTROLLER_EPOCH, broker_epoch=0, type=0,
        live_leaders=[], topic_states=[L.LeaderAndIsrTopicState(
            topic_name=w.n.ok, topic_id=ok_id, partition_states=[L.LeaderAndIsrPartitionState(
                partition_index=0, controller_epoch=FUTURE_CONTROLLER_EPOCH, leader=1,
                leader_epoch=0, isr=[1], partition_epoch=0, replicas=[1], adding_replicas=[],
                removing_replicas=[])])]))


def leader_and_isr_denied(w: World, answer: Any) -> None:
    assert answer.error_code == CLUSTER_DENIED
    assert [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partition_errors])
            for t in answer.topics] == [(w.topic_ids[w.n.ok], [(0, CLUSTER_DENIED)])]


def leader_and_isr_allowed(w: World, answer: Any) -> None:
    assert answer.error_code == STALE_BROKER_EPOCH  # authorized, then refused: unchanged


def stop_replica(w: World) -> Any:
    S = StopReplicaRequest
    return w.ask(ApiKey.STOP_REPLICA, S(
        controller_id=1, controller_epoch=FUTURE_CONTROLLER_EPOCH, broker_epoch=0,
        topic_states=[S.StopReplicaTopicState(topic_name=w.n.ok, partition_states=[
            S.StopReplicaPartitionState(partition_index=0, leader_epoch=-1,
                                        delete_partition=False)])]))


def stop_replica_denied(w: World, answer: Any) -> None:
    assert answer.error_code == CLUSTER_DENIED
    assert [(p.topic_name, p.partition_index, p.error_code) for p in answer.partition_errors
            ] == [(w.n.ok, 0, CLUSTER_DENIED)]


def update_metadata(w: World) -> Any:
    return w.ask(ApiKey.UPDATE_METADATA, UpdateMetadataRequest(
        controller_id=1, controller_epoch=FUTURE_CONTROLLER_EPOCH, broker_epoch=0, type=0,
        topic_states=[], live_brokers=[]))


def controlled_shutdown(w: World) -> Any:
    # broker 99 is not alive: an allowed request moves nothing
    return w.ask(ApiKey.CONTROLLED_SHUTDOWN, ControlledShutdownRequest(broker_id=99,
                                                                       broker_epoch=0))


def alter_partition(w: World) -> Any:
    # broker 99 is not registered: an allowed request is refused as a stale broker epoch
    return w.ask(ApiKey.ALTER_PARTITION, AlterPartitionRequest(broker_id=99, broker_epoch=0))


def allocate_producer_ids(w: World) -> Any:
    return w.ask(ApiKey.ALLOCATE_PRODUCER_IDS,
                 AllocateProducerIdsRequest(broker_id=99, broker_epoch=0))


def top_level(code: int) -> Callable[[World, Any], None]:
    def check(w: World, answer: Any) -> None:
        assert answer.error_code == code, answer
    return check


def controlled_shutdown_denied(w: World, answer: Any) -> None:
    assert (answer.error_code, answer.remaining_partitions) == (CLUSTER_DENIED, [])


# ---- OffsetCommit (8), OffsetFetch (9), OffsetDelete (47)

COMMIT_GROUP = f"group-commit-{uuid.uuid4().hex[:8]}"


def _commit(group_id: str, partitions: list[tuple[str, int]]) -> OffsetCommitRequest:
    C = OffsetCommitRequest
    by_topic: dict[str, list[int]] = {}
    for name, index in partitions:
        by_topic.setdefault(name, []).append(index)
    return C(group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
             group_instance_id=None, topics=[C.OffsetCommitRequestTopic(name=t, partitions=[
                 C.OffsetCommitRequestPartition(partition_index=i, committed_offset=1,
                                                committed_metadata="")
                 for i in indexes]) for t, indexes in by_topic.items()])


def offset_commit(w: World) -> Any:
    n = w.n
    return w.ask(ApiKey.OFFSET_COMMIT, _commit(COMMIT_GROUP,
                                               [(n.ok, 0), (n.no, 0), (n.missing, 0)]))


def offset_commit_denied(w: World, answer: Any) -> None:
    # the group first: every partition answers 30
    assert set(codes(answer.topics).values()) == {GROUP_DENIED}
    assert len(codes(answer.topics)) == 3


def offset_commit_allowed(w: World, answer: Any) -> None:
    n = w.n
    assert codes(answer.topics) == {(n.ok, 0): NONE, (n.no, 0): TOPIC_DENIED,
                                    (n.missing, 0): UNKNOWN_TOPIC}


def offset_fetch(w: World) -> Any:
    n = w.n
    F = OffsetFetchRequest
    return w.ask(ApiKey.OFFSET_FETCH, F(require_stable=False, groups=[
        F.OffsetFetchRequestGroup(group_id=n.group, member_id=None, member_epoch=-1,
                                  topics=None),
        F.OffsetFetchRequestGroup(group_id=n.group, member_id=None, member_epoch=-1, topics=[
            F.OffsetFetchRequestTopics(name=t, partition_indexes=[0]) for t in (n.ok, n.no)])]))


def offset_fetch_denied(w: World, answer: Any) -> None:
    # a denied group carries its error alone, no partitions
    assert [(g.group_id, g.error_code, g.topics) for g in answer.groups] == [
        (w.n.group, GROUP_DENIED, []), (w.n.group, GROUP_DENIED, [])]


def offset_fetch_allowed(w: World, answer: Any) -> None:
    n = w.n
    every, named = answer.groups
    assert every.error_code == named.error_code == NONE
    # all of the group's offsets: the topic it may not describe is left out
    assert {(t.name, p.partition_index, p.committed_offset, p.error_code)
            for t in every.topics for p in t.partitions} == {(n.ok, 0, 1, NONE)}
    assert {(t.name, p.partition_index, p.committed_offset, p.error_code)
            for t in named.topics for p in t.partitions} == {
        (n.ok, 0, 1, NONE), (n.no, 0, -1, TOPIC_DENIED)}


def offset_delete(w: World) -> Any:
    n = w.n
    D = OffsetDeleteRequest
    return w.ask(ApiKey.OFFSET_DELETE, D(group_id=n.group_offsets, topics=[
        D.OffsetDeleteRequestTopic(name=t, partitions=[
            D.OffsetDeleteRequestPartition(partition_index=0)])
        for t in (n.ok, n.no, n.missing)]))


def offset_delete_denied(w: World, answer: Any) -> None:
    assert (answer.error_code, answer.topics) == (GROUP_DENIED, [])


def offset_delete_allowed(w: World, answer: Any) -> None:
    n = w.n
    assert answer.error_code == NONE
    assert codes(answer.topics) == {(n.ok, 0): NONE, (n.no, 0): TOPIC_DENIED,
                                    (n.missing, 0): UNKNOWN_TOPIC}


def txn_offset_commit(w: World) -> Any:
    n = w.n
    T = TxnOffsetCommitRequest
    return w.ask(ApiKey.TXN_OFFSET_COMMIT, T(
        transactional_id=n.txn, group_id=COMMIT_GROUP, producer_id=1, producer_epoch=0,
        generation_id=-1, member_id="", group_instance_id=None, topics=[
            T.TxnOffsetCommitRequestTopic(name=name, partitions=[
                T.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1,
                                                  committed_metadata="")])
            for name in (n.ok, n.no, n.missing)]))


def txn_offset_commit_denied(w: World, answer: Any) -> None:
    # the transactional id first: every partition answers 53
    assert set(codes(answer.topics).values()) == {TXN_ID_DENIED}
    assert len(codes(answer.topics)) == 3


def txn_offset_commit_allowed(w: World, answer: Any) -> None:
    n = w.n
    found = codes(answer.topics)
    assert {k: v for k, v in found.items() if k != (n.ok, 0)} == {
        (n.no, 0): TOPIC_DENIED, (n.missing, 0): UNKNOWN_TOPIC}
    # authorized: what the coordinators make of producer 1 (no such transaction) is theirs
    assert found[(n.ok, 0)] not in (TXN_ID_DENIED, GROUP_DENIED, TOPIC_DENIED)


# ---- FindCoordinator (10) and the group membership APIs (11-14)

OTHER_GROUP = f"group-other-{uuid.uuid4().hex[:8]}"
MEMBER_GROUP = f"group-member-{uuid.uuid4().hex[:8]}"


SHARE_KEY = "share-group:AAAAAAAAAAAAAAAAAAAAAA:0"  # v6's share-group state key


def find_coordinator(w: World) -> tuple[Any, Any, Any]:
    groups = w.ask(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
        key_type=0, coordinator_keys=[w.n.group, OTHER_GROUP]))
    transactions = w.ask(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
        key_type=1, coordinator_keys=[w.n.txn]))
    shares = w.ask(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
        key_type=2, coordinator_keys=[SHARE_KEY]), 6)
    return groups, transactions, shares


def find_coordinator_denied(w: World, answers: tuple[Any, Any, Any]) -> None:
    groups, transactions, shares = answers
    assert [(c.key, c.error_code, c.node_id) for c in groups.coordinators] == [
        (w.n.group, GROUP_DENIED, -1), (OTHER_GROUP, GROUP_DENIED, -1)]
    assert [c.error_code for c in transactions.coordinators] == [TXN_ID_DENIED]
    # a share key needs Cluster CLUSTER_ACTION (brokers' share-group persisters ask)
    assert [c.error_code for c in shares.coordinators] == [CLUSTER_DENIED]


def find_coordinator_allowed(w: World, answers: tuple[Any, Any, Any]) -> None:
    groups, transactions, shares = answers
    assert [(c.key, c.error_code, c.node_id) for c in groups.coordinators] == [
        (w.n.group, NONE, 1), (OTHER_GROUP, GROUP_DENIED, -1)]
    # authorized; the first ask creates __transaction_state
    assert [c.error_code for c in transactions.coordinators] == [COORDINATOR_NOT_AVAILABLE]
    # authorized, but a ZooKeeper-mode broker has no share coordinator (Kafka 3.9)
    assert [(c.error_code, c.node_id) for c in shares.coordinators] == [
        (COORDINATOR_NOT_AVAILABLE, -1)]


def join_group(w: World) -> Any:
    J = JoinGroupRequest
    return w.ask(ApiKey.JOIN_GROUP, J(
        group_id=MEMBER_GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
        member_id="", group_instance_id=None, protocol_type="consumer", reason=None,
        protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")]))


def heartbeat(w: World) -> Any:
    return w.ask(ApiKey.HEARTBEAT, HeartbeatRequest(
        group_id=OTHER_GROUP, generation_id=1, member_id="nobody", group_instance_id=None))


def leave_group(w: World) -> Any:
    L = LeaveGroupRequest
    return w.ask(ApiKey.LEAVE_GROUP, L(group_id=OTHER_GROUP, members=[
        L.MemberIdentity(member_id="nobody", group_instance_id=None, reason=None)]))


def leave_group_allowed(w: World, answer: Any) -> None:
    assert answer.error_code == NONE
    assert [(m.member_id, m.error_code) for m in answer.members] == [
        ("nobody", UNKNOWN_MEMBER_ID)]


def sync_group(w: World) -> Any:
    return w.ask(ApiKey.SYNC_GROUP, SyncGroupRequest(
        group_id=OTHER_GROUP, generation_id=1, member_id="nobody", group_instance_id=None,
        protocol_type="consumer", protocol_name="range", assignments=[]))


# ---- DescribeGroups (15), ListGroups (16), DeleteGroups (42)


def describe_groups(w: World) -> Any:
    return w.ask(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(
        groups=[w.n.group, OTHER_GROUP], include_authorized_operations=True))


def describe_groups_denied(w: World, answer: Any) -> None:
    assert [(g.group_id, g.error_code, g.authorized_operations) for g in answer.groups] == [
        (w.n.group, GROUP_DENIED, NO_OPERATIONS), (OTHER_GROUP, GROUP_DENIED, NO_OPERATIONS)]


def describe_groups_allowed(w: World, answer: Any) -> None:
    assert [(g.group_id, g.error_code, g.group_state, g.authorized_operations)
            for g in answer.groups] == [
        (w.n.group, NONE, "Empty", bits(AclOperation.DESCRIBE)),
        (OTHER_GROUP, GROUP_DENIED, "", NO_OPERATIONS)]


def list_groups(w: World) -> Any:
    return w.ask(ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=[], types_filter=[]))


def list_groups_denied(w: World, answer: Any) -> None:
    assert (answer.error_code, answer.groups) == (NONE, [])  # a filter, never an error


def list_groups_allowed(w: World, answer: Any) -> None:
    n = w.n
    assert answer.error_code == NONE
    assert [g.group_id for g in answer.groups] == [n.group]
    # DESCRIBE on the cluster lists every group
    w.grant(cluster(AclOperation.DESCRIBE))
    every = list_groups(w)
    assert {n.group, n.group_offsets} <= {g.group_id for g in every.groups}


def delete_groups(w: World) -> Any:
    return w.ask(ApiKey.DELETE_GROUPS, DeleteGroupsRequest(
        groups_names=[w.n.group_delete, OTHER_GROUP]))


def delete_groups_denied(w: World, answer: Any) -> None:
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        (w.n.group_delete, GROUP_DENIED), (OTHER_GROUP, GROUP_DENIED)]


def delete_groups_allowed(w: World, answer: Any) -> None:
    assert [(r.group_id, r.error_code) for r in answer.results] == [
        (w.n.group_delete, NONE), (OTHER_GROUP, GROUP_DENIED)]


# ---- ApiVersions (18)


def api_versions(w: World) -> Any:
    return w.ask(ApiKey.API_VERSIONS, ApiVersionsRequest(
        client_software_name="moldau-tests", client_software_version="1.0"))


def api_versions_answered(w: World, answer: Any) -> None:
    assert answer.error_code == NONE and answer.api_keys  # no ACL needed


# ---- SaslHandshake (17), SaslAuthenticate (36) on a PLAINTEXT listener: no ACL is asked;
# both are refused with ILLEGAL_SASL_STATE, as Kafka's KafkaApis refuses them there


def sasl_handshake(w: World) -> Any:
    return w.ask(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequest(mechanism="PLAIN"))


def sasl_authenticate(w: World) -> Any:
    return w.ask(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequest(auth_bytes=b""))


def illegal_sasl_state(w: World, answer: Any) -> None:
    assert answer.error_code == 34


# ---- the delegation token APIs (38-41): on a PLAINTEXT listener all four are refused
# with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED before any ACL is asked (Kafka's
# allowTokenRequests); tests/broker/test_delegation_tokens.py has their ACLs over SASL

TOKEN_REQUEST_NOT_ALLOWED = 64


def create_token(w: World) -> Any:
    return w.ask(ApiKey.CREATE_DELEGATION_TOKEN, CreateDelegationTokenRequest(
        renewers=[], max_lifetime_ms=-1))


def renew_token(w: World) -> Any:
    return w.ask(ApiKey.RENEW_DELEGATION_TOKEN, RenewDelegationTokenRequest(
        hmac=b"x", renew_period_ms=-1))


def expire_token(w: World) -> Any:
    return w.ask(ApiKey.EXPIRE_DELEGATION_TOKEN, ExpireDelegationTokenRequest(
        hmac=b"x", expiry_time_period_ms=-1))


def describe_tokens(w: World) -> Any:
    return w.ask(ApiKey.DESCRIBE_DELEGATION_TOKEN, DescribeDelegationTokenRequest(owners=None))


def token_request_not_allowed(w: World, answer: Any) -> None:
    assert answer.error_code == TOKEN_REQUEST_NOT_ALLOWED


# ---- ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69): a ZooKeeper broker has no
# new group coordinator, so Kafka 3.9 answers UNSUPPORTED_VERSION before any ACL is asked


def consumer_group_heartbeat(w: World) -> Any:
    return w.ask(ApiKey.CONSUMER_GROUP_HEARTBEAT, ConsumerGroupHeartbeatRequest(
        group_id=w.n.group, member_id="", member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=[w.n.ok], topic_partitions=[]))


def heartbeat_unsupported(w: World, answer: Any) -> None:
    assert answer.error_code == 35 and answer.member_id is None, answer


def consumer_group_describe(w: World) -> Any:
    return w.ask(ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest(
        group_ids=[w.n.group], include_authorized_operations=True))


def describe_unsupported(w: World, answer: Any) -> None:
    assert [(g.group_id, g.error_code) for g in answer.groups] == [(w.n.group, 35)], answer


# ---- Envelope (58): forwarding is not enabled on a ZooKeeper broker (no KRaft migration):
# the connection is closed before any ACL is asked, on a connection of its own here


def envelope(w: World) -> Any:
    with BlockingConnection("127.0.0.1", w.broker.port) as conn:
        try:
            return conn.request(ApiKey.ENVELOPE, 0, EnvelopeRequest(
                request_data=b"\x00", request_principal=b"",
                client_host_address=b"\x7f\x00\x00\x01"))
        except ConnectionError as exc:
            return exc


def connection_closed(w: World, answer: Any) -> None:
    assert isinstance(answer, ConnectionError), answer
    round_trip = w.ask(ApiKey.API_VERSIONS, ApiVersionsRequest(
        client_software_name="moldau-tests", client_software_version="1.0"))
    assert round_trip.error_code == NONE  # the other connections are served


# ---- CreateTopics (19), DeleteTopics (20), CreatePartitions (37)

NEW_TOPICS = tuple(topic_name(f"new-{i}") for i in range(3))


def create_topics(w: World) -> Any:
    C = CreateTopicsRequest
    return w.ask(ApiKey.CREATE_TOPICS, C(timeout_ms=10_000, validate_only=True, topics=[
        C.CreatableTopic(name=t, num_partitions=1, replication_factor=1, assignments=[],
                         configs=[]) for t in NEW_TOPICS]))


def _created(answer: Any) -> list[tuple[str, int, int, int, bool]]:
    return [(t.name, t.error_code, t.topic_config_error_code, t.num_partitions,
             bool(t.configs)) for t in answer.topics]


def create_topics_denied(w: World, answer: Any) -> None:
    assert _created(answer) == [(t, TOPIC_DENIED, TOPIC_DENIED, -1, False) for t in NEW_TOPICS]
    assert {t.error_message for t in answer.topics} == {"Authorization failed."}


def create_topics_allowed(w: World, answer: Any) -> None:
    first, second, third = NEW_TOPICS
    assert _created(answer) == [
        (first, NONE, TOPIC_DENIED, -1, False),  # created; its configs hidden
        (second, TOPIC_DENIED, TOPIC_DENIED, -1, False),
        (third, NONE, NONE, 1, True)]
    # CREATE on the cluster allows every topic
    w.grant(cluster(AclOperation.CREATE))
    assert [t.error_code for t in create_topics(w).topics] == [NONE, NONE, NONE]


def delete_topics(w: World) -> Any:
    n = w.n
    D = DeleteTopicsRequest
    return w.ask(ApiKey.DELETE_TOPICS, D(timeout_ms=15_000, topics=[
        D.DeleteTopicState(name=n.del1, topic_id=ZERO_ID),
        D.DeleteTopicState(name=None, topic_id=w.topic_ids[n.del2]),
        D.DeleteTopicState(name=n.missing, topic_id=ZERO_ID)]))


def delete_topics_denied(w: World, answer: Any) -> None:
    n = w.n
    # named by id without DESCRIBE: the name stays hidden
    assert [(r.name, r.topic_id, r.error_code) for r in answer.responses] == [
        (n.del1, ZERO_ID, TOPIC_DENIED), (None, w.topic_ids[n.del2], TOPIC_DENIED),
        (n.missing, ZERO_ID, TOPIC_DENIED)]


def delete_topics_allowed(w: World, answer: Any) -> None:
    n = w.n
    assert [(r.name, r.error_code) for r in answer.responses] == [
        (n.del1, NONE), (n.del2, NONE), (n.missing, UNKNOWN_TOPIC)]


def create_partitions(w: World) -> Any:
    C = CreatePartitionsRequest
    n = w.n
    return w.ask(ApiKey.CREATE_PARTITIONS, C(timeout_ms=10_000, validate_only=True, topics=[
        C.CreatePartitionsTopic(name=t, count=3, assignments=None)
        for t in (n.ok, n.no, n.missing)]))


def create_partitions_allowed(w: World, answer: Any) -> None:
    n = w.n
    assert [(r.name, r.error_code) for r in answer.results] == [
        (n.ok, NONE), (n.no, TOPIC_DENIED), (n.missing, UNKNOWN_TOPIC)]


def each_result(code: int, field: str = "results") -> Callable[[World, Any], None]:
    def check(w: World, answer: Any) -> None:
        assert {r.error_code for r in getattr(answer, field)} == {code}, answer
    return check


# ---- DeleteRecords (21)


def delete_records(w: World) -> Any:
    D = DeleteRecordsRequest
    n = w.n
    return w.ask(ApiKey.DELETE_RECORDS, D(timeout_ms=10_000, topics=[
        D.DeleteRecordsTopic(name=t, partitions=[
            D.DeleteRecordsPartition(partition_index=0, offset=1)])
        for t in (n.rec, n.no, n.missing)]))


def delete_records_denied(w: World, answer: Any) -> None:
    assert set(codes(answer.topics).values()) == {TOPIC_DENIED}
    assert {p.low_watermark for t in answer.topics for p in t.partitions} == {-1}


def delete_records_allowed(w: World, answer: Any) -> None:
    n = w.n
    assert codes(answer.topics) == {(n.rec, 0): NONE, (n.no, 0): TOPIC_DENIED,
                                    (n.missing, 0): UNKNOWN_TOPIC}
    assert answer.topics[0].partitions[0].low_watermark == 1


# ---- InitProducerId (22)


def init_producer_id(w: World) -> tuple[Any, Any]:
    idempotent = w.ask(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1))
    transactional = w.ask(ApiKey.INIT_PRODUCER_ID, InitProducerIdRequest(
        transactional_id=w.n.txn, transaction_timeout_ms=60_000, producer_id=-1,
        producer_epoch=-1))
    return idempotent, transactional


def init_producer_id_denied(w: World, answers: tuple[Any, Any]) -> None:
    idempotent, transactional = answers
    assert (idempotent.error_code, idempotent.producer_id) == (CLUSTER_DENIED, -1)
    assert (transactional.error_code, transactional.producer_id) == (TXN_ID_DENIED, -1)


def init_producer_id_allowed(w: World, answers: tuple[Any, Any]) -> None:
    idempotent, transactional = answers
    # WRITE on some topic is enough for an idempotent producer
    assert idempotent.error_code == NONE and idempotent.producer_id >= 0
    # authorized: the coordinator's answer (the id's partition may still be coming up)
    assert transactional.error_code in COORDINATOR_ANSWERS, transactional
    # as is IDEMPOTENT_WRITE on the cluster, without any topic
    w.revoke_all()
    assert init_producer_id(w)[0].error_code == CLUSTER_DENIED
    w.grant(cluster(AclOperation.IDEMPOTENT_WRITE))
    assert init_producer_id(w)[0].error_code == NONE


# ---- OffsetForLeaderEpoch (23)


def offset_for_leader_epoch(w: World) -> Any:
    E = OffsetForLeaderEpochRequest
    n = w.n
    return w.ask(ApiKey.OFFSET_FOR_LEADER_EPOCH, E(replica_id=-1, topics=[
        E.OffsetForLeaderTopic(topic=t, partitions=[E.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=-1, leader_epoch=0)])
        for t in (n.ok, n.no, n.missing)]))


def offset_for_leader_epoch_denied(w: World, answer: Any) -> None:
    assert set(codes(answer.topics, "topic", index="partition").values()) == {TOPIC_DENIED}


def offset_for_leader_epoch_allowed(w: World, answer: Any) -> None:
    n = w.n
    assert codes(answer.topics, "topic", index="partition") == {
        (n.ok, 0): NONE, (n.no, 0): TOPIC_DENIED, (n.missing, 0): UNKNOWN_TOPIC}
    assert answer.topics[0].partitions[0].end_offset >= 2


# ---- DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44)


def describe_configs(w: World) -> Any:
    D = DescribeConfigsRequest
    n = w.n
    return w.ask(ApiKey.DESCRIBE_CONFIGS, D(
        include_synonyms=False, include_documentation=False, resources=[
            D.DescribeConfigsResource(resource_type=kind, resource_name=name,
                                      configuration_keys=None)
            for kind, name in ((TOPIC_RESOURCE, n.ok), (TOPIC_RESOURCE, n.no),
                               (TOPIC_RESOURCE, n.missing), (BROKER_RESOURCE, "1"),
                               (LOGGER_RESOURCE, "1"))]))


def _described(answer: Any) -> list[int]:
    return [r.error_code for r in answer.results]


def describe_configs_denied(w: World, answer: Any) -> None:
    assert _described(answer) == [TOPIC_DENIED] * 3 + [CLUSTER_DENIED] * 2
    assert all(r.configs == [] for r in answer.results)


def describe_configs_allowed(w: World, answer: Any) -> None:
    assert _described(answer) == [NONE, TOPIC_DENIED, UNKNOWN_TOPIC, NONE, NONE]
    assert answer.results[0].configs and answer.results[3].configs


def alter_configs(w: World) -> Any:
    A = AlterConfigsRequest
    n = w.n
    retention = [A.AlterableConfig(name="retention.ms", value="86400000")]
    return w.ask(ApiKey.ALTER_CONFIGS, A(validate_only=True, resources=[
        A.AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=n.ok,
                               configs=retention),
        A.AlterConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=n.no,
                               configs=retention),
        A.AlterConfigsResource(resource_type=BROKER_RESOURCE, resource_name="1", configs=[]),
        # another broker's id is refused before authorization, as Kafka does
        A.AlterConfigsResource(resource_type=BROKER_RESOURCE, resource_name="2", configs=[])]))


def alter_configs_denied(w: World, answer: Any) -> None:
    assert [r.error_code for r in answer.responses] == [TOPIC_DENIED, TOPIC_DENIED,
                                                        CLUSTER_DENIED, INVALID_REQUEST]


def alter_configs_allowed(w: World, answer: Any) -> None:
    assert [r.error_code for r in answer.responses] == [NONE, TOPIC_DENIED, NONE,
                                                        INVALID_REQUEST]


def incremental_alter_configs(w: World) -> Any:
    I = IncrementalAlterConfigsRequest  # noqa: E741  (Kafka's name, shortened)
    n = w.n
    retention = [I.AlterableConfig(name="retention.ms", config_operation=0, value="86400000")]
    return w.ask(ApiKey.INCREMENTAL_ALTER_CONFIGS, I(validate_only=True, resources=[
        I.AlterConfigsResource(resource_type=kind, resource_name=name, configs=configs)
        for kind, name, configs in ((TOPIC_RESOURCE, n.ok, retention),
                                    (TOPIC_RESOURCE, n.no, retention),
                                    (BROKER_RESOURCE, "1", []), (LOGGER_RESOURCE, "1", []))]))


def incremental_alter_configs_denied(w: World, answer: Any) -> None:
    assert [r.error_code for r in answer.responses] == [TOPIC_DENIED, TOPIC_DENIED,
                                                        CLUSTER_DENIED, CLUSTER_DENIED]


def incremental_alter_configs_allowed(w: World, answer: Any) -> None:
    assert [r.error_code for r in answer.responses] == [NONE, TOPIC_DENIED, NONE, NONE]


# ---- DescribeLogDirs (35), ElectLeaders (43), the reassignments (45, 46),
# DescribeCluster (60)


def alter_replica_log_dirs(w: World) -> Any:
    A = AlterReplicaLogDirsRequest
    return w.ask(ApiKey.ALTER_REPLICA_LOG_DIRS, A(dirs=[A.AlterReplicaLogDir(
        path="/no/such/dir", topics=[A.AlterReplicaLogDirTopic(name=w.n.ok, partitions=[0])])]))


def alter_replica_log_dirs_checks(code: int) -> Callable[[World, Any], None]:
    def check(w: World, answer: Any) -> None:
        assert [p.error_code for t in answer.results for p in t.partitions] == [code]
    return check


def describe_log_dirs(w: World) -> Any:
    return w.ask(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequest(topics=None))


def describe_log_dirs_denied(w: World, answer: Any) -> None:
    assert (answer.error_code, answer.results) == (CLUSTER_DENIED, [])


def describe_log_dirs_allowed(w: World, answer: Any) -> None:
    assert answer.error_code == NONE
    assert w.n.ok in {t.name for r in answer.results for t in r.topics}


def elect_leaders(w: World) -> Any:
    E = ElectLeadersRequest
    return w.ask(ApiKey.ELECT_LEADERS, E(election_type=0, timeout_ms=10_000, topic_partitions=[
        E.TopicPartitions(topic=w.n.ok, partitions=[0, 1])]))


def _elected(answer: Any) -> dict[tuple[Any, int], int]:
    return codes(answer.replica_election_results, "topic", "partition_result",
                 index="partition_id")


def elect_leaders_denied(w: World, answer: Any) -> None:
    assert answer.error_code == CLUSTER_DENIED
    assert _elected(answer) == {(w.n.ok, 0): CLUSTER_DENIED, (w.n.ok, 1): CLUSTER_DENIED}


def elect_leaders_allowed(w: World, answer: Any) -> None:
    assert answer.error_code == NONE
    # the preferred leaders lead already
    assert _elected(answer) == {(w.n.ok, 0): ELECTION_NOT_NEEDED,
                                (w.n.ok, 1): ELECTION_NOT_NEEDED}


def alter_reassignments(w: World) -> Any:
    A = AlterPartitionReassignmentsRequest
    return w.ask(ApiKey.ALTER_PARTITION_REASSIGNMENTS, A(timeout_ms=10_000, topics=[
        A.ReassignableTopic(name=w.n.ok, partitions=[
            A.ReassignablePartition(partition_index=0, replicas=None)])]))  # a cancellation


def alter_reassignments_denied(w: World, answer: Any) -> None:
    assert answer.error_code == CLUSTER_DENIED
    assert codes(answer.responses) == {(w.n.ok, 0): CLUSTER_DENIED}


def alter_reassignments_allowed(w: World, answer: Any) -> None:
    assert answer.error_code == NONE
    assert codes(answer.responses) == {(w.n.ok, 0): NO_REASSIGNMENT}
    # null, as Kafka 3.9.1 sends it: the client shows the error's default message
    assert answer.responses[0].partitions[0].error_message is None


def list_reassignments(w: World) -> Any:
    return w.ask(ApiKey.LIST_PARTITION_REASSIGNMENTS, ListPartitionReassignmentsRequest(
        timeout_ms=10_000, topics=None))


def list_reassignments_allowed(w: World, answer: Any) -> None:
    assert (answer.error_code, answer.topics) == (NONE, [])


def describe_cluster(w: World) -> Any:
    return w.ask(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequest(
        include_cluster_authorized_operations=True, endpoint_type=1))


def describe_cluster_checks(operations: int) -> Callable[[World, Any], None]:
    def check(w: World, answer: Any) -> None:
        assert answer.error_code == NONE and answer.brokers  # no ACL needed
        assert answer.cluster_authorized_operations == operations
    return check


# ---- DescribeAcls (29), CreateAcls (30), DeleteAcls (31)

PROBE_TOPIC = "acl-probe"


def describe_acls(w: World) -> Any:
    return w.ask(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest(
        resource_type_filter=ResourceType.ANY.value, resource_name_filter=None,
        pattern_type_filter=PatternType.ANY.value, principal_filter=None, host_filter=None,
        operation=AclOperation.ANY.value, permission_type=AclPermissionType.ANY.value))


def describe_acls_allowed(w: World, answer: Any) -> None:
    assert answer.error_code == NONE
    assert [(r.resource_type, r.resource_name, [a.principal for a in r.acls])
            for r in answer.resources] == [
        (ResourceType.CLUSTER.value, CLUSTER, ["User:ANONYMOUS"])]


def create_acls(w: World) -> Any:
    return w.ask(ApiKey.CREATE_ACLS, CreateAclsRequest(creations=[
        CreateAclsRequest.AclCreation(
            resource_type=ResourceType.TOPIC.value, resource_name=PROBE_TOPIC,
            resource_pattern_type=PatternType.LITERAL.value, principal="User:someone",
            host="*", operation=AclOperation.READ.value,
            permission_type=AclPermissionType.ALLOW.value)]))


def delete_acls(w: World) -> Any:
    return w.ask(ApiKey.DELETE_ACLS, DeleteAclsRequest(filters=[
        DeleteAclsRequest.DeleteAclsFilter(
            resource_type_filter=ResourceType.TOPIC.value, resource_name_filter=PROBE_TOPIC,
            pattern_type_filter=PatternType.ANY.value, principal_filter=None,
            host_filter=None, operation=AclOperation.ANY.value,
            permission_type=AclPermissionType.ANY.value)]))


# ---- DescribeUserScramCredentials (50), AlterUserScramCredentials (51)

SCRAM_USER = "scram-probe"  # never given a credential


def describe_scram(w: World) -> Any:
    D = DescribeUserScramCredentialsRequest
    return w.ask(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, D(users=[D.UserName(name=SCRAM_USER)]))


def describe_scram_denied(w: World, answer: Any) -> None:
    assert answer.error_code == CLUSTER_DENIED
    assert [r.error_code for r in answer.results] == [CLUSTER_DENIED]


def describe_scram_allowed(w: World, answer: Any) -> None:
    assert answer.error_code == NONE
    assert [(r.user, r.error_code) for r in answer.results] == [(SCRAM_USER, RESOURCE_NOT_FOUND)]


def alter_scram(w: World) -> Any:
    # deleting a credential the user does not have: allowed, it changes nothing
    A = AlterUserScramCredentialsRequest
    return w.ask(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, A(upsertions=[], deletions=[
        A.ScramCredentialDeletion(name=SCRAM_USER, mechanism=1)]))


def update_features(w: World) -> Any:
    U = UpdateFeaturesRequest
    return w.ask(ApiKey.UPDATE_FEATURES, U(feature_updates=[
        U.FeatureUpdateKey(feature="metadata.version", max_version_level=21)]))


def update_features_allowed(w: World, answer: Any) -> None:
    # allowed, on the controller: refused per feature, as a ZooKeeper-mode Kafka broker
    assert answer.error_code == NONE
    assert [(r.feature, r.error_code) for r in answer.results] == [
        ("metadata.version", INVALID_REQUEST)]


def scram_results(code: int) -> Callable[[World, Any], None]:
    def check(w: World, answer: Any) -> None:
        assert [(r.user, r.error_code) for r in answer.results] == [(SCRAM_USER, code)]
    return check


# ---- DescribeClientQuotas (48), AlterClientQuotas (49)

QUOTA_CLIENT = "quota-probe"  # never given a quota; the alter only validates


def describe_quotas(w: World) -> Any:
    D = DescribeClientQuotasRequest
    return w.ask(ApiKey.DESCRIBE_CLIENT_QUOTAS, D(strict=True, components=[
        D.ComponentData(entity_type="client-id", match_type=0, match=QUOTA_CLIENT)]))


# ---- AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26), DescribeTransactions
# (65), ListTransactions (66): authorized, the transaction coordinator answers


def add_partitions(w: World) -> tuple[Any, Any]:
    n = w.n
    A = AddPartitionsToTxnRequest
    # a producer's (v3): the transactional id, then WRITE per topic
    client = w.ask(ApiKey.ADD_PARTITIONS_TO_TXN, A(
        v3_and_below_transactional_id=n.txn, v3_and_below_producer_id=1,
        v3_and_below_producer_epoch=0, v3_and_below_topics=[
            A.AddPartitionsToTxnTopic(name=name, partitions=[0])
            for name in (n.ok, n.no, n.missing)]), version=3)
    # a partition leader's verification (v4+): CLUSTER_ACTION
    broker = w.ask(ApiKey.ADD_PARTITIONS_TO_TXN, A(transactions=[A.AddPartitionsToTxnTransaction(
        transactional_id=n.txn, producer_id=1, producer_epoch=0, verify_only=True,
        topics=[A.AddPartitionsToTxnTopic(name=name, partitions=[0])
                for name in (n.ok, n.missing)])]))
    return client, broker


def _txn_codes(answer: Any) -> dict[tuple[Any, int], int]:
    return codes(answer, partitions="results_by_partition", code="partition_error_code")


def add_partitions_denied(w: World, answers: tuple[Any, Any]) -> None:
    client, broker = answers
    assert set(_txn_codes(client.results_by_topic_v3_and_below).values()) == {TXN_ID_DENIED}
    assert (broker.error_code, broker.results_by_transaction) == (CLUSTER_DENIED, [])


def add_partitions_allowed(w: World, answers: tuple[Any, Any]) -> None:
    client, broker = answers
    n = w.n
    # one refused partition fails the others with OPERATION_NOT_ATTEMPTED
    assert _txn_codes(client.results_by_topic_v3_and_below) == {
        (n.ok, 0): OPERATION_NOT_ATTEMPTED, (n.no, 0): TOPIC_DENIED,
        (n.missing, 0): UNKNOWN_TOPIC}
    result, = broker.results_by_transaction
    assert broker.error_code == NONE and result.transactional_id == n.txn
    assert _txn_codes(result.topic_results) == {(n.ok, 0): OPERATION_NOT_ATTEMPTED,
                                                (n.missing, 0): UNKNOWN_TOPIC}


# ---- WriteTxnMarkers (27), DescribeProducers (61): the partition leader's side


def write_txn_markers(w: World) -> Any:
    W = WriteTxnMarkersRequest
    # a partition nobody hosts: allowed, it answers UNKNOWN_TOPIC and writes nothing
    return w.ask(ApiKey.WRITE_TXN_MARKERS, W(markers=[W.WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
        topics=[W.WritableTxnMarkerTopic(name=w.n.missing, partition_indexes=[0])])]))


def txn_markers_answered(code: int) -> Callable[[World, Any], None]:
    def check(w: World, answer: Any) -> None:
        marker, = answer.markers
        assert codes(marker.topics) == {(w.n.missing, 0): code}
    return check


def describe_producers(w: World) -> Any:
    D = DescribeProducersRequest
    return w.ask(ApiKey.DESCRIBE_PRODUCERS, D(topics=[
        D.TopicRequest(name=name, partition_indexes=[0]) for name in (w.n.ok, w.n.missing)]))


def describe_producers_denied(w: World, answer: Any) -> None:
    assert codes(answer.topics) == {(w.n.ok, 0): TOPIC_DENIED, (w.n.missing, 0): TOPIC_DENIED}


def describe_producers_allowed(w: World, answer: Any) -> None:
    assert codes(answer.topics) == {(w.n.ok, 0): NONE, (w.n.missing, 0): UNKNOWN_TOPIC}


def add_offsets(w: World) -> Any:
    return w.ask(ApiKey.ADD_OFFSETS_TO_TXN, AddOffsetsToTxnRequest(
        transactional_id=w.n.txn, producer_id=1, producer_epoch=0, group_id=w.n.group))


def end_txn(w: World) -> Any:
    return w.ask(ApiKey.END_TXN, EndTxnRequest(transactional_id=w.n.txn, producer_id=1,
                                               producer_epoch=0, committed=True))


def describe_transactions(w: World) -> Any:
    return w.ask(ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequest(
        transactional_ids=[w.n.txn]))


def describe_transactions_denied(w: World, answer: Any) -> None:
    assert [(s.transactional_id, s.error_code) for s in answer.transaction_states] == [
        (w.n.txn, TXN_ID_DENIED)]


def describe_transactions_allowed(w: World, answer: Any) -> None:
    state, = answer.transaction_states
    assert state.transactional_id == w.n.txn
    assert state.error_code in COORDINATOR_ANSWERS | {105}, state  # 105: not found


def coordinator_answered(w: World, answer: Any) -> None:
    assert answer.error_code in COORDINATOR_ANSWERS, answer


def list_transactions(w: World) -> Any:
    return w.ask(ApiKey.LIST_TRANSACTIONS, ListTransactionsRequest(
        state_filters=[], producer_id_filters=[], duration_filter=-1))


def list_transactions_denied(w: World, answer: Any) -> None:
    # never an error: what may not be described is left out
    assert (answer.error_code, answer.transaction_states) == (NONE, [])


def list_transactions_allowed(w: World, answer: Any) -> None:
    assert answer.error_code == NONE
    assert {s.transactional_id for s in answer.transaction_states} <= {w.n.txn}


def describe_quotas_checks(code: int) -> Callable[[World, Any], None]:
    def check(w: World, answer: Any) -> None:
        assert (answer.error_code, answer.entries) == (code, None if code else [])
    return check


def alter_quotas(w: World) -> Any:
    A = AlterClientQuotasRequest
    return w.ask(ApiKey.ALTER_CLIENT_QUOTAS, A(validate_only=True, entries=[A.EntryData(
        entity=[A.EntityData(entity_type="client-id", entity_name=QUOTA_CLIENT)],
        ops=[A.OpData(key="producer_byte_rate", value=1048576.0, remove=False)])]))


# ---- the table

_R, _W, _D, _C = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE

ROWS: tuple[Row, ...] = (
    Row(ApiKey.PRODUCE, produce,
        lambda n: (*topic(n.ok, _W), *topic(n.missing, _W),
                   Grant(ResourceType.TRANSACTIONAL_ID, n.txn, _W)),
        produce_denied, produce_allowed),
    Row(ApiKey.FETCH, fetch, lambda n: topic(n.ok, _R), fetch_denied, fetch_allowed),
    Row(ApiKey.LIST_OFFSETS, list_offsets, lambda n: topic(n.ok, _D) + topic(n.missing, _D),
        list_offsets_denied, list_offsets_allowed),
    Row(ApiKey.METADATA, metadata,
        lambda n: (topic(n.ok, _D) + topic(AUTO_TOPIC, _D, _C) + topic(DESCRIBED_MISSING, _D)
                   + (cluster(_D),)),
        metadata_denied, metadata_allowed),
    Row(ApiKey.LEADER_AND_ISR, leader_and_isr,
        lambda n: (cluster(AclOperation.CLUSTER_ACTION),),
        leader_and_isr_denied, leader_and_isr_allowed),
    Row(ApiKey.STOP_REPLICA, stop_replica, lambda n: (cluster(AclOperation.CLUSTER_ACTION),),
        stop_replica_denied, top_level(STALE_BROKER_EPOCH)),
    Row(ApiKey.UPDATE_METADATA, update_metadata,
        lambda n: (cluster(AclOperation.CLUSTER_ACTION),),
        top_level(CLUSTER_DENIED), top_level(STALE_BROKER_EPOCH)),
    Row(ApiKey.CONTROLLED_SHUTDOWN, controlled_shutdown,
        lambda n: (cluster(AclOperation.CLUSTER_ACTION),),
        controlled_shutdown_denied, top_level(BROKER_NOT_AVAILABLE)),
    Row(ApiKey.ALTER_PARTITION, alter_partition,
        lambda n: (cluster(AclOperation.CLUSTER_ACTION),),
        top_level(CLUSTER_DENIED), top_level(STALE_BROKER_EPOCH)),
    Row(ApiKey.ALLOCATE_PRODUCER_IDS, allocate_producer_ids,
        lambda n: (cluster(AclOperation.CLUSTER_ACTION),),
        top_level(CLUSTER_DENIED), top_level(BROKER_ID_NOT_REGISTERED)),
    Row(ApiKey.OFFSET_COMMIT, offset_commit,
        lambda n: (group(COMMIT_GROUP, _R), *topic(n.ok, _R), *topic(n.missing, _R)),
        offset_commit_denied, offset_commit_allowed),
    Row(ApiKey.OFFSET_FETCH, offset_fetch, lambda n: (group(n.group, _D), *topic(n.ok, _D)),
        offset_fetch_denied, offset_fetch_allowed),
    Row(ApiKey.FIND_COORDINATOR, find_coordinator,
        lambda n: (group(n.group, _D), Grant(ResourceType.TRANSACTIONAL_ID, n.txn, _D),
                   cluster(AclOperation.CLUSTER_ACTION)),
        find_coordinator_denied, find_coordinator_allowed),
    Row(ApiKey.JOIN_GROUP, join_group, lambda n: (group(MEMBER_GROUP, _R),),
        top_level(GROUP_DENIED), top_level(MEMBER_ID_REQUIRED)),
    Row(ApiKey.HEARTBEAT, heartbeat, lambda n: (group(OTHER_GROUP, _R),),
        top_level(GROUP_DENIED), top_level(UNKNOWN_MEMBER_ID)),
    Row(ApiKey.LEAVE_GROUP, leave_group, lambda n: (group(OTHER_GROUP, _R),),
        top_level(GROUP_DENIED), leave_group_allowed),
    Row(ApiKey.SYNC_GROUP, sync_group, lambda n: (group(OTHER_GROUP, _R),),
        top_level(GROUP_DENIED), top_level(UNKNOWN_MEMBER_ID)),
    Row(ApiKey.DESCRIBE_GROUPS, describe_groups, lambda n: (group(n.group, _D),),
        describe_groups_denied, describe_groups_allowed),
    Row(ApiKey.LIST_GROUPS, list_groups, lambda n: (group(n.group, _D),),
        list_groups_denied, list_groups_allowed),
    Row(ApiKey.API_VERSIONS, api_versions, lambda n: (), api_versions_answered, None),
    Row(ApiKey.SASL_HANDSHAKE, sasl_handshake, lambda n: (), illegal_sasl_state, None),
    Row(ApiKey.SASL_AUTHENTICATE, sasl_authenticate, lambda n: (), illegal_sasl_state, None),
    Row(ApiKey.CREATE_DELEGATION_TOKEN, create_token, lambda n: (), token_request_not_allowed,
        None),
    Row(ApiKey.RENEW_DELEGATION_TOKEN, renew_token, lambda n: (), token_request_not_allowed,
        None),
    Row(ApiKey.EXPIRE_DELEGATION_TOKEN, expire_token, lambda n: (), token_request_not_allowed,
        None),
    Row(ApiKey.DESCRIBE_DELEGATION_TOKEN, describe_tokens, lambda n: (),
        token_request_not_allowed, None),
    Row(ApiKey.CREATE_TOPICS, create_topics,
        lambda n: (topic(NEW_TOPICS[0], _C)
                   + topic(NEW_TOPICS[2], _C, AclOperation.DESCRIBE_CONFIGS)),
        create_topics_denied, create_topics_allowed),
    Row(ApiKey.DELETE_TOPICS, delete_topics,
        lambda n: topic(n.del1, AclOperation.DELETE) + topic(n.del2, AclOperation.DELETE)
        + topic(n.missing, AclOperation.DELETE),
        delete_topics_denied, delete_topics_allowed),
    Row(ApiKey.DELETE_RECORDS, delete_records,
        lambda n: topic(n.rec, AclOperation.DELETE) + topic(n.missing, AclOperation.DELETE),
        delete_records_denied, delete_records_allowed),
    Row(ApiKey.INIT_PRODUCER_ID, init_producer_id,
        lambda n: (*topic(n.ok, _W), Grant(ResourceType.TRANSACTIONAL_ID, n.txn, _W)),
        init_producer_id_denied, init_producer_id_allowed),
    Row(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions,
        lambda n: (Grant(ResourceType.TRANSACTIONAL_ID, n.txn, _W), *topic(n.ok, _W),
                   *topic(n.missing, _W), cluster(AclOperation.CLUSTER_ACTION)),
        add_partitions_denied, add_partitions_allowed),
    # an operator's abort (kafka-transactions.sh) needs ALTER; a broker's CLUSTER_ACTION
    Row(ApiKey.WRITE_TXN_MARKERS, write_txn_markers, lambda n: (cluster(AclOperation.ALTER),),
        txn_markers_answered(CLUSTER_DENIED), txn_markers_answered(UNKNOWN_TOPIC)),
    Row(ApiKey.DESCRIBE_PRODUCERS, describe_producers,
        lambda n: topic(n.ok, _R) + topic(n.missing, _R),
        describe_producers_denied, describe_producers_allowed),
    Row(ApiKey.ADD_OFFSETS_TO_TXN, add_offsets,
        lambda n: (Grant(ResourceType.TRANSACTIONAL_ID, n.txn, _W), group(n.group, _R)),
        top_level(TXN_ID_DENIED), coordinator_answered),
    Row(ApiKey.END_TXN, end_txn, lambda n: (Grant(ResourceType.TRANSACTIONAL_ID, n.txn, _W),),
        top_level(TXN_ID_DENIED), coordinator_answered),
    Row(ApiKey.DESCRIBE_TRANSACTIONS, describe_transactions,
        lambda n: (Grant(ResourceType.TRANSACTIONAL_ID, n.txn, _D),),
        describe_transactions_denied, describe_transactions_allowed),
    Row(ApiKey.LIST_TRANSACTIONS, list_transactions,
        lambda n: (Grant(ResourceType.TRANSACTIONAL_ID, n.txn, _D),),
        list_transactions_denied, list_transactions_allowed),
    Row(ApiKey.OFFSET_FOR_LEADER_EPOCH, offset_for_leader_epoch,
        lambda n: topic(n.ok, _D) + topic(n.missing, _D),
        offset_for_leader_epoch_denied, offset_for_leader_epoch_allowed),
    Row(ApiKey.DESCRIBE_CONFIGS, describe_configs,
        lambda n: (topic(n.ok, AclOperation.DESCRIBE_CONFIGS)
                   + topic(n.missing, AclOperation.DESCRIBE_CONFIGS)
                   + (cluster(AclOperation.DESCRIBE_CONFIGS),)),
        describe_configs_denied, describe_configs_allowed),
    Row(ApiKey.ALTER_CONFIGS, alter_configs,
        lambda n: (*topic(n.ok, AclOperation.ALTER_CONFIGS), cluster(AclOperation.ALTER_CONFIGS)),
        alter_configs_denied, alter_configs_allowed),
    # allowed, the unknown dir answers LOG_DIR_NOT_FOUND (57)
    Row(ApiKey.ALTER_REPLICA_LOG_DIRS, alter_replica_log_dirs,
        lambda n: (cluster(AclOperation.ALTER),),
        alter_replica_log_dirs_checks(CLUSTER_DENIED), alter_replica_log_dirs_checks(57)),
    Row(ApiKey.DESCRIBE_LOG_DIRS, describe_log_dirs, lambda n: (cluster(_D),),
        describe_log_dirs_denied, describe_log_dirs_allowed),
    Row(ApiKey.CREATE_PARTITIONS, create_partitions,
        lambda n: topic(n.ok, AclOperation.ALTER) + topic(n.missing, AclOperation.ALTER),
        each_result(TOPIC_DENIED), create_partitions_allowed),
    Row(ApiKey.DELETE_GROUPS, delete_groups,
        lambda n: (group(n.group_delete, AclOperation.DELETE),),
        delete_groups_denied, delete_groups_allowed),
    Row(ApiKey.ELECT_LEADERS, elect_leaders, lambda n: (cluster(AclOperation.ALTER),),
        elect_leaders_denied, elect_leaders_allowed),
    Row(ApiKey.INCREMENTAL_ALTER_CONFIGS, incremental_alter_configs,
        lambda n: (*topic(n.ok, AclOperation.ALTER_CONFIGS), cluster(AclOperation.ALTER_CONFIGS)),
        incremental_alter_configs_denied, incremental_alter_configs_allowed),
    Row(ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter_reassignments,
        lambda n: (cluster(AclOperation.ALTER),),
        alter_reassignments_denied, alter_reassignments_allowed),
    Row(ApiKey.LIST_PARTITION_REASSIGNMENTS, list_reassignments, lambda n: (cluster(_D),),
        top_level(CLUSTER_DENIED), list_reassignments_allowed),
    Row(ApiKey.OFFSET_DELETE, offset_delete,
        lambda n: (group(n.group_offsets, AclOperation.DELETE), *topic(n.ok, _R),
                   *topic(n.missing, _R)),
        offset_delete_denied, offset_delete_allowed),
    Row(ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit,
        lambda n: (Grant(ResourceType.TRANSACTIONAL_ID, n.txn, _W), group(COMMIT_GROUP, _R),
                   *topic(n.ok, _R), *topic(n.missing, _R)),
        txn_offset_commit_denied, txn_offset_commit_allowed),
    Row(ApiKey.DESCRIBE_CLUSTER, describe_cluster, lambda n: (cluster(_D),),
        describe_cluster_checks(0), describe_cluster_checks(bits(_D))),
    Row(ApiKey.DESCRIBE_ACLS, describe_acls, lambda n: (cluster(_D),),
        top_level(CLUSTER_DENIED), describe_acls_allowed),
    Row(ApiKey.CREATE_ACLS, create_acls, lambda n: (cluster(AclOperation.ALTER),),
        each_result(CLUSTER_DENIED), each_result(NONE)),
    Row(ApiKey.DELETE_ACLS, delete_acls, lambda n: (cluster(AclOperation.ALTER),),
        each_result(CLUSTER_DENIED, "filter_results"), each_result(NONE, "filter_results")),
    Row(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, describe_scram, lambda n: (cluster(_D),),
        describe_scram_denied, describe_scram_allowed),
    Row(ApiKey.UPDATE_FEATURES, update_features, lambda n: (cluster(AclOperation.ALTER),),
        top_level(CLUSTER_DENIED), update_features_allowed),
    Row(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, alter_scram,
        lambda n: (cluster(AclOperation.ALTER),),
        scram_results(CLUSTER_DENIED), scram_results(RESOURCE_NOT_FOUND)),
    Row(ApiKey.DESCRIBE_CLIENT_QUOTAS, describe_quotas,
        lambda n: (cluster(AclOperation.DESCRIBE_CONFIGS),),
        describe_quotas_checks(CLUSTER_DENIED), describe_quotas_checks(NONE)),
    Row(ApiKey.ALTER_CLIENT_QUOTAS, alter_quotas,
        lambda n: (cluster(AclOperation.ALTER_CONFIGS),),
        each_result(CLUSTER_DENIED, "entries"), each_result(NONE, "entries")),
    Row(ApiKey.ENVELOPE, envelope, lambda n: (), connection_closed, None),
    Row(ApiKey.CONSUMER_GROUP_HEARTBEAT, consumer_group_heartbeat, lambda n: (),
        heartbeat_unsupported, None),
    Row(ApiKey.CONSUMER_GROUP_DESCRIBE, consumer_group_describe, lambda n: (),
        describe_unsupported, None),
)


# --------------------------------------------------------------------------- the tests


def test_every_advertised_api_has_one_row(world: World) -> None:
    keys = [row.key for row in ROWS]
    assert len(keys) == len(set(keys)), "one row per API key"
    assert {ApiKey(k) for k in world.versions} == set(keys)


@pytest.mark.parametrize("row", ROWS, ids=[row.key.name for row in ROWS])
def test_the_api_authorizes_as_kafka(world: World, row: Row) -> None:
    world.revoke_all()
    world.granted = set()
    try:
        row.denied(world, row.request(world))
        if row.allowed is None:
            return
        world.grant(*row.grants(world.n))
        row.allowed(world, row.request(world))
    finally:
        world.revoke_all()
    # what allowed it is what the API table says the handler checks
    checked = {(c.resource, c.operation) for c in API_TABLE[row.key].checks}
    assert world.granted <= checked, (row.key.name, world.granted - checked)
