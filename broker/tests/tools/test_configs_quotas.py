"""kafka-configs for client quotas against the real three-broker cluster of the tools
package: users, clients, a user's clients and ips, by name and by default entity, through
--bootstrap-server (DescribeClientQuotas, AlterClientQuotas), Kafka 3.9's output lines,
the znodes Kafka writes, and its refusals of bad input with nothing written."""

from __future__ import annotations

import contextlib
import io
import json
import uuid

import pytest

from moldau.cluster.zk_client import KafkaZkClient
from moldau.tools.configs import TOOL

from .toolrun import Result, ToolCluster

CONFIGS = "kafka-configs.sh"


class InProcess:
    """kafka-configs run in this process (its `main`, as the script calls it) against the
    cluster: the same code and output as `kafka-configs.sh`, without a process start per
    command (the script itself runs in test_the_books_client_quota)."""

    def __init__(self, cluster: ToolCluster) -> None:
        self.cluster = cluster

    def tool(self, *args: str, bootstrap: bool = True) -> Result:
        out, err = io.StringIO(), io.StringIO()
        argv = ["--bootstrap-server", self.cluster.bootstrap, *args] if bootstrap else args
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = TOOL.main(list(argv))
        return Result(code, out.getvalue(), err.getvalue())

    def ok(self, *args: str) -> str:
        result = self.tool(*args)
        assert result.code == 0, (result.code, result.out, result.err)
        return result.out


@pytest.fixture(scope="module")
def configs(cluster: ToolCluster) -> InProcess:
    return InProcess(cluster)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def config(zk: KafkaZkClient, path: str) -> dict[str, str] | None:
    found = zk.get(path)
    return None if found is None else json.loads(found[0])["config"]


def test_the_books_client_quota(cluster: ToolCluster, configs: InProcess,
                                zk: KafkaZkClient) -> None:
    clueful = unique("clueful")
    out = cluster.ok(CONFIGS, "--alter", "--add-config",
                     "producer_byte_rate=1048576,consumer_byte_rate=10485760",
                     "--entity-type", "clients", "--entity-name", clueful)
    assert out == f"Completed updating config for client {clueful}.\n"
    assert config(zk, f"/config/clients/{clueful}") == {
        "producer_byte_rate": "1048576", "consumer_byte_rate": "10485760"}
    described = cluster.ok(CONFIGS, "--describe", "--client", clueful)
    # the order of the AdminClient's HashMap of two keys (buckets 0 and 3 of 4)
    assert described == (f"Quota configs for client-id '{clueful}' are "
                         "consumer_byte_rate=1.048576E7, producer_byte_rate=1048576.0\n")
    assert described in configs.ok("--describe", "--entity-type", "clients")

    out = configs.ok("--alter", "--delete-config", "consumer_byte_rate", "--client",
                     clueful)
    assert out == f"Completed updating config for client {clueful}.\n"
    assert config(zk, f"/config/clients/{clueful}") == {"producer_byte_rate": "1048576"}
    configs.ok("--alter", "--delete-config", "producer_byte_rate", "--client", clueful)
    assert not zk.exists(f"/config/clients/{clueful}")  # emptied: removed, as Kafka does
    assert configs.ok("--describe", "--client", clueful) == ""


def test_users_their_clients_and_defaults(configs: InProcess, zk: KafkaZkClient) -> None:
    user, app = unique("app user"), unique("app")  # a space: sanitized in the znode
    out = configs.ok("--alter", "--add-config", "request_percentage=50",
                     "--user", user, "--client", app)
    assert out == f"Completed updating config for client {app}.\n"  # Kafka's flag order
    out = configs.ok("--alter", "--add-config", "producer_byte_rate=2048",
                     "--entity-type", "users", "--entity-name", user,
                     "--entity-type", "clients", "--entity-default")
    assert out == f"Completed updating config for user {user}.\n"
    sanitized = user.replace(" ", "%20")
    assert config(zk, f"/config/users/{sanitized}/clients/{app}") == {
        "request_percentage": "50.0"}
    assert config(zk, f"/config/users/{sanitized}/clients/<default>") == {
        "producer_byte_rate": "2048"}
    one = configs.ok("--describe", "--user", user, "--client", app)
    assert one == (f"Quota configs for user-principal '{user}', client-id '{app}' are "
                   "request_percentage=50.0\n")
    both = configs.ok("--describe", "--entity-type", "users", "--entity-name", user,
                      "--entity-type", "clients").splitlines()
    assert sorted(both) == sorted([
        one.rstrip("\n"),
        f"Quota configs for user-principal '{user}', the default client-id are "
        "producer_byte_rate=2048.0"])

    # the default user, and a user's SCRAM credential beside its quota
    out = configs.ok("--alter", "--add-config", "consumer_byte_rate=4096",
                     "--user-defaults")
    assert out == "Completed updating default config for users in the cluster.\n"
    assert configs.ok("--describe", "--entity-type", "users", "--entity-default") == (
        "Quota configs for the default user-principal are consumer_byte_rate=4096.0\n")
    configs.ok("--alter", "--add-config", "SCRAM-SHA-256=[password=pw]", "--user",
               user)
    configs.ok("--alter", "--add-config", "controller_mutation_rate=2.5", "--user",
               user)
    stored = config(zk, f"/config/users/{sanitized}")
    assert stored is not None and sorted(stored) == ["SCRAM-SHA-256",
                                                     "controller_mutation_rate"]
    assert configs.ok("--describe", "--user", user) == (
        f"Quota configs for user-principal '{user}' are controller_mutation_rate=2.5\n"
        f"SCRAM credential configs for user-principal '{user}' are "
        "SCRAM-SHA-256=iterations=4096\n")
    configs.ok("--alter", "--delete-config", "controller_mutation_rate", "--user",
               user)
    assert sorted(config(zk, f"/config/users/{sanitized}") or {}) == ["SCRAM-SHA-256"]
    configs.ok("--alter", "--delete-config", "consumer_byte_rate", "--user-defaults")


