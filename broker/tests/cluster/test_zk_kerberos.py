"""Kerberos towards ZooKeeper, against a real MIT KDC (tests/kdc.py) and a real ZooKeeper 3.8
that requires SASL and logs in with its own keytab (`zookeeper/localhost`, principals
stripped of host and realm): the session and a whole broker log in from a JAAS `Client`
section with Krb5LoginModule named in KAFKA_OPTS (with `-Djava.security.krb5.conf`), with
`zookeeper.set.acl=true` their znodes carry `sasl:kafka` ACLs that every broker principal
`kafka/<host>` may change and others may not, a missing keytab, a wrong principal and an
unreachable KDC stop startup with a message naming the JAAS section and keytab, and the
ZooKeeper-facing tools log in the same way. One KDC and one ZooKeeper for the module."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.exceptions import NoAuthError
from kdc import REALM, TestKdc, kdc_available
from zk_fixtures import running_ensemble

from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.cluster.zk_kerberos import ZkKerberosLogin
from moldau.cluster.zk_sasl import ZkAuthenticationError
from moldau.cluster.zk_server_security import ZkServerKerberos, ZkServerSasl
from moldau.devcluster.brokers import BrokerProcess, free_port

pytestmark = pytest.mark.skipif(not kdc_available(), reason="MIT Kerberos KDC not installed")

BIN = Path(sys.executable).parent
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
BROKER = f"kafka/localhost@{REALM}"
OTHER_BROKER = f"kafka/broker2.test@{REALM}"  # another host: the same `sasl:kafka`
INTRUDER = f"mallory@{REALM}"


@dataclass
class Realm:
    kdc: TestKdc
    directory: Path

    def keytab(self, principal: str) -> Path:
        return self.directory / (principal.split("@")[0].replace("/", "_") + ".keytab")

    def login(self, principal: str = BROKER) -> ZkKerberosLogin:
        return ZkKerberosLogin(principal, str(self.keytab(principal)), "Client", "<test>",
                               krb5_conf=str(self.kdc.krb5_conf))

    def jaas(self, principal: str = BROKER, keytab: Path | None = None) -> Path:
        """A broker's JAAS file as a Kafka operator writes it for Kerberos to ZooKeeper."""
        path = self.directory / f"jaas-{uuid.uuid4().hex[:6]}.conf"
        path.write_text(f'Client {{\n  {KRB5} required\n  useKeyTab=true\n  storeKey=true\n'
                        f'  keyTab="{keytab or self.keytab(principal)}"\n'
                        f'  principal="{principal}";\n}};\n')
        return path

    def kafka_opts(self, jaas: Path, krb5_conf: Path | None = None) -> str:
        return (f"-Djava.security.auth.login.config={jaas} "
                f"-Djava.security.krb5.conf={krb5_conf or self.kdc.krb5_conf}")


