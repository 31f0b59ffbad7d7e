"""kafka-configs for SCRAM users against the real three-broker cluster of the tools
package: through --bootstrap-server (AlterUserScramCredentials, salted here, sent to the
controller; DescribeUserScramCredentials) and through --zookeeper (straight into the
znode, as Kafka 3.9 bootstraps the inter-broker user before any broker runs), Kafka's
output lines and errors, and a user's quota key surviving every credential change."""

from __future__ import annotations

import uuid

from moldau.client.blocking import BlockingConnection
from moldau.cluster.zk_client import KafkaZkClient
from moldau.protocol.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from moldau.security.sasl.scram_credentials import (
    ScramCredential,
    ScramMechanism,
    password_matches,
)

from .toolrun import ToolCluster, assert_golden, run

CONFIGS = "kafka-configs.sh"
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
ZK_WARNING = ("Warning: --zookeeper is deprecated and will be removed in a future version of "
              "Kafka.\nUse --bootstrap-server instead to specify a broker to connect to.\n")
CREDENTIALS = ("SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
               "SCRAM-SHA-512=[password=alice-secret]")


def user_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def credential(zk: KafkaZkClient, user: str, mechanism: ScramMechanism) -> ScramCredential:
    return ScramCredential.from_config_value(zk.get_user_config(user)[mechanism.mechanism_name])


def test_bootstrap_server_alter_describe_delete(cluster: ToolCluster, zk: KafkaZkClient) -> None:
    alice = user_name("alice")
    zk.update_user_config(alice, lambda c: {**c, "producer_byte_rate": "1024"})
    out = cluster.ok(CONFIGS, "--alter", "--add-config", CREDENTIALS, "--entity-type", "users",
                     "--entity-name", alice)
    assert out == f"Completed updating config for user {alice}.\n"
    assert zk.get_user_config(alice)["producer_byte_rate"] == "1024"
    assert credential(zk, alice, SHA256).iterations == 8192
    assert credential(zk, alice, SHA512).iterations == 4096  # the default
    assert password_matches(SHA256, credential(zk, alice, SHA256), "alice-secret")
    assert password_matches(SHA512, credential(zk, alice, SHA512), "alice-secret")

    described = cluster.ok(CONFIGS, "--describe", "--user", alice)
    assert_golden("configs-describe-user-scram.txt", described.replace(alice, "alice"))
    every = cluster.ok(CONFIGS, "--describe", "--entity-type", "users").splitlines()
    assert set(described.splitlines()) <= set(every)

    out = cluster.ok(CONFIGS, "--alter", "--delete-config", "SCRAM-SHA-512", "--user", alice)
    assert out == f"Completed updating config for user {alice}.\n"
    assert cluster.ok(CONFIGS, "--describe", "--user", alice) == (
        f"Quota configs for user-principal '{alice}' are producer_byte_rate=1024.0\n"
        f"SCRAM credential configs for user-principal '{alice}' are "
        "SCRAM-SHA-256=iterations=8192\n")
    assert sorted(zk.get_user_config(alice)) == ["SCRAM-SHA-256", "producer_byte_rate"]
    # a user without credentials describes as nothing, as Kafka's tool prints it
    assert cluster.ok(CONFIGS, "--describe", "--user", user_name("nobody")) == ""


def test_zookeeper_bootstraps_a_user_before_any_broker(cluster: ToolCluster) -> None:
    """The inter-broker user written into a chroot no broker has used yet."""
    fresh = cluster.zk_connect.rsplit("/", 1)[0] + f"/scram-bootstrap-{uuid.uuid4().hex[:8]}"
    zookeeper = ("--zookeeper", fresh)
    result = run(CONFIGS, *zookeeper, "--alter", "--add-config",
                 "SCRAM-SHA-512=[password=broker-secret]", "--entity-type", "users",
                 "--entity-name", "broker")
    assert (result.code, result.err) == (0, "")
    assert result.out == ZK_WARNING + "Completed updating config for entity: user-principal " \
                                      "'broker'.\n"
    zk = KafkaZkClient(fresh, session_timeout_ms=6000)
    zk.start()
    try:
        stored = credential(zk, "broker", SHA512)
        assert stored.iterations == 4096
        assert password_matches(SHA512, stored, "broker-secret")
        (change,) = zk.read_change_notifications(purge=False)
        assert (change.entity_type, change.entity_name) == ("users", "broker")
    finally:
        zk.close()
    described = run(CONFIGS, *zookeeper, "--describe", "--user", "broker")
    assert described.code == 0
    assert described.out == ZK_WARNING + "Configs for user-principal 'broker' are " \
                                         f"SCRAM-SHA-512={stored.to_config_value()}\n"
    everyone = run(CONFIGS, *zookeeper, "--describe", "--entity-type", "users")
    assert everyone.out == described.out


