"""moldau.tools.access_apply, the access role's tool, against a real ZooKeeper: declared
users and ACLs applied, a second run changes nothing, ACLs added by hand are kept and
reported as drift (removed only when the declaration is exclusive), a dry run reports and
writes nothing, and bad declarations are refused with Kafka's messages before anything is
written."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from moldau.authorizer.acl_authorizer import AclAuthorizer
from moldau.authorizer.acl_store import AclStore
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.security.acls import (
    LITERAL_CHANGE_ROOT,
    AccessControlEntry,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from moldau.tools import access_apply
from moldau.tools.zk_tool_cli import EXIT_INPUT, EXIT_OK

ORDERS = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
TEAM_PREFIX = ResourcePattern(ResourceType.GROUP, "team-", PatternType.PREFIXED)
ALICE_READS = {"principal": "User:alice", "operation": "Read", "permission": "Allow",
               "resource_type": "Topic", "resource_name": "orders"}
ALICE_GROUPS = {"principal": "User:alice", "host": "*", "operation": "READ",
                "permission": "ALLOW", "resource_type": "group", "resource_name": "team-",
                "pattern_type": "prefixed"}
ALICE = {"name": "alice", "password": "alice-secret", "mechanisms": ["SCRAM-SHA-512"]}


def entry(principal: str, operation: AclOperation,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AccessControlEntry:
    return AccessControlEntry(principal, "*", operation, permission)


@pytest.fixture
def connect(zk_single: ZooKeeperEnsemble) -> str:
    """A fresh chroot's connect string (the tool creates what it needs under it)."""
    return f"{zk_single.connect_string}/access-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def zk(connect: str) -> Iterator[KafkaZkClient]:
    client = KafkaZkClient(connect)
    client.start()
    try:
        yield client
    finally:
        client.close()


def apply(connect: str, state: object, *flags: str) -> tuple[int, dict[str, object], str]:
    out, err = io.StringIO(), io.StringIO()
    code = access_apply.main(["--zookeeper", connect, *flags],
                             stdin=io.StringIO(json.dumps(state)), stdout=out, stderr=err)
    return code, json.loads(out.getvalue()) if out.getvalue() else {}, err.getvalue()


def stored(zk: KafkaZkClient) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
    return {p: acls.entries for p, acls in AclStore(zk.kazoo).read_all().items()}


def test_apply_then_a_rerun_changes_nothing(connect: str, zk: KafkaZkClient) -> None:
    state = {"users": [ALICE], "acls": [ALICE_READS, ALICE_GROUPS]}
    code, report, err = apply(connect, state)
    assert (code, err) == (EXIT_OK, "")
    assert report["changed"] is True
    assert report["users"] == [{"user": "alice", "mechanism": "SCRAM-SHA-512",
                                "action": "written"}]
    assert len(report["acls_added"]) == 2  # type: ignore[arg-type]
    assert {**ALICE_READS, "host": "*", "pattern_type": "literal"} in report["acls_added"]  # type: ignore[operator]
    assert stored(zk) == {ORDERS: {entry("User:alice", AclOperation.READ)},
                          TEAM_PREFIX: {entry("User:alice", AclOperation.READ)}}
    assert "SCRAM-SHA-512" in zk.get_user_config("alice")
    # the brokers hear of it: one change notification per pattern written
    assert zk.get_children(LITERAL_CHANGE_ROOT)
    notified = len(zk.get_children(LITERAL_CHANGE_ROOT))

    code, report, err = apply(connect, state)
    assert (code, err) == (EXIT_OK, "")
    assert report["changed"] is False
    assert report["users"][0]["action"] == "kept"  # type: ignore[index]
    assert (report["acls_added"], report["acls_removed"], report["acls_kept"]) == ([], [], 2)
    assert len(zk.get_children(LITERAL_CHANGE_ROOT)) == notified  # nothing written


