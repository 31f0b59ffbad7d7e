"""Creating topics: validation, replica assignment and the ZooKeeper writes (Kafka's
ZkAdminManager and AdminZkClient). CreateTopics, Metadata auto-creation and (later) the
tools share it. The controller turns the written assignment into partitions.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from moldau.cluster import host_domains, zk_data
from moldau.cluster.assignment import (
    AdminOperationError,
    BrokerMetadata,
    RackAwareMode,
    assign_replicas,
    broker_metadatas,
    zk_metadata_cache_order,
)
from moldau.coordinator.group.offsets_log import OFFSETS_TOPIC
from moldau.coordinator.transaction.partitioning import TRANSACTION_STATE_TOPIC
from moldau.errors import (
    InvalidReplicaAssignmentError,
    InvalidTopicError,
    TopicAlreadyExistsError,
    UnknownServerError,
)

from .topic_names import has_collision_chars, unify_collision_chars, validate_topic_name

if TYPE_CHECKING:
    from moldau.cluster.zk_async import AsyncZk

    from .config import BrokerConfig
    from .metadata_cache import MetadataCache

log = logging.getLogger("kafka.server.ZkAdminManager")


class TopicAdmin:
    """Built once ZooKeeper is connected and the metadata cache exists (the broker's start)."""

    def __init__(self, config: BrokerConfig, metadata: MetadataCache, zk: AsyncZk) -> None:
        # read at use time: dynamic broker configs update this object in place
        self.config = config
        self.metadata = metadata
        self.zk = zk
        self._auto_creating: set[str] = set()
        self._tasks: set[asyncio.Future[None]] = set()

    def validate_new_topic(self, name: str) -> None:
        validate_topic_name(name)
        existing = self.metadata.topics
        if name in existing:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        if has_collision_chars(name):
            unified = unify_collision_chars(name)
            for other in existing:
                if unify_collision_chars(other) == unified:
                    raise InvalidTopicError(
                        f"Topic '{name}' collides with existing topic: {other}")

    async def broker_hosts(self) -> dict[int, str]:
        """Broker id -> `moldau.broker.host` (a Moldau extension), read from the
        registrations in /brokers/ids: UpdateMetadata does not carry it, and AdminZkClient
        reads the same znodes for its placement."""
        registrations = await self.zk.call(self.zk.client.get_all_brokers)
        return host_domains.hosts_of(registrations)

    def plan(self, name: str, num_partitions: int, replication_factor: int,
             assignment: Mapping[int, list[int]] | None,
             hosts: Mapping[int, str] | None = None) -> dict[int, list[int]]:
        """The replica assignment of a new topic (validated against the live brokers),
        placing no two replicas of a partition on one of `hosts` while there are enough."""
        hosts = hosts or {}
        if assignment:
            if sorted(assignment) != list(range(len(assignment))):
                raise InvalidReplicaAssignmentError(
                    "Partitions should be a consecutive 0-based integer sequence")
            sizes = {len(r) for r in assignment.values()}
            if len(sizes) != 1:
                raise InvalidReplicaAssignmentError(
                    "All partitions should have the same number of replicas")
            for index, replicas in assignment.items():
                if len(set(replicas)) != len(replicas):
                    raise InvalidReplicaAssignmentError(
                        f"Duplicate replica assignment found: {replicas} for partition {index}")
                # Kafka's ZooKeeper mode takes brokers that are not alive (as TopicCommand
                # always did): their partitions start offline and get a leader when the
                # broker registers. CreatePartitions, unlike this, refuses them.
            explicit = {int(k): list(v) for k, v in assignment.items()}
            host_domains.warn_explicit(log, name, explicit, hosts)
            return explicit
        try:
            live = self.live_brokers(hosts)
            placed = assign_replicas(live, num_partitions, replication_factor)
            host_domains.warn_placed(log, name, placed, hosts, [b.id for b in live])
            return placed
        except AdminOperationError as exc:
            # Not an ApiException in Kafka: logged as an error, answered as
            # UNKNOWN_SERVER_ERROR without a message.
            log.error("Error processing create topic request %s: %s", name, exc)
            raise UnknownServerError() from exc

    def live_brokers(self, hosts: Mapping[int, str] | None = None) -> list[BrokerMetadata]:
        """The live brokers with their racks (and hosts), in the order
        ZkMetadataCache.getAliveBrokers gives them to CreateTopics (it decides the
        rack-unaware placement)."""
        brokers = self.metadata.brokers
        hosts = hosts or {}
        return [BrokerMetadata(i, brokers[i].rack, hosts.get(i))
                for i in zk_metadata_cache_order(brokers)]

    def partition_brokers(self, hosts: Mapping[int, str] | None = None
                          ) -> list[BrokerMetadata]:
        """The brokers CreatePartitions places new partitions on
        (AdminZkClient.getBrokerMetadatas): sorted by id, rack-aware, refused with
        AdminOperationError when only some brokers have a rack."""
        return broker_metadatas(self.live_brokers(hosts), RackAwareMode.ENFORCED)

    async def create(self, name: str, assignment: dict[int, list[int]],
                     configs: dict[str, str]) -> None:
        topic_id = zk_data.random_uuid()
        try:
            await self.zk.call(self.zk.client.create_topic, name, topic_id, assignment, configs)
        except Exception as exc:
            if type(exc).__name__ in ("NodeExistsError", "TopicExistsError"):
                raise TopicAlreadyExistsError(f"Topic '{name}' already exists.") from None
            raise
        log.info("Creating topic %s with configuration %s and initial partition assignment %s",
                 name, configs, assignment)

    async def wait_for_leaders(self, names: list[str], timeout_s: float) -> bool:
        """CreateTopics answers once every partition has a leader, or at the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        metadata = self.metadata
        while True:
            if all(name in metadata.topics and metadata.topics[name].partitions and all(
                    p.leader >= 0 for p in metadata.topics[name].partitions.values())
                    for name in names):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.01)

    def auto_create(self, name: str) -> None:
        """Metadata's auto-creation: fire and forget (the client asks again)."""
        if name == OFFSETS_TOPIC:
            self.create_offsets_topic()
            return
        if name == TRANSACTION_STATE_TOPIC:
            self.create_transaction_state_topic()
            return
        config = self.config
        self._create_in_background(name, config["num.partitions"],
                                   config["default.replication.factor"], {})

    def create_offsets_topic(self) -> bool:
        """__consumer_offsets on first use, with the offsets.topic.* settings. As in
        Kafka, it is not created until offsets.topic.replication.factor brokers are
        alive (FindCoordinator answers COORDINATOR_NOT_AVAILABLE meanwhile): False then."""
        config = self.config
        return self._create_internal(
            OFFSETS_TOPIC, "the offsets topic", "offsets.topic.replication.factor",
            config["offsets.topic.num.partitions"],
            {"cleanup.policy": "compact", "compression.type": "producer",
             "segment.bytes": str(config["offsets.topic.segment.bytes"])})

    def create_transaction_state_topic(self) -> bool:
        """__transaction_state on first use (FindCoordinator for a transactional id), with
        the transaction.state.log.* settings and Kafka's enforced configs
        (TransactionStateManager.transactionTopicConfigs); as the offsets topic, not
        before transaction.state.log.replication.factor brokers are alive."""
        config = self.config
        return self._create_internal(
            TRANSACTION_STATE_TOPIC, "the transactions state topic",
            "transaction.state.log.replication.factor",
            config["transaction.state.log.num.partitions"],
            {"unclean.leader.election.enable": "false", "compression.type": "uncompressed",
             "cleanup.policy": "compact",
             "min.insync.replicas": str(config["transaction.state.log.min.isr"]),
             "segment.bytes": str(config["transaction.state.log.segment.bytes"])})

    def _create_internal(self, name: str, what: str, factor_key: str, partitions: int,
                         configs: dict[str, str]) -> bool:
        alive = len(self.metadata.alive_broker_ids())
        factor = self.config[factor_key]
        if alive < factor:
            log.error("Number of alive brokers '%d' does not meet the required replication "
                      "factor '%d' for %s (configured via '%s'). This error can be ignored "
                      "if the cluster is starting up and not all brokers are up yet.", alive,
                      factor, what, factor_key)
            return False
        self._create_in_background(name, partitions, factor, configs)
        return True

    def _create_in_background(self, name: str, partitions: int, factor: int,
                              configs: dict[str, str]) -> None:
        if name in self._auto_creating:
            return
        self._auto_creating.add(name)

        async def run() -> None:
            try:
                self.validate_new_topic(name)
                hosts = await self.broker_hosts()
                await self.create(name, self.plan(name, partitions, factor, None, hosts),
                                  configs)
            except TopicAlreadyExistsError:
                pass
            except Exception as exc:
                log.warning("Auto-creation of topic %s failed: %s", name, exc)
            finally:
                self._auto_creating.discard(name)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)  # keep a reference until it is done
        task.add_done_callback(self._tasks.discard)
