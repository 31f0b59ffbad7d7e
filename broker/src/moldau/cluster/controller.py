"""The controller (Kafka's KafkaController, ZooKeeper mode), as far as a single broker needs it.

One broker wins the ephemeral /controller znode and decides partition leadership: it
watches /brokers/ids, /brokers/topics and /admin/delete_topics, creates the state znode
of every new partition (leader = first live replica, ISR = the live replicas), and tells
the brokers through `ControllerChannel`: LeaderAndIsr, UpdateMetadata and StopReplica.
While Moldau runs one broker the channel is a direct call into this process; with
replication it becomes the inter-broker connection, and nothing here changes.

Here are the controller's election, its watches, brokers coming and going, ISR changes
and the writes of partition states. The events are in `controller_events`, their
queue in `controller_event_manager`, the election rules in `elections`, the controller's
data in `controller_state`; topics coming, changing and going in `topic_changes`;
controlled shutdown, elections asked for and failed log dirs in `leadership`, and
reassignment in `reassignment`.

Every decision is logged to `state.change.logger` (state-change.log) and the controller's
own life to `kafka.controller` (controller.log).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import assert_never

from moldau.cluster import elections, zk_data, zk_features
from moldau.cluster.broker_requests import BrokerRequests, IsrChange
from moldau.cluster.controller_event_manager import ControllerEventManager
from moldau.cluster.controller_events import (
    AutoLeaderRebalance,
    BrokerChange,
    ControllerEvent,
    Elect,
    IsrChangeNotification,
    LogDirEventNotification,
    OfflineReplicas,
    PartitionModifications,
    ReassignPartitionsZnode,
    ReplicaLeaderElectionZnode,
    TopicChange,
    TopicDeletion,
)
from moldau.cluster.controller_state import (
    NO_LEADER,
    ControllerChannel,
    PartitionDecision,
    TopicPartition,
    TopicState,
)
from moldau.cluster.leadership import LeadershipMoves
from moldau.cluster.reassignment import PartitionReassigner
from moldau.cluster.topic_changes import TopicChanges
from moldau.cluster.zk_async import AsyncZk
from moldau.errors import KafkaError

# the controller's data types, imported from here by server/ and the tests
__all__ = ["NO_LEADER", "Controller", "ControllerChannel", "PartitionDecision", "TopicState"]

log = logging.getLogger("kafka.controller")
state_change_log = logging.getLogger("state.change.logger")


class Controller:
    def __init__(self, broker_id: int, zk: AsyncZk, channel: ControllerChannel,
                 delete_topic_enable: bool = True, unclean_election: bool = False,
                 leader_rebalance: tuple[float, int] | None = None,
                 feature_znode_version: int = zk_features.V2) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.channel = channel
        self.delete_topic_enable = delete_topic_enable
        self.unclean_election = unclean_election  # the broker default; topics may override
        self.shutting_down: set[int] = set()  # brokers in controlled shutdown
        # replicas on failed log dirs, by broker (until the broker registers again)
        self.offline_replicas: dict[int, set[TopicPartition]] = {}
        # auto.leader.rebalance.enable: (check interval s, imbalance percentage) or None
        self.leader_rebalance = leader_rebalance
        self.feature_znode_version = feature_znode_version  # /feature's format (IBP 3.3+: 2)
        self._rebalancer: asyncio.Task[None] | None = None
        self.epoch = 0
        self.active = False
        self.live_brokers: dict[int, zk_data.BrokerRegistration] = {}
        self.topics: dict[str, TopicState] = {}
        self._events = ControllerEventManager(broker_id, self._process, lambda: self.active)
        self.reassigner = PartitionReassigner(self)
        self.topic_changes = TopicChanges(self)
        self.leadership = LeadershipMoves(self)
        self.broker_requests = BrokerRequests(self)
        # metrics hooks (ControllerStats): the ms an election round took, unclean elections
        self.on_election_round: Callable[[float], None] | None = None
        self.on_unclean_election: Callable[[], None] | None = None

    # --- life cycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Run the event loop of the controller (one event at a time, as Kafka's event
        manager) and try to win the election; watch /controller to retry when it goes."""
        self._events.start()
        # fires now and whenever /controller changes: each time, try to win
        await self.zk.watch_data(zk_data.CONTROLLER_PATH, lambda *_: self.post(Elect()))

    def post(self, event: ControllerEvent) -> None:
        """Queue an event for the controller's event loop."""
        self._events.post(event)

    async def stop(self) -> None:
        self.active = False
        if self._rebalancer is not None:
            self._rebalancer.cancel()
        await self._events.stop()

    async def _process(self, event: ControllerEvent) -> None:
        match event:
            case Elect():
                await self._elect()
            case BrokerChange():
                await self._on_brokers_change()
            case TopicChange(topics):
                await self.topic_changes.on_topics(topics)
            case PartitionModifications(topic):
                await self.topic_changes.on_topic_data(topic)
            case TopicDeletion(topics):
                await self.topic_changes.on_deletions(topics)
            case IsrChangeNotification():
                await self._on_isr_change()
            case LogDirEventNotification():
                await self.leadership.on_log_dir_event()
            case OfflineReplicas(broker_id, partitions):
                await self.leadership.on_offline_replicas(broker_id, partitions)
            case ReplicaLeaderElectionZnode(data):
                await self.leadership.on_preferred_election_znode(data)
            case AutoLeaderRebalance(percentage):
                await self.leadership.check_leader_imbalance(percentage)
            case ReassignPartitionsZnode(data):
                await self.reassigner.on_znode(data)
            case _:
                assert_never(event)

    async def _elect(self) -> None:
        zk = self.zk
        if self.active:
            holder = await zk.call(zk.client.get_controller_id)
            if holder == self.broker_id:
                return
            log.info("[Controller id=%d] Resigning: broker %s holds /controller",
                     self.broker_id, holder)
            self.active = False
            self.channel.controller_moved(holder if holder is not None else -1)
        epoch = await zk.call(zk.client.try_elect_controller, self.broker_id)
        if epoch is None:
            holder = await zk.call(zk.client.get_controller_id)
            self.channel.controller_moved(holder if holder is not None else -1)
            log.info("[Controller id=%d] Broker %s has been elected as the controller, so "
                     "stopping the election process.", self.broker_id, holder)
            return
        self.epoch = epoch
        self.active = True
        self.channel.controller_moved(self.broker_id)
        log.info("[Controller id=%d] %d successfully elected as the controller. Epoch "
                 "incremented to %d", self.broker_id, self.broker_id, epoch)
        await self._on_become_controller()

    async def _on_become_controller(self) -> None:
        await self._enable_feature_versioning()
        log.info("[Controller id=%d] Registering handlers", self.broker_id)
        # Each watch fires once now with the current children, which queues the initial
        # load (brokers first: topics need the live brokers to elect leaders).
        await self._load_brokers()
        zk, post = self.zk, self.post
        await zk.watch_children(zk_data.BROKER_IDS_PATH, lambda _ids: post(BrokerChange()))
        await zk.watch_children(zk_data.TOPICS_PATH,
                                lambda names: post(TopicChange(tuple(names or ()))))
        await zk.watch_children(zk_data.DELETE_TOPICS_PATH,
                                lambda names: post(TopicDeletion(tuple(names or ()))))
        await zk.watch_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH,
                                lambda _names: post(IsrChangeNotification()))
        await zk.watch_data(zk_data.PREFERRED_REPLICA_ELECTION_PATH,
                            lambda data, _stat: post(ReplicaLeaderElectionZnode(data)))
        await zk.watch_children(zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH,
                                lambda _names: post(LogDirEventNotification()))
        await zk.watch_data(zk_data.REASSIGN_PARTITIONS_PATH,
                            lambda data, _stat: post(ReassignPartitionsZnode(data)))
        if self.leader_rebalance is not None and self._rebalancer is None:
            self._rebalancer = asyncio.ensure_future(self._rebalance_timer(
                *self.leader_rebalance))

    async def _enable_feature_versioning(self) -> None:
        """Kafka's maybeSetupFeatureVersioning: /feature created enabled (or enabled) before
        anything else, so every broker's ApiVersions reports its epoch."""
        zk = self.zk
        try:
            epoch = await zk.call(zk.client.enable_feature_versioning,
                                  self.feature_znode_version)
        except ValueError as exc:  # a malformed /feature: Kafka's election fails on it too
            log.error("[Controller id=%d] Could not enable feature versioning: %s",
                      self.broker_id, exc)
            return
        log.info("[Controller id=%d] Feature versioning enabled at epoch %d",
                 self.broker_id, epoch)

    async def _rebalance_timer(self, interval_s: float, percentage: int) -> None:
        while True:
            await asyncio.sleep(interval_s)
            if self.active:
                self.post(AutoLeaderRebalance(percentage))

    # --- brokers --------------------------------------------------------------------------

    async def _load_brokers(self) -> None:
        brokers = await self.zk.call(self.zk.client.get_all_brokers)
        # a broker the channel cannot reach (no endpoint on its listener) is not live,
        # as in Kafka, whose channel manager fails to add it before the broker counts
        self.live_brokers = {b.id: b for b in self.channel.set_live_brokers(brokers)}
        log.info("[Controller id=%d] Live brokers: %s", self.broker_id,
                 sorted(self.live_brokers))

    async def _on_brokers_change(self) -> None:
        started = time.monotonic()
        before = dict(self.live_brokers)
        await self._load_brokers()
        after = self.live_brokers
        # a broker that re-registered (a new czxid) died and came back in between
        bounced = {b for b in set(before) & set(after)
                   if before[b].epoch != after[b].epoch and before[b].epoch >= 0}
        new = (set(after) - set(before)) | bounced
        dead = (set(before) - set(after)) | bounced
        if new:
            log.info("[Controller id=%d] Newly added brokers: %s, deleted brokers: %s, "
                     "bounced brokers: %s, all live brokers: %s", self.broker_id,
                     sorted(new - bounced), sorted(dead - bounced), sorted(bounced),
                     sorted(after))
        elif dead:
            log.info("[Controller id=%d] Broker failure callback for %s", self.broker_id,
                     ",".join(map(str, sorted(dead))))
        self.shutting_down -= dead
        for broker_id in new | dead:  # a restarted broker brings its (repaired) dirs back
            self.offline_replicas.pop(broker_id, None)
        # Elect leaders where the leader died, drop dead replicas from ISRs, and elect
        # where no leader could be chosen before.
        changed: list[PartitionDecision] = []
        for name, topic in self.topics.items():
            for index in topic.assignment:
                decision = await self.elect_if_needed(name, topic, index)
                if decision is not None:
                    changed.append(decision)
        await self.announce(changed, rejoined=new)
        if changed and self.on_election_round is not None:
            self.on_election_round((time.monotonic() - started) * 1000)

    def eligible(self, broker_id: int, tp: TopicPartition | None = None) -> bool:
        """Whether a replica may lead: alive, not shutting down, and (for a partition)
        not on a failed log dir of its broker."""
        return (broker_id in self.live_brokers and broker_id not in self.shutting_down
                and (tp is None or tp not in self.offline_replicas.get(broker_id, ())))

    def _eligible_replicas(self, name: str, index: int, replicas: Iterable[int]) -> set[int]:
        return {r for r in replicas if self.eligible(r, (name, index))}

    # --- partition states ------------------------------------------------------------

    async def elect_if_needed(self, name: str, topic: TopicState,
                               index: int) -> PartitionDecision | None:
        """Create the partition's state znode, or move leadership off a dead leader.
        Returns the decision when it changed (or was just read)."""
        zk = self.zk
        replicas = topic.assignment[index]
        found = await zk.call(zk.client.get_partition_state, name, index)
        if found is None:
            first = elections.new_partition(replicas, self.live_brokers)
            state = zk_data.PartitionState(leader=first.leader, leader_epoch=0,
                                           isr=list(first.isr), controller_epoch=self.epoch)
            await zk.call(zk.client.create_partition_states, name, {index: state},
                          self._epoch_zk_version())
            decision = self._decision(name, topic, index, state, 0)
            state_change_log.info(
                "[Controller id=%d epoch=%d] Changed partition %s-%d from NewPartition to "
                "OnlinePartition with state LeaderAndIsr(leader=%d, leaderEpoch=0, isr=%s)",
                self.broker_id, self.epoch, name, index, first.leader, state.isr)
            topic.partitions[index] = decision
            return decision
        state, version = found
        decision = self._decision(name, topic, index, state, version)
        live = self.live_brokers
        eligible = self._eligible_replicas(name, index, replicas)
        unclean = (elections.only_unclean_can_elect(state.leader, state.isr, replicas, live,
                                                    eligible)
                   and await self._unclean_allowed(name))
        election = elections.after_broker_change(state.leader, state.isr, replicas, live,
                                                 eligible, unclean)
        if election is None:  # nothing to change
            known = topic.partitions.get(index)
            topic.partitions[index] = decision
            return None if known == decision else decision
        return await self.write_state(name, topic, index, state, version, election.leader,
                                      list(election.isr),
                                      "unclean election" if election.unclean else "election")

    async def _unclean_allowed(self, name: str) -> bool:
        overrides = await self.zk.call(self.zk.client.get_entity_config, "topics", name)
        value = overrides.get("unclean.leader.election.enable")
        return self.unclean_election if value is None else value.strip().lower() == "true"

    async def write_state(self, name: str, topic: TopicState, index: int,
                          state: zk_data.PartitionState, version: int, leader: int,
                          isr: list[int], why: str) -> PartitionDecision:
        """Write a partition's new leader and ISR (a new leader epoch) conditionally on the
        state we read, and remember the decision."""
        new_state = zk_data.PartitionState(leader=leader, leader_epoch=state.leader_epoch + 1,
                                           isr=isr, controller_epoch=self.epoch)
        new_version = await self.zk.call(self.zk.client.update_partition_state, name, index,
                                         new_state, version, self._epoch_zk_version())
        decision = self._decision(name, topic, index, new_state, new_version)
        topic.partitions[index] = decision
        if why == "unclean election" and self.on_unclean_election is not None:
            self.on_unclean_election()
        state_change_log.info(
            "[Controller id=%d epoch=%d] Changed partition %s-%d (%s) from "
            "LeaderAndIsr(leader=%d, leaderEpoch=%d, isr=%s) to LeaderAndIsr(leader=%d, "
            "leaderEpoch=%d, isr=%s)", self.broker_id, self.epoch, name, index, why,
            state.leader, state.leader_epoch, state.isr, leader, new_state.leader_epoch, isr)
        if leader == NO_LEADER:
            state_change_log.error(
                "[Controller id=%d epoch=%d] Partition %s-%d is offline: no replica in the "
                "ISR %s is alive", self.broker_id, self.epoch, name, index, isr)
        return decision

    def _epoch_zk_version(self) -> int:
        """The /controller_epoch version this controller's election left. Each partition
        state write checks it in the same multi-op (Kafka's checkControllerAndUpdate): a
        controller that lost its office and has not heard yet (its session expired and
        another broker won) must not hand out leader epochs that the brokers, which
        have heard from the new one, then refuse as stale, while the new controller
        announces the state it read before."""
        return self.zk.client.controller_epoch_zk_version

    def _decision(self, name: str, topic: TopicState, index: int,
                  state: zk_data.PartitionState, version: int) -> PartitionDecision:
        move = topic.reassigning.get(index)
        return PartitionDecision(name, topic.topic_id, index, state.leader, state.leader_epoch,
                                 list(state.isr), list(topic.assignment[index]), version,
                                 self.epoch, move.adding if move is not None else [],
                                 state.leader_recovery_state)

    # --- ISR changes made by leaders ---------------------------------------------------------

    async def _on_isr_change(self) -> None:
        """Leaders wrote new ISRs to ZooKeeper: read them and tell every broker."""
        zk = self.zk
        changed = await zk.call(zk.client.take_isr_change_notifications)
        decisions = []
        for name, index in sorted(changed):
            topic = self.topics.get(name)
            if topic is None or index not in topic.assignment:
                continue
            found = await zk.call(zk.client.get_partition_state, name, index)
            if found is not None:
                decisions.append(self.decision(name, index, *found))
        await self.isr_changed(decisions)
        await self.reassigner.maybe_complete(changed)

    def decision(self, name: str, index: int, state: zk_data.PartitionState,
                 version: int) -> PartitionDecision:
        """A known partition's decision from its state znode."""
        return self._decision(name, self.topics[name], index, state, version)

    async def isr_changed(self, decisions: list[PartitionDecision]) -> None:
        """Remember new ISRs and tell every broker (UpdateMetadata, as Kafka does); a
        reassignment waiting for its new replicas may complete now."""
        for decision in decisions:
            self.topics[decision.topic].partitions[decision.partition] = decision
        if decisions:
            await self.send_update_metadata(decisions, [])

    # --- requests (run as events, in order with the others) -----------------------------

    async def controlled_shutdown(self, broker_id: int,
                                  broker_epoch: int) -> list[TopicPartition]:
        """Move leadership off a broker that is stopping; the replicated partitions it
        still leads (no other ISR member alive) are returned, as Kafka does."""
        return await self._events.ask(
            lambda: self.leadership.shut_down(broker_id, broker_epoch))

    async def elect_leaders(self, partitions: list[TopicPartition] | None,
                            preferred: bool) -> dict[TopicPartition, KafkaError | None]:
        """Run a preferred (or unclean) election for the partitions (None: all); each gets
        None when its leader changed, else the error Kafka answers for it."""
        return await self._events.ask(lambda: self.leadership.elect(partitions, preferred))

    async def alter_partition(self, broker_id: int, broker_epoch: int,
                              changes: list[IsrChange], version: int
                              ) -> dict[TopicPartition, PartitionDecision | KafkaError]:
        """A leader's AlterPartition: each partition's new state, or its error."""
        async def alter() -> dict[TopicPartition, PartitionDecision | KafkaError]:
            results = await self.broker_requests.alter_partition(broker_id, broker_epoch,
                                                                 changes, version)
            await self.reassigner.maybe_complete(
                {tp for tp, r in results.items() if isinstance(r, PartitionDecision)})
            return results
        return await self._events.ask(alter)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """A block of producer ids for a broker (AllocateProducerIds): (first, count)."""
        return await self._events.ask(
            lambda: self.broker_requests.allocate_producer_ids(broker_id, broker_epoch))

    async def alter_reassignments(self, wanted: dict[TopicPartition, list[int] | None]
                                  ) -> dict[TopicPartition, KafkaError | None]:
        """Start or cancel (None) reassignments; each partition gets None or its error."""
        return await self._events.ask(lambda: self.reassigner.alter(wanted))

    # --- telling brokers ------------------------------------------------------------------

    async def announce(self, decisions: list[PartitionDecision],
                       rejoined: Iterable[int] = ()) -> None:
        by_broker: dict[int, list[PartitionDecision]] = {}
        for decision in decisions:
            for replica in decision.replicas:
                if replica in self.live_brokers:
                    by_broker.setdefault(replica, []).append(decision)
        if rejoined:
            # the live brokers first, as Kafka's onBrokerStartup: a Kafka broker refuses to
            # follow a leader its metadata cache does not know yet ("cannot become
            # follower since the new leader is unavailable") and would never follow
            await self.send_update_metadata([], [])
        for broker_id in rejoined:
            # a broker that came back gets the state of everything it hosts
            by_broker[broker_id] = [
                d for t in self.topics.values() for d in t.partitions.values()
                if broker_id in d.replicas]
        for broker_id, batch in by_broker.items():
            await self.channel.leader_and_isr(broker_id, batch)
        await self.send_update_metadata(decisions, [])

    async def send_update_metadata(self, decisions: list[PartitionDecision],
                                    deleted: list[str]) -> None:
        everything = [d for t in self.topics.values() for d in t.partitions.values()]
        await self.channel.update_metadata(self.live_brokers.keys(),
                                           list(self.live_brokers.values()), everything,
                                           deleted)
