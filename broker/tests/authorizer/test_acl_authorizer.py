"""AclAuthorizer against a real ZooKeeper (fixtures in zk_fixtures.py; every test under its
own chroot, each AclAuthorizer on its own session as each broker would be): Kafka's znodes
and change notifications, propagation between brokers, concurrent writers, the decision
memo, refused input, and decisions while ZooKeeper is away."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from kazoo.client import KazooClient

from moldau.authorizer.acl_authorizer import AclAuthorizer, AclAuthorizerConfig
from moldau.authorizer.acl_change_listener import AclChangeListener
from moldau.authorizer.acl_store import AclStore, AclStoreUnavailableError
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.errors import InvalidRequestError
from moldau.security.acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclPolicy,
    Action,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    decode_acls,
)

Op, RT, PT = AclOperation, ResourceType, PatternType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
HOST = "10.0.0.1"

Factory = Callable[..., AclAuthorizer]


def wait_for(cond: Callable[[], object], timeout: float = 10.0) -> float:
    """Seconds until cond() held; AssertionError after `timeout`."""
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.005)
    return time.monotonic() - start


def binding(name: str = "orders", principal: str = "User:alice", operation: AclOperation = Op.READ,
            permission: AclPermissionType = ALLOW, pattern_type: PatternType = PT.LITERAL,
            resource_type: ResourceType = RT.TOPIC, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern_type),
                      AccessControlEntry(principal, host, operation, permission))


def may(authorizer: AclAuthorizer, operation: AclOperation = Op.READ, name: str = "orders",
        principal: str = "User:alice") -> bool:
    return authorizer.authorize(principal, HOST, "Fetch",
                                [Action(operation, RT.TOPIC, name)])[0]


class SyncedKazoo:
    """The test's own session on its chroot, to read and write znodes as Kafka would. The
    authorizers write through other sessions, which may sit on other servers: each read
    first syncs this session's server with the leader (ZooKeeper's reads may lag)."""

    _READS = frozenset({"get", "get_children", "exists"})

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.zk, name)
        if name not in self._READS:
            return call

        def synced(*args: Any, **kwargs: Any) -> Any:
            self.zk.sync("/")
            return call(*args, **kwargs)
        return synced


@pytest.fixture
def kazoo(zk_client: KafkaZkClient) -> SyncedKazoo:
    return SyncedKazoo(zk_client.kazoo)


@pytest.fixture
def authorizers(zk_ensemble: ZooKeeperEnsemble, zk_chroot: str) -> Iterator[Factory]:
    """Started AclAuthorizers on the test's chroot, each on a session of its own."""
    clients: list[KafkaZkClient] = []
    started: list[AclAuthorizer] = []

    def make(config: AclAuthorizerConfig | None = None) -> AclAuthorizer:
        client = KafkaZkClient(zk_ensemble.connect_string, zk_chroot, 6000, 15000)
        client.start()
        clients.append(client)
        authorizer = AclAuthorizer.from_zk_client(client, config)
        authorizer.start()
        started.append(authorizer)
        return authorizer

    yield make
    for authorizer in started:
        authorizer.close()
    for client in clients:
        client.close()


def children(kazoo: SyncedKazoo, path: str) -> list[str]:
    return sorted(kazoo.get_children(path))


