"""Partition state on this broker: where the controller's LeaderAndIsr, UpdateMetadata and
StopReplica take effect, and the one writer of the ISR changes a leader makes (Kafka's
ReplicaManager.becomeLeaderOrFollower, maybeUpdateMetadataCache and stopReplicas, and the
ZooKeeper-mode AlterPartition path).

The replica manager (replica_manager.py) holds the partitions and their logs; the
fetchers (replication/replica_fetcher.py) follow the leaders; the controller
(cluster/controller.py) decides. The requests reach `PartitionStates` through the
handlers of controller_requests.py, or directly when this broker is the controller
(replication/controller_channel.py).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.cluster import zk_data
from moldau.cluster.zk_client import ZkBadVersionError
from moldau.coordinator.group.offsets_log import OFFSETS_TOPIC
from moldau.coordinator.transaction.partitioning import TRANSACTION_STATE_TOPIC
from moldau.errors import KafkaStorageError
from moldau.protocol._runtime import ZERO_UUID
from moldau.replication.replica_manager import LeaderAndIsr, RecordedIsr

from .cooperative import CooperativePause
from .metadata_cache import BrokerEndpoints, PartitionInfo, TopicInfo

if TYPE_CHECKING:
    from moldau.cluster.controller import PartitionDecision
    from moldau.cluster.zk_async import AsyncZk
    from moldau.coordinator.group.coordinator import GroupCoordinator
    from moldau.coordinator.transaction.coordinator import TransactionCoordinator
    from moldau.replication.replica_fetcher import ReplicaFetcherManager
    from moldau.replication.replica_manager import Partition, ReplicaManager

    from .metadata_cache import MetadataCache
    from .topic_configs import TopicConfigs

log = logging.getLogger("kafka.cluster.Partition")
state_change_log = logging.getLogger("state.change.logger")


class IsrWriter:
    """A leader's ISR changes, written to the partition's state znode with its expected
    version, then announced to the controller (/isr_change_notification)."""

    def __init__(self, broker_id: int, zk: AsyncZk) -> None:
        self.broker_id = broker_id
        self.zk = zk

    async def __call__(self, partition: Partition, isr: list[int]) -> RecordedIsr:
        state = partition.state  # what the write starts from: the partition may change
        new_state = zk_data.PartitionState(leader=state.leader, leader_epoch=state.leader_epoch,
                                           isr=isr, controller_epoch=state.controller_epoch)
        try:
            version = await self.zk.call(self.zk.client.update_partition_state, partition.topic,
                                         partition.index, new_state, state.zk_version)
            recorded = RecordedIsr(list(isr), version)
        except ZkBadVersionError:
            found = await self._own_earlier_write(partition, state.leader_epoch,
                                                  state.zk_version)
            if found is None:
                raise
            recorded = found
        # also after adopting: the lost write's notification may never have been made
        await self.zk.call(self.zk.client.create_isr_change_notification,
                           [(partition.topic, partition.index)])
        return recorded

    async def _own_earlier_write(self, partition: Partition, leader_epoch: int,
                                 expected_version: int) -> RecordedIsr | None:
        """After a conflicting write: the recorded ISR when the znode still names this
        broker as leader at the leader epoch the write started from. Then only this
        leader wrote it since the expected version, with an earlier write whose answer
        was lost (a ZooKeeper session expiry or connection loss while it was out: kazoo's
        retry then meets the landed write as a conflict). Anything else is another
        writer's: a successor's ISR after a LeaderAndIsr deposed this leader mid-write
        must not be adopted."""
        found = await self.zk.call(self.zk.client.get_partition_state, partition.topic,
                                   partition.index)
        if found is None:
            return None
        recorded, version = found
        if (recorded.leader, recorded.leader_epoch) != (self.broker_id, leader_epoch):
            return None  # the controller moved on: its LeaderAndIsr is coming
        log.info("[Partition %s broker=%d] ZooKeeper holds ISR %s at version %d from this "
                 "leader's earlier write (version %d expected); adopting it", partition.name,
                 self.broker_id, ",".join(map(str, recorded.isr)), version, expected_version)
        return RecordedIsr(list(recorded.isr), version)


class PartitionStates:
    """Applies the controller's decisions to this broker's replicas, fetchers, metadata
    cache and group and transaction coordinators."""

    def __init__(self, broker_id: int, zk: AsyncZk, metadata: MetadataCache,
                 replica_manager: ReplicaManager, fetchers: ReplicaFetcherManager,
                 group_coordinator: GroupCoordinator, topic_configs: TopicConfigs,
                 offline_partitions: set[tuple[str, int]],
                 transaction_coordinator: TransactionCoordinator | None = None) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.fetchers = fetchers
        self.group_coordinator = group_coordinator
        self.transaction_coordinator = transaction_coordinator
        self.topic_configs = topic_configs
        # partitions whose log was on a failed log dir: never recreated elsewhere
        self.offline_partitions = offline_partitions

    async def load_topic_overrides(self, topics: set[str]) -> None:
        """A topic new to this broker: read its overrides before its logs are created
        (Kafka's fetchLogConfig), since no change notification announces them."""
        for topic in sorted(topics):
            if topic not in self.topic_configs.overrides:
                overrides = await self.zk.call(self.zk.client.get_entity_config, "topics", topic)
                self.topic_configs.set_overrides(topic, overrides)

    async def apply_leader_and_isr(self, decisions: list[PartitionDecision]
                                   ) -> dict[tuple[str, int], int]:
        """Become leader or follower of each partition; followers fetch from their leader.
        Returns the error code of each partition that failed."""
        # groups of the offsets partitions this request makes us lead must be retried
        # here, not looked for elsewhere, while the request is applied in slices
        coming = [d.partition for d in decisions
                  if d.topic == OFFSETS_TOPIC and d.leader == self.broker_id]
        self.group_coordinator.expect_elections(coming)
        try:
            return await self._apply_leader_and_isr(decisions)
        finally:
            self.group_coordinator.end_expected(coming)

    async def _apply_leader_and_isr(self, decisions: list[PartitionDecision]
                                    ) -> dict[tuple[str, int], int]:
        errors: dict[tuple[str, int], int] = {}
        pause = CooperativePause()
        for d in decisions:
            await pause.maybe()
            if self.broker_id not in d.replicas:
                continue
            if (d.topic, d.partition) in self.offline_partitions:
                errors[(d.topic, d.partition)] = KafkaStorageError.code
                continue
            state = LeaderAndIsr(d.leader, d.leader_epoch, d.isr, d.replicas,
                                 d.controller_epoch, d.zk_version, d.adding)
            # Kafka restarts a follower's fetch only for a new leader or leader epoch: a
            # new ISR or replica list alone keeps its place (and the fetch in flight)
            existing = self.replica_manager.get_partition(d.topic, d.partition)
            keeps_following = (existing is not None and not existing.is_leader
                               and existing.state.leader == d.leader
                               and existing.state.leader_epoch == d.leader_epoch
                               and self.fetchers.follows((d.topic, d.partition), d.leader))
            try:
                partition = self.replica_manager.become_leader_or_follower(
                    d.topic, d.partition, None if d.topic_id == ZERO_UUID else d.topic_id,
                    state,
                    self.topic_configs.log_config(d.topic))
            except Exception as exc:
                state_change_log.error(
                    "Error applying LeaderAndIsr for %s-%d: %s", d.topic, d.partition, exc)
                errors[(d.topic, d.partition)] = getattr(exc, "code", -1)
                continue
            if partition.state is not state:
                continue  # an older leader epoch: ignored
            if partition.is_leader or d.leader < 0:
                self.fetchers.remove_partitions([(d.topic, d.partition)])
            elif not keeps_following:
                self.fetchers.add_partition(partition, d.leader)
            if d.topic == OFFSETS_TOPIC:
                if partition.is_leader:
                    self.group_coordinator.on_elected(d.partition)
                else:
                    self.group_coordinator.on_resigned(d.partition)
            elif d.topic == TRANSACTION_STATE_TOPIC and self.transaction_coordinator:
                # the coordinator epoch is the partition's leader epoch
                if partition.is_leader:
                    self.transaction_coordinator.on_elected(d.partition, d.leader_epoch)
                else:
                    self.transaction_coordinator.on_resigned(d.partition, d.leader_epoch)
        self.fetchers.restart_long_polls()
        return errors

    def apply_update_metadata(self, live: list[zk_data.BrokerRegistration],
                              decisions: list[PartitionDecision], deleted: list[str]) -> None:
        """The controller's view of the cluster: live brokers, every partition's leader
        and ISR, and the topics deleted since its last update."""
        cache = self.metadata
        cache.set_brokers([
            BrokerEndpoints(b.id, {e.listener_name: (e.host or "", e.port) for e in b.endpoints},
                            b.rack) for b in live])
        gone: list[tuple[str, int]] = []
        for name in deleted:
            info = cache.topics.get(name)
            if info is not None:
                gone += [(name, index) for index in info.partitions]
            cache.remove_topic(name)
        if gone:
            self.group_coordinator.on_partitions_deleted(gone)
        topics: dict[str, TopicInfo] = {}
        for d in decisions:
            info = topics.get(d.topic)
            if info is None:
                info = topics[d.topic] = TopicInfo(d.topic, d.topic_id)
            info.partitions[d.partition] = PartitionInfo(d.partition, d.leader, d.leader_epoch,
                                                         d.replicas, d.isr)
        for info in topics.values():
            cache.put_topic(info)
        cache.initialized = True

    async def apply_stop_replica(self, partitions: list[tuple[str, int]], delete: bool
                                 ) -> None:
        """Stop hosting the partitions (a reassignment moved them, or their topic was
        deleted): no fetching, no serving, the logs deleted with delete."""
        self.fetchers.remove_partitions(partitions)
        pause = CooperativePause()
        for topic, index in partitions:
            await pause.maybe()
            if topic == OFFSETS_TOPIC:
                self.group_coordinator.on_resigned(index)
            elif topic == TRANSACTION_STATE_TOPIC and self.transaction_coordinator:
                self.transaction_coordinator.on_resigned(index, None)
            self.replica_manager.stop_replica(topic, index, delete)
        if delete:  # a reassignment may move one partition of a topic and keep others
            hosted = {t for t, _ in self.replica_manager.partitions}
            for topic in {t for t, _ in partitions} - hosted:
                self.topic_configs.forget(topic)