def test_zookeeper_writes_reach_the_running_cluster(cluster: ToolCluster,
                                                    zk: KafkaZkClient) -> None:
    user = user_name("app user")  # a space: sanitized in the znode name
    zk.update_user_config(user, lambda c: {**c, "consumer_byte_rate": "2048"})
    zookeeper = ("--zookeeper", cluster.zk_connect)
    result = run(CONFIGS, *zookeeper, "--alter", "--add-config",
                 "SCRAM-SHA-256=[iterations=4096,password=p, with=comma]", "--user", user)
    assert result.out == ZK_WARNING + f"Completed updating config for entity: " \
                                      f"user-principal '{user}'.\n", result.err
    assert password_matches(SHA256, credential(zk, user, SHA256), "p, with=comma")
    assert zk.get_user_config(user)["consumer_byte_rate"] == "2048"
    assert cluster.ok(CONFIGS, "--describe", "--user", user) == (
        f"Quota configs for user-principal '{user}' are consumer_byte_rate=2048.0\n"
        f"SCRAM credential configs for user-principal '{user}' are "
        "SCRAM-SHA-256=iterations=4096\n")
    result = run(CONFIGS, *zookeeper, "--alter", "--delete-config", "SCRAM-SHA-256",
                 "--entity-type", "users", "--entity-name", user)
    assert result.code == 0, result.err
    assert zk.get_user_config(user) == {"consumer_byte_rate": "2048"}


