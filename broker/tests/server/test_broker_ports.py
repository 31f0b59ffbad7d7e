"""The collaborators the composition root (server/broker.py) wires, built here from their
own narrow ports and no Broker: the controller's channel applies its own broker's requests
in place, the gauges read parts that exist only after the broker's start, a change of the
topic defaults reaches the running logs, and a controlled shutdown asks the controller
ZooKeeper names (a real ZooKeeper)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.cluster.controller import PartitionDecision
from moldau.cluster.controller_events import OfflineReplicas
from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import KafkaZkClient
from moldau.errors import KafkaStorageError
from moldau.metrics.registry import MetricsRegistry
from moldau.protocol._runtime import ZERO_UUID
from moldau.replication.protocol_versions import versions_for
from moldau.server.broker_metrics import MetricSources, register_broker_metrics
from moldau.server.config import BrokerConfig
from moldau.server.controlled_shutdown import ShutdownServices, controlled_shutdown
from moldau.server.controller_channel import NetworkControllerChannel
from moldau.server.dynamic_config import apply_log_defaults
from moldau.server.handlers.services import BrokerState
from moldau.server.metadata_cache import MetadataCache
from moldau.server.topic_configs import TopicConfigs
from moldau.storage.log import PartitionLog

ME = 1
TopicPartition = tuple[str, int]


def config(**values: object) -> BrokerConfig:
    return BrokerConfig.from_properties({"zookeeper.connect": "zk:2181", **values})


@dataclass
class Controller:
    """What the broker's parts read of its controller."""

    active: bool = True
    epoch: int = 3
    topics: dict[str, Any] = field(default_factory=dict)
    posted: list[object] = field(default_factory=list)
    shutdowns: list[tuple[int, int]] = field(default_factory=list)

    def post(self, event: object) -> None:
        self.posted.append(event)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int
                                  ) -> list[TopicPartition]:
        self.shutdowns.append((broker_id, broker_epoch))
        return []


class PartitionStates:
    """Records the controller's requests applied to this broker; LeaderAndIsr reports
    the partitions of `failed` as on a failed log dir."""

    def __init__(self, failed: list[TopicPartition]) -> None:
        self.failed = failed
        self.applied: list[tuple[str, object]] = []
        self.metadata_decisions: list[PartitionDecision] = []

    async def load_topic_overrides(self, topics: set[str]) -> None:
        self.applied.append(("overrides", topics))

    async def apply_leader_and_isr(self, decisions: list[object]) -> dict[TopicPartition, int]:
        self.applied.append(("leader_and_isr", decisions))
        return dict.fromkeys(self.failed, KafkaStorageError.code)

    def apply_update_metadata(self, live: list[object], decisions: list[PartitionDecision],
                              deleted: list[str]) -> None:
        self.applied.append(("update_metadata", deleted))
        self.metadata_decisions = decisions

    async def apply_stop_replica(self, partitions: list[TopicPartition], delete: bool) -> None:
        self.applied.append(("stop_replica", (partitions, delete)))


def test_the_controller_channel_applies_its_own_brokers_requests_in_place() -> None:
    states = PartitionStates(failed=[("orders", 0)])
    metadata = MetadataCache(ME)
    controller = Controller()
    cfg = config()
    channel = NetworkControllerChannel(
        ME, cfg, versions_for(cfg["inter.broker.protocol.version"]), lambda: None,
        states, metadata, lambda: controller)  # type: ignore[arg-type,return-value]

    async def run() -> None:
        await channel.leader_and_isr(ME, [])
        await channel.update_metadata([ME], [], [], ["gone"])
        await channel.stop_replica(ME, [("orders", 1)], True)

    asyncio.run(run())
    assert states.applied == [("overrides", set()), ("leader_and_isr", []),
                              ("update_metadata", ["gone"]),
                              ("stop_replica", ([("orders", 1)], True))]
    # the replica on a failed log dir goes to the active controller
    assert controller.posted == [OfflineReplicas(ME, (("orders", 0),))]
    assert channel.senders == {}  # nothing went over the network
    channel.controller_moved(2)
    assert metadata.controller_id == 2


@pytest.mark.parametrize(("ibp", "carries_ids"), [("2.8-IV0", False), ("2.8-IV1", True)])
def test_the_controllers_own_broker_sees_the_ids_the_wire_would_carry(
        ibp: str, carries_ids: bool) -> None:
    """Below IBP 2.8-IV1 LeaderAndIsr and UpdateMetadata carry no topic ids: the
    controller's own broker gets the zero id too, as every other broker does."""
    states = PartitionStates(failed=[])
    cfg = config(**{"inter.broker.protocol.version": ibp})
    channel = NetworkControllerChannel(
        ME, cfg, versions_for(ibp), lambda: None, states, MetadataCache(ME),
        lambda: Controller())  # type: ignore[arg-type,return-value]
    topic_id = uuid.uuid4()
    decisions = [PartitionDecision("orders", topic_id, 0, ME, 0, [ME], [ME], 0, 1)]

    async def run() -> None:
        await channel.leader_and_isr(ME, decisions)
        await channel.update_metadata([ME], [], decisions, [])

    asyncio.run(run())
    expected = topic_id if carries_ids else ZERO_UUID
    [(_, applied)] = [a for a in states.applied if a[0] == "leader_and_isr"]
    assert [d.topic_id for d in applied] == [expected]  # type: ignore[attr-defined]
    assert [d.topic_id for d in states.metadata_decisions] == [expected]


