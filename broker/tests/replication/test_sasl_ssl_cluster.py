"""Three brokers secured as a Kafka operator secures them: their inter-broker listener is
SASL_SSL with SCRAM-SHA-512 (the `broker` user, bootstrapped into ZooKeeper before any
broker starts, as `kafka-configs --zookeeper` does), they log in to a ZooKeeper that
requires SASL with DIGEST-MD5 from the JAAS `Client` section in KAFKA_OPTS, and create
their znodes with `zookeeper.set.acl=true`. The durability checker produces over SASL_SSL
(SCRAM-SHA-512 as the `checker` user, acks=all, idempotent, min.insync.replicas 2) while
the leader of a partition is killed with SIGKILL and restarted: it must find every
acknowledged record exactly once and in order.

Each broker also has a PLAINTEXT listener, which only the test's own observers (metadata,
ISR checks) use; the brokers know each other by the SASL_SSL listener alone."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from tls_material import TlsMaterial, make_tls_material
from zk_fixtures import running_ensemble

from moldau.checker.producer import ProducerRun
from moldau.cluster import zk_data
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZkServerSasl, ZooKeeperEnsemble
from moldau.cluster.zk_sasl import ZkSaslLogin
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.security.sasl.scram_credentials import ScramMechanism, derive_credential

from .conftest import CLUSTER_PROPERTIES, SESSION_S, Cluster, running
from .faults import RATE, AckWatch, acked, isrs_full, judge, leaders, survivor, wait_acks

ZK_USER, ZK_PASSWORD = "kafka", "kafka-zk-secret"
USERS = {"broker": "broker-secret", "checker": "checker-secret"}
SCRAM = "SCRAM-SHA-512"
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="{user}" password="{password}";')


@dataclass
class SaslSslCluster(Cluster):
    """The replication tests' Cluster, whose ZooKeeper sessions log in with DIGEST-MD5,
    and the SASL_SSL side the checker uses."""

    sasl_ports: dict[int, int] | None = None
    tls: TlsMaterial | None = None

    @contextlib.contextmanager
    def zookeeper(self) -> Iterator[KafkaZkClient]:
        host, chroot = self.zk_connect.split("/", 1)
        with KafkaZkClient(host, "/" + chroot, session_timeout_ms=int(SESSION_S * 1000),
                           connection_timeout_ms=15000, secure_acls=True,
                           sasl=ZkSaslLogin(ZK_USER, ZK_PASSWORD, "Client", "<test>")) as zk:
            yield zk

    @property
    def sasl_bootstrap(self) -> str:
        assert self.sasl_ports is not None
        return ",".join(f"127.0.0.1:{port}" for port in self.sasl_ports.values())

    def checker_config(self) -> dict[str, Any]:
        """librdkafka's settings for the checker: SASL_SSL as the `checker` user."""
        assert self.tls is not None
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": SCRAM,
                "sasl.username": "checker", "sasl.password": USERS["checker"],
                "ssl.ca.location": str(self.tls.ca_cert)}


