"""`make test-long` (MOLDAU_LONG=1): Kafka's AclAuthorizer across three real brokers in a
real ZooKeeper ensemble, the way an operator meets it.

The brokers talk to each other over SASL_PLAINTEXT as `User:broker` (SCRAM-SHA-512, the
credentials in ZooKeeper before the first start), so a broker has a principal of its own
that differs from the clients' (`User:admin`, the checker's `User:app`, `User:probe`).

1. The authorizer turned on in the running cluster as docs/security.md tells (and
   playbooks/enable-authorizer.yml does): `User:broker` and `User:admin` in super.users,
   the checker's ACLs seeded through ZooKeeper with kafka-acls --authorizer-properties,
   then each broker restarted in turn with authorizer.class.name while the durability
   checker produces with acks=all to an RF 3, min ISR 2 topic, the ISR whole again before
   the next broker. The checker must lose nothing, no record may fail, and no broker's
   kafka-authorizer.log may deny `User:broker` anything.
2. An ACL created through one broker (CreateAcls, an admin client bootstrapped to it
   alone) applies on each of the three within 1 s, and so does its removal: measured per
   broker as the first moment a request by the principal is allowed (then refused) there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from moldau.checker.cli import create_topic
from moldau.checker.consumer import verify
from moldau.checker.producer import ProducerRun
from moldau.client.blocking import BlockingConnection
from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.security.sasl.scram import ScramClient
from moldau.security.sasl.scram_credentials import ScramMechanism, derive_credential

pytestmark = pytest.mark.skipif(os.environ.get("MOLDAU_LONG") != "1",
                                reason="make test-long only (MOLDAU_LONG=1)")

MECHANISM = ScramMechanism.SCRAM_SHA_512
USERS = {"broker": "broker-secret", "admin": "admin-secret", "app": "app-secret",
         "probe": "probe-secret"}
SUPER_USERS = "User:broker;User:admin"
AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": SUPER_USERS}
TOPIC_AUTHORIZATION_FAILED = 29
PROPAGATION_LIMIT_S = 1.0
# the replication tests' short timers, so a restart resolves in test time
TIMERS = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "3000",
          "controlled.shutdown.retry.backoff.ms": "500",
          "auto.leader.rebalance.enable": "false"}


@dataclass
class SaslCluster:
    brokers: dict[int, BrokerProcess]
    sasl_ports: dict[int, int]
    zk_connect: str  # with the chroot

    def bootstrap(self, *broker_ids: int) -> str:
        ids = broker_ids or tuple(self.brokers)
        return ",".join(f"127.0.0.1:{self.sasl_ports[i]}" for i in ids)

    def client(self, user: str, *broker_ids: int) -> dict[str, Any]:
        """librdkafka settings logging in as `user` (to these brokers only, if named)."""
        return {"bootstrap.servers": self.bootstrap(*broker_ids),
                "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": MECHANISM.mechanism_name,
                "sasl.username": user, "sasl.password": USERS[user]}

    def connect(self, broker_id: int, user: str) -> BlockingConnection:
        """One SASL connection to one broker, so that broker alone answers."""
        return BlockingConnection("127.0.0.1", self.sasl_ports[broker_id],
                                  sasl=lambda: ScramClient(MECHANISM, user, USERS[user]))

    def kafka_acls(self, *args: str) -> None:
        """Kafka's kafka-acls through ZooKeeper, as an operator seeds a cluster."""
        tool = Path(sys.executable).parent / "kafka-acls"
        subprocess.run([str(tool), "--authorizer-properties",
                        f"zookeeper.connect={self.zk_connect}", *args],
                       check=True, capture_output=True, text=True, timeout=60)

    def isr_whole(self, topic: str) -> bool:
        host, chroot = self.zk_connect.split("/", 1)
        with KafkaZkClient(host, "/" + chroot) as zk:
            states = zk.get_partition_states(topic)
        return bool(states) and all(len(state.isr) == len(self.brokers)
                                    for state, _ in states.values())

    def authorizer_log(self, broker_id: int) -> str:
        path = Path(self.brokers[broker_id].log_dir) / "kafka-authorizer.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def tails(self) -> str:
        return "\n".join(f"--- broker {i}\n{b.tail(15)}" for i, b in self.brokers.items())


