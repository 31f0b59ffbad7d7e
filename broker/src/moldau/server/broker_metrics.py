"""The broker's metrics under Kafka's MBean names (see moldau.metrics.registry).

BrokerTopicMetrics come broker-wide (no tag) and per topic (`topic=<name>`), except the
replication byte rates, which Kafka keeps broker-wide only. ReplicaManager and
KafkaController gauges are read from the live state when asked; the controller ones
count only on the active controller, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.metrics.process import process_bean
from moldau.metrics.registry import Meter, MetricsRegistry, mbean_name

if TYPE_CHECKING:
    from .broker import Broker

SERVER, CONTROLLER, LOG, CLUSTER = "kafka.server", "kafka.controller", "kafka.log", "kafka.cluster"
TOPIC_METERS = ("MessagesInPerSec", "BytesInPerSec", "BytesOutPerSec", "BytesRejectedPerSec",
                "TotalProduceRequestsPerSec", "FailedProduceRequestsPerSec",
                "TotalFetchRequestsPerSec", "FailedFetchRequestsPerSec")
BROKER_ONLY_METERS = ("ReplicationBytesInPerSec", "ReplicationBytesOutPerSec")


class BrokerTopicStats:
    """Kafka's BrokerTopicStats: each mark counts broker-wide and for its topic."""

    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = registry
        self.all = {n: registry.meter(SERVER, "BrokerTopicMetrics", n)
                    for n in TOPIC_METERS + BROKER_ONLY_METERS}
        self.topics: dict[str, dict[str, Meter]] = {}

    def mark(self, name: str, topic: str, n: int = 1) -> None:
        self.all[name].mark(n)
        meters = self.topics.get(topic)
        if meters is None:
            tags = (("topic", topic),)
            meters = self.topics[topic] = {
                m: self.registry.meter(SERVER, "BrokerTopicMetrics", m, tags)
                for m in TOPIC_METERS}
        meters[name].mark(n)

    def mark_broker(self, name: str, n: int) -> None:
        """A broker-wide only meter (replication traffic)."""
        self.all[name].mark(n)

    def remove_topic(self, topic: str) -> None:
        if self.topics.pop(topic, None) is not None:
            for name in TOPIC_METERS:
                self.registry.remove(SERVER, "BrokerTopicMetrics", name, (("topic", topic),))


def register_state_gauges(registry: MetricsRegistry, broker: Broker) -> None:
    """ReplicaManager and KafkaController gauges over the broker's live state."""

    def partitions() -> list:
        return list(broker.replica_manager.partitions.values()) if broker.replica_manager else []

    def leading() -> list:
        return [p for p in partitions() if p.is_leader]

    def isr_vs_min(p: object) -> int:
        isr, minimum = len(p.state.isr), p.log.config.min_insync_replicas  # type: ignore[attr-defined]
        return (isr > minimum) - (isr < minimum)

    rm = "ReplicaManager"
    registry.gauge(SERVER, rm, "PartitionCount", lambda: len(partitions()))
    registry.gauge(SERVER, rm, "LeaderCount", lambda: len(leading()))
    registry.gauge(SERVER, rm, "UnderReplicatedPartitions", lambda: sum(
        1 for p in leading() if len(p.state.isr) < len(p.state.replicas)))
    registry.gauge(SERVER, rm, "UnderMinIsrPartitionCount", lambda: sum(
        1 for p in leading() if isr_vs_min(p) < 0))
    registry.gauge(SERVER, rm, "AtMinIsrPartitionCount", lambda: sum(
        1 for p in leading() if isr_vs_min(p) == 0))
    registry.gauge(SERVER, rm, "OfflineReplicaCount", lambda: len(broker.offline_partitions))

    def controller_decisions() -> list:
        controller = broker.controller
        if controller is None or not controller.active:
            return []
        return [d for t in controller.topics.values() for d in t.partitions.values()]

    def active() -> bool:
        return broker.controller is not None and broker.controller.active

    kc = "KafkaController"
    registry.gauge(CONTROLLER, kc, "ActiveControllerCount", lambda: int(active()))
    registry.gauge(CONTROLLER, kc, "OfflinePartitionsCount", lambda: sum(
        1 for d in controller_decisions() if d.leader < 0))
    registry.gauge(CONTROLLER, kc, "PreferredReplicaImbalanceCount", lambda: sum(
        1 for d in controller_decisions() if d.replicas and d.leader != d.replicas[0]))
    registry.gauge(CONTROLLER, kc, "GlobalTopicCount", lambda: len(
        broker.controller.topics) if active() else 0)  # type: ignore[union-attr]
    registry.gauge(CONTROLLER, kc, "GlobalPartitionCount", lambda: len(controller_decisions()))

    registry.gauge(LOG, "LogManager", "OfflineLogDirectoryCount", lambda: len(
        broker.log_manager.offline_dirs) if broker.log_manager else 0)
    for field, name in (("read_bytes", "linux-disk-read-bytes"),
                        ("write_bytes", "linux-disk-write-bytes")):
        registry.gauge(SERVER, "KafkaServer", name, lambda f=field: _proc_io().get(f, 0))
    registry.add_provider(lambda: partition_beans(partitions()))
    registry.add_provider(process_bean)


def partition_beans(partitions: list) -> dict[str, dict[str, object]]:
    """Kafka's per-partition MBeans: Log (every replica) and Partition (its values count
    on the leader only, as in Kafka)."""
    beans: dict[str, dict[str, object]] = {}
    for p in partitions:
        tags = (("topic", p.topic), ("partition", str(p.index)))
        plog = p.log
        for name, value in (("Size", plog.size_in_bytes()), ("LogEndOffset", plog.log_end_offset),
                            ("LogStartOffset", plog.log_start_offset),
                            ("NumLogSegments", len(plog.segments))):
            beans[mbean_name(LOG, "Log", name, tags)] = {"Value": value}
        leader = p.is_leader
        isr, replicas = len(p.state.isr), len(p.state.replicas)
        minimum = plog.config.min_insync_replicas
        for name, value in (("UnderReplicated", int(leader and isr < replicas)),
                            ("InSyncReplicasCount", isr if leader else 0),
                            ("ReplicasCount", replicas if leader else 0),
                            ("UnderMinIsr", int(leader and isr < minimum)),
                            ("AtMinIsr", int(leader and isr == minimum))):
            beans[mbean_name(CLUSTER, "Partition", name, tags)] = {"Value": value}
    return beans


def _proc_io() -> dict[str, int]:
    """This process's /proc/self/io (Linux): bytes it made the disks read and write."""
    try:
        with open("/proc/self/io") as fh:
            return {k: int(v) for k, _, v in (line.partition(": ") for line in fh) if v}
    except (OSError, ValueError):
        return {}
