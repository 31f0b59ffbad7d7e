"""SASL to ZooKeeper against a real ZooKeeper 3.8 that requires it (DIGEST-MD5 users in its
JAAS `Server` section, `enforce.auth`): the session and a whole broker log in from the
JAAS `Client` section named in KAFKA_OPTS, with `zookeeper.set.acl=true` their znodes carry
`sasl:<user>` ACLs, other clients cannot change them (nor read the sensitive ones), a wrong
password or a missing login fails with a clear message, and the ZooKeeper-facing tools
authenticate the same way."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, SessionClosedRequireSaslError
from zk_fixtures import running_ensemble

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZkServerSasl, ZooKeeperEnsemble
from moldau.cluster.zk_sasl import ZkAuthenticationError, ZkSaslLogin
from moldau.devcluster.brokers import BrokerProcess

BIN = Path(sys.executable).parent
BROKER_USER, BROKER_PASSWORD = "kafka", "kafka-zk-secret"
OTHER_USER, OTHER_PASSWORD = "intruder", "intruder-secret"
DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"


@pytest.fixture(scope="module")
def sasl_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    users = {BROKER_USER: BROKER_PASSWORD, OTHER_USER: OTHER_PASSWORD}
    yield from running_ensemble(tmp_path_factory, 1, ZkServerSasl(users))


def jaas_file(directory: Path, password: str = BROKER_PASSWORD, user: str = BROKER_USER,
              module: str = DIGEST) -> Path:
    """A broker's JAAS file as a Kafka operator writes it: the ZooKeeper `Client` section."""
    path = directory / f"jaas-{uuid.uuid4().hex[:6]}.conf"
    path.write_text(f'Client {{\n  {module} required\n  username="{user}"\n'
                    f'  password="{password}";\n}};\n')
    return path


def kafka_opts(jaas: Path) -> str:
    return f"-Djava.security.auth.login.config={jaas}"


def login(user: str = BROKER_USER, password: str = BROKER_PASSWORD) -> ZkSaslLogin:
    return ZkSaslLogin(user, password, "Client", "<test>")


def kazoo(zk: ZooKeeperEnsemble, chroot: str, user: str | None = None,
          password: str | None = None) -> KazooClient:
    """A plain kazoo client: anonymous, or logged in as another SASL user."""
    sasl = None if user is None else {"mechanism": "DIGEST-MD5", "username": user,
                                      "password": password}
    client = KazooClient(hosts=zk.connect_string + chroot, sasl_options=sasl)
    client.start(timeout=15)
    return client


def closing(client: KazooClient) -> None:
    client.stop()
    client.close()


def acl_ids(client: KazooClient | KafkaZkClient, path: str) -> set[tuple[str, str, int]]:
    zk = client.kazoo if isinstance(client, KafkaZkClient) else client
    return {(a.id.scheme, a.id.id, a.perms) for a in zk.get_acls(path)[0]}


def run_tool(script: str, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "KAFKA_OPTS"}
    return subprocess.run([str(BIN / script), *args], capture_output=True, text=True,
                          timeout=90, env={**environ, **(env or {})})


# -- the ensemble --------------------------------------------------------------------------


def test_the_ensemble_refuses_an_unauthenticated_client(sasl_zk: ZooKeeperEnsemble) -> None:
    # the server closes the session at its first request: one client per attempt
    for attempt in ("read", "write"):
        anonymous = kazoo(sasl_zk, "")
        try:
            with pytest.raises(SessionClosedRequireSaslError):
                if attempt == "read":
                    anonymous.get_children("/")
                else:
                    anonymous.create("/anonymous-was-here", b"")
        finally:
            closing(anonymous)
    client = KafkaZkClient(sasl_zk.connect_string, session_timeout_ms=6000,
                           connection_timeout_ms=15000)
    with pytest.raises(ZkAuthenticationError, match="requires SASL authentication") as caught:
        client.start()
    assert "java.security.auth.login.config" in str(caught.value)


# -- the session ---------------------------------------------------------------------------


