"""The controller (Kafka's KafkaController, ZooKeeper mode), as far as a single broker needs it.

One broker wins the ephemeral /controller znode and decides partition leadership: it
watches /brokers/ids, /brokers/topics and /admin/delete_topics, creates the state znode
of every new partition (leader = first live replica, ISR = the live replicas), and tells
the brokers through `ControllerChannel`: LeaderAndIsr, UpdateMetadata and StopReplica.
While Moldau runs one broker the channel is a direct call into this process; with
replication it becomes the inter-broker connection, and nothing here changes.

Every decision is logged to `state.change.logger` (state-change.log) and the controller's
own life to `kafka.controller` (controller.log).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from moldau.cluster import zk_data
from moldau.cluster.zk_client import ZooKeeperUnavailableError

log = logging.getLogger("kafka.controller")
state_change_log = logging.getLogger("state.change.logger")

NO_LEADER = -1


@dataclass
class PartitionDecision:
    topic: str
    topic_id: UUID
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    zk_version: int
    controller_epoch: int


@dataclass
class TopicState:
    topic_id: UUID
    assignment: dict[int, list[int]]
    partitions: dict[int, PartitionDecision] = field(default_factory=dict)


class ControllerChannel(Protocol):
    """How the controller reaches brokers (the requests Kafka's controller sends)."""

    async def leader_and_isr(self, broker_id: int, decisions: list[PartitionDecision]) -> None: ...

    async def update_metadata(self, broker_ids: Iterable[int],
                              live_brokers: list[zk_data.BrokerRegistration],
                              decisions: list[PartitionDecision],
                              deleted_topics: list[str]) -> None: ...

    async def stop_replica(self, broker_id: int, partitions: list[tuple[str, int]],
                           delete: bool) -> None: ...

    def controller_moved(self, controller_id: int) -> None:
        """This broker stopped being the controller; -1 while no one is known."""


class Controller:
    def __init__(self, broker_id: int, zk: Any, channel: ControllerChannel,
                 delete_topic_enable: bool = True) -> None:
        self.broker_id = broker_id
        self.zk = zk  # AsyncZk
        self.channel = channel
        self.delete_topic_enable = delete_topic_enable
        self.epoch = 0
        self.active = False
        self.live_brokers: dict[int, zk_data.BrokerRegistration] = {}
        self.topics: dict[str, TopicState] = {}
        self._events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._topic_watches: set[str] = set()

    # --- life cycle -------------------------------------------------------------------

    async def start(self) -> None:
        """Run the event loop of the controller (one event at a time, as Kafka's event
        manager) and try to win the election; watch /controller to retry when it goes."""
        self._worker = asyncio.ensure_future(self._run())
        # fires now and whenever /controller changes: each time, try to win
        await self.zk.watch_data(zk_data.CONTROLLER_PATH, lambda *_: self.post("elect"))

    def post(self, event: str, payload: Any = None) -> None:
        self._events.put_nowait((event, payload))

    async def stop(self) -> None:
        self.active = False
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker

    async def _run(self) -> None:
        handlers = {
            "elect": self._elect,
            "brokers": self._on_brokers_change,
            "topics": self._on_topics_change,
            "topic_changed": self._on_topic_data_change,
            "delete_topics": self._on_delete_topics,
        }
        while True:
            event, payload = await self._events.get()
            if event != "elect" and not self.active:
                continue
            try:
                await handlers[event](payload)
            except asyncio.CancelledError:
                raise
            except ZooKeeperUnavailableError as exc:  # an outage, not a bug: no traceback
                log.error("[Controller id=%d] Could not process event %s: %s",
                          self.broker_id, event, exc)
            except Exception:
                log.exception("[Controller id=%d] Error processing event %s", self.broker_id,
                              event)

    async def _elect(self, _payload: Any) -> None:
        if self.active:
            holder = await self.zk.call("get_controller_id")
            if holder == self.broker_id:
                return
            log.info("[Controller id=%d] Resigning: broker %s holds /controller",
                     self.broker_id, holder)
            self.active = False
            self.channel.controller_moved(holder if holder is not None else -1)
        epoch = await self.zk.call("try_elect_controller", self.broker_id)
        if epoch is None:
            holder = await self.zk.call("get_controller_id")
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
        log.info("[Controller id=%d] Registering handlers", self.broker_id)
        # Each watch fires once now with the current children, which queues the initial
        # load (brokers first: topics need the live brokers to elect leaders).
        await self._load_brokers()
        await self.zk.watch_children(zk_data.BROKER_IDS_PATH,
                                     lambda ids: self.post("brokers", ids))
        await self.zk.watch_children(zk_data.TOPICS_PATH,
                                     lambda names: self.post("topics", names))
        await self.zk.watch_children(zk_data.DELETE_TOPICS_PATH,
                                     lambda names: self.post("delete_topics", names))

    # --- brokers --------------------------------------------------------------------------

    async def _load_brokers(self) -> None:
        brokers = await self.zk.call("get_all_brokers")
        self.live_brokers = {b.id: b for b in brokers}
        log.info("[Controller id=%d] Live brokers: %s", self.broker_id,
                 sorted(self.live_brokers))

    async def _on_brokers_change(self, _ids: Any) -> None:
        before = set(self.live_brokers)
        await self._load_brokers()
        after = set(self.live_brokers)
        if after - before:
            log.info("[Controller id=%d] Newly added brokers: %s", self.broker_id,
                     sorted(after - before))
        if before - after:
            log.info("[Controller id=%d] Dead brokers: %s", self.broker_id,
                     sorted(before - after))
        # Elect leaders where the leader died or none could be chosen before.
        changed: list[PartitionDecision] = []
        for name, topic in self.topics.items():
            for index in topic.assignment:
                decision = await self._elect_if_needed(name, topic, index)
                if decision is not None:
                    changed.append(decision)
        await self._announce(changed, rejoined=after - before)

    # --- topics ---------------------------------------------------------------------------

    async def _on_topics_change(self, names: Any) -> None:
        current = set(names or [])
        new = [n for n in sorted(current) if n not in self.topics]
        decisions: list[PartitionDecision] = []
        for name in new:
            decisions.extend(await self._load_topic(name))
        for name in list(self.topics):
            if name not in current:
                self.topics.pop(name, None)  # deleted behind our back
        if decisions:
            await self._announce(decisions)
        else:
            await self._send_update_metadata([], [])

    async def _load_topic(self, name: str) -> list[PartitionDecision]:
        assignment = await self.zk.call("get_topic_assignment", name)
        if assignment is None:
            return []
        topic = self.topics.get(name)
        if topic is None:
            topic = TopicState(assignment.topic_id, dict(assignment.partitions))
            self.topics[name] = topic
            log.info("[Controller id=%d] New topic %s with partitions %s", self.broker_id,
                     name, dict(sorted(assignment.partitions.items())))
        else:
            topic.assignment = dict(assignment.partitions)
        if name not in self._topic_watches:
            self._topic_watches.add(name)
            await self.zk.watch_data(zk_data.topic_path(name),
                                     lambda *_args, n=name: self.post("topic_changed", n))
        decisions = []
        for index in sorted(topic.assignment):
            decision = await self._elect_if_needed(name, topic, index)
            if decision is not None:
                decisions.append(decision)
            elif index in topic.partitions:
                decisions.append(topic.partitions[index])
        return decisions

    async def _on_topic_data_change(self, name: str) -> None:
        """Partitions added to a topic (CreatePartitions rewrites the assignment)."""
        if name not in self.topics:
            return
        decisions = await self._load_topic(name)
        await self._announce(decisions)

    async def _elect_if_needed(self, name: str, topic: TopicState,
                               index: int) -> PartitionDecision | None:
        """Create the partition's state znode, or move leadership off a dead leader.
        Returns the decision when it changed (or was just read)."""
        replicas = topic.assignment[index]
        live = [r for r in replicas if r in self.live_brokers]
        found = await self.zk.call("get_partition_state", name, index)
        if found is None:
            leader = live[0] if live else NO_LEADER
            state = zk_data.PartitionState(leader=leader, leader_epoch=0, isr=live or replicas,
                                           controller_epoch=self.epoch)
            await self.zk.call("create_partition_states", name, {index: state})
            decision = self._decision(name, topic, index, state, 0)
            state_change_log.info(
                "[Controller id=%d epoch=%d] Changed partition %s-%d from NewPartition to "
                "OnlinePartition with state LeaderAndIsr(leader=%d, leaderEpoch=0, isr=%s)",
                self.broker_id, self.epoch, name, index, leader, state.isr)
            topic.partitions[index] = decision
            return decision
        state, version = found
        decision = self._decision(name, topic, index, state, version)
        if state.leader in self.live_brokers:
            known = topic.partitions.get(index)
            topic.partitions[index] = decision
            return None if known == decision else decision
        # The leader is gone: prefer a live ISR member (clean election).
        candidates = [r for r in state.isr if r in self.live_brokers]
        leader = candidates[0] if candidates else NO_LEADER
        if leader == NO_LEADER and state.leader == NO_LEADER:
            topic.partitions[index] = decision
            return None
        isr = candidates if candidates else state.isr
        new_state = zk_data.PartitionState(leader=leader, leader_epoch=state.leader_epoch + 1,
                                           isr=isr, controller_epoch=self.epoch)
        new_version = await self.zk.call("update_partition_state", name, index, new_state,
                                         version)
        decision = self._decision(name, topic, index, new_state, new_version)
        topic.partitions[index] = decision
        state_change_log.info(
            "[Controller id=%d epoch=%d] Changed partition %s-%d leader from %d to %d "
            "(leader epoch %d, ISR %s)", self.broker_id, self.epoch, name, index,
            state.leader, leader, new_state.leader_epoch, isr)
        return decision

    def _decision(self, name: str, topic: TopicState, index: int,
                  state: zk_data.PartitionState, version: int) -> PartitionDecision:
        return PartitionDecision(name, topic.topic_id, index, state.leader, state.leader_epoch,
                                 list(state.isr), list(topic.assignment[index]), version,
                                 self.epoch)

    async def _on_delete_topics(self, names: Any) -> None:
        names = sorted(set(names or []))
        if not names:
            return
        if not self.delete_topic_enable:
            log.info("[Controller id=%d] Topic deletion is disabled; ignoring the deletion "
                     "of %s", self.broker_id, names)
            return
        deleted = []
        for name in names:
            topic = self.topics.pop(name, None)
            if topic is not None:
                by_broker: dict[int, list[tuple[str, int]]] = {}
                for index, replicas in topic.assignment.items():
                    for replica in replicas:
                        by_broker.setdefault(replica, []).append((name, index))
                for broker_id, partitions in by_broker.items():
                    if broker_id in self.live_brokers:
                        await self.channel.stop_replica(broker_id, partitions, delete=True)
            await self.zk.call("delete_topic_znodes", name)
            self._topic_watches.discard(name)
            deleted.append(name)
            log.info("[Controller id=%d] Deletion of topic %s successfully completed",
                     self.broker_id, name)
        await self._send_update_metadata([], deleted)

    # --- telling brokers ------------------------------------------------------------------

    async def _announce(self, decisions: list[PartitionDecision],
                        rejoined: Iterable[int] = ()) -> None:
        by_broker: dict[int, list[PartitionDecision]] = {}
        for decision in decisions:
            for replica in decision.replicas:
                if replica in self.live_brokers:
                    by_broker.setdefault(replica, []).append(decision)
        for broker_id in rejoined:
            # a broker that came back gets the state of everything it hosts
            by_broker[broker_id] = [
                d for t in self.topics.values() for d in t.partitions.values()
                if broker_id in d.replicas]
        for broker_id, batch in by_broker.items():
            await self.channel.leader_and_isr(broker_id, batch)
        await self._send_update_metadata(decisions, [])

    async def _send_update_metadata(self, decisions: list[PartitionDecision],
                                    deleted: list[str]) -> None:
        everything = [d for t in self.topics.values() for d in t.partitions.values()]
        await self.channel.update_metadata(self.live_brokers.keys(),
                                           list(self.live_brokers.values()), everything,
                                           deleted)
