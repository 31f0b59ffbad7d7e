"""The request handlers built from their ports, with no broker process and no broker
object: the composition function (handlers.build_handlers) with a fake of every service,
and the behaviour of Produce, Metadata and OffsetCommit on small fakes and real
in-process components (a MetadataCache, a ReplicaManager over logs in a temporary
directory)."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import pytest

from moldau.coordinator.group.records import OffsetAndMetadata
from moldau.errors import (
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    SecurityDisabledError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from moldau.metrics.registry import MetricsRegistry
from moldau.protocol.errors import ProtocolError
from moldau.protocol.generated.api import APIS, ApiKey
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.protocol.generated.offset_commit_request import OffsetCommitRequest
from moldau.protocol.generated.produce_request import ProduceRequest
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.records import build_batch
from moldau.replication.replica_manager import LeaderAndIsr, ReplicaManager
from moldau.security.acls import Action
from moldau.server import handlers as handlers_package
from moldau.server.authorization import AllowAll
from moldau.server.broker_metrics import DelayedOperations, NoTopicStats
from moldau.server.handlers import build_handlers
from moldau.server.handlers.groups import OffsetCommitHandler
from moldau.server.handlers.metadata import MetadataHandler
from moldau.server.handlers.produce import ProduceAppends, ProduceHandler
from moldau.server.handlers.services import BrokerState, HandlerServices
from moldau.server.metadata_cache import BrokerEndpoints, MetadataCache, PartitionInfo, TopicInfo
from moldau.server.network import Session
from moldau.server.requests import RequestContext, RequestDispatcher
from moldau.server.routes import register_handlers
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager, ManagerConfig

BROKER_ID = 1
LISTENER = "PLAINTEXT"


# --- fakes --------------------------------------------------------------------------------


class Port:
    """A stand-in for one service: the composition test only checks who gets what."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Port({self.name})"


class Config(dict[str, Any]):
    """BrokerConfig's item access, with the keys the handlers read at construction."""


@dataclass
class Listener:
    name: str = LISTENER


@dataclass
class Connection:
    session: Session = field(default_factory=Session)
    listener: Listener = field(default_factory=Listener)


class Denying(AllowAll):
    """Denies the named (operation, resource type, name) triples, allows the rest."""

    def __init__(self, *denied: tuple[str, str, str]) -> None:
        self.denied = set(denied)

    def authorize(self, principal: str, host: str, request_name: str,
                  actions: Sequence[Action]) -> list[bool]:
        return [(a.operation.name, a.resource_type.name, a.name) not in self.denied
                for a in actions]


def context(api_key: int, version: int, authorizer: AllowAll | None = None
            ) -> RequestContext:
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=7, client_id="ports-test")
    return RequestContext(Connection(), header, version, 0,  # type: ignore[arg-type]
                          authorizer or AllowAll())


def run(result: Any) -> Any:
    """A handler's answer, awaited when it is a coroutine."""
    if asyncio.iscoroutine(result):
        return asyncio.run(result)
    return result


def fake_services() -> HandlerServices:
    values: dict[str, Any] = {f.name: Port(f.name) for f in fields(HandlerServices)}
    values["config"] = Config({"max.incremental.fetch.session.cache.slots": 1000})
    values["state"] = BrokerState(BROKER_ID)
    registry = MetricsRegistry()
    values["metrics"] = registry
    values["purgatory"] = {kind: DelayedOperations(registry, kind) for kind in ("Produce",
                                                                              "Fetch")}
    values["controller"] = lambda: None
    values["advertised_versions"] = lambda: {}
    return HandlerServices(**values)


# --- the composition ----------------------------------------------------------------------


def test_every_handler_is_built_from_its_ports_alone() -> None:
    services = fake_services()
    built, _appends = build_handlers(services)
    offered = {id(getattr(services, f.name)) for f in fields(HandlerServices)}
    for api_key, handler in built.items():
        spec = APIS[api_key]
        assert spec.min_version <= handler.MIN_VERSION <= handler.MAX_VERSION \
            <= spec.max_version, spec.name
        for name, value in vars(handler).items():
            if isinstance(value, Port):
                assert id(value) in offered, (spec.name, name)
            assert type(value).__name__ != "Broker", (spec.name, name)