def test_acls_added_by_hand_are_kept_and_reported_unless_exclusive(
        connect: str, zk: KafkaZkClient) -> None:
    assert apply(connect, {"acls": [ALICE_READS]})[0] == EXIT_OK
    by_hand = entry("User:bob", AclOperation.WRITE)
    hand_topic = ResourcePattern(ResourceType.TOPIC, "bobs", PatternType.LITERAL)
    store = AclStore(zk.kazoo)
    store.update(ORDERS, lambda entries: entries | {by_hand})
    store.update(hand_topic, lambda entries: entries | {by_hand})

    code, report, _ = apply(connect, {"acls": [ALICE_READS]})
    assert (code, report["changed"], report["acls_removed"]) == (EXIT_OK, False, [])
    drift = report["drift"]["acls"]  # type: ignore[index]
    assert sorted((d["resource_name"], d["principal"], d["operation"]) for d in drift) == [
        ("bobs", "User:bob", "Write"), ("orders", "User:bob", "Write")]
    assert stored(zk)[ORDERS] == {entry("User:alice", AclOperation.READ), by_hand}

    # a dry run of the exclusive declaration says what would go and removes nothing
    code, report, _ = apply(connect, {"acls": [ALICE_READS], "acls_exclusive": True},
                            "--dry-run")
    assert (code, report["changed"], report["dry_run"]) == (EXIT_OK, True, True)
    assert len(report["acls_removed"]) == 2  # type: ignore[arg-type]
    assert hand_topic in stored(zk)

    code, report, _ = apply(connect, {"acls": [ALICE_READS], "acls_exclusive": True})
    assert (code, report["changed"], len(report["acls_removed"])) == (EXIT_OK, True, 2)  # type: ignore[arg-type]
    assert stored(zk) == {ORDERS: {entry("User:alice", AclOperation.READ)}}
    assert apply(connect, {"acls": [ALICE_READS], "acls_exclusive": True})[1]["changed"] is False


def test_a_dry_run_reports_and_writes_nothing(connect: str, zk: KafkaZkClient) -> None:
    state = {"users": [ALICE], "acls": [ALICE_READS]}
    code, report, err = apply(connect, state, "--dry-run")
    assert (code, err, report["changed"], report["dry_run"]) == (EXIT_OK, "", True, True)
    assert report["users"][0]["action"] == "written"  # type: ignore[index]
    assert len(report["acls_added"]) == 1  # type: ignore[arg-type]
    assert stored(zk) == {}
    assert zk.get_user_config("alice") == {}


def test_undeclared_scram_users_are_reported(connect: str, zk: KafkaZkClient) -> None:
    bob = {"name": "bob", "password": "bob-secret", "mechanisms": ["SCRAM-SHA-256"]}
    assert apply(connect, {"users": [ALICE, bob]})[0] == EXIT_OK
    code, report, _ = apply(connect, {"users": [ALICE]})
    assert (code, report["changed"]) == (EXIT_OK, False)
    assert report["drift"] == {"acls": [], "quotas": [], "users": ["bob"]}
    assert "SCRAM-SHA-256" in zk.get_user_config("bob")  # reported, not removed


@pytest.mark.parametrize(("acl", "message"), [
    ({**ALICE_READS, "operation": "Reed"},
     "ACL #2: unknown operation 'Reed'; expected one of"),
    ({**ALICE_READS, "resource_type": "Queue"},
     "ACL #2: unknown resource type 'Queue'; expected one of"),
    ({**ALICE_READS, "resource_type": "Any"}, "ACL #2: resource type Any names no resource"),
    ({**ALICE_READS, "pattern_type": "match"},
     "ACL #2: A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    ({**ALICE_READS, "pattern_type": "glob"},
     "ACL #2: unknown pattern type 'glob'; expected one of"),
    ({**ALICE_READS, "principal": "alice"},
     "ACL #2: expected a string in format principalType:principalName but got alice"),
    ({**ALICE_READS, "resource_type": "Cluster", "operation": "Alter",
      "resource_name": "prod"},
     "ACL #2: The only valid name for the CLUSTER resource is kafka-cluster"),
    ({**ALICE_READS, "operation": "ClusterAction"},
     "ACL #2: ResourceType TOPIC only supports operations Read, All, AlterConfigs, "),
    ({**ALICE_READS, "permission": "Maybe"},
     "ACL #2: unknown permission type 'Maybe'; expected one of"),
    ({**ALICE_READS, "permission": "Any"}, "ACL #2: permission must be Allow or Deny"),
    ({**ALICE_READS, "resource_name": "a/b"},
     "ACL #2: ACL binding contains invalid resource name: a/b"),
    ({**ALICE_READS, "resource_name": ""}, "ACL #2: Invalid empty resource name"),
    ({**ALICE_READS, "topic": "orders"}, "ACL #2: unknown keys ['topic']"),
    ({key: value for key, value in ALICE_READS.items() if key != "principal"},
     "ACL #2: missing ['principal']"),
])
def test_bad_acls_are_refused_and_nothing_is_written(
        connect: str, zk: KafkaZkClient, acl: dict[str, str], message: str) -> None:
    # a valid user and ACL come first: nothing of the document may be written
    state = {"users": [ALICE], "acls": [ALICE_READS, acl]}
    code, report, err = apply(connect, state)
    assert (code, report) == (EXIT_INPUT, {})
    assert err.startswith(f"access_apply: standard input: {message}"), err
    assert "alice-secret" not in err
    assert not zk.exists("/kafka-acl") and not zk.exists("/config/users")