def test_znodes_and_change_nodes_are_laid_out_as_kafkas(authorizers: Factory,
                                                        kazoo: SyncedKazoo) -> None:
    authorizer = authorizers()
    types = ["Cluster", "DelegationToken", "Group", "Topic", "TransactionalId", "User"]
    assert children(kazoo, "/kafka-acl") == types
    assert children(kazoo, "/kafka-acl-extended") == ["prefixed"]
    assert children(kazoo, "/kafka-acl-extended/prefixed") == types
    assert children(kazoo, "/kafka-acl-changes") == []
    assert children(kazoo, "/kafka-acl-extended-changes") == []

    assert authorizer.create_acls([
        binding(), binding(operation=Op.DESCRIBE_CONFIGS, permission=DENY, host=HOST),
        binding("orders-", "User:*", Op.WRITE, pattern_type=PT.PREFIXED),
        binding("kafka-cluster", "User:broker", Op.CLUSTER_ACTION, resource_type=RT.CLUSTER),
    ]) == [None] * 4

    data, stat = kazoo.get("/kafka-acl/Topic/orders")
    assert data == (b'{"acls":[{"principal":"User:alice","permissionType":"Deny",'
                    b'"host":"10.0.0.1","operation":"DescribeConfigs"},{"principal":'
                    b'"User:alice","permissionType":"Allow","host":"*","operation":"Read"}],'
                    b'"version":1}')
    assert stat.version == 0  # both entries of one pattern in one write
    assert json.loads(kazoo.get("/kafka-acl-extended/prefixed/Topic/orders-")[0]) == {
        "version": 1, "acls": [{"principal": "User:*", "permissionType": "Allow",
                                "host": "*", "operation": "Write"}]}
    assert children(kazoo, "/kafka-acl/Cluster") == ["kafka-cluster"]

    # one change node per changed resource, in Kafka's two encodings
    literal = children(kazoo, "/kafka-acl-changes")
    assert literal == ["acl_changes_0000000000", "acl_changes_0000000001"]
    assert sorted(kazoo.get(f"/kafka-acl-changes/{n}")[0] for n in literal) == [
        b"CLUSTER:kafka-cluster", b"TOPIC:orders"]
    (extended,) = children(kazoo, "/kafka-acl-extended-changes")
    assert extended == "acl_changes_0000000000"
    assert kazoo.get(f"/kafka-acl-extended-changes/{extended}")[0] == (
        b'{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}')

    # adding what is there already writes nothing and notifies nobody
    assert authorizer.create_acls([binding()]) == [None]
    assert kazoo.get("/kafka-acl/Topic/orders")[1].version == 0
    assert len(children(kazoo, "/kafka-acl-changes")) == 2


def test_acls_written_by_kafka_are_loaded_and_followed(authorizers: Factory,
                                                       kazoo: SyncedKazoo) -> None:
    # as Kafka's kafka-acls --authorizer-properties leaves them: znodes, then a change node
    kazoo.create("/kafka-acl/Topic/orders",
                 b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
                 b'"operation":"Read","host":"*"}]}', makepath=True)
    kazoo.create("/kafka-acl-extended/prefixed/Group/app-",
                 b'{"acls":[{"principal":"User:*","permissionType":"Allow","host":"*",'
                 b'"operation":"Read"}],"version":1}', makepath=True)
    kazoo.create("/kafka-acl/Bogus/x", b"", makepath=True)  # an unknown type is skipped
    authorizer = authorizers()
    assert authorizer.describe_acls(AclBindingFilter()) == [
        binding(), binding("app-", "User:*", pattern_type=PT.PREFIXED, resource_type=RT.GROUP)]
    assert may(authorizer) and not may(authorizer, principal="User:bob")
    assert authorizer.authorize("User:bob", HOST, "JoinGroup",
                                [Action(Op.READ, RT.GROUP, "app-1")]) == [True]

    kazoo.set("/kafka-acl/Topic/orders",
              b'{"version":1,"acls":[{"principal":"User:bob","permissionType":"Allow",'
              b'"operation":"All","host":"*"}]}')
    kazoo.create("/kafka-acl-changes/acl_changes_", b"TOPIC:orders", sequence=True)
    wait_for(lambda: may(authorizer, principal="User:bob"), timeout=1.0)
    assert not may(authorizer)


def test_another_broker_sees_a_change_within_a_second(authorizers: Factory) -> None:
    writer, other = authorizers(), authorizers()
    assert not may(other) and not may(other, name="orders-eu")
    assert writer.create_acls([binding(), binding("orders-", pattern_type=PT.PREFIXED)]) == [
        None, None]
    assert may(writer)  # the writer's own cache at once
    assert wait_for(lambda: may(other) and may(other, name="orders-eu"), timeout=1.0) < 1.0

    deny = binding("*", "User:*", Op.ALL, DENY)
    assert other.create_acls([deny]) == [None]
    assert wait_for(lambda: not may(writer), timeout=1.0) < 1.0

    results = writer.delete_acls([AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "*",
                                                                         PT.LITERAL))])
    assert [r.binding for r in results[0].bindings] == [deny]
    assert wait_for(lambda: may(other), timeout=1.0) < 1.0
    assert other.describe_acls(AclBindingFilter()) == writer.describe_acls(AclBindingFilter())