def test_the_dispatcher_advertises_exactly_the_built_handlers() -> None:
    services = fake_services()
    dispatcher = RequestDispatcher()
    register_handlers(dispatcher, services)
    built, _ = build_handlers(services)
    assert set(dispatcher.advertised_versions()) == set(built)
    assert dispatcher.fast_produce is not None


def test_no_handler_module_imports_the_broker() -> None:
    folder = Path(handlers_package.__file__).parent
    for module in sorted(folder.glob("*.py")):
        text = module.read_text()
        assert not re.search(r"from \.\.broker import|moldau\.server\.broker\b", text), \
            module.name


# --- Produce on a real ReplicaManager and logs ----------------------------------------------


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[tuple[ProduceHandler, MetadataCache]]:
    """A ProduceHandler over one partition this broker leads ("orders"-0) and one the
    metadata knows but another broker hosts ("orders"-1)."""
    manager = LogManager(ManagerConfig([str(tmp_path)], BROKER_ID, "cluster"), LogConfig())
    replicas = ReplicaManager(BROKER_ID, manager)
    topic_id = uuid.uuid4()
    replicas.become_leader_or_follower(
        "orders", 0, topic_id, LeaderAndIsr(BROKER_ID, 0, [BROKER_ID], [BROKER_ID]))
    metadata = MetadataCache(BROKER_ID)
    metadata.put_topic(TopicInfo("orders", topic_id, {
        0: PartitionInfo(0, BROKER_ID, 0, [BROKER_ID], [BROKER_ID]),
        1: PartitionInfo(1, 2, 0, [2], [2])}))
    registry = MetricsRegistry()
    appends = ProduceAppends(metadata, replicas, manager, NoTopicStats(registry),
                             {"Produce": DelayedOperations(registry, "Produce")})
    yield ProduceHandler(appends), metadata
    manager.shutdown()


def produce(handler: ProduceHandler, partitions: list[tuple[str, int]], acks: int = 1,
            authorizer: AllowAll | None = None) -> Any:
    topics: dict[str, list[Any]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(ProduceRequest.PartitionProduceData(
            index=index, records=build_batch([(b"k", b"v")])))
    request = ProduceRequest(acks=acks, timeout_ms=1000, transactional_id=None, topic_data=[
        ProduceRequest.TopicProduceData(name=t, partition_data=p) for t, p in topics.items()])
    return run(handler(context(0, 9, authorizer), request))


def codes(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    return {(t.name, p.index): (p.error_code, p.base_offset)
            for t in response.responses for p in t.partition_responses}


def test_produce_appends_on_the_leader_and_answers_each_partition(leader) -> None:
    handler, _ = leader
    assert codes(produce(handler, [("orders", 0)])) == {("orders", 0): (0, 0)}
    answer = codes(produce(handler, [("orders", 0), ("orders", 1), ("absent", 0)]))
    assert answer == {("orders", 0): (0, 1),
                      ("orders", 1): (NotLeaderOrFollowerError.code, -1),
                      ("absent", 0): (UnknownTopicOrPartitionError.code, -1)}


def test_produce_refusals_cost_the_other_partitions_nothing(leader) -> None:
    handler, metadata = leader
    metadata.put_topic(TopicInfo("__consumer_offsets", uuid.uuid4()))
    denied = Denying(("WRITE", "TOPIC", "secret"))
    answer = codes(produce(handler, [("orders", 0), ("secret", 0),
                                     ("__consumer_offsets", 0)], authorizer=denied))
    assert answer == {("orders", 0): (0, 0),
                      ("secret", 0): (TopicAuthorizationFailedError.code, -1),
                      ("__consumer_offsets", 0): (InvalidTopicError.code, -1)}
    assert codes(produce(handler, [("orders", 0)], acks=2)) == {
        ("orders", 0): (InvalidRequiredAcksError.code, -1)}
    assert codes(produce(handler, [("orders", 0)])) == {("orders", 0): (0, 1)}


def test_a_failed_acks_0_produce_closes_the_connection(leader) -> None:
    handler, _ = leader
    assert produce(handler, [("orders", 0)], acks=0) is None
    with pytest.raises(ProtocolError):
        produce(handler, [("orders", 1)], acks=0)


# --- Metadata on a real MetadataCache and a fake topic admin --------------------------------


class TopicAdmin:
    """Records the topics Metadata asks to auto-create."""

    def __init__(self) -> None:
        self.created: list[str] = []

    def auto_create(self, name: str) -> None:
        self.created.append(name)


def metadata_handler(auto_create: bool = True) -> tuple[MetadataHandler, TopicAdmin]:
    cache = MetadataCache(BROKER_ID)
    cache.set_brokers([BrokerEndpoints(1, {LISTENER: ("h1", 9092)}),
                       BrokerEndpoints(2, {LISTENER: ("h2", 9092), "SSL": ("h2", 9093)})])
    cache.put_topic(TopicInfo("orders", uuid.uuid4(), {
        0: PartitionInfo(0, 2, 3, [2, 1], [2, 1])}))
    cache.controller_id = 2
    cache.initialized = True
    topics = TopicAdmin()
    handler = MetadataHandler(BROKER_ID, Config({"auto.create.topics.enable": auto_create}),
                              cache, topics)  # type: ignore[arg-type]
    return handler, topics


def ask_metadata(handler: MetadataHandler, names: list[str] | None, create: bool = True,
                 authorizer: AllowAll | None = None) -> Any:
    topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=n)
                                         for n in names]
    request = MetadataRequest(topics=topics, allow_auto_topic_creation=create,
                              include_topic_authorized_operations=False)
    return run(handler(context(3, 9, authorizer), request))


