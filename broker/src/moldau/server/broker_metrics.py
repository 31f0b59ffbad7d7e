"""The broker's metrics under Kafka's MBean names (see moldau.metrics.registry).

BrokerTopicMetrics come broker-wide (no tag) and per topic (`topic=<name>`), except the
replication byte rates, which Kafka keeps broker-wide only. ReplicaManager and
KafkaController gauges are read from the live state when asked; the controller ones
count only on the active controller, as in Kafka.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import psutil

from moldau.metrics.process import process_bean
from moldau.metrics.registry import Meter, MetricsRegistry, mbean_name
from moldau.storage.index_mappings import MAPPED_INDEXES, max_map_count
from moldau.storage.log import PartitionLog

if TYPE_CHECKING:
    from moldau.cluster.controller import Controller
    from moldau.replication.replica_fetcher import ReplicaFetcherManager
    from moldau.replication.replica_manager import Partition, ReplicaManager
    from moldau.security.tls import TlsContextHolder
    from moldau.storage.log_manager import LogManager

    from .network import SocketServer

SERVER, CONTROLLER, LOG, CLUSTER = "kafka.server", "kafka.controller", "kafka.log", "kafka.cluster"
NETWORK = "kafka.network"
TOPIC_METERS = ("MessagesInPerSec", "BytesInPerSec", "BytesOutPerSec", "BytesRejectedPerSec",
                "TotalProduceRequestsPerSec", "FailedProduceRequestsPerSec",
                "TotalFetchRequestsPerSec", "FailedFetchRequestsPerSec",
                "FetchMessageConversionsPerSec")
BROKER_ONLY_METERS = ("ReplicationBytesInPerSec", "ReplicationBytesOutPerSec",
                      "ReassignmentBytesInPerSec", "ReassignmentBytesOutPerSec")


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

    def produced(self, topic: str, messages: int, nbytes: int) -> None:
        """A partition's append of a produce request: MessagesInPerSec, BytesInPerSec and
        TotalProduceRequestsPerSec, broker-wide and for the topic, in one call."""
        meters = self.topics.get(topic)
        if meters is None:
            self.mark("TotalProduceRequestsPerSec", topic)  # makes the topic's meters
            meters = self.topics[topic]
        else:
            self.all["TotalProduceRequestsPerSec"].mark(1)
            meters["TotalProduceRequestsPerSec"].mark(1)
        self.all["MessagesInPerSec"].mark(messages)
        meters["MessagesInPerSec"].mark(messages)
        self.all["BytesInPerSec"].mark(nbytes)
        meters["BytesInPerSec"].mark(nbytes)

    def mark_broker(self, name: str, n: int) -> None:
        """A broker-wide only meter (replication traffic)."""
        self.all[name].mark(n)

    def remove_topic(self, topic: str) -> None:
        if self.topics.pop(topic, None) is not None:
            for name in TOPIC_METERS:
                self.registry.remove(SERVER, "BrokerTopicMetrics", name, (("topic", topic),))


@dataclass(frozen=True)
class MetricSources:
    """The broker's live state its gauges read when they are scraped. The registration
    comes first, so the parts the broker's start creates come as functions that return
    them (None until they exist)."""

    registry: MetricsRegistry
    tls_holders: Mapping[str, TlsContextHolder]  # filled in as the listeners open
    offline_partitions: Collection[tuple[str, int]]  # grows when a log dir fails
    replica_manager: Callable[[], ReplicaManager | None]
    log_manager: Callable[[], LogManager | None]
    fetchers: Callable[[], ReplicaFetcherManager | None]
    controller: Callable[[], Controller | None]
    socket_server: Callable[[], SocketServer | None]


def register_state_gauges(sources: MetricSources) -> None:
    """ReplicaManager and KafkaController gauges over the broker's live state."""
    registry = sources.registry

    def partitions() -> list[Partition]:
        replica_manager = sources.replica_manager()
        return list(replica_manager.partitions.values()) if replica_manager else []

    def leading() -> list[Partition]:
        return [p for p in partitions() if p.is_leader]

    def isr_vs_min(p: Partition) -> int:
        isr, minimum = len(p.state.isr), p.log.config.min_insync_replicas
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
    registry.gauge(SERVER, rm, "OfflineReplicaCount", lambda: len(sources.offline_partitions))

    def active_controller() -> Controller | None:
        controller = sources.controller()
        return controller if controller is not None and controller.active else None

    def controller_decisions() -> list:
        controller = active_controller()
        if controller is None:
            return []
        return [d for t in controller.topics.values() for d in t.partitions.values()]

    def active() -> bool:
        return active_controller() is not None

    def global_topics() -> int:
        controller = active_controller()
        return len(controller.topics) if controller is not None else 0

    kc = "KafkaController"
    registry.gauge(CONTROLLER, kc, "ActiveControllerCount", lambda: int(active()))
    registry.gauge(CONTROLLER, kc, "OfflinePartitionsCount", lambda: sum(
        1 for d in controller_decisions() if d.leader < 0))
    registry.gauge(CONTROLLER, kc, "PreferredReplicaImbalanceCount", lambda: sum(
        1 for d in controller_decisions() if d.replicas and d.leader != d.replicas[0]))
    registry.gauge(CONTROLLER, kc, "GlobalTopicCount", global_topics)
    registry.gauge(CONTROLLER, kc, "GlobalPartitionCount", lambda: len(controller_decisions()))

    def offline_dirs() -> int:
        log_manager = sources.log_manager()
        return len(log_manager.offline_dirs) if log_manager else 0

    registry.gauge(LOG, "LogManager", "OfflineLogDirectoryCount", offline_dirs)
    for field, name in (("read_bytes", "linux-disk-read-bytes"),
                        ("write_bytes", "linux-disk-write-bytes")):
        registry.gauge(SERVER, "KafkaServer", name, _disk_io_reader(field))
    registry.add_provider(lambda: partition_beans(partitions()))
    registry.add_provider(process_bean)
    # the index mappings against the kernel's limit, read live (a raised sysctl shows)
    registry.gauge("moldau", "Memory", "IndexMappings", lambda: MAPPED_INDEXES.mappings)
    registry.gauge("moldau", "Memory", "MaxMapCount", max_map_count)


