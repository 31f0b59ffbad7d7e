"""kafka-acls.sh as Kafka 3.9's AclCommand: against a real broker running Kafka's
AclAuthorizer (`--bootstrap-server`, the Admin API), and straight against the broker's
ZooKeeper chroot (`--authorizer-properties zookeeper.connect=...`), each writing ACLs the
other path and the broker see. Outputs are compared with the golden files; bad command
lines get Kafka's message and write nothing.

One broker for the module: PLAINTEXT, `super.users=User:ANONYMOUS` (the tool's own
connection). Every test names its own resources and leaves no ACL behind."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from moldau.client.blocking import BlockingConnection
from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.describe_acls_request import DescribeAclsRequest
from moldau.security.acls import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_acls,
)
from moldau.tools.acl_plan import operations_text, parse_operation
from moldau.tools.acl_services import authorizer_setting, zk_tls_file_properties

from .toolrun import Result, assert_golden, run

ACLS = "kafka-acls.sh"
DEPRECATION = ("Warning: support for ACL configuration directly through the authorizer is "
               "deprecated and will be removed in a future release. Please use "
               "--bootstrap-server instead to set ACLs through the admin client.\n")
ONE_ACTION = "Command must include exactly one action: --list, --add, --remove. \n"
ERROR = "Error while executing ACL command: "


@dataclass
class AclCluster:
    broker: BrokerProcess
    zk_connect: str  # with the chroot
    zk: KafkaZkClient  # on the chroot, to look at the znodes

    def admin(self, *args: str, stdin: str | None = None) -> Result:
        """The tool through the Admin API."""
        return run(ACLS, "--bootstrap-server", self.broker.bootstrap, *args, stdin=stdin)

    def direct(self, *args: str, stdin: str | None = None) -> Result:
        """The tool writing ZooKeeper itself."""
        return run(ACLS, "--authorizer-properties", f"zookeeper.connect={self.zk_connect}",
                   *args, stdin=stdin)

    def bindings(self, name: str | None = None) -> set[str]:
        """What the broker's authorizer holds (DescribeAcls, from its cache), on resources
        of that name (any name: None), one `pattern entry` string per binding."""
        with BlockingConnection("127.0.0.1", self.broker.port, timeout=10) as conn:
            answer = conn.request(ApiKey.DESCRIBE_ACLS, 3, DescribeAclsRequest(
                resource_type_filter=ResourceType.ANY, resource_name_filter=name,
                pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None,
                operation=AclOperation.ANY, permission_type=AclPermissionType.ANY))
        assert answer.error_code == 0, answer
        found = set()
        for r in answer.resources:
            pattern = ResourcePattern(ResourceType(r.resource_type), r.resource_name,
                                      PatternType(r.pattern_type))
            found |= {f"{pattern} " + str(AccessControlEntry(
                a.principal, a.host, AclOperation(a.operation),
                AclPermissionType(a.permission_type))) for a in r.acls}
        return found

    def wait_bindings(self, name: str, wanted: set[str], timeout: float) -> float:
        """Seconds until the broker holds exactly `wanted` on `name`; fails after timeout."""
        start = time.monotonic()
        while (found := self.bindings(name)) != wanted:
            assert time.monotonic() - start < timeout, (found, wanted)
            time.sleep(0.02)
        return time.monotonic() - start


def ok(result: Result) -> str:
    assert result.code == 0, (result.code, result.out, result.err)
    return result.out


@pytest.fixture(scope="module")
def acls(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[AclCluster]:
    chroot = f"/acls-tool-{uuid.uuid4().hex[:8]}"
    connect = zk_ensemble.connect_string + chroot
    broker = BrokerProcess(str(tmp_path_factory.mktemp("acls-tool")), 1, connect, properties={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS",
        "num.partitions": "1", "offsets.topic.replication.factor": "1"})
    broker.start(wait=60)
    zk = KafkaZkClient(zk_ensemble.connect_string, chroot, session_timeout_ms=6000)
    zk.start()
    try:
        yield AclCluster(broker, connect, zk)
        assert zk.get_children("/kafka-acl/Topic") == []  # every test cleaned up
    finally:
        zk.close()
        assert broker.stop() == 0


def test_topic_acls_added_listed_and_removed(acls: AclCluster) -> None:
    topic = ("--topic", "orders")
    out = ok(acls.admin("--add", *topic, "--allow-principal", "User:alice", "--allow-principal",
                        "User:bob", "--operation", "Read", "--operation", "Write"))
    assert_golden("acls-add-topic.txt", out)
    assert len(acls.bindings("orders")) == 4
    assert_golden("acls-list-topic.txt", ok(acls.admin("--list", *topic)))
    # the named entries only, --force: no question asked, and (Kafka 3.9) no listing
    assert ok(acls.admin("--remove", *topic, "--allow-principal", "User:bob", "--operation",
                         "Write", "--force")) == ""
    assert len(acls.bindings("orders")) == 3
    # no principal: every entry of the resource
    assert ok(acls.admin("--remove", *topic, "--force")) == ""
    assert acls.bindings("orders") == set()
    assert not acls.zk.exists("/kafka-acl/Topic/orders")


def test_group_and_cluster_acls_with_hosts_and_denials(acls: AclCluster) -> None:
    out = ok(acls.admin("--add", "--group", "payments", "--cluster", "--operation", "Describe",
                        "--allow-principal", "User:carol", "--allow-host", "10.0.0.1",
                        "--allow-host", "10.0.0.2", "--deny-principal", "User:mallory"))
    assert_golden("acls-add-group-cluster.txt", out)
    assert acls.bindings("payments") == {
        f"ResourcePattern(resourceType=GROUP, name=payments, patternType=LITERAL) "
        f"(principal={principal}, host={host}, operation=DESCRIBE, permissionType={kind})"
        for principal, host, kind in (("User:carol", "10.0.0.1", "ALLOW"),
                                      ("User:carol", "10.0.0.2", "ALLOW"),
                                      ("User:mallory", "*", "DENY"))}
    assert len(acls.bindings("kafka-cluster")) == 3
    assert ok(acls.admin("--remove", "--group", "payments", "--cluster", "--force")) == ""
    assert acls.bindings() == set()


def test_prefixed_patterns_listed_by_any_and_match(acls: AclCluster) -> None:
    ok(acls.admin("--add", "--topic", "orders-eu", "--allow-principal", "User:alice",
                  "--operation", "Read"))
    out = ok(acls.admin("--add", "--topic", "orders-", "--resource-pattern-type", "prefixed",
                        "--allow-principal", "User:bob", "--operation", "Write"))
    assert_golden("acls-add-prefixed.txt", out)
    ok(acls.admin("--add", "--topic", "*", "--allow-principal", "User:carol", "--operation",
                  "Describe"))
    assert acls.zk.exists("/kafka-acl-extended/prefixed/Topic/orders-")
    # match: every pattern that applies to the name; any: every pattern of exactly the name
    assert_golden("acls-list-match.txt", ok(acls.admin(
        "--list", "--topic", "orders-eu", "--resource-pattern-type", "match")))
    assert ok(acls.admin("--list", "--topic", "orders-", "--resource-pattern-type",
                         "ANY")) == ok(acls.admin("--list", "--topic", "orders-",
                                                  "--resource-pattern-type", "prefixed"))
    assert "orders-eu" not in ok(acls.admin("--list", "--topic", "orders-",
                                            "--resource-pattern-type", "any"))
    # a literal listing of the prefix finds nothing; removing with match takes all three
    assert ok(acls.admin("--list", "--topic", "orders-")) == ""
    assert ok(acls.admin("--remove", "--topic", "orders-eu", "--resource-pattern-type",
                         "match", "--force")) == ""
    assert acls.bindings() == set()


def test_producer_and_consumer_expansions(acls: AclCluster) -> None:
    producer = ("--producer", "--idempotent", "--topic", "ledger", "--transactional-id",
                "ledger-tx", "--allow-principal", "User:writer")
    consumer = ("--consumer", "--topic", "ledger", "--group", "auditors",
                "--allow-principal", "User:reader")
    assert_golden("acls-add-producer.txt", ok(acls.admin("--add", *producer)))
    assert_golden("acls-add-consumer.txt", ok(acls.admin("--add", *consumer)))
    assert len(acls.bindings()) == 3 + 2 + 1 + 2 + 1
    ok(acls.admin("--remove", *producer, "--force"))
    assert {b.split(" (")[1] for b in acls.bindings()} == {
        "principal=User:reader, host=*, operation=READ, permissionType=ALLOW)",
        "principal=User:reader, host=*, operation=DESCRIBE, permissionType=ALLOW)"}
    ok(acls.admin("--remove", *consumer, "--force"))
    assert acls.bindings() == set()


def test_delegation_tokens_and_user_principals(acls: AclCluster, tmp_path: Path) -> None:
    config = tmp_path / "admin.properties"
    config.write_text("client.id=acl-admin\nrequest.timeout.ms=20000\n")
    with_config = ("--command-config", str(config))
    ok(acls.admin(*with_config, "--add", "--user-principal", "User:bob", "--operation",
                  "CreateTokens", "--operation", "DESCRIBETOKENS", "--allow-principal",
                  "User:alice"))
    ok(acls.admin(*with_config, "--add", "--delegation-token", "token-1", "--operation",
                  "Describe", "--allow-principal", "User:alice"))
    assert acls.bindings() == {
        "ResourcePattern(resourceType=USER, name=User:bob, patternType=LITERAL) (principal="
        "User:alice, host=*, operation=CREATE_TOKENS, permissionType=ALLOW)",
        "ResourcePattern(resourceType=USER, name=User:bob, patternType=LITERAL) (principal="
        "User:alice, host=*, operation=DESCRIBE_TOKENS, permissionType=ALLOW)",
        "ResourcePattern(resourceType=DELEGATION_TOKEN, name=token-1, patternType=LITERAL) "
        "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)"}
    assert acls.zk.exists("/kafka-acl/User/User:bob")
    ok(acls.admin("--remove", "--user-principal", "User:bob", "--delegation-token", "token-1",
                  "--force"))
    assert acls.bindings() == set()


def test_principal_filters_the_listing(acls: AclCluster) -> None:
    for topic, principal in (("books", "User:alice"), ("books", "User:bob"),
                             ("films", "User:alice")):
        ok(acls.admin("--add", "--topic", topic, "--allow-principal", principal,
                      "--operation", "Read"))
    out = ok(acls.admin("--list", "--principal", "User:alice", "--principal", "User:nobody"))
    assert_golden("acls-list-principal.txt", out)
    # with a resource: only that resource's entries of the principal
    out = ok(acls.admin("--list", "--topic", "books", "--principal", "User:bob"))
    assert out.splitlines() == [
        "ACLs for principal `User:bob`",
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=books, "
        "patternType=LITERAL)`: ",
        " \t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW) ", ""]
    ok(acls.admin("--remove", "--topic", "books", "--topic", "films", "--force"))
    assert acls.bindings() == set()


def test_removal_asks_first(acls: AclCluster) -> None:
    ok(acls.admin("--add", "--topic", "drafts", "--allow-principal", "User:alice",
                  "--operation", "Alter"))
    before = acls.bindings("drafts")
    # "n", and the end of input, keep the entries
    out = ok(acls.admin("--remove", "--topic", "drafts", "--allow-principal", "User:alice",
                        "--operation", "Alter", stdin="n\n"))
    assert_golden("acls-remove-prompt-declined.txt", out)
    assert ok(acls.admin("--remove", "--topic", "drafts", stdin="")).startswith(
        "Are you sure you want to delete all ACLs for resource filter `ResourcePattern("
        "resourceType=TOPIC, name=drafts, patternType=LITERAL)`? (y/n)\n")
    assert acls.bindings("drafts") == before
    # "Y" removes them
    out = ok(acls.admin("--remove", "--topic", "drafts", stdin="Y\n"))
    assert out == ("Are you sure you want to delete all ACLs for resource filter "
                   "`ResourcePattern(resourceType=TOPIC, name=drafts, patternType=LITERAL)`? "
                   "(y/n)\n")
    assert acls.bindings("drafts") == set()


BAD_COMMAND_LINES = [
    pytest.param(("--topic", "untouched", "--allow-principal", "User:a"), ONE_ACTION, True,
                 id="no-action"),
    pytest.param(("--add", "--list", "--topic", "untouched", "--allow-principal", "User:a"),
                 ONE_ACTION, True, id="two-actions"),
    pytest.param(("--add", "--group", "untouched", "--allow-principal", "User:a",
                  "--operation", "Write"),
                 "ResourceType GROUP only supports operations Read, Describe, Delete, All\n",
                 True, id="operation-not-for-groups"),
    # Kafka's names are Read and READ; any other spelling is an unknown operation
    pytest.param(("--add", "--topic", "untouched", "--allow-principal", "User:a",
                  "--operation", "read"),
                 "ResourceType TOPIC only supports operations Read, All, AlterConfigs, "
                 "DescribeConfigs, Delete, Write, Alter, Create, Describe\n", True,
                 id="unknown-operation"),
    pytest.param(("--add", "--topic", "untouched", "--allow-principal", "User:a",
                  "--resource-pattern-type", "match"),
                 "A '--resource-pattern-type' value of 'MATCH' is not valid when adding "
                 "acls.\n", True, id="match-with-add"),
    pytest.param(("--add", "--topic", "untouched"), "You must specify one of: "
                 "--allow-principal, --deny-principal when trying to add ACLs.\n", True,
                 id="no-principal"),
    pytest.param(("--add", "--allow-principal", "User:a"), "You must provide at least one "
                 "resource: --topic <topic> or --cluster or --group <group> or "
                 "--delegation-token <Delegation Token ID>\n", True, id="no-resource"),
    pytest.param(("--list", "--topic", "untouched", "--allow-principal", "User:a"),
                 'Option "[list]" can\'t be used with option "[allow-principal]"\n', True,
                 id="list-with-principal"),
    pytest.param(("--add", "--consumer", "--topic", "untouched", "--allow-principal",
                  "User:a"), "With --consumer you must specify a --topic and a --group and "
                 "no --cluster or --transactional-id option should be specified.\n", True,
                 id="consumer-without-group"),
    pytest.param(("--add", "--producer", "--topic", "untouched", "--allow-principal",
                  "User:a", "--operation", "Read"),
                 'Option "[producer]" can\'t be used with option "[operation]"\n', True,
                 id="producer-with-operation"),
    pytest.param(("--add", "--topic", "untouched", "--allow-principal", "User:a",
                  "--idempotent"),
                 "The --idempotent option is only available if --producer is set\n", True,
                 id="idempotent-alone"),
    pytest.param(("--add", "--topic", "untouched", "--allow-principal", "User:a",
                  "--resource-pattern-type", "suffixed"),
                 "Cannot parse argument 'suffixed' of option resource-pattern-type\n", False,
                 id="unknown-pattern-type"),
]


@pytest.mark.parametrize(("args", "message", "usage"), BAD_COMMAND_LINES)
def test_bad_command_lines_write_nothing(acls: AclCluster, args: tuple[str, ...],
                                         message: str, usage: bool) -> None:
    result = acls.admin(*args)
    assert (result.code, result.out) == (1, ""), result
    assert result.err.startswith(message), result.err
    assert ("\nOption " in result.err) is usage, result.err
    assert acls.bindings("untouched") == set()


def test_failures_after_the_checks_go_to_stdout(acls: AclCluster) -> None:
    """Kafka's AclCommand catches them: the message, then the exception's stack trace
    (Moldau has no frames) and an empty line, on stdout; exit status 1."""
    result = acls.admin("--add", "--topic", "untouched", "--allow-principal", "alice")
    message = "expected a string in format principalType:principalName but got alice"
    assert (result.code, result.err) == (1, "")
    assert result.out == f"{ERROR}{message}\njava.lang.IllegalArgumentException: {message}\n\n"
    assert acls.bindings("untouched") == set()


def test_authorizer_refusals_are_kafkas_errors(acls: AclCluster) -> None:
    empty = ("--add", "--topic", "", "--allow-principal", "User:a")
    adding = ("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=, "
              "patternType=LITERAL)`: \n \t(principal=User:a, host=*, operation=ALL, "
              "permissionType=ALLOW) \n\n")
    refusal = "org.apache.kafka.common.errors.InvalidRequestException: Invalid empty resource name"
    result = acls.admin(*empty)
    assert (result.code, result.err) == (1, "")
    assert result.out == (f"{adding}{ERROR}{refusal}\n"
                          f"java.util.concurrent.ExecutionException: {refusal}\n"
                          f"Caused by: {refusal}\n\n")
    # the ZooKeeper path reports the binding it could not write, goes on, and succeeds
    result = acls.direct(*empty)
    assert (result.code, result.err) == (0, DEPRECATION)
    assert result.out == (f"{adding}Error while adding ACLs: Invalid empty resource name\n"
                          f"{refusal}\n\n")
    assert acls.bindings() == set()


def test_zookeeper_path_and_broker_see_each_others_acls(acls: AclCluster) -> None:
    added = acls.direct("--add", "--topic", "zk-orders", "--allow-principal", "User:zed",
                        "--operation", "Read")
    assert added.code == 0 and added.err == DEPRECATION, added
    assert_golden("acls-zk-add.txt", added.out)
    # Kafka's znode, and the broker hears of it through the change notification
    data, _ = acls.zk.get("/kafka-acl/Topic/zk-orders") or (b"", None)
    assert decode_acls(data) == {AccessControlEntry("User:zed", "*", AclOperation.READ,
                                                    AclPermissionType.ALLOW)}
    zed = ("ResourcePattern(resourceType=TOPIC, name=zk-orders, patternType=LITERAL) "
           "(principal=User:zed, host=*, operation=READ, permissionType=ALLOW)")
    assert acls.wait_bindings("zk-orders", {zed}, timeout=1.0) < 1.0
    # written through the broker, listed from ZooKeeper
    ok(acls.admin("--add", "--topic", "broker-orders", "--allow-principal", "User:bea",
                  "--operation", "Write"))
    listed = acls.direct("--list", "--topic", "broker-orders", "--topic", "zk-orders")
    assert_golden("acls-zk-list.txt", ok(listed))
    assert ok(acls.direct("--list")) == ok(acls.admin("--list"))
    # removed through ZooKeeper: the broker forgets it
    assert ok(acls.direct("--remove", "--topic", "zk-orders", "--topic", "broker-orders",
                          "--force")) == ""
    # (each topic's znode has its own change notification: wait for both)
    acls.wait_bindings("zk-orders", set(), timeout=5.0)
    acls.wait_bindings("broker-orders", set(), timeout=5.0)
    assert acls.bindings() == set()


def test_zookeeper_path_command_line_errors(acls: AclCluster) -> None:
    result = run(ACLS, "--list")
    assert result.code == 1
    assert result.err.startswith('Missing required argument "[authorizer-properties]"\n')
    result = run(ACLS, "--authorizer-properties", "zookeeper.connect", "--list")
    missing = "Missing value for key zookeeper.connect}"  # Kafka 3.9's brace
    assert (result.code, result.err) == (1, DEPRECATION)
    assert result.out == f"{ERROR}{missing}\njava.lang.IllegalArgumentException: {missing}\n\n"
    result = acls.direct("--topic", "untouched")
    assert result.err.startswith(DEPRECATION + ONE_ACTION)
    result = run(ACLS, "--bootstrap-server", acls.broker.bootstrap, "--authorizer",
                 "kafka.security.authorizer.AclAuthorizer", "--list")
    assert result.err.startswith("Only one of --bootstrap-server or --authorizer must be "
                                 "specified\n")
    result = acls.admin("--authorizer-properties", f"zookeeper.connect={acls.zk_connect}",
                        "--list")
    assert result.err.startswith("The --authorizer-properties option can only be used with "
                                 "--authorizer option\n")


# -- units: Kafka's readings of names and properties --------------------------------------

def test_refused_operations_are_listed_in_kafkas_order() -> None:
    # as kafka_2.13-3.9.1 prints them (compat's acls.moldau-tool compares them too)
    assert operations_text(ResourceType.CLUSTER) == (
        "All, AlterConfigs, DescribeConfigs, IdempotentWrite, Alter, ClusterAction, Create, "
        "Describe")
    assert operations_text(ResourceType.TRANSACTIONAL_ID) == "Describe, Write, All"
    assert operations_text(ResourceType.USER) == "DescribeTokens, CreateTokens, All"
    assert operations_text(ResourceType.DELEGATION_TOKEN) == "Describe, All"


def test_operation_names_are_kafkas() -> None:
    assert parse_operation("ClusterAction") is AclOperation.CLUSTER_ACTION
    assert parse_operation("CLUSTERACTION") is AclOperation.CLUSTER_ACTION
    for other in ("CLUSTER_ACTION", "clusterAction", "Any ", ""):
        assert parse_operation(other) is AclOperation.UNKNOWN
    assert parse_operation("Any") is AclOperation.ANY  # known, but no resource supports it


def test_zk_tls_file_keeps_only_client_tls_keys(tmp_path: Path) -> None:
    kept = zk_tls_file_properties({
        "zookeeper.ssl.client.enable": "true", "authorizer.zookeeper.ssl.truststore.location":
        "/ca.p12", "zookeeper.connect": "elsewhere:2181", "zookeeper.set.acl": "true"})
    assert kept == {"zookeeper.ssl.client.enable": "true",
                    "authorizer.zookeeper.ssl.truststore.location": "/ca.p12"}
    properties = {"zookeeper.ssl.protocol": "TLSv1.2",
                  "authorizer.zookeeper.ssl.protocol": "TLSv1.3"}
    assert authorizer_setting(properties, "zookeeper.ssl.protocol") == "TLSv1.3"
    assert authorizer_setting(properties, "zookeeper.ssl.cipher.suites") is None