def test_concurrent_writers_to_one_resource_both_land(authorizers: Factory,
                                                      kazoo: SyncedKazoo) -> None:
    first, second = authorizers(), authorizers()
    start = threading.Barrier(2)
    results: dict[str, list[object]] = {}

    def add(authorizer: AclAuthorizer, who: str) -> None:
        start.wait()
        results[who] = [authorizer.create_acls([binding(principal=f"User:{who}-{i}")])
                        for i in range(8)]

    threads = [threading.Thread(target=add, args=(first, "a")),
               threading.Thread(target=add, args=(second, "b"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert all(result == [None] for batch in results.values() for result in batch)

    expected = {f"User:{who}-{i}" for who in "ab" for i in range(8)}
    stored = decode_acls(kazoo.get("/kafka-acl/Topic/orders")[0])
    assert {entry.principal for entry in stored} == expected
    for authorizer in (first, second):
        wait_for(lambda a=authorizer: {b.entry.principal for b in a.describe_acls(
            AclBindingFilter())} == expected, timeout=1.0)


def test_deleting_the_last_entry_deletes_the_znode(authorizers: Factory,
                                                   kazoo: SyncedKazoo) -> None:
    authorizer = authorizers()
    authorizer.create_acls([binding(), binding(operation=Op.WRITE),
                            binding("orders", pattern_type=PT.PREFIXED)])
    by_operation = AclBindingFilter(entry_filter=AccessControlEntryFilter(operation=Op.WRITE))
    everything_on_orders = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "orders", PT.ANY))
    first, second = authorizer.delete_acls([by_operation, everything_on_orders])
    # a binding goes to the first filter that matched it
    assert [r.binding for r in first.bindings] == [binding(operation=Op.WRITE)]
    assert sorted(str(r.binding) for r in second.bindings) == sorted(
        str(b) for b in (binding(), binding("orders", pattern_type=PT.PREFIXED)))
    assert all(r.error is None for r in first.bindings + second.bindings)
    assert kazoo.exists("/kafka-acl/Topic/orders") is None
    assert kazoo.exists("/kafka-acl-extended/prefixed/Topic/orders") is None
    assert authorizer.describe_acls(AclBindingFilter()) == []
    # per resource, one change node for the creation and one for the deletion (both
    # filters' entries went in one write)
    assert len(children(kazoo, "/kafka-acl-changes")) == 2
    assert len(children(kazoo, "/kafka-acl-extended-changes")) == 2
    # nothing left to match: an empty result, no change node
    assert authorizer.delete_acls([everything_on_orders])[0].bindings == ()
    assert len(children(kazoo, "/kafka-acl-changes")) == 2


def test_a_delete_filter_naming_a_pattern_reaches_past_the_cache(authorizers: Factory,
                                                                 kazoo: SyncedKazoo) -> None:
    authorizer = authorizers()
    # written behind the authorizer's back, with no change notification
    kazoo.create("/kafka-acl/Topic/hidden", b'{"version":1,"acls":[{"principal":"User:x",'
                 b'"permissionType":"Deny","operation":"Read","host":"*"}]}')
    exact = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "hidden", PT.LITERAL))
    assert [r.binding for r in authorizer.delete_acls([exact])[0].bindings] == [
        binding("hidden", "User:x", permission=DENY)]
    assert kazoo.exists("/kafka-acl/Topic/hidden") is None


class CountingPolicy:
    def __init__(self, policy: AclPolicy) -> None:
        self.policy = policy
        self.calls = 0

    def authorize(self, *args: object) -> bool:
        self.calls += 1
        return self.policy.authorize(*args)  # type: ignore[arg-type]


def test_decisions_are_memoized_until_any_acl_changes(authorizers: Factory) -> None:
    writer, other = authorizers(), authorizers()
    counting = CountingPolicy(other.policy)
    other.policy = counting  # type: ignore[assignment]
    assert not may(other) and not may(other)
    assert counting.calls == 1
    # a change to an unrelated resource drops the memo too
    writer.create_acls([binding("unrelated")])
    wait_for(lambda: len(other.snapshot) == 1, timeout=1.0)
    assert not may(other)
    assert counting.calls == 2
    writer.create_acls([binding()])
    assert wait_for(lambda: may(other), timeout=1.0) < 1.0
    assert may(other) and counting.calls == 3