def _value(registry: MetricsRegistry, mbean: str) -> object:
    [found] = registry.snapshot(mbean)
    return found["Value"]


def test_the_gauges_read_the_parts_once_the_broker_has_made_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(PartitionLog, "flush_listener", None)  # registration sets it
    registry = MetricsRegistry()
    offline: set[TopicPartition] = set()
    parts: dict[str, Any] = {}
    purgatory = register_broker_metrics(MetricSources(
        registry, {}, offline,
        replica_manager=lambda: parts.get("replica_manager"),
        log_manager=lambda: parts.get("log_manager"), fetchers=lambda: parts.get("fetchers"),
        controller=lambda: parts.get("controller"),
        socket_server=lambda: parts.get("socket_server")))
    assert set(purgatory) == {"Produce", "Fetch"}
    active = "kafka.controller:type=KafkaController,name=ActiveControllerCount"
    topics = "kafka.controller:type=KafkaController,name=GlobalTopicCount"
    offline_dirs = "kafka.log:type=LogManager,name=OfflineLogDirectoryCount"
    replicas = "kafka.server:type=ReplicaManager,name=OfflineReplicaCount"
    queue = "kafka.network:type=RequestChannel,name=RequestQueueSize"
    # before the start: nothing to count, and no gauge fails
    for mbean in (active, topics, offline_dirs, replicas, queue):
        assert _value(registry, mbean) == 0

    orders = SimpleNamespace(partitions={0: SimpleNamespace(leader=-1, replicas=[ME])})
    parts["controller"] = Controller(topics={"orders": orders})
    parts["log_manager"] = SimpleNamespace(offline_dirs={"/data/1"})
    offline.add(("orders", 0))
    assert _value(registry, active) == 1
    assert _value(registry, topics) == 1
    assert _value(registry, offline_dirs) == 1
    assert _value(registry, replicas) == 1
    parts["controller"].active = False  # resigned: the controller gauges count nothing
    assert _value(registry, active) == 0
    assert _value(registry, topics) == 0


def test_new_topic_defaults_reach_the_running_logs() -> None:
    topic_configs = TopicConfigs(config())
    topic_configs.set_overrides("compacted", {"cleanup.policy": "compact"})
    logs = {tp: SimpleNamespace(config=None) for tp in (("orders", 0), ("compacted", 0))}
    replica_manager = SimpleNamespace(partitions={
        tp: SimpleNamespace(log=log) for tp, log in logs.items()})
    log_manager = SimpleNamespace(default_log_config=None)
    week = topic_configs.default
    day = replace(week, retention_ms=86_400_000)

    apply_log_defaults(day, topic_configs, log_manager,  # type: ignore[arg-type]
                       replica_manager)  # type: ignore[arg-type]
    assert log_manager.default_log_config is day
    assert logs["orders", 0].config is day
    compacted = logs["compacted", 0].config
    assert compacted is not None
    assert compacted.retention_ms == day.retention_ms
    assert compacted.cleanup_policy != day.cleanup_policy  # its override stays
    # before the logs are open only the defaults change
    apply_log_defaults(week, topic_configs, None, None)
    assert topic_configs.log_config("orders") is week


def _shutdown(zk: AsyncZk | None, controller: Controller | None) -> ShutdownServices:
    cfg = config(**{"controlled.shutdown.max.retries": 2,
                    "controlled.shutdown.retry.backoff.ms": 1})
    return ShutdownServices(cfg, BrokerState(ME, broker_epoch=42), zk, MetadataCache(ME),
                            controller,  # type: ignore[arg-type]
                            versions_for(cfg["inter.broker.protocol.version"]), lambda: None)


def test_a_controlled_shutdown_asks_this_brokers_own_controller(
        zk_client: KafkaZkClient) -> None:
    zk_client.ensure_persistent_paths()
    assert zk_client.try_elect_controller(ME) is not None
    controller = Controller()
    asyncio.run(controlled_shutdown(_shutdown(AsyncZk(zk_client), controller)))
    assert controller.shutdowns == [(ME, 42)]


def test_a_controlled_shutdown_gives_up_when_the_controller_is_unreachable(
        zk_client: KafkaZkClient, caplog: pytest.LogCaptureFixture) -> None:
    zk_client.ensure_persistent_paths()
    assert zk_client.try_elect_controller(2) is not None  # no endpoint of it is known
    with caplog.at_level(logging.INFO, logger="kafka.server.KafkaServer"):
        asyncio.run(controlled_shutdown(_shutdown(AsyncZk(zk_client), Controller())))
    assert caplog.text.count("no PLAINTEXT endpoint known for controller 2") == 2
    assert "Proceeding to do an unclean shutdown" in caplog.text


def test_a_controlled_shutdown_is_skipped_without_zookeeper(
        caplog: pytest.LogCaptureFixture) -> None:
    controller = Controller()
    with caplog.at_level(logging.WARNING, logger="kafka.server.KafkaServer"):
        asyncio.run(controlled_shutdown(_shutdown(None, controller)))
    assert "Skipping controlled shutdown" in caplog.text
    assert controller.shutdowns == []