def partition_beans(partitions: list) -> dict[str, dict[str, object]]:
    """Kafka's per-partition MBeans: Log (every replica) and Partition (its values count
    on the leader only, as in Kafka, except LastStableOffsetLag)."""
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
                            ("AtMinIsr", int(leader and isr == minimum)),
                            # every replica, as Kafka: records above the LSO (open or
                            # not yet replicated transactions)
                            ("LastStableOffsetLag",
                             plog.high_watermark - plog.last_stable_offset)):
            beans[mbean_name(CLUSTER, "Partition", name, tags)] = {"Value": value}
    return beans


class DelayedOperations:
    """One of Kafka's purgatories (Produce: acks=all waits; Fetch: long polls):
    NumDelayedOperations counts the waiting requests, PurgatorySize the partitions they
    watch (Kafka counts an operation once per key it watches)."""

    def __init__(self, registry: MetricsRegistry, kind: str) -> None:
        self.operations = 0
        self.watched = 0
        tags = (("delayedOperation", kind),)
        registry.gauge(SERVER, "DelayedOperationPurgatory", "NumDelayedOperations",
                       lambda: self.operations, tags)
        registry.gauge(SERVER, "DelayedOperationPurgatory", "PurgatorySize",
                       lambda: self.watched, tags)

    @contextmanager
    def waiting(self, keys: int) -> Iterator[None]:
        self.operations += 1
        self.watched += keys
        try:
            yield
        finally:
            self.operations -= 1
            self.watched -= keys


