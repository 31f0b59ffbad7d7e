"""Kafka and Moldau clusters of the same shape on one ZooKeeper, for bench/kafka_peer.py.

The Kafka brokers are the compat lab's `KafkaBroker` (Apache Kafka 3.9.1 from the cached
Maven jars, kafka-server-start.sh's 1 GiB heap and kafka-run-class.sh's G1 flags via
compat/launcher.py), the Moldau brokers the tests' `BrokerProcess`; each system gets a
ZooKeeper chroot of its own and the same server.properties: Kafka's defaults, except the
internal topics' replication factor (the broker count) and no initial rebalance delay
(ConsumerPerformance joins a fresh group every run).
"""

from __future__ import annotations

import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _peer_servers as ps
import _support as s

KAFKA, MOLDAU = "Kafka", "Moldau"


def import_paths() -> None:
    """compat/ is a package at the checkout's root, moldau lives in broker/src."""
    for path in (s.REPO, s.REPO / "broker" / "src"):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))


def shared_properties(brokers: int) -> dict[str, str]:
    """What both systems' brokers get beyond Kafka's defaults."""
    internal_rf = str(brokers)
    return {"offsets.topic.replication.factor": internal_rf,
            "transaction.state.log.replication.factor": internal_rf,
            "transaction.state.log.min.isr": str(min(2, brokers)),
            "group.initial.rebalance.delay.ms": "0"}


@dataclass
class Cluster:
    """One system's brokers (compat's KafkaBroker or moldau's BrokerProcess)."""

    name: str
    brokers: list[Any]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def pids(self) -> list[int]:
        pids = [b.process.pid if self.name == KAFKA else b.pid() for b in self.brokers]
        if any(pid is None for pid in pids):
            raise RuntimeError(f"a {self.name} broker is not running")
        return pids

    def _processes(self) -> list[int]:
        """The brokers' pids and those of any processes they started."""
        out = []
        for pid in self.pids():
            out += [pid, *_descendants(pid)]
        return out

    def cpu_seconds(self) -> float:
        """User and system CPU time of the brokers (and any processes they started)."""
        return sum(ps.cpu_seconds(pid) for pid in self._processes())

    def rss_bytes(self) -> int:
        return sum(ps.rss_bytes(pid) for pid in self._processes())

    def data_dirs(self) -> list[str]:
        return [str(b.data_dir) for b in self.brokers]

    def stop(self) -> None:
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            list(pool.map(lambda b: b.stop(), self.brokers))


def _descendants(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            out += [int(child), *_descendants(int(child))]
    return out


@dataclass
class Pair:
    """The two clusters of one shape, side by side on one ZooKeeper."""

    kafka: Cluster
    moldau: Cluster

    def __getitem__(self, name: str) -> Cluster:
        return self.kafka if name == KAFKA else self.moldau

    def stop(self) -> None:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(Cluster.stop, (self.kafka, self.moldau)))


def start_pair(workdir: Path, zookeeper: str, brokers: int) -> Pair:
    """`brokers` Kafka and `brokers` Moldau brokers, ids 1..n, Kafka's JVMs starting
    while Moldau's brokers do."""
    import_paths()
    from compat.lab import KafkaBroker
    from moldau.devcluster.brokers import BrokerProcess

    run = uuid.uuid4().hex[:8]
    props = shared_properties(brokers)
    kafka = Cluster(KAFKA, [
        KafkaBroker(workdir / f"kafka{brokers}-{i}", f"{zookeeper}/kafka{brokers}-{run}",
                    broker_id=i, properties=props) for i in range(1, brokers + 1)])
    moldau = Cluster(MOLDAU, [
        BrokerProcess(str(workdir / f"moldau{brokers}-{i}"), i,
                      f"{zookeeper}/moldau{brokers}-{run}", properties=props)
        for i in range(1, brokers + 1)])
    pair = Pair(kafka, moldau)
    try:
        for broker in kafka.brokers:
            broker.start()
        for broker in moldau.brokers:
            broker.start(wait=None)
        for broker in moldau.brokers:
            broker.wait_healthy(120)
        for broker in kafka.brokers:
            broker.wait_ready(180)
        for cluster in (kafka, moldau):
            ps.warm_group_coordinator(cluster.bootstrap, "kafka-peer-warmup")
    except BaseException:
        pair.stop()
        raise
    return pair


def create_topic(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    """A topic with every replica in sync (min.insync.replicas 2 at RF 3), leaders known."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "2"} if rf == 3 else {}
    admin.create_topics([NewTopic(name, partitions, rf, config=config)])[name].result(120)

    def ready() -> bool:
        meta = admin.list_topics(name, timeout=10).topics[name]
        return (meta.error is None and len(meta.partitions) == partitions
                and all(p.leader >= 0 and len(p.isrs) == rf for p in meta.partitions.values()))

    s.wait_until(ready, 180, f"topic {name}")


def delete_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient

    if names:
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until answered
        for future in admin.delete_topics(names).values():
            future.result(120)