def test_bad_input_is_refused_with_nothing_written(authorizers: Factory,
                                                   kazoo: SyncedKazoo) -> None:
    authorizer = authorizers()
    results = authorizer.create_acls([
        binding(principal="alice"),
        binding(operation=Op.UNKNOWN),
        binding(operation=Op.ANY),
        binding("a/b"),
        binding(""),
        binding("my-cluster", resource_type=RT.CLUSTER),
        binding(pattern_type=PT.MATCH),
    ])
    assert all(isinstance(error, InvalidRequestError) for error in results)
    assert [str(error) for error in results] == [
        "expected a string in format principalType:principalName but got alice",
        "Failed to create ACL", "Failed to create ACL", "Failed to create ACL",
        "Invalid empty resource name",
        "The only valid name for the CLUSTER resource is kafka-cluster",
        "Failed to create ACL"]
    for root in ("/kafka-acl", "/kafka-acl-extended/prefixed"):
        for type_dir in children(kazoo, root):
            assert children(kazoo, f"{root}/{type_dir}") == []
    assert children(kazoo, "/kafka-acl-changes") == []
    assert children(kazoo, "/kafka-acl-extended-changes") == []
    # a valid binding beside refused ones is written
    assert authorizer.create_acls([binding(principal="bob"), binding()])[1] is None
    assert children(kazoo, "/kafka-acl/Topic") == ["orders"]
    # delete filters with unknown elements are refused per filter
    unknown = AclBindingFilter(entry_filter=AccessControlEntryFilter(operation=Op.UNKNOWN))
    (refused,) = authorizer.delete_acls([unknown])
    assert isinstance(refused.error, InvalidRequestError) and refused.bindings == ()


def test_super_users_and_authorized_operations(authorizers: Factory) -> None:
    authorizer = authorizers(AclAuthorizerConfig.from_properties({
        "super.users": "User:admin;User:CN=broker1", "allow.everyone.if.no.acl.found": "true"}))
    authorizer.create_acls([binding("*", "User:*", Op.ALL, DENY)])
    assert may(authorizer, Op.ALTER, principal="User:CN=broker1")
    assert not may(authorizer, principal="User:alice")
    assert not may(authorizer, name="x")  # the DENY on * covers every topic
    authorizer.create_acls([binding("g", operation=Op.READ, resource_type=RT.GROUP)])
    # READ implies DESCRIBE: bits 3 and 8
    assert authorizer.authorized_operations("User:alice", HOST, "DescribeGroups", RT.GROUP,
                                            "g") == (1 << 3) | (1 << 8)
    assert not authorizer.authorize_by_resource_type("User:alice", HOST, "InitProducerId",
                                                     Op.WRITE, RT.TOPIC)
    assert authorizer.authorize_by_resource_type("User:admin", HOST, "InitProducerId",
                                                 Op.WRITE, RT.TOPIC)
    with pytest.raises(ValueError, match="true or false"):
        AclAuthorizerConfig.from_properties({"allow.everyone.if.no.acl.found": "yes"})