def test_metadata_lists_brokers_of_the_listener_and_the_topics_leaders() -> None:
    handler, _ = metadata_handler()
    answer = ask_metadata(handler, ["orders"])
    assert sorted((b.node_id, b.host, b.port) for b in answer.brokers) == [
        (1, "h1", 9092), (2, "h2", 9092)]
    assert answer.controller_id == 2
    [topic] = answer.topics
    assert (topic.name, topic.error_code) == ("orders", 0)
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes)
            for p in topic.partitions] == [(0, 2, 3, [2, 1])]


def test_metadata_auto_creates_only_when_both_sides_allow_it() -> None:
    handler, topics = metadata_handler()
    [topic] = ask_metadata(handler, ["new"]).topics
    assert (topic.error_code, topics.created) == (LeaderNotAvailableError.code, ["new"])
    [topic] = ask_metadata(handler, ["other"], create=False).topics
    assert topic.error_code == UnknownTopicOrPartitionError.code
    handler, topics = metadata_handler(auto_create=False)
    [topic] = ask_metadata(handler, ["new"]).topics
    assert (topic.error_code, topics.created) == (UnknownTopicOrPartitionError.code, [])


def test_metadata_hides_what_the_principal_may_not_describe() -> None:
    handler, topics = metadata_handler()
    denied = Denying(("DESCRIBE", "TOPIC", "orders"))
    assert ask_metadata(handler, None, authorizer=denied).topics == []
    [topic] = ask_metadata(handler, ["orders"], authorizer=denied).topics
    assert (topic.error_code, topic.partitions) == (TopicAuthorizationFailedError.code, [])
    assert topics.created == []


# --- OffsetCommit on a fake coordinator ------------------------------------------------------


class Coordinator:
    """Takes commits for generation 3 of any group, as the group coordinator would."""

    def __init__(self) -> None:
        self.committed: dict[tuple[str, int], OffsetAndMetadata] = {}

    async def commit_offsets(self, group_id: str, member_id: str, instance_id: str | None,
                             generation: int, offsets: dict[tuple[str, int], OffsetAndMetadata]
                             ) -> dict[tuple[str, int], int]:
        if generation != 3:
            raise IllegalGenerationError(f"generation {generation}")
        self.committed.update(offsets)
        return dict.fromkeys(offsets, 0)