@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Realm]:
    directory = tmp_path_factory.mktemp("zk-kdc")
    kdc = TestKdc(directory)
    kdc.start()
    saved = {key: os.environ.get(key) for key in kdc.env()}
    # this process's own Kerberos clients (the in-process sessions) use the test realm
    os.environ.update(kdc.env())
    try:
        realm = Realm(kdc, directory)
        for principal in ("zookeeper/localhost", BROKER, OTHER_BROKER, INTRUDER):
            kdc.principal_with_keytab(principal, realm.keytab(principal))
        yield realm
    finally:
        kdc.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def kerberos_zk(realm: Realm, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[ZooKeeperEnsemble]:
    server = ZkServerKerberos(f"zookeeper/localhost@{REALM}",
                              str(realm.keytab("zookeeper/localhost")), str(realm.kdc.krb5_conf))
    yield from running_ensemble(tmp_path_factory, 1, ZkServerSasl(kerberos=server))


def session(zk: ZooKeeperEnsemble, chroot: str, login: ZkKerberosLogin,
            secure_acls: bool = False) -> KafkaZkClient:
    client = KafkaZkClient(zk.connect_string, chroot, session_timeout_ms=6000,
                           connection_timeout_ms=20000, secure_acls=secure_acls, sasl=login)
    client.start()
    return client


def acl_ids(client: KafkaZkClient, path: str) -> set[tuple[str, str, int]]:
    return {(a.id.scheme, a.id.id, a.perms) for a in client.kazoo.get_acls(path)[0]}


def run_tool(script: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("KAFKA_OPTS", "KRB5_CONFIG")}
    return subprocess.run([str(BIN / script), *args], capture_output=True, text=True,
                          timeout=90, env={**environ, **env})


# -- the session ---------------------------------------------------------------------------


def test_sessions_log_in_with_kerberos_and_every_broker_principal_is_sasl_kafka(
        realm: Realm, kerberos_zk: ZooKeeperEnsemble) -> None:
    chroot = f"/krb-{uuid.uuid4().hex[:8]}"
    first = session(kerberos_zk, chroot, realm.login(), secure_acls=True)
    try:
        first.ensure_persistent_paths()
        first.kazoo.create("/brokers/topics/t", b"{}")
        assert acl_ids(first, "/brokers/topics/t") == {("sasl", "kafka", 31),
                                                       ("world", "anyone", 1)}
        assert acl_ids(first, "/config/users") == {("sasl", "kafka", 31)}
    finally:
        first.close()
    # another broker's principal (another host) is the same ZooKeeper identity
    second = session(kerberos_zk, chroot, realm.login(OTHER_BROKER))
    try:
        second.kazoo.set("/brokers/topics/t", b'{"version":3}')
        assert second.get_children("/config/users") == []
    finally:
        second.close()
    # anybody else reads what everyone may read, and nothing more
    intruder = session(kerberos_zk, chroot, realm.login(INTRUDER))
    try:
        assert intruder.kazoo.get("/brokers/topics/t")[0] == b'{"version":3}'
        with pytest.raises(NoAuthError):
            intruder.kazoo.set("/brokers/topics/t", b"{}")
        with pytest.raises(NoAuthError):
            intruder.get_children("/config/users")
    finally:
        intruder.close()


def test_a_login_the_kdc_or_zookeeper_refuses_fails_at_start(
        realm: Realm, kerberos_zk: ZooKeeperEnsemble) -> None:
    wrong = ZkKerberosLogin(f"kafka/elsewhere@{REALM}", str(realm.keytab(BROKER)), "Client",
                            "<test>", krb5_conf=str(realm.kdc.krb5_conf))
    with pytest.raises(ZkAuthenticationError, match="Could not login") as caught:
        session(kerberos_zk, "/refused", wrong)
    assert "kafka/elsewhere" in str(caught.value)
    assert str(realm.keytab(BROKER)) in str(caught.value)
    # a server principal the KDC does not know: the exchange fails, naming it
    lost = realm.login()
    lost.server_principal = "zookeeper/nowhere.test"
    began = time.monotonic()
    with pytest.raises(ZkAuthenticationError) as refused:
        session(kerberos_zk, "/refused", lost)
    assert f"zookeeper/nowhere.test@{REALM}" in str(refused.value)
    assert time.monotonic() - began < 15  # not after the connection timeout


def test_the_session_logs_in_again_with_a_renewed_ticket_after_a_restart(
        realm: Realm, kerberos_zk: ZooKeeperEnsemble) -> None:
    login = realm.login()
    client = session(kerberos_zk, f"/renew-{uuid.uuid4().hex[:8]}", login, secure_acls=True)
    try:
        client.ensure_persistent_paths()
        before = login.credentials()
        assert login._login is not None and login._login.refresh_now()
        assert login.credentials() is not before  # a fresh TGT from the keytab
        kerberos_zk.stop_node(0)
        kerberos_zk.start_node(0)
        kerberos_zk.wait_node(0, timeout=30)
        assert client.get_children("/brokers") == ["ids", "seqid", "topics"]
        assert acl_ids(client, "/brokers") == {("sasl", "kafka", 31), ("world", "anyone", 1)}
    finally:
        client.close()


# -- a broker ------------------------------------------------------------------------------


def test_a_broker_logs_in_with_kerberos_serves_and_sets_sasl_acls(
        realm: Realm, kerberos_zk: ZooKeeperEnsemble, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    chroot = f"/broker-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(str(tmp_path / "b"), 1, kerberos_zk.connect_string + chroot,
                           port=free_port(),
                           properties={"zookeeper.set.acl": "true", "num.partitions": "1"},
                           env={"KAFKA_OPTS": realm.kafka_opts(realm.jaas())})
    broker.start(wait=60)
    try:
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(3):
            producer.produce("zk-krb", f"v{i}".encode())
        assert producer.flush(30) == 0
    finally:
        assert broker.stop() == 0
    assert f"SASL GSSAPI as '{BROKER}'" in broker.tail(400)
    owner = session(kerberos_zk, chroot, realm.login(OTHER_BROKER))
    try:
        assert acl_ids(owner, "/brokers/topics/zk-krb") == {("sasl", "kafka", 31),
                                                            ("world", "anyone", 1)}
        assert acl_ids(owner, "/config/users") == {("sasl", "kafka", 31)}
    finally:
        owner.close()


@pytest.mark.parametrize("fault", ["missing-keytab", "wrong-principal", "kdc-down",
                                   "no-keytab-option"])
def test_a_broker_whose_kerberos_login_fails_does_not_start(
        realm: Realm, kerberos_zk: ZooKeeperEnsemble, tmp_path: Path, fault: str) -> None:
    jaas, krb5_conf, words = realm.jaas(), None, "Could not login"
    if fault == "missing-keytab":
        jaas = realm.jaas(keytab=tmp_path / "gone.keytab")
        words = f"keyTab {tmp_path / 'gone.keytab'} of principal {BROKER}"
    elif fault == "wrong-principal":
        jaas = realm.jaas(f"kafka/elsewhere@{REALM}", keytab=realm.keytab(BROKER))
        words = f"no key for kafka/elsewhere@{REALM} in keytab"
    elif fault == "kdc-down":
        krb5_conf = tmp_path / "krb5.conf"  # the realm's KDC on a port nobody listens on
        krb5_conf.write_text(realm.kdc.krb5_conf.read_text().replace(
            f"127.0.0.1:{realm.kdc.port}", f"127.0.0.1:{free_port()}"))
        words = "Cannot contact any KDC"
    else:
        jaas.write_text(f"Client {{\n  {KRB5} required useKeyTab=true principal=\"{BROKER}\";"
                        "\n};\n")
        words = "Krb5LoginModule with useKeyTab=true needs keyTab"
    broker = BrokerProcess(str(tmp_path / "b"), 1, kerberos_zk.connect_string + "/refused",
                           properties={"zookeeper.connection.timeout.ms": "30000"},
                           env={"KAFKA_OPTS": realm.kafka_opts(jaas, krb5_conf)})
    broker.start(wait=None)
    assert broker.process is not None
    assert broker.process.wait(60) == 1
    tail = broker.tail(60)
    assert words in tail, tail
    assert f"JAAS section 'Client' of {jaas}" in tail, tail


# -- the tools -----------------------------------------------------------------------------


def test_the_zookeeper_tools_log_in_with_kerberos_from_kafka_opts(
        realm: Realm, kerberos_zk: ZooKeeperEnsemble) -> None:
    chroot = f"/tools-{uuid.uuid4().hex[:8]}"
    connect = kerberos_zk.connect_string + chroot
    env = {"KAFKA_OPTS": realm.kafka_opts(realm.jaas())}
    done = run_tool("kafka-configs.sh", "--zookeeper", connect, "--alter", "--add-config",
                    "SCRAM-SHA-256=[iterations=4096,password=alice-secret]",
                    "--entity-type", "users", "--entity-name", "alice", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = run_tool("zookeeper-shell.sh", connect, "getAcl", "/config/users/alice", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-2:] == ["'sasl,'kafka", ": cdrwa"]

    client = session(kerberos_zk, chroot, realm.login())  # zookeeper.set.acl=false
    try:
        client.ensure_persistent_paths()
        assert acl_ids(client, "/brokers") == {("world", "anyone", 31)}
    finally:
        client.close()
    migrated = run_tool("zookeeper-security-migration.sh", "--zookeeper.acl=secure",
                        "--zookeeper.connect", connect, env=env)
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    client = session(kerberos_zk, chroot, realm.login(OTHER_BROKER))
    try:
        assert acl_ids(client, "/brokers") == {("sasl", "kafka", 31), ("world", "anyone", 1)}
    finally:
        client.close()

    unknown = run_tool("zookeeper-shell.sh", connect, "ls", "/",
                       env={"KAFKA_OPTS": realm.kafka_opts(realm.jaas(f"nobody@{REALM}"))})
    assert unknown.returncode == 1 and "Could not login" in unknown.stderr, unknown.stderr