def test_ips(configs: InProcess, zk: KafkaZkClient) -> None:
    out = configs.ok("--alter", "--add-config", "connection_creation_rate=10",
                     "--ip", "10.20.30.40")
    assert out == "Completed updating config for ip 10.20.30.40.\n"
    out = configs.ok("--alter", "--add-config", "connection_creation_rate=100",
                     "--ip-defaults")
    assert out == "Completed updating default config for ips in the cluster.\n"
    assert config(zk, "/config/ips/10.20.30.40") == {"connection_creation_rate": "10"}
    assert config(zk, "/config/ips/<default>") == {"connection_creation_rate": "100"}
    lines = configs.ok("--describe", "--entity-type", "ips").splitlines()
    assert sorted(lines) == [
        "Quota configs for ip '10.20.30.40' are connection_creation_rate=10.0",
        "Quota configs for the default ip are connection_creation_rate=100.0"]
    for ip in ("--ip", "10.20.30.40"), ("--ip-defaults",):
        configs.ok("--alter", "--delete-config", "connection_creation_rate", *ip)
    assert zk.get_children("/config/ips") == []


def test_bad_input_is_refused_and_writes_nothing(cluster: ToolCluster, configs: InProcess,
                                                 zk: KafkaZkClient) -> None:
    client = unique("steady")
    configs.ok("--alter", "--client", client, "--add-config",
               "producer_byte_rate=1000")
    paths = ("/config/clients", "/config/users", "/config/ips")
    before = {p: zk.get_children(p) for p in paths}
    prefix = f"Error while executing config command with args '--bootstrap-server " \
             f"{cluster.bootstrap} "
    refused_by_tool = {
        ("--alter", "--client", client, "--add-config", "producer_byte_rate=fast"):
            "Cannot parse quota configuration value for producer_byte_rate: fast",
        ("--alter", "--client", client, "--add-config", "quota.producer.default=10"):
            "Only quota configs can be added for 'clients' using --bootstrap-server. "
            "Unexpected config names: Set(quota.producer.default)",
        ("--alter", "--client", client, "--delete-config", "consumer_byte_rate"):
            "Invalid config(s): consumer_byte_rate",
        ("--alter", "--ip", "10.0.0.9", "--add-config", "producer_byte_rate=10"):
            "Only connection quota configs can be added for 'ips' using --bootstrap-server. "
            "Unexpected config names: producer_byte_rate",
        ("--alter", "--ip", "no such host!", "--add-config", "connection_creation_rate=1"):
            "The entity name for ips must be a valid IP or resolvable host, but it is: "
            "no such host!",
        ("--describe", "--entity-type", "users", "--entity-type", "ips"):
            "Only 'users' and 'clients' entity types may be specified together",
        ("--alter", "--entity-type", "users", "--entity-type", "clients", "--entity-name",
         "u", "--add-config", "producer_byte_rate=1"):
            "An entity name must be specified for every entity type",
    }
    refused_by_broker = {
        ("--alter", "--client", client, "--add-config", "producer_byte_rate=1.5"):
            "Configuration producer_byte_rate must be a LONG value",
        ("--alter", "--client", client, "--add-config", "producer_byte_rate=0"):
            "Quota producer_byte_rate must be greater than 0",
        ("--alter", "--user", "someone", "--add-config", "consumer_byte_rate=-10"):
            "Quota consumer_byte_rate must be greater than 0",
        ("--alter", "--ip", "10.0.0.9", "--add-config", "connection_creation_rate=2.5"):
            "Configuration connection_creation_rate must be a INT value",
    }
    cases = {args: message + "\n" for args, message in refused_by_tool.items()}
    for args, message in cases.items():
        result = configs.tool(*args)
        assert (result.code, result.out, result.err) == (1, "", message), args
    # the broker's refusals as Kafka 3.9.1's ConfigCommand prints them: the command line,
    # then the AdminClient's ExecutionException and its cause
    for args, message in refused_by_broker.items():
        result = configs.tool(*args)
        header, wrapped, cause = result.err.splitlines()
        assert (result.code, result.out, header) == (1, "", f"{prefix}{' '.join(args)}'"), args
        assert wrapped.startswith("java.util.concurrent.ExecutionException: org.apache.kafka.")
        assert wrapped.endswith(f"Exception: {message}") and cause.endswith(message), args
    # 3.9 configures only users (SCRAM) and brokers through --zookeeper
    result = configs.tool("--zookeeper", cluster.zk_connect, "--alter", "--client", client,
                          "--add-config", "producer_byte_rate=10", bootstrap=False)
    assert (result.code, result.err) == (
        1, "Invalid entity type clients, the entity type must be one of users, brokers with "
           "a --zookeeper argument\n")
    assert {p: zk.get_children(p) for p in paths} == before
    assert config(zk, f"/config/clients/{client}") == {"producer_byte_rate": "1000"}