@pytest.mark.parametrize(("state", "message"), [
    ([], "expected a JSON object"),
    ({"acl": []}, "unknown keys ['acl']"),
    ({"acls_exclusive": "yes"}, "'acls_exclusive' must be true or false"),
    ({"users": [{"name": "alice", "mechanisms": ["SCRAM-SHA-1"], "password": "x"}]},
     "user 'alice': unknown SCRAM mechanism 'SCRAM-SHA-1'"),
])
def test_a_bad_document_is_refused(connect: str, zk: KafkaZkClient, state: object,
                                   message: str) -> None:
    code, _, err = apply(connect, state)
    assert code == EXIT_INPUT
    assert message in err
    assert not zk.exists("/config/users")


def test_run_as_the_role_runs_it(connect: str, zk: KafkaZkClient) -> None:
    """`python -m` with the state on standard input and JSON on standard output."""
    done = subprocess.run(
        [sys.executable, "-m", "moldau.tools.access_apply", "--zookeeper", connect],
        input=json.dumps({"users": [ALICE], "acls": [ALICE_READS]}), capture_output=True,
        text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (EXIT_OK, "")
    assert "alice-secret" not in done.stdout
    assert json.loads(done.stdout)["changed"] is True
    assert ORDERS in stored(zk)


ALICE_QUOTA = {"entity": {"user": "alice"}, "config": {"producer_byte_rate": 1048576}}
QUOTAS = [ALICE_QUOTA,
          {"entity": {"user": "alice", "client-id": "app"},
           "config": {"consumer_byte_rate": 10485760, "request_percentage": 50}},
          {"entity": {"client-id": "<default>"}, "config": {"consumer_byte_rate": 2048}},
          {"entity": {"ip": "10.0.0.7"}, "config": {"connection_creation_rate": 10}}]


def test_quotas_applied_once_beside_the_credentials(connect: str, zk: KafkaZkClient) -> None:
    code, report, err = apply(connect, {"users": [ALICE], "quotas": QUOTAS})
    assert (code, err, report["changed"]) == (EXIT_OK, "", True)
    assert len(report["quotas_set"]) == 4  # type: ignore[arg-type]
    alice = zk.get_user_config("alice")
    assert alice["producer_byte_rate"] == "1048576" and "SCRAM-SHA-512" in alice
    assert zk.get_quota_entity_config("alice", "app") == {
        "consumer_byte_rate": "10485760", "request_percentage": "50.0"}
    assert zk.get_quota_entity_config(None, "<default>") == {"consumer_byte_rate": "2048"}
    assert zk.get_ip_quota_config("10.0.0.7") == {"connection_creation_rate": "10"}

    code, report, _ = apply(connect, {"users": [ALICE], "quotas": QUOTAS})
    assert (code, report["changed"], report["quotas_set"], report["quotas_kept"]) == (
        EXIT_OK, False, [], 5)

    # a changed value is written, the user's credential stays
    faster = {**ALICE_QUOTA, "config": {"producer_byte_rate": 2097152}}
    code, report, _ = apply(connect, {"users": [ALICE], "quotas": [faster, *QUOTAS[1:]]})
    assert (code, report["changed"]) == (EXIT_OK, True)
    assert report["quotas_set"] == [faster]
    assert report["users"][0]["action"] == "kept"  # type: ignore[index]
    assert zk.get_user_config("alice")["producer_byte_rate"] == "2097152"


def test_quotas_set_by_hand_are_kept_and_reported_unless_exclusive(
        connect: str, zk: KafkaZkClient) -> None:
    assert apply(connect, {"quotas": [ALICE_QUOTA]})[0] == EXIT_OK
    zk.update_quota_entity_config("alice", None, lambda c: {**c, "consumer_byte_rate": "4096"})
    zk.update_quota_entity_config(None, "batch", lambda c: {**c, "request_percentage": "20"})

    code, report, _ = apply(connect, {"quotas": [ALICE_QUOTA]})
    assert (code, report["changed"], report["quotas_removed"]) == (EXIT_OK, False, [])
    assert report["drift"]["quotas"] == [  # type: ignore[index]
        {"entity": {"user": "alice"}, "config": {"consumer_byte_rate": 4096}},
        {"entity": {"client-id": "batch"}, "config": {"request_percentage": 20.0}}]

    exclusive = {"quotas": [ALICE_QUOTA], "quotas_exclusive": True}
    code, report, _ = apply(connect, exclusive, "--dry-run")
    assert (code, report["changed"], len(report["quotas_removed"])) == (EXIT_OK, True, 2)  # type: ignore[arg-type]
    assert zk.get_quota_entity_config(None, "batch") == {"request_percentage": "20"}

    code, report, _ = apply(connect, exclusive)
    assert (code, report["changed"]) == (EXIT_OK, True)
    assert zk.get_user_config("alice") == {"producer_byte_rate": "1048576"}
    assert zk.get_quota_entity_config(None, "batch") == {}
    assert apply(connect, exclusive)[1]["changed"] is False


@pytest.mark.parametrize(("quota", "message"), [
    ({"entity": {"user": "bob"}, "config": {"producer_byte_rate": "fast"}},
     "Invalid value fast for configuration producer_byte_rate: Not a number of type LONG"),
    ({"entity": {"user": "bob"}, "config": {"producer_byte_rate": 10.5}},
     "Configuration producer_byte_rate must be a Long value"),
    ({"entity": {"user": "bob"}, "config": {"consumer_byte_rate": 0}},
     "Invalid value 0 for configuration consumer_byte_rate: must be greater than 0"),
    ({"entity": {"user": "bob"}, "config": {"request_percentage": -1}},
     "Invalid value -1 for configuration request_percentage: must be greater than 0"),
    ({"entity": {"user": "bob"}, "config": {"quota.producer.default": 1}},
     "Invalid configuration key quota.producer.default"),
    ({"entity": {"ip": "10.0.0.7"}, "config": {"producer_byte_rate": 1}},
     "Invalid configuration key producer_byte_rate"),
    ({"entity": {"ip": "10.0.0.300"}, "config": {"connection_creation_rate": 1}},
     "10.0.0.300 is not a valid IP address"),
    ({"entity": {"ip": "10.0.0.7", "user": "alice"}, "config": {"connection_creation_rate": 1}},
     "an ip entity cannot be combined with user or client-id"),
    ({"entity": {"group": "g"}, "config": {"producer_byte_rate": 1}},
     "unknown entity types ['group']"),
    ({"entity": {"user": "bob"}}, "expected an object with 'entity' and 'config'"),
    ({"entity": {"user": "alice"}, "config": {"producer_byte_rate": 2}},
     "entity {'user': 'alice'} is declared more than once"),
])
def test_bad_quotas_are_refused_and_nothing_is_written(
        connect: str, zk: KafkaZkClient, quota: dict[str, object], message: str) -> None:
    code, report, err = apply(connect, {"users": [ALICE], "acls": [ALICE_READS],
                                        "quotas": [ALICE_QUOTA, quota]})
    assert (code, report) == (EXIT_INPUT, {})
    assert err.startswith(f"access_apply: standard input: quota #2: {message}"), err
    assert not zk.exists("/kafka-acl") and not zk.exists("/config")


def test_a_running_brokers_authorizer_follows_within_a_second(connect: str,
                                                               zk: KafkaZkClient) -> None:
    """The writes go through the broker's ACL store: a broker's authorizer already
    running on the cluster learns them from the change notifications."""
    authorizer = AclAuthorizer.from_zk_client(zk)
    authorizer.start()
    try:
        assert apply(connect, {"acls": [ALICE_READS, ALICE_GROUPS]})[0] == EXIT_OK
        deadline = time.monotonic() + 1.0
        while len(authorizer.describe_acls(AclBindingFilter())) < 2:
            assert time.monotonic() < deadline, "the authorizer did not follow within 1 s"
            time.sleep(0.02)
    finally:
        authorizer.close()
