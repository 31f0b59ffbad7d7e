"""Replication tests: three real broker processes on 127.0.0.1 in one ZooKeeper chroot of
the session's real three-node ensemble, driven by confluent-kafka and the durability
checker. Timers are short so faults resolve in test time: ZooKeeper sessions of 6 s,
replica.lag.time.max.ms of 3 s, controlled shutdown retries 0.5 s apart."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from moldau.cluster import zk_data
from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess

T = TypeVar("T")

SESSION_S = 6.0  # zookeeper.session.timeout.ms below

CLUSTER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "6",
    "num.partitions": "1",
    "default.replication.factor": "3",
    # leaders stay where the tests put them (test_leader_balance.py turns it on)
    "auto.leader.rebalance.enable": "false",
}


@dataclass
class Cluster:
    brokers: dict[int, BrokerProcess]
    zk_connect: str  # with the chroot

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.pid() is not None)

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def partitions(self, topic: str, via: int | None = None) -> dict[int, Any]:
        """{partition: metadata} as a broker's metadata cache has it."""
        from confluent_kafka.admin import AdminClient

        server = self.bootstrap if via is None else self.brokers[via].bootstrap
        client = AdminClient({"bootstrap.servers": server})
        deadline = time.monotonic() + 10
        while True:
            # a broker learns of a new topic a moment after the controller made it
            # (UpdateMetadata): until then it answers without partitions
            found = client.list_topics(topic, timeout=10).topics[topic]
            if (found.partitions and found.error is None) or time.monotonic() > deadline:
                return dict(found.partitions)
            time.sleep(0.1)

    def create_topic(self, prefix: str, partitions: int = 3, replication_factor: int = 3,
                     **config: str) -> str:
        from confluent_kafka.admin import NewTopic

        name = f"{prefix}-{uuid.uuid4().hex[:8]}"

        def create(admin: Any) -> None:
            futures = admin.create_topics(
                [NewTopic(name, partitions, replication_factor, config=config)],
                operation_timeout=30)
            futures[name].result(30)

        self.on_controller(create)
        self.wait_for(lambda: all(len(p.isrs) == replication_factor
                                  for p in self.partitions(name).values()),
                      30, f"{name}: every partition with a full ISR")
        # Metadata can name a leader a moment before that broker has applied its
        # LeaderAndIsr (a loaded machine stretches the moment): wait until each leader
        # answers for its partition, as a client's retries would.
        for index, meta in self.partitions(name).items():
            leader = meta.leader
            self.wait_for(lambda i=index, b=leader: self.leader_serves(name, i, b), 30,
                          f"{name}-{index}: its leader {leader} serving it")
        return name

    def on_controller(self, call: Callable[[Any], T], timeout: float = 30) -> T:
        """Run an admin call that goes to the controller, again while it answers
        NOT_CONTROLLER. librdkafka sends such calls to the controller its metadata names
        and does not retry: right after a fault test the controller may have moved and a
        broker's metadata may name the old one until UpdateMetadata reaches it. Kafka's
        Java admin client retries; so does this helper. The call gets a fresh admin
        client each time (one that knew a stopped controller keeps waiting for it) and
        may raise NOT_CONTROLLER or return it as a per-partition KafkaError."""
        from confluent_kafka import KafkaError, KafkaException

        deadline = time.monotonic() + timeout
        while True:
            admin = self.admin()  # held until the answer: its destruction fails futures
            try:
                outcome = call(admin)
            except KafkaException as exc:
                if (exc.args[0].code() != KafkaError.NOT_CONTROLLER
                        or time.monotonic() > deadline):
                    raise
            else:
                if (not isinstance(outcome, KafkaError)
                        or outcome.code() != KafkaError.NOT_CONTROLLER
                        or time.monotonic() > deadline):
                    return outcome
            time.sleep(0.5)

    def leader_serves(self, topic: str, partition: int, broker_id: int) -> bool:
        """Whether the broker answers ListOffsets for the partition without an error."""
        from moldau.client.blocking import BlockingConnection
        from moldau.protocol.generated.list_offsets_request import ListOffsetsRequest

        latest = ListOffsetsRequest.ListOffsetsPartition(partition_index=partition,
                                                          timestamp=-1)
        with BlockingConnection("127.0.0.1", self.brokers[broker_id].port) as conn:
            answer = conn.request_by_name(
                "ListOffsets", 1, replica_id=-1, isolation_level=0,
                topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[latest])])
        return bool(answer.topics[0].partitions[0].error_code == 0)

    def wait_for(self, condition: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = condition()
            except Exception as exc:  # a broker restarting: keep asking
                value, error = None, exc
            else:
                error = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                                     + (f" (last error: {error})" if error else "")
                                     + "\n" + self.log_tails())
            time.sleep(0.2)

    def wait_gone(self, broker_id: int, timeout: float = 20) -> None:
        """Until the controller has noticed a killed broker (its ZooKeeper session ended):
        only then can it register again, as in Kafka."""
        from confluent_kafka.admin import AdminClient

        def gone() -> bool:
            metadata = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(
                timeout=10)
            return broker_id not in metadata.brokers

        self.wait_for(gone, timeout, f"broker {broker_id} gone from the cluster metadata")

    def log_tails(self, lines: int = 15) -> str:
        return "\n".join(f"--- broker {i}\n{b.tail(lines)}" for i, b in self.brokers.items())

    @contextlib.contextmanager
    def zookeeper(self) -> Iterator[KafkaZkClient]:
        host, chroot = self.zk_connect.split("/", 1)
        with KafkaZkClient(host, "/" + chroot, session_timeout_ms=int(SESSION_S * 1000),
                           connection_timeout_ms=15000) as zk:
            yield zk

    def start(self, broker_id: int) -> None:
        """Start a stopped broker. After a kill -9 its registration lives on until its
        ZooKeeper session expires, and like Kafka a broker does not start while its id is
        registered by another session: wait for that first."""
        with self.zookeeper() as zk:
            self.wait_for(lambda: not zk.exists(zk_data.broker_path(broker_id)),
                          3 * SESSION_S, f"broker {broker_id}'s old registration to expire")
        self.brokers[broker_id].start()

    def ensure_all_running(self) -> None:
        for broker_id, broker in self.brokers.items():
            if broker.pid() is None:
                self.start(broker_id)