def test_the_session_creates_znodes_with_sasl_acls(sasl_zk: ZooKeeperEnsemble) -> None:
    chroot = f"/acl-{uuid.uuid4().hex[:8]}"
    client = KafkaZkClient(sasl_zk.connect_string, chroot, session_timeout_ms=6000,
                           secure_acls=True, sasl=login())
    client.start()
    try:
        client.ensure_persistent_paths()
        client.set_entity_config(zd.ConfigType.BROKER, "1", {"log.cleaner.threads": "2"})
        client.set_entity_config(zd.ConfigType.TOPIC, "t", {"cleanup.policy": "compact"})
        client.update_user_config("alice", lambda config: {**config, "SCRAM-SHA-256": "x"})
        everyone_reads = {("sasl", BROKER_USER, 31), ("world", "anyone", 1)}
        assert acl_ids(client, zd.BROKER_IDS_PATH) == everyone_reads
        assert acl_ids(client, "/config/topics/t") == everyone_reads
        for sensitive in ("/config/users", "/config/users/alice", "/config/brokers/1"):
            assert acl_ids(client, sensitive) == {("sasl", BROKER_USER, 31)}, sensitive
        assert acl_ids(client, "/consumers") == {("world", "anyone", 31)}
    finally:
        client.close()

    # Another SASL user (ZooKeeper lets it in) reads the open znodes and nothing more.
    other = kazoo(sasl_zk, chroot, OTHER_USER, OTHER_PASSWORD)
    try:
        assert other.get("/config/topics/t")[0]
        for sensitive in ("/config/users/alice", "/config/brokers/1"):
            with pytest.raises(NoAuthError):
                other.get(sensitive)
        with pytest.raises(NoAuthError):
            other.set("/config/topics/t", b"{}")
        with pytest.raises(NoAuthError):
            other.create(zd.BROKER_IDS_PATH + "/7", b"{}")
        with pytest.raises(NoAuthError):
            other.delete("/config/topics/t")
    finally:
        closing(other)


def test_a_wrong_password_fails_the_start_at_once(sasl_zk: ZooKeeperEnsemble) -> None:
    client = KafkaZkClient(sasl_zk.connect_string, session_timeout_ms=6000,
                           connection_timeout_ms=20000, sasl=login(password="bad-pass-123"))
    began = time.monotonic()
    with pytest.raises(ZkAuthenticationError) as caught:
        client.start()
    assert time.monotonic() - began < 10  # not after the connection timeout
    message = str(caught.value)
    assert message.startswith("Auth failed either before or while waiting for connection")
    assert f"'{BROKER_USER}'" in message and "wrong user or password" in message
    assert "bad-pass-123" not in message


# -- a broker ------------------------------------------------------------------------------