def test_decisions_are_logged_in_kafkas_words(authorizers: Factory,
                                              caplog: pytest.LogCaptureFixture) -> None:
    authorizer = authorizers()
    authorizer.create_acls([binding(operation=Op.WRITE)])
    caplog.set_level(1, logger="kafka.authorizer.logger")
    authorizer.authorize("User:x", HOST, "Fetch", [Action(Op.READ, RT.TOPIC, "t")])
    authorizer.authorize("User:alice", HOST, "Produce",
                         [Action(Op.WRITE, RT.TOPIC, "orders", reference_count=2)])
    authorizer.authorize("User:x", HOST, "Metadata",
                         [Action(Op.DESCRIBE, RT.TOPIC, "t", log_if_denied=False)])
    authorizer.authorize_by_resource_type("User:x", HOST, "InitProducerId", Op.WRITE,
                                          RT.TOPIC)
    assert [(r.levelname, r.getMessage()) for r in caplog.records
            if r.name == "kafka.authorizer.logger"] == [
        ("INFO", "Principal = User:x is Denied Operation = Read from host = 10.0.0.1 on "
                 "resource = Topic:LITERAL:t for request = Fetch with resourceRefCount = 1"),
        ("DEBUG", "Principal = User:alice is Allowed Operation = Write from host = 10.0.0.1 "
                  "on resource = Topic:LITERAL:orders for request = Produce with "
                  "resourceRefCount = 2"),
        ("TRACE", "Principal = User:x is Denied Operation = Describe from host = 10.0.0.1 "
                  "on resource = Topic:LITERAL:t for request = Metadata with "
                  "resourceRefCount = 1"),
        ("INFO", "Principal = User:x is Denied Operation = Write from host = 10.0.0.1 on "
                 "resource = Topic:UNKNOWN:NONE for request = InitProducerId with "
                 "resourceRefCount = 0"),
    ]


def test_old_change_nodes_are_purged(zk_client: KafkaZkClient, kazoo: SyncedKazoo) -> None:
    store = AclStore(zk_client.kazoo)
    store.create_paths()
    pattern = ResourcePattern(RT.TOPIC, "t", PT.LITERAL)
    store.notify_change(pattern)
    store.notify_change(pattern)
    seen: list[ResourcePattern] = []
    time.sleep(0.05)
    listener = AclChangeListener(store, seen.append, expiration_ms=20)
    listener.process("/kafka-acl-changes")
    assert seen == [pattern, pattern]
    assert children(kazoo, "/kafka-acl-changes") == []
    store.notify_change(pattern)  # a fresh one stays until it is old
    AclChangeListener(store, seen.append).process("/kafka-acl-changes")
    assert children(kazoo, "/kafka-acl-changes") == ["acl_changes_0000000002"]


def test_decisions_go_on_while_zookeeper_is_away(tmp_path_factory: pytest.TempPathFactory
                                                 ) -> None:
    ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("zk-away"), size=1, tick_time=500,
                                 die_with_parent=True)
    ensemble.start(timeout=60)
    client = KafkaZkClient(ensemble.connect_string, "/away", 10000, 15000)
    try:
        client.start()
        authorizer = AclAuthorizer.from_zk_client(client)
        authorizer.start()
        authorizer.create_acls([binding()])
        ensemble.stop_node(0)
        wait_for(lambda: not client.connected)
        assert may(authorizer) and not may(authorizer, principal="User:bob")
        with pytest.raises(AclStoreUnavailableError, match="ZooKeeper is not connected"):
            authorizer.create_acls([binding(principal="User:bob")])
        with pytest.raises(AclStoreUnavailableError):
            authorizer.delete_acls([AclBindingFilter()])
        assert authorizer.describe_acls(AclBindingFilter()) == [binding()]
        ensemble.start_node(0)
        wait_for(lambda: client.connected, timeout=20)
        assert authorizer.create_acls([binding(principal="User:bob")]) == [None]
        assert may(authorizer, principal="User:bob")
        authorizer.close()
    finally:
        client.close()
        ensemble.stop()


def _describe(authorizer: AclAuthorizer) -> Sequence[AclBinding]:
    return authorizer.describe_acls(AclBindingFilter())


def test_describe_filters_and_orders_as_kafka(authorizers: Factory) -> None:
    authorizer = authorizers()
    authorizer.create_acls([binding("b"), binding("a"), binding("ab", pattern_type=PT.PREFIXED),
                            binding("g", resource_type=RT.GROUP), binding("*", "User:bob")])
    # by resource type, then pattern type, then name in reverse
    assert [(b.pattern.resource_type, b.pattern.name) for b in _describe(authorizer)] == [
        (RT.TOPIC, "b"), (RT.TOPIC, "a"), (RT.TOPIC, "*"), (RT.TOPIC, "ab"), (RT.GROUP, "g")]
    match = AclBindingFilter(ResourcePatternFilter(RT.TOPIC, "abc", PT.MATCH))
    assert [b.pattern.name for b in authorizer.describe_acls(match)] == ["*", "ab"]
