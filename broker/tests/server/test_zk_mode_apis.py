"""The API versions Kafka 3.9 in ZooKeeper mode advertises beyond the everyday ones, on
small fakes: ListOffsets v9 (LATEST_TIERED without remote storage), OffsetCommit v0 and
OffsetFetch v0 (offsets in ZooKeeper under /consumers, apart from the coordinator's),
ConsumerGroupHeartbeat and ConsumerGroupDescribe (UNSUPPORTED_VERSION before authorizing,
as without the new group coordinator) and Envelope (the connection is closed)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from moldau.cluster import zk_consumer_ops
from moldau.coordinator.group.config import CoordinatorConfig
from moldau.errors import (
    GroupAuthorizationFailedError,
    OffsetMetadataTooLargeError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from moldau.protocol.errors import ProtocolError
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.consumer_group_describe_request import (
    ConsumerGroupDescribeRequest,
)
from moldau.protocol.generated.consumer_group_describe_response import (
    ConsumerGroupDescribeResponse,
)
from moldau.protocol.generated.consumer_group_heartbeat_request import (
    ConsumerGroupHeartbeatRequest,
)
from moldau.protocol.generated.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)
from moldau.protocol.generated.envelope_request import EnvelopeRequest
from moldau.protocol.generated.list_offsets_request import ListOffsetsRequest
from moldau.protocol.generated.list_offsets_response import ListOffsetsResponse
from moldau.protocol.generated.offset_commit_request import OffsetCommitRequest
from moldau.protocol.generated.offset_commit_response import OffsetCommitResponse
from moldau.protocol.generated.offset_fetch_request import OffsetFetchRequest
from moldau.protocol.generated.offset_fetch_response import OffsetFetchResponse
from moldau.protocol.records import build_batch
from moldau.replication.replica_manager import LeaderAndIsr, ReplicaManager
from moldau.security.acls import Action
from moldau.server.authorization import AllowAll
from moldau.server.handlers import build_handlers
from moldau.server.handlers.groups import OffsetCommitHandler, OffsetFetchHandler
from moldau.server.handlers.list_offsets import ListOffsetsHandler
from moldau.server.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager, ManagerConfig

from .test_handler_ports import BROKER_ID, Denying, context, fake_services, run


class Refusing(AllowAll):
    """An authorizer that must not be asked."""

    def authorize(self, principal: str, host: str, request_name: str,
                  actions: Sequence[Action]) -> list[bool]:
        raise AssertionError(f"{request_name} authorized {actions}")


# --- ListOffsets v8 and v9 on a real ReplicaManager -----------------------------------------


@pytest.fixture
def list_offsets(tmp_path: Path) -> Iterator[Callable[[int, int], tuple[int, int, int, int]]]:
    manager = LogManager(ManagerConfig([str(tmp_path)], BROKER_ID, "cluster"), LogConfig())
    replicas = ReplicaManager(BROKER_ID, manager)
    topic_id = uuid.uuid4()
    replicas.become_leader_or_follower(
        "orders", 0, topic_id, LeaderAndIsr(BROKER_ID, 4, [BROKER_ID], [BROKER_ID]))
    metadata = MetadataCache(BROKER_ID)
    metadata.put_topic(TopicInfo("orders", topic_id, {
        0: PartitionInfo(0, BROKER_ID, 4, [BROKER_ID], [BROKER_ID])}))
    log = replicas.leader_partition("orders", 0, True).log
    log.append_as_leader(build_batch([(b"k", b"v")] * 3), 4)
    log.update_high_watermark(log.log_end_offset)
    handler = ListOffsetsHandler(metadata, replicas)

    def ask(version: int, timestamp: int) -> tuple[int, int, int, int]:
        request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name="orders", partitions=[
                ListOffsetsRequest.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])])
        response = handler(context(ApiKey.LIST_OFFSETS, version), request)
        ListOffsetsResponse.decode(response.encode(version), version)  # valid on the wire
        [p] = response.topics[0].partitions
        return p.error_code, p.timestamp, p.offset, p.leader_epoch

    yield ask
    manager.shutdown()


def test_list_offsets_v9_latest_tiered_is_none_without_remote_storage(list_offsets) -> None:
    assert ListOffsetsHandler.MAX_VERSION == 9
    assert list_offsets(9, -5) == (0, -1, -1, -1)
    # the others are unchanged at v9: latest, earliest, and earliest-local (-4, v8)
    assert list_offsets(9, -1) == (0, -1, 3, 4)
    assert list_offsets(9, -2) == (0, -1, 0, 4)
    assert list_offsets(8, -4) == (0, -1, 0, 4)
    assert list_offsets(9, -4) == (0, -1, 0, 4)


# --- OffsetCommit v0 and OffsetFetch v0 in ZooKeeper ------------------------------------------


class FakeSession:
    """ZkSession's two generic operations zk_consumer_ops uses, over a dict of znodes."""

    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}

    def _set_or_create(self, path: str, data: bytes) -> int:
        self.nodes[path] = data
        return 0

    def get(self, path: str) -> tuple[bytes, object] | None:
        return (self.nodes[path], object()) if path in self.nodes else None


