"""What this broker knows about the cluster (Kafka's ZkMetadataCache).

The controller keeps it current (through UpdateMetadata in a multi-broker cluster; by a
direct call while this broker is its own controller). Metadata, DescribeCluster and the
admin handlers read it; nothing here talks to ZooKeeper.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from moldau.protocol._runtime import ZERO_UUID


@dataclass(frozen=True)
class BrokerEndpoints:
    broker_id: int
    endpoints: dict[str, tuple[str, int]]  # listener name -> (host, port)
    rack: str | None = None


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    offline_replicas: list[int] = field(default_factory=list)


@dataclass
class TopicInfo:
    name: str
    topic_id: UUID
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)

    @property
    def internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class MetadataCache:
    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.cluster_id = ""
        self.controller_id = -1
        self.brokers: dict[int, BrokerEndpoints] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topic_names: dict[UUID, str] = {}
        # False until the controller's first UpdateMetadata is applied: until then an
        # absent topic is unknown to this broker, not to the cluster
        self.initialized = False

    # --- updates (the controller's side) ----------------------------------------------

    def set_brokers(self, brokers: list[BrokerEndpoints]) -> None:
        self.brokers = {b.broker_id: b for b in brokers}

    def put_topic(self, info: TopicInfo) -> None:
        old = self.topics.get(info.name)
        if old is not None and old.topic_id != info.topic_id:
            self.topic_names.pop(old.topic_id, None)
        self.topics[info.name] = info
        if info.topic_id != ZERO_UUID:  # Kafka's "no id" (IBP below 2.8-IV1) names nothing
            self.topic_names[info.topic_id] = info.name

    def update_partition(self, topic: str, info: PartitionInfo) -> None:
        self.topics[topic].partitions[info.partition] = info

    def remove_topic(self, name: str) -> None:
        info = self.topics.pop(name, None)
        if info is not None:
            self.topic_names.pop(info.topic_id, None)

    # --- queries ----------------------------------------------------------------------

    def alive_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def endpoint(self, broker_id: int, listener: str) -> tuple[str, int] | None:
        broker = self.brokers.get(broker_id)
        return None if broker is None else broker.endpoints.get(listener)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        info = self.topics.get(topic)
        return None if info is None else info.partitions.get(partition)

    def topic_id(self, topic: str) -> UUID | None:
        info = self.topics.get(topic)
        return None if info is None else info.topic_id