def test_bad_input_changes_nothing(cluster: ToolCluster, zk: KafkaZkClient) -> None:
    user = user_name("steady")
    cluster.ok(CONFIGS, "--alter", "--user", user, "--add-config",
               "SCRAM-SHA-256=[password=steady]")
    before = zk.get_user_config(user)
    alter = ("--alter", "--user", user)
    cases = {
        (*alter, "--add-config", "SCRAM-SHA-256=[password=x],producer_byte_rate=1024"):
            "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
            "using --bootstrap-server.\n",
        ("--alter", "--entity-type", "users", "--entity-default", "--add-config",
         "SCRAM-SHA-256=[password=x]"):
            "The use of --entity-default or --user-defaults is not allowed with User SCRAM "
            "Credentials using --bootstrap-server.\n",
        ("--alter", "--user-defaults", "--delete-config", "SCRAM-SHA-256"):
            "The use of --entity-default or --user-defaults is not allowed with User SCRAM "
            "Credentials using --bootstrap-server.\n",
        (*alter, "--add-config", "SCRAM-SHA-256=[iterations=1024,password=x]"):
            "Iterations 1024 is less than the minimum 4096 required for SCRAM-SHA-256\n",
        (*alter, "--add-config", "SCRAM-SHA-256=[iterations=8192]"):
            "Invalid credential property SCRAM_SHA_256=iterations=8192\n",
        (*alter, "--add-config", "bogus.key=1"):
            "Only quota and SCRAM credential configs can be added for 'users' using "
            "--bootstrap-server. Unexpected config names: Set(bogus.key)\n",
        (*alter, "--delete-config", "bogus.key"):
            "Only quota and SCRAM credential configs can be deleted for 'users' using "
            "--bootstrap-server. Unexpected config names: ArrayBuffer(bogus.key)\n",
        ("--alter", "--entity-type", "users", "--add-config", "SCRAM-SHA-256=[password=x]"):
            "An entity-name or default entity must be specified with --alter of users, "
            "clients, brokers or ips\n",
    }
    prefix = f"Error while executing config command with args '--bootstrap-server " \
             f"{cluster.bootstrap} "
    broker_refusals = {
        (*alter, "--add-config", "SCRAM-SHA-512=[iterations=16385,password=x]"):
            "Too many iterations",
        (*alter, "--delete-config", "SCRAM-SHA-512"):
            "Attempt to delete a user credential that does not exist",
    }
    # the AdminClient refuses an empty password before it sends anything
    empty = (*alter, "--add-config", "SCRAM-SHA-512=[password=]")
    cases[empty] = f"{prefix}{' '.join(empty)}' : Password must not be empty\n"
    for args, message in cases.items():
        result = cluster.tool(CONFIGS, *args)
        assert (result.code, result.out, result.err) == (1, "", message), args
    # the broker's refusals as Kafka 3.9.1's ConfigCommand prints them: the command line,
    # then the AdminClient's ExecutionException and its cause
    for args, message in broker_refusals.items():
        result = cluster.tool(CONFIGS, *args)
        header, wrapped, cause = result.err.splitlines()
        assert (result.code, result.out, header) == (1, "", f"{prefix}{' '.join(args)}'"), args
        assert wrapped.startswith("java.util.concurrent.ExecutionException: org.apache.kafka.")
        assert wrapped.endswith(f"Exception: {message}") and cause.endswith(message), args

    zookeeper = ("--zookeeper", cluster.zk_connect)
    zk_cases = {
        ("--alter", "--user", user, "--add-config", "consumer_byte_rate=20000"):
            "requirement failed: --bootstrap-server option must be specified to update users "
            "configs: {add: {consumer_byte_rate=20000}, delete: List()}. User configuration "
            "updates using ZooKeeper are only supported for SCRAM credential updates.\n",
        ("--alter", "--user", user, "--delete-config", "consumer_byte_rate,SCRAM-SHA-256"):
            "requirement failed: --bootstrap-server option must be specified to update users "
            "configs: {add: {}, delete: ArrayBuffer(consumer_byte_rate, SCRAM-SHA-256)}. User "
            "configuration updates using ZooKeeper are only supported for SCRAM credential "
            "updates.\n",
        ("--alter", "--user", user, "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]"):
            "Iterations 100 is less than the minimum 4096 required for SCRAM_SHA_256\n",
        ("--alter", "--user", user, "--delete-config", "SCRAM-SHA-512"):
            "Invalid config(s): SCRAM-SHA-512\n",
        ("--alter", "--user-defaults", "--add-config", "SCRAM-SHA-256=[password=x]"):
            "requirement failed: Unknown Dynamic Configuration: HashSet(SCRAM-SHA-256).\n",
    }
    for args, message in zk_cases.items():
        result = run(CONFIGS, *zookeeper, *args)
        assert (result.code, result.out, result.err) == (1, ZK_WARNING, message), args
    refused = run(CONFIGS, *zookeeper, "--describe", "--user", user, "--all")
    assert (refused.code, refused.out, refused.err) == (
        1, "", "--bootstrap-server must be specified for --all\n")
    assert zk.get_user_config(user) == before
    assert not zk.exists("/config/users/<default>")


def test_only_the_controller_alters_credentials(cluster: ToolCluster, zk: KafkaZkClient) -> None:
    """Another broker answers NOT_CONTROLLER for every user, sorted, before authorizing;
    the tool found the controller (above) whichever broker it bootstrapped from."""
    controller = zk.get_controller_id()
    other = next(b for i, b in cluster.brokers.items() if i != controller)
    A = AlterUserScramCredentialsRequest
    request = A(deletions=[A.ScramCredentialDeletion(name="zed", mechanism=1)],
                upsertions=[A.ScramCredentialUpsertion(
                    name="amy", mechanism=1, iterations=4096, salt=b"s",
                    salted_password=SHA256.salted_password("x", b"s", 4096))])
    with BlockingConnection("127.0.0.1", other.port) as conn:
        answer = conn.request(51, 0, request)
    assert [(r.user, r.error_code, r.error_message) for r in answer.results] == [
        ("amy", 41, None), ("zed", 41, None)]
    assert zk.get_user_config("amy") == {}