def test_a_broker_logs_in_serves_and_sets_sasl_acls(sasl_zk: ZooKeeperEnsemble,
                                                      tmp_path: Path) -> None:
    from confluent_kafka import Consumer, Producer

    chroot = f"/broker-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(str(tmp_path / "b"), 1, sasl_zk.connect_string + chroot,
                           properties={"zookeeper.set.acl": "true", "num.partitions": "1"},
                           env={"KAFKA_OPTS": kafka_opts(jaas_file(tmp_path))})
    broker.start(wait=60)
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(5):
            producer.produce("zk-sasl", f"v{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "zk-sasl",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["zk-sasl"])
        values: list[bytes | None] = []
        while len(values) < 5:
            message = consumer.poll(20)
            assert message is not None, values
            assert message.error() is None, message.error()
            values.append(message.value())
        consumer.close()
        assert values == [f"v{i}".encode() for i in range(5)]
    finally:
        assert broker.stop() == 0
    assert "SASL DIGEST-MD5 as 'kafka'" in broker.tail(400)

    owner = KafkaZkClient(sasl_zk.connect_string, chroot, session_timeout_ms=6000,
                          sasl=login())
    owner.start()
    try:
        assert acl_ids(owner, "/brokers/topics/zk-sasl") == {("sasl", BROKER_USER, 31),
                                                             ("world", "anyone", 1)}
        assert acl_ids(owner, "/config/users") == {("sasl", BROKER_USER, 31)}
    finally:
        owner.close()
    other = kazoo(sasl_zk, chroot, OTHER_USER, OTHER_PASSWORD)
    try:
        with pytest.raises(NoAuthError):
            other.get_children("/config/users")
        with pytest.raises(NoAuthError):
            other.delete("/brokers/topics/zk-sasl", recursive=True)
    finally:
        closing(other)


@pytest.mark.parametrize(("jaas", "properties", "words"), [
    ({"password": "not-the-password"}, {}, "Auth failed either before or while waiting"),
    ({"module": "com.sun.security.auth.module.Krb5LoginModule"}, {},
     "Krb5LoginModule needs useKeyTab=true"),  # Kerberos: test_zk_kerberos.py
    (None, {"zookeeper.set.acl": "true"}, "zookeeper.set.acl is true, but ZooKeeper client"),
], ids=["wrong-password", "kerberos", "set-acl-without-identity"])
def test_a_broker_without_a_usable_login_does_not_start(
        sasl_zk: ZooKeeperEnsemble, tmp_path: Path, jaas: dict[str, str] | None,
        properties: dict[str, str], words: str) -> None:
    env = {"KAFKA_OPTS": kafka_opts(jaas_file(tmp_path, **jaas))} if jaas is not None else {}
    broker = BrokerProcess(str(tmp_path / "b"), 1, sasl_zk.connect_string + "/refused",
                           properties={"zookeeper.connection.timeout.ms": "30000",
                                       **properties}, env=env)
    broker.start(wait=None)
    assert broker.process is not None
    assert broker.process.wait(60) == 1
    tail = broker.tail(60)
    assert words in tail, tail
    assert "not-the-password" not in tail


# -- the tools -----------------------------------------------------------------------------


def test_zookeeper_shell_logs_in_from_kafka_opts(sasl_zk: ZooKeeperEnsemble,
                                                 tmp_path: Path) -> None:
    chroot = f"/shell-{uuid.uuid4().hex[:8]}"
    client = KafkaZkClient(sasl_zk.connect_string, chroot, session_timeout_ms=6000,
                           secure_acls=True, sasl=login())
    client.start()
    try:
        client.ensure_persistent_paths()
    finally:
        client.close()
    connect = sasl_zk.connect_string + chroot
    env = {"KAFKA_OPTS": kafka_opts(jaas_file(tmp_path))}
    shown = run_tool("zookeeper-shell.sh", connect, "getAcl", "/config/users", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-2:] == [f"'sasl,'{BROKER_USER}", ": cdrwa"]

    refused = run_tool("zookeeper-shell.sh", connect, "ls", "/")
    assert refused.returncode == 1
    assert "requires SASL authentication" in refused.stderr, refused.stderr

    wrong = run_tool("zookeeper-shell.sh", connect, "ls", "/",
                     env={"KAFKA_OPTS": kafka_opts(jaas_file(tmp_path, password="nope"))})
    assert wrong.returncode == 1 and "Auth failed" in wrong.stderr, wrong.stderr


def test_kafka_configs_zookeeper_logs_in_and_writes_a_creator_only_user(
        sasl_zk: ZooKeeperEnsemble, tmp_path: Path) -> None:
    connect = sasl_zk.connect_string + f"/configs-{uuid.uuid4().hex[:8]}"
    env = {"KAFKA_OPTS": kafka_opts(jaas_file(tmp_path))}
    args = ("--zookeeper", connect, "--alter", "--add-config",
            "SCRAM-SHA-256=[iterations=4096,password=alice-secret]", "--entity-type", "users",
            "--entity-name", "alice")
    done = run_tool("kafka-configs.sh", *args, env=env)
    assert done.returncode == 0, done.stderr
    described = run_tool("kafka-configs.sh", "--zookeeper", connect, "--describe",
                         "--entity-type", "users", "--entity-name", "alice", env=env)
    assert described.returncode == 0 and "SCRAM-SHA-256" in described.stdout, described

    client = KafkaZkClient(connect, session_timeout_ms=6000, sasl=login())
    client.start()
    try:
        assert acl_ids(client, "/config/users/alice") == {("sasl", BROKER_USER, 31)}
    finally:
        client.close()

    refused = run_tool("kafka-configs.sh", *args)
    assert refused.returncode == 1
    assert "requires SASL authentication" in refused.stderr + refused.stdout, refused


def test_kafka_acls_through_zookeeper_logs_in_and_secures_its_znodes(
        sasl_zk: ZooKeeperEnsemble, tmp_path: Path) -> None:
    connect = sasl_zk.connect_string + f"/acls-{uuid.uuid4().hex[:8]}"
    env = {"KAFKA_OPTS": kafka_opts(jaas_file(tmp_path))}
    args = ("--authorizer-properties", f"zookeeper.connect={connect}", "--add",
            "--allow-principal", "User:bob", "--operation", "Read", "--topic", "orders")
    done = run_tool("kafka-acls.sh", *args, env=env)
    assert done.returncode == 0, done.stderr
    client = KafkaZkClient(connect, session_timeout_ms=6000, sasl=login())
    client.start()
    try:
        # zookeeper.set.acl defaults to true when SASL is on, as in Kafka's AclCommand
        assert acl_ids(client, "/kafka-acl/Topic/orders") == {("sasl", BROKER_USER, 31),
                                                              ("world", "anyone", 1)}
    finally:
        client.close()
    refused = run_tool("kafka-acls.sh", *args)
    assert refused.returncode != 0
    assert "requires SASL authentication" in refused.stderr + refused.stdout, refused


# -- zookeeper-security-migration.sh -------------------------------------------------------


def test_the_migration_tool_secures_what_was_created_open_and_opens_it_again(
        sasl_zk: ZooKeeperEnsemble, tmp_path: Path) -> None:
    """Kafka's last step of securing ZooKeeper: a cluster's znodes made before
    zookeeper.set.acl=true get Kafka's ACLs; `unsecure` opens them again."""
    chroot = f"/migrate-{uuid.uuid4().hex[:8]}"
    client = KafkaZkClient(sasl_zk.connect_string, chroot, session_timeout_ms=6000,
                           sasl=login())  # logged in, but zookeeper.set.acl=false
    client.start()
    try:
        client.ensure_persistent_paths()
        client.set_entity_config(zd.ConfigType.TOPIC, "t", {"cleanup.policy": "compact"})
        client.update_user_config("alice", lambda config: {**config, "SCRAM-SHA-256": "x"})
        client.kazoo.create("/brokers/topics/t/partitions/0/state", b"{}", makepath=True)
        open_all = {("world", "anyone", 31)}
        assert acl_ids(client, "/config/users/alice") == open_all
        connect = sasl_zk.connect_string + chroot
        env = {"KAFKA_OPTS": kafka_opts(jaas_file(tmp_path))}
        done = run_tool("zookeeper-security-migration.sh", "--zookeeper.acl=secure",
                        "--zookeeper.connect", connect, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        missing = done.stdout.splitlines()[0].rpartition(": ")[2].split(",")
        assert missing[missing.index("/delegation_token"):] == [  # Kafka 3.9's order
            "/delegation_token", "/kafka-acl-extended", "/migration", "/feature", "/kafka-acl",
            "/kafka-acl-changes", "/kafka-acl-extended/prefixed", "/kafka-acl-extended-changes"
        ], done.stdout
        everyone_reads = {("sasl", BROKER_USER, 31), ("world", "anyone", 1)}
        for path in ("/", "/brokers/topics/t/partitions/0/state", "/config/topics/t",
                     "/kafka-acl", "/kafka-acl-extended/prefixed", "/feature",
                     "/migration"):  # a missing secure root is created, as in Kafka 3.9
            assert acl_ids(client, path) == everyone_reads, path
        for sensitive in ("/config/users", "/config/users/alice"):
            assert acl_ids(client, sensitive) == {("sasl", BROKER_USER, 31)}, sensitive
        assert acl_ids(client, "/consumers") == open_all  # not a secure root, as in Kafka
        assert not client.exists("/controller")  # never created by the tool

        other = kazoo(sasl_zk, chroot, OTHER_USER, OTHER_PASSWORD)
        try:
            assert other.get("/config/topics/t")[0]
            with pytest.raises(NoAuthError):
                other.get("/config/users/alice")
            with pytest.raises(NoAuthError):
                other.set("/brokers/topics/t/partitions/0/state", b"{}")
        finally:
            closing(other)

        again = run_tool("zookeeper-security-migration.sh", "--zookeeper.acl=unsecure",
                         "--zookeeper.connect", connect, env=env)
        assert again.returncode == 0, again.stdout + again.stderr
        for path in ("/", "/config/users/alice", "/brokers/topics/t/partitions/0/state"):
            assert acl_ids(client, path) == open_all, path
    finally:
        client.close()


def test_the_migration_tool_refuses_without_an_identity_or_a_mode(
        sasl_zk: ZooKeeperEnsemble, tmp_path: Path) -> None:
    connect = sasl_zk.connect_string + f"/migrate-{uuid.uuid4().hex[:8]}"
    bare = run_tool("zookeeper-security-migration.sh", "--zookeeper.acl=secure",
                    "--zookeeper.connect", connect)
    assert bare.returncode == 1 and bare.stdout == ""
    assert bare.stderr.splitlines() == [
        "ERROR: No JAAS configuration file has been specified and no TLS client certificate "
        "has been specified. Please make sure that you set the system property "
        "java.security.auth.login.config or provide a ZooKeeper client TLS configuration "
        "via --zk-tls-config-file <filename> identifying at least "
        "zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and "
        "zookeeper.ssl.keystore.location",
        "java.lang.IllegalArgumentException: Incorrect configuration"]

    no_client = tmp_path / "kafka-server-only.conf"
    no_client.write_text('KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule'
                         ' required username="a" password="b";\n};\n')
    insecure = run_tool("zookeeper-security-migration.sh", "--zookeeper.acl=secure",
                        "--zookeeper.connect", connect,
                        env={"KAFKA_OPTS": kafka_opts(no_client)})
    assert insecure.returncode == 1
    assert insecure.stdout == ("ERROR: Security isn't enabled, most likely the file isn't "
                               f"set properly: {no_client}\n")

    env = {"KAFKA_OPTS": kafka_opts(jaas_file(tmp_path))}
    no_mode = run_tool("zookeeper-security-migration.sh", "--zookeeper.connect", connect,
                       env=env)
    assert no_mode.returncode == 1
    assert no_mode.stderr.startswith("ZooKeeper Migration Tool Help.")
    assert "--zookeeper.acl" in no_mode.stderr

    checked = run_tool("zookeeper-security-migration.sh", "--zookeeper.acl=secure",
                       "--zookeeper.connect", connect, "--enable.path.check", env=env)
    assert checked.returncode == 1
    lines = checked.stdout.splitlines()
    assert lines[0].startswith("Warning: The following secure root paths do not exist in "
                               "ZooKeeper: /admin,/brokers,/cluster,/config,/controller,")
    assert lines[1:] == ["That might be due to an incorrect chroot is specified when "
                         "executing the command.", "Exit the command."]
    client = KafkaZkClient(connect, session_timeout_ms=6000, sasl=login())
    client.start()
    try:
        assert client.get_children("/") == []  # no root was created
    finally:
        client.close()


# -- reconnections (last: they restart the module's ZooKeeper) -------------------------


def restart(zk: ZooKeeperEnsemble, users: dict[str, str]) -> None:
    zk.sasl = ZkServerSasl(users)
    zk.write_configs()
    zk.stop_node(0)
    zk.start_node(0)
    zk.wait_node(0, timeout=30)


def test_the_session_logs_in_again_after_zookeeper_restarts_and_outlives_a_refusal(
        sasl_zk: ZooKeeperEnsemble, caplog: pytest.LogCaptureFixture) -> None:
    users = {BROKER_USER: BROKER_PASSWORD, OTHER_USER: OTHER_PASSWORD}
    client = KafkaZkClient(sasl_zk.connect_string, f"/restart-{uuid.uuid4().hex[:8]}",
                           session_timeout_ms=10000, secure_acls=True, sasl=login())
    client.start()
    try:
        client.ensure_persistent_paths()
        restart(sasl_zk, users)
        assert client.get_children("/brokers") == ["ids", "seqid", "topics"]

        # The server no longer accepts the password: the client keeps trying (Kafka
        # reinitializes its session) instead of giving up, and logs why.
        restart(sasl_zk, {**users, BROKER_USER: "rotated"})
        deadline = time.monotonic() + 20
        while "failed, retrying" not in caplog.text:
            assert time.monotonic() < deadline, caplog.text
            time.sleep(0.1)
        restart(sasl_zk, users)
        assert client.get_children("/brokers") == ["ids", "seqid", "topics"]
    finally:
        client.close()
        sasl_zk.sasl = ZkServerSasl(users)
        sasl_zk.write_configs()