def register_network_gauges(registry: MetricsRegistry,
                            server: Callable[[], SocketServer | None]) -> None:
    """RequestChannel queue sizes and socket-server-metrics connection counts. One event
    loop plays every network processor here, so the processor is 0."""

    def responses_queued() -> int:
        s = server()
        return 0 if s is None else sum(
            1 for c in s.connections
            if c.transport is not None and c.transport.get_write_buffer_size() > 0)

    registry.gauge(NETWORK, "RequestChannel", "RequestQueueSize",
                   lambda: server().queue_bound.queued if server() else 0)  # type: ignore[union-attr]
    registry.gauge(NETWORK, "RequestChannel", "ResponseQueueSize", responses_queued)
    registry.gauge(NETWORK, "RequestChannel", "ResponseQueueSize", responses_queued,
                   (("processor", "0"),))

    def connection_counts() -> dict[str, dict[str, object]]:
        s = server()
        if s is None:
            return {}
        counts = {listener.name: 0 for listener in s.listeners}
        for c in s.connections:
            counts[c.listener.name] = counts.get(c.listener.name, 0) + 1
        return {f"{SERVER}:type=socket-server-metrics,listener={name},networkProcessor=0":
                {"connection-count": n} for name, n in counts.items()}

    registry.add_provider(connection_counts)


def register_fetcher_lag(registry: MetricsRegistry,
                         fetchers: Callable[[], ReplicaFetcherManager | None]) -> None:
    """ReplicaFetcherManager MaxLag and FetcherLagMetrics ConsumerLag per followed
    partition: the leader's high watermark in its last answer minus our log end."""

    def states() -> list:
        manager = fetchers()
        if manager is None:
            return []
        return [(f.name, s) for f in list(manager.fetchers.values())
                for s in list(f.states.values())]

    registry.gauge(SERVER, "ReplicaFetcherManager", "MaxLag",
                   lambda: max((s.lag for _, s in states()), default=0),
                   (("clientId", "Replica"),))
    registry.add_provider(lambda: {
        mbean_name(SERVER, "FetcherLagMetrics", "ConsumerLag",
                   (("clientId", name), ("topic", s.partition.topic),
                    ("partition", str(s.partition.index)))): {"Value": s.lag}
        for name, s in states()})


METRICS_ENABLED_ENV = "MOLDAU_METRICS_ENABLED"  # "false": the A/B benchmark's off switch


def metrics_enabled() -> bool:
    return os.environ.get(METRICS_ENABLED_ENV, "true").lower() not in ("false", "0", "no")


class NoTopicStats(BrokerTopicStats):
    """BrokerTopicStats that count nothing (metrics switched off)."""

    def mark(self, name: str, topic: str, n: int = 1) -> None:
        pass

    def produced(self, topic: str, messages: int, nbytes: int) -> None:
        pass

    def mark_broker(self, name: str, n: int) -> None:
        pass


def certificate_beans(tls_holders: Mapping[str, TlsContextHolder]
                      ) -> dict[str, dict[str, object]]:
    """When the certificate each TLS listener serves now expires (seconds since the epoch;
    a renewal reloaded at run time shows at once)."""
    beans: dict[str, dict[str, object]] = {}
    for listener, holder in tls_holders.items():
        certificate = holder.certificate
        if certificate is not None:
            beans[mbean_name("moldau", "Tls", "CertificateNotAfterSeconds",
                             (("listener", listener),))] = {
                "Value": certificate.not_valid_after_utc.timestamp()}
    return beans


def _disk_io_reader(field: str) -> Callable[[], int]:
    """A gauge's reader of the bytes this process made the disks read or write (psutil's
    io_counters: /proc/self/io on Linux); 0 where the platform does not count them."""

    def read() -> int:
        try:
            return int(getattr(psutil.Process().io_counters(), field))
        except (psutil.Error, AttributeError):
            return 0

    return read


def register_broker_metrics(sources: MetricSources) -> dict[str, DelayedOperations]:
    """The gauges over the broker's state, the flush timer, and the purgatories."""
    registry = sources.registry
    registry.add_provider(lambda: certificate_beans(sources.tls_holders))
    register_state_gauges(sources)
    register_network_gauges(registry, sources.socket_server)
    register_fetcher_lag(registry, sources.fetchers)
    PartitionLog.flush_listener = registry.timer(
        LOG, "LogFlushStats", "LogFlushRateAndTimeMs").update if metrics_enabled() else None
    return {kind: DelayedOperations(registry, kind) for kind in ("Produce", "Fetch")}