class FakeZkClient(FakeSession):
    """KafkaZkClient's consumer offset methods, bound as zk_client.py binds them."""

    set_or_create_consumer_offset = zk_consumer_ops.set_or_create_consumer_offset
    get_consumer_offset = zk_consumer_ops.get_consumer_offset


class FakeAsyncZk:
    def __init__(self) -> None:
        self.client = FakeZkClient()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)


class UntouchedCoordinator:
    """The group coordinator, which v0 never asks."""

    config = CoordinatorConfig()

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the coordinator was asked for {name}")


def group_handlers(zk: FakeAsyncZk | None) -> tuple[OffsetCommitHandler, OffsetFetchHandler]:
    cache = MetadataCache(BROKER_ID)
    cache.put_topic(TopicInfo("orders", uuid.uuid4(), {
        i: PartitionInfo(i, 1, 0, [1], [1]) for i in (0, 1)}))
    cache.put_topic(TopicInfo("secret", uuid.uuid4(), {0: PartitionInfo(0, 1, 0, [1], [1])}))
    coordinator: Any = UntouchedCoordinator()
    return (OffsetCommitHandler(coordinator, cache, zk),  # type: ignore[arg-type]
            OffsetFetchHandler(coordinator, cache, zk))  # type: ignore[arg-type]


def commit_v0(handler: OffsetCommitHandler, offsets: dict[tuple[str, int], tuple[int, str]],
              authorizer: AllowAll | None = None) -> dict[tuple[str, int], int]:
    topics: dict[str, list[Any]] = {}
    for (topic, index), (offset, metadata) in offsets.items():
        topics.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=index, committed_offset=offset, committed_metadata=metadata))
    request = OffsetCommitRequest.decode(OffsetCommitRequest(group_id="g", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
        for t, p in topics.items()]).encode(0), 0)
    response = run(handler(context(ApiKey.OFFSET_COMMIT, 0, authorizer), request))
    OffsetCommitResponse.decode(response.encode(0), 0)
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


def fetch_v0(handler: OffsetFetchHandler, partitions: list[tuple[str, int]],
             authorizer: AllowAll | None = None) -> dict[tuple[str, int], tuple[int, str, int]]:
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    request = OffsetFetchRequest.decode(OffsetFetchRequest(group_id="g", topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=p)
        for t, p in topics.items()]).encode(0), 0)
    response = run(handler(context(ApiKey.OFFSET_FETCH, 0, authorizer), request))
    decoded = OffsetFetchResponse.decode(response.encode(0), 0)
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in decoded.topics for p in t.partitions}


def test_offset_commit_v0_writes_kafkas_consumer_offset_znodes() -> None:
    zk = FakeAsyncZk()
    commit, _ = group_handlers(zk)
    assert OffsetCommitHandler.MIN_VERSION == 0
    answer = commit_v0(commit, {("orders", 0): (10, "m"), ("orders", 1): (7, ""),
                                ("orders", 5): (1, ""), ("absent", 0): (2, "")})
    assert answer == {("orders", 0): 0, ("orders", 1): 0,
                      ("orders", 5): UnknownTopicOrPartitionError.code,
                      ("absent", 0): UnknownTopicOrPartitionError.code}
    assert zk.client.nodes == {"/consumers/g/offsets/orders/0": b"10",
                               "/consumers/g/offsets/orders/1": b"7"}
    # a second commit overwrites
    assert commit_v0(commit, {("orders", 0): (11, "")}) == {("orders", 0): 0}
    assert zk.client.nodes["/consumers/g/offsets/orders/0"] == b"11"


def test_offset_commit_v0_checks_group_topic_and_metadata_size() -> None:
    zk = FakeAsyncZk()
    commit, _ = group_handlers(zk)
    denied_group = Denying(("READ", "GROUP", "g"))
    assert commit_v0(commit, {("orders", 0): (1, "")}, denied_group) == {
        ("orders", 0): GroupAuthorizationFailedError.code}
    denied_topic = Denying(("READ", "TOPIC", "secret"))
    assert commit_v0(commit, {("orders", 0): (1, ""), ("secret", 0): (1, "")},
                     denied_topic) == {("orders", 0): 0,
                                       ("secret", 0): TopicAuthorizationFailedError.code}
    too_large = "x" * (CoordinatorConfig().offset_metadata_max_bytes + 1)
    assert commit_v0(commit, {("orders", 1): (3, too_large)}) == {
        ("orders", 1): OffsetMetadataTooLargeError.code}
    assert zk.client.nodes == {"/consumers/g/offsets/orders/0": b"1"}