def commit(coordinator: Coordinator, offsets: dict[tuple[str, int], int], generation: int = 3,
           authorizer: AllowAll | None = None) -> dict[tuple[str, int], int]:
    cache = MetadataCache(BROKER_ID)
    cache.put_topic(TopicInfo("orders", uuid.uuid4(), {
        i: PartitionInfo(i, 1, 0, [1], [1]) for i in (0, 1)}))
    handler = OffsetCommitHandler(coordinator, cache)  # type: ignore[arg-type]
    topics: dict[str, list[Any]] = {}
    for (topic, index), offset in offsets.items():
        topics.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=index, committed_offset=offset, committed_leader_epoch=-1,
            committed_metadata=""))
    request = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=generation,
                                  member_id="m", group_instance_id=None, topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=p)
        for t, p in topics.items()])
    response = run(handler(context(8, 8, authorizer), request))
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


def test_offset_commit_stores_known_partitions_and_names_the_rest() -> None:
    coordinator = Coordinator()
    answer = commit(coordinator, {("orders", 0): 10, ("orders", 5): 1, ("absent", 0): 2})
    assert answer == {("orders", 0): 0, ("orders", 5): UnknownTopicOrPartitionError.code,
                      ("absent", 0): UnknownTopicOrPartitionError.code}
    assert {tp: o.offset for tp, o in coordinator.committed.items()} == {("orders", 0): 10}


def test_offset_commit_checks_the_group_then_each_topic() -> None:
    coordinator = Coordinator()
    group_denied = Denying(("READ", "GROUP", "g"))
    assert commit(coordinator, {("orders", 0): 1}, authorizer=group_denied) == {
        ("orders", 0): GroupAuthorizationFailedError.code}
    topic_denied = Denying(("READ", "TOPIC", "orders"))
    assert commit(coordinator, {("orders", 0): 1}, authorizer=topic_denied) == {
        ("orders", 0): TopicAuthorizationFailedError.code}
    assert coordinator.committed == {}


def test_offset_commit_carries_the_coordinators_refusal_to_every_partition() -> None:
    coordinator = Coordinator()
    assert commit(coordinator, {("orders", 0): 1, ("orders", 1): 2}, generation=2) == {
        ("orders", 0): IllegalGenerationError.code, ("orders", 1): IllegalGenerationError.code}
    assert coordinator.committed == {}


def test_the_acl_apis_without_an_authorizer_answer_security_disabled() -> None:
    """No authorizer.class.name: as Kafka, SECURITY_DISABLED in every error slot."""
    from moldau.protocol.generated.create_acls_request import CreateAclsRequest
    from moldau.protocol.generated.delete_acls_request import DeleteAclsRequest
    from moldau.protocol.generated.describe_acls_request import DescribeAclsRequest

    built, _ = build_handlers(replace(fake_services(), acl_authorizer=None))
    described = built[ApiKey.DESCRIBE_ACLS](context(ApiKey.DESCRIBE_ACLS, 3),
                                            DescribeAclsRequest())
    assert (described.error_code, described.error_message) == (
        SecurityDisabledError.code, "No Authorizer is configured on the broker")
    creation = CreateAclsRequest.AclCreation(resource_type=2, resource_name="t",
                                             principal="User:a", host="*", operation=3,
                                             permission_type=3)
    created = built[ApiKey.CREATE_ACLS](context(ApiKey.CREATE_ACLS, 3),
                                        CreateAclsRequest(creations=[creation, creation]))
    assert [r.error_code for r in created.results] == [SecurityDisabledError.code] * 2
    deleted = built[ApiKey.DELETE_ACLS](context(ApiKey.DELETE_ACLS, 3), DeleteAclsRequest(
        filters=[DeleteAclsRequest.DeleteAclsFilter()]))
    assert [r.error_code for r in deleted.filter_results] == [SecurityDisabledError.code]