def make_cluster(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any,
                 racks: dict[int, str] | None = None, hosts: dict[int, str] | None = None,
                 **overrides: str) -> Cluster:
    """Three brokers (not started) in a fresh chroot, with the test properties; `hosts`
    sets `moldau.broker.host` of the brokers it names."""
    connect = zk_ensemble.connect_string + f"/moldau-{uuid.uuid4().hex[:12]}"
    brokers = {}
    for i in (1, 2, 3):
        rack = {"broker.rack": racks[i]} if racks else {}
        host = {"moldau.broker.host": hosts[i]} if hosts and i in hosts else {}
        brokers[i] = BrokerProcess(str(tmp_path_factory.mktemp(f"broker{i}")), i, connect,
                                   properties={**CLUSTER_PROPERTIES, **overrides, **rack,
                                               **host})
    return Cluster(brokers, connect)


def stop_cluster(cluster: Cluster) -> None:
    codes = {i: b.stop() for i, b in cluster.brokers.items() if b.pid() is not None}
    assert all(code == 0 for code in codes.values()), codes


@contextlib.contextmanager
def running(cluster: Cluster) -> Iterator[Cluster]:
    """Start the cluster's brokers; on the way out every one must stop cleanly."""
    try:
        for broker in cluster.brokers.values():
            broker.start()
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[Cluster]:
    with running(make_cluster(tmp_path_factory, zk_ensemble)) as started:
        yield started