def test_offset_fetch_v0_reads_the_znodes_only() -> None:
    zk = FakeAsyncZk()
    commit, fetch = group_handlers(zk)
    assert OffsetFetchHandler.MIN_VERSION == 0
    commit_v0(commit, {("orders", 0): (10, "dropped"), ("secret", 0): (4, "")})
    unknown = (-1, "", UnknownTopicOrPartitionError.code)
    assert fetch_v0(fetch, [("orders", 0), ("orders", 1), ("orders", 9), ("absent", 0)]) == {
        ("orders", 0): (10, "", 0),  # v0 keeps no metadata
        ("orders", 1): unknown,  # no znode
        ("orders", 9): unknown, ("absent", 0): unknown}
    assert fetch_v0(fetch, [("orders", 0), ("secret", 0)],
                    Denying(("DESCRIBE", "TOPIC", "secret"))) == {
        ("orders", 0): (10, "", 0),
        ("secret", 0): (-1, "", TopicAuthorizationFailedError.code)}
    assert fetch_v0(fetch, [("orders", 0), ("secret", 0)],
                    Denying(("DESCRIBE", "GROUP", "g"))) == {
        ("orders", 0): (-1, "", GroupAuthorizationFailedError.code),
        ("secret", 0): (-1, "", GroupAuthorizationFailedError.code)}


def test_v0_without_zookeeper_is_unsupported() -> None:
    commit, fetch = group_handlers(None)
    assert commit_v0(commit, {("orders", 0): (1, "")}) == {
        ("orders", 0): UnsupportedVersionError.code}
    assert fetch_v0(fetch, [("orders", 0)]) == {
        ("orders", 0): (-1, "", UnsupportedVersionError.code)}


def test_the_built_group_handlers_keep_v0_offsets_in_the_brokers_zookeeper() -> None:
    services = fake_services()
    built, _ = build_handlers(services)
    for key in (ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH):
        assert built[key].MIN_VERSION == 0
        assert vars(built[key])["zk"] is services.zk


# --- the new consumer protocol and Envelope ------------------------------------------------


def test_consumer_group_heartbeat_is_unsupported_before_authorization() -> None:
    built, _ = build_handlers(fake_services())
    handler = built[ApiKey.CONSUMER_GROUP_HEARTBEAT]
    assert (handler.MIN_VERSION, handler.MAX_VERSION) == (0, 0)
    request = ConsumerGroupHeartbeatRequest(group_id="g", member_id="", member_epoch=0,
                                            subscribed_topic_names=["orders"])
    response = handler(context(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, Refusing()), request)
    decoded = ConsumerGroupHeartbeatResponse.decode(response.encode(0), 0)
    assert decoded == ConsumerGroupHeartbeatResponse(error_code=UnsupportedVersionError.code)
    assert (decoded.error_message, decoded.member_id, decoded.assignment) == (None, None, None)


def test_consumer_group_describe_is_unsupported_for_every_group() -> None:
    built, _ = build_handlers(fake_services())
    handler = built[ApiKey.CONSUMER_GROUP_DESCRIBE]
    assert (handler.MIN_VERSION, handler.MAX_VERSION) == (0, 0)
    request = ConsumerGroupDescribeRequest(group_ids=["a", "b"],
                                           include_authorized_operations=True)
    response = handler(context(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, Refusing()), request)
    decoded = ConsumerGroupDescribeResponse.decode(response.encode(0), 0)
    assert [(g.group_id, g.error_code, g.error_message, g.group_state, g.members,
             g.authorized_operations) for g in decoded.groups] == [
        (name, UnsupportedVersionError.code, None, "", [], -2147483648) for name in "ab"]


def test_an_envelope_closes_the_connection_before_authorization(caplog) -> None:
    built, _ = build_handlers(fake_services())
    handler = built[ApiKey.ENVELOPE]
    assert (handler.MIN_VERSION, handler.MAX_VERSION) == (0, 0)
    request = EnvelopeRequest(request_data=b"\x00", request_principal=b"",
                              client_host_address=b"\x7f\x00\x00\x01")
    with caplog.at_level("INFO", "kafka.server.KafkaApis"), pytest.raises(ProtocolError):
        handler(context(ApiKey.ENVELOPE, 0, Refusing()), request)
    assert "`Envelope` request even though forwarding has not been enabled" in caplog.text