def wait_for(condition: Callable[[], Any], timeout: float, what: str,
             cluster: SaslCluster) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n"
                                 + cluster.tails())
        time.sleep(0.2)


def register_users(zk_connect: str) -> None:
    """The SCRAM credentials in ZooKeeper before any broker starts (kafka-configs
    --zookeeper in Kafka 3.9): the brokers log in to each other as `broker`."""
    host, chroot = zk_connect.split("/", 1)
    with KafkaZkClient(host) as root:
        root.ensure_path("/" + chroot)
    with KafkaZkClient(host, "/" + chroot) as zk:
        zk.ensure_path("/config/users")
        for user, password in USERS.items():
            value = derive_credential(MECHANISM, password, 4096).to_config_value()

            def with_credential(config: dict[str, str], v: str = value) -> dict[str, str]:
                return {**config, MECHANISM.mechanism_name: v}

            zk.update_user_config(user, with_credential)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[SaslCluster]:
    connect = zk_ensemble.connect_string + f"/authz-long-{uuid.uuid4().hex[:8]}"
    register_users(connect)
    brokers, sasl_ports = {}, {}
    for broker_id in (1, 2, 3):
        plain, sasl = free_port(), free_port()
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": MECHANISM.mechanism_name,
            "sasl.mechanism.inter.broker.protocol": MECHANISM.mechanism_name,
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
                'org.apache.kafka.common.security.scram.ScramLoginModule required '
                f'username="broker" password="{USERS["broker"]}";',
            "num.partitions": "1", "default.replication.factor": "3",
            "offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "3",
            "auto.create.topics.enable": "false", **TIMERS,
        }
        brokers[broker_id] = BrokerProcess(str(tmp_path_factory.mktemp(f"authz{broker_id}")),
                                           broker_id, connect, port=plain, properties=props)
        sasl_ports[broker_id] = sasl
    started = SaslCluster(brokers, sasl_ports, connect)
    try:
        for broker in brokers.values():
            broker.start(wait=60)
        yield started
    finally:
        codes = {i: b.stop() for i, b in brokers.items() if b.pid() is not None}
        assert all(code == 0 for code in codes.values()), codes