@pytest.fixture(scope="module")
def sasl_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    yield from running_ensemble(tmp_path_factory, 1, ZkServerSasl({ZK_USER: ZK_PASSWORD}))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            sasl_zk: ZooKeeperEnsemble) -> Iterator[SaslSslCluster]:
    directory = tmp_path_factory.mktemp("sasl-ssl")
    tls = make_tls_material(directory / "tls")
    jaas = directory / "zk-client.conf"
    jaas.write_text("Client {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                    f'  username="{ZK_USER}"\n  password="{ZK_PASSWORD}";\n}};\n')
    jaas.chmod(0o600)
    connect = sasl_zk.connect_string + f"/sasl-ssl-{uuid.uuid4().hex[:8]}"
    brokers, sasl_ports = {}, {}
    for i in (1, 2, 3):
        plain, sasl_ports[i] = free_port(), free_port()
        brokers[i] = BrokerProcess(
            str(directory / f"broker{i}"), i, connect, port=plain,
            properties={
                **CLUSTER_PROPERTIES,
                "listeners": f"PLAINTEXT://127.0.0.1:{plain},"
                             f"SASL_SSL://127.0.0.1:{sasl_ports[i]}",
                "inter.broker.listener.name": "SASL_SSL",
                "sasl.enabled.mechanisms": SCRAM,
                "sasl.mechanism.inter.broker.protocol": SCRAM,
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_JAAS.format(
                    user="broker", password=USERS["broker"]),
                **tls.server_settings(),
                "zookeeper.set.acl": "true",
            },
            env={"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})
    cluster = SaslSslCluster(brokers, connect, sasl_ports, tls)
    with cluster.zookeeper() as zk:  # the users before any broker, creator-only ACLs
        zk.ensure_persistent_paths()
        for user, password in USERS.items():
            value = derive_credential(ScramMechanism.SCRAM_SHA_512, password,
                                      4096).to_config_value()
            zk.update_user_config(user, lambda c, v=value: {**c, SCRAM: v})
    with running(cluster) as started:
        assert isinstance(started, SaslSslCluster)
        yield started


def test_the_checker_over_sasl_ssl_loses_nothing_across_a_kill_9_of_a_leader(
        cluster: SaslSslCluster) -> None:
    topic = cluster.create_topic("sasl-ssl-kill", partitions=3, replication_factor=3,
                                 **{"min.insync.replicas": "2"})
    run = ProducerRun(cluster.sasl_bootstrap, topic, rate=RATE,
                      config=cluster.checker_config()).start()
    watch = AckWatch(run).start()
    try:
        cluster.wait_for(lambda: all(acked(run, p) > 0 for p in range(3)), 30,
                         "first acknowledgements over SASL_SSL on every partition")
        victim = leaders(cluster, topic)[0]
        other = survivor(cluster, victim)
        cluster.brokers[victim].kill()
        cluster.wait_for(lambda: all(
            m.leader not in (victim, -1) and victim not in m.isrs
            for m in cluster.partitions(topic, other).values()),
            3 * SESSION_S, f"broker {victim} out of every leadership and ISR")
        wait_acks(cluster, run, f"with broker {victim} dead")
        cluster.start(victim)  # waits for its registration to expire, logged in
        cluster.wait_for(lambda: isrs_full(cluster, topic), 45,
                         f"broker {victim} back in every ISR (fetching over SASL_SSL)")
        wait_acks(cluster, run, "after the restart")
    finally:
        watch.stop()
        if run.running:
            with contextlib.suppress(Exception):
                run.stop(flush_timeout=5)
        cluster.ensure_all_running()
    judge(run, watch, "kill -9 of a leader over SASL_SSL")

    # what the brokers made in ZooKeeper is theirs alone to change
    with cluster.zookeeper() as zk:
        for path in (zk_data.broker_path(victim), f"/brokers/topics/{topic}"):
            acls = {(a.id.scheme, a.id.id, a.perms) for a in zk.kazoo.get_acls(path)[0]}
            assert acls == {("sasl", ZK_USER, 31), ("world", "anyone", 1)}, (path, acls)
        users = zk.kazoo.get_acls("/config/users/broker")[0]
        assert {(a.id.scheme, a.id.id) for a in users} == {("sasl", ZK_USER)}


def test_a_wrong_password_is_refused_on_the_sasl_ssl_listener(
        cluster: SaslSslCluster) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[Any] = []
    wrong = {**cluster.checker_config(), "sasl.password": "not-the-password",
             "bootstrap.servers": cluster.sasl_bootstrap, "error_cb": errors.append}
    admin = AdminClient(wrong)
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    admin.poll(1)  # delivers the errors to error_cb
    assert any(e.code() == KafkaError._AUTHENTICATION and "Authentication failed during "
               "authentication due to invalid credentials with SASL mechanism "
               "SCRAM-SHA-512" in e.str() for e in errors), errors
    good = {**cluster.checker_config(), "bootstrap.servers": cluster.sasl_bootstrap}
    assert set(AdminClient(good).list_topics(timeout=10).brokers) == {1, 2, 3}