def topic_error(conn: BlockingConnection, topic: str) -> int:
    answer = conn.request_by_name("Metadata", 1,
                                  topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
    return int(answer.topics[0].error_code)


def restart_with_authorizer(cluster: SaslCluster, broker_id: int, topic: str) -> None:
    """One step of the roll: SIGTERM (controlled shutdown), the new server.properties,
    start, then the topic's ISR whole again before the next broker."""
    broker = cluster.brokers[broker_id]
    assert broker.stop() == 0, broker.tail()
    broker.properties = {**broker.properties, **AUTHORIZER}
    broker.write_config()
    broker.start(wait=60)
    wait_for(lambda: cluster.isr_whole(topic), 60, f"{topic}'s ISR whole after broker "
             f"{broker_id}'s restart", cluster)


def enable_authorizer(cluster: SaslCluster, topic: str) -> None:
    for broker_id, broker in cluster.brokers.items():
        if broker.properties.get("authorizer.class.name") != AUTHORIZER["authorizer.class.name"]:
            restart_with_authorizer(cluster, broker_id, topic)


def test_authorizer_turned_on_in_a_running_cluster_under_the_checker(
        cluster: SaslCluster) -> None:
    topic = f"authz-durability-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, partitions=3, replication_factor=3,
                 min_insync_replicas=2, config=cluster.client("admin"))
    wait_for(lambda: cluster.isr_whole(topic), 30, f"{topic}'s ISR whole", cluster)
    # the checker's ACLs, seeded through ZooKeeper before any broker enforces them
    cluster.kafka_acls("--add", "--allow-principal", "User:app", "--producer", "--idempotent",
                       "--topic", topic)
    cluster.kafka_acls("--add", "--allow-principal", "User:app", "--operation", "Read",
                       "--topic", topic)
    cluster.kafka_acls("--add", "--allow-principal", "User:app", "--operation", "Read",
                       "--group", "moldau-checker-", "--resource-pattern-type", "prefixed")

    run = ProducerRun(cluster.bootstrap(), topic, rate=200, config=cluster.client("app"))
    run.start()
    time.sleep(2)
    enable_authorizer(cluster, topic)
    time.sleep(3)  # acks=all writes through brokers that all enforce the ACLs
    report = verify(run)

    assert report.ok, report.summary()
    totals = report.totals()
    assert totals["acknowledged"] > 1000, report.summary()
    assert totals["failed"] == 0 and totals["in_doubt"] == 0, report.summary()
    for broker_id in cluster.brokers:
        log = cluster.authorizer_log(broker_id)
        denied = [line for line in log.splitlines()
                  if "is Denied" in line and "Principal = User:broker " in line]
        assert not denied, f"broker {broker_id} denied the brokers' principal:\n" + "\n".join(
            denied[:10])
    # every broker enforces: a principal without ACLs is refused the topic on each
    for broker_id in cluster.brokers:
        with cluster.connect(broker_id, "probe") as conn:
            assert topic_error(conn, topic) == TOPIC_AUTHORIZATION_FAILED, broker_id


def first_answers(cluster: SaslCluster, topic: str, wanted: int,
                  started: float, timeout: float = 10.0) -> dict[int, float]:
    """Seconds after `started` at which each broker first answered `topic` with error
    `wanted` to User:probe, asked every 10 ms over one connection per broker."""
    connections = {i: cluster.connect(i, "probe") for i in cluster.brokers}
    seen: dict[int, float] = {}
    try:
        deadline = time.monotonic() + timeout
        while len(seen) < len(connections) and time.monotonic() < deadline:
            for broker_id, conn in connections.items():
                if broker_id not in seen and topic_error(conn, topic) == wanted:
                    seen[broker_id] = time.monotonic() - started
            time.sleep(0.01)
    finally:
        for conn in connections.values():
            conn.close()
    return seen


def test_an_acl_created_through_one_broker_applies_on_all_three_within_a_second(
        cluster: SaslCluster) -> None:
    topic = f"authz-propagation-{uuid.uuid4().hex[:6]}"
    create_topic(cluster.bootstrap(), topic, partitions=1, replication_factor=3,
                 min_insync_replicas=2, config=cluster.client("admin"))
    enable_authorizer(cluster, topic)  # already on when the test above ran first
    for broker_id in cluster.brokers:
        with cluster.connect(broker_id, "probe") as conn:
            assert topic_error(conn, topic) == TOPIC_AUTHORIZATION_FAILED, broker_id

    admin = AdminClient(cluster.client("admin", 1))  # broker 1 only takes the change
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:probe",
                         "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    started = time.monotonic()
    admin.create_acls([binding])[binding].result(10)
    allowed = first_answers(cluster, topic, 0, started)

    removal = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL,
                               "User:probe", "*", AclOperation.ANY, AclPermissionType.ANY)
    started = time.monotonic()
    assert len(admin.delete_acls([removal])[removal].result(10)) == 1
    refused = first_answers(cluster, topic, TOPIC_AUTHORIZATION_FAILED, started)

    print(f"\nACL applied after {allowed} s, removed after {refused} s (per broker)")
    assert set(allowed) == set(cluster.brokers), allowed
    assert set(refused) == set(cluster.brokers), refused
    assert max(allowed.values()) <= PROPAGATION_LIMIT_S, allowed
    assert max(refused.values()) <= PROPAGATION_LIMIT_S, refused
