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
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar
from uuid import UUID

from moldau.cluster import zk_data
from moldau.cluster.reassignment import PartitionReassigner, Reassignment, reassignments_in_znode
from moldau.cluster.zk_client import (
    ControllerMovedError,
    ZkBadVersionError,
    ZooKeeperUnavailableError,
)
from moldau.errors import (
    BrokerNotAvailableError,
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    KafkaError,
    NotControllerError,
    PreferredLeaderNotAvailableError,
    StaleBrokerEpochError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger("kafka.controller")
state_change_log = logging.getLogger("state.change.logger")

NO_LEADER = -1
T = TypeVar("T")
BAD_VERSION_RETRIES = 5


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
    adding: list[int] = field(default_factory=list)  # replicas a reassignment adds


@dataclass
class TopicState:
    topic_id: UUID
    assignment: dict[int, list[int]]  # during a reassignment: the full replica set
    partitions: dict[int, PartitionDecision] = field(default_factory=dict)
    reassigning: dict[int, Reassignment] = field(default_factory=dict)


class ControllerChannel(Protocol):
    """How the controller reaches brokers (the requests Kafka's controller sends)."""

    async def leader_and_isr(self, broker_id: int, decisions: list[PartitionDecision]) -> None: ...

    async def update_metadata(self, broker_ids: Iterable[int],
                              live_brokers: list[zk_data.BrokerRegistration],
                              decisions: list[PartitionDecision],
                              deleted_topics: list[str]) -> None: ...

    async def stop_replica(self, broker_id: int, partitions: list[tuple[str, int]],
                           delete: bool) -> None: ...

    def set_live_brokers(self, live: list[zk_data.BrokerRegistration]) -> None:
        """The brokers requests can go to (the registrations name their endpoints)."""

    def controller_moved(self, controller_id: int) -> None:
        """This broker stopped being the controller; -1 while no one is known."""


class Controller:
    def __init__(self, broker_id: int, zk: Any, channel: ControllerChannel,
                 delete_topic_enable: bool = True, unclean_election: bool = False,
                 leader_rebalance: tuple[float, int] | None = None) -> None:
        self.broker_id = broker_id
        self.zk = zk  # AsyncZk
        self.channel = channel
        self.delete_topic_enable = delete_topic_enable
        self.unclean_election = unclean_election  # the broker default; topics may override
        self.shutting_down: set[int] = set()  # brokers in controlled shutdown
        # replicas on failed log dirs, by broker (until the broker registers again)
        self.offline_replicas: dict[int, set[tuple[str, int]]] = {}
        # auto.leader.rebalance.enable: (check interval s, imbalance percentage) or None
        self.leader_rebalance = leader_rebalance
        self._rebalancer: asyncio.Task[None] | None = None
        self.epoch = 0
        self.active = False
        self.live_brokers: dict[int, zk_data.BrokerRegistration] = {}
        self.topics: dict[str, TopicState] = {}
        self._events: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._topic_watches: set[str] = set()
        self.reassigner = PartitionReassigner(self)
        # metrics hooks (ControllerStats): the ms an election round took, unclean elections
        self.on_election_round: Callable[[float], None] | None = None
        self.on_unclean_election: Callable[[], None] | None = None

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
        if self._rebalancer is not None:
            self._rebalancer.cancel()
        if self._worker is not None:
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._worker

    async def _run(self) -> None:
        handlers: dict[str, Callable[[Any], Awaitable[None]]] = {
            "elect": self._elect,
            "brokers": self._on_brokers_change,
            "topics": self._on_topics_change,
            "topic_changed": self._on_topic_data_change,
            "delete_topics": self._on_delete_topics,
            "isr_change": self._on_isr_change,
            "ask": self._on_ask,
            "preferred_election_znode": self._on_preferred_election_znode,
            "leader_imbalance_check": self._check_leader_imbalance,
            "reassign_znode": self.reassigner.on_znode,
            "log_dir_event": self._on_log_dir_event,
            "offline_replicas": self._on_offline_replicas,
        }
        while True:
            event, payload = await self._events.get()
            if event != "elect" and not self.active:
                if event == "ask" and not payload[2].done():
                    payload[2].set_exception(NotControllerError(
                        f"broker {self.broker_id} is not the controller"))
                continue
            try:
                await self._handle(handlers[event], event, payload)
            except asyncio.CancelledError:
                raise
            except ZooKeeperUnavailableError as exc:  # an outage, not a bug: no traceback
                log.error("[Controller id=%d] Could not process event %s: %s",
                          self.broker_id, event, exc)
            except ControllerMovedError as exc:  # another broker was elected meanwhile
                log.info("[Controller id=%d] Stopped processing event %s: %s",
                         self.broker_id, event, exc)
                if event == "ask" and not payload[2].done():
                    payload[2].set_exception(NotControllerError(str(exc)))
                self.post("elect")  # finds the new holder of /controller and resigns
            except Exception:
                log.exception("[Controller id=%d] Error processing event %s", self.broker_id,
                              event)

    async def _handle(self, handler: Callable[[Any], Awaitable[None]], event: str,
                      payload: Any) -> None:
        """Run an event's handler; a conditional write that lost a race with a leader's
        ISR update (or another writer) runs the handler again on fresh state, as Kafka's
        controller retries such partitions."""
        for attempt in range(1, BAD_VERSION_RETRIES + 1):
            try:
                await handler(payload)
                return
            except ZkBadVersionError as exc:
                if attempt == BAD_VERSION_RETRIES:
                    if event == "ask" and not payload[2].done():
                        payload[2].set_exception(exc)
                    raise
                log.info("[Controller id=%d] Retrying event %s: %s", self.broker_id, event, exc)
                await asyncio.sleep(0.02 * attempt)

    async def _ask(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run fn(*args) as an event of the controller (in order with the others, so it
        sees a consistent state) and return its result."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self.post("ask", (fn, args, future))
        return await future

    async def _on_ask(self, payload: Any) -> None:
        fn, args, future = payload
        try:
            result = await fn(*args)
        except ZkBadVersionError:
            raise  # _handle runs it again
        except ControllerMovedError as exc:
            if not future.done():
                future.set_exception(NotControllerError(str(exc)))
            raise
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            raise
        if not future.done():
            future.set_result(result)

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
        await self.zk.watch_children(zk_data.ISR_CHANGE_NOTIFICATION_PATH,
                                     lambda names: self.post("isr_change", names))
        await self.zk.watch_data(zk_data.PREFERRED_REPLICA_ELECTION_PATH,
                                 lambda data, _stat: self.post("preferred_election_znode",
                                                               data))
        await self.zk.watch_children(zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH,
                                     lambda names: self.post("log_dir_event", names))
        await self.zk.watch_data(zk_data.REASSIGN_PARTITIONS_PATH,
                                 lambda data, _stat: self.post("reassign_znode", data))
        if self.leader_rebalance is not None and self._rebalancer is None:
            self._rebalancer = asyncio.ensure_future(self._rebalance_timer(
                *self.leader_rebalance))

    async def _rebalance_timer(self, interval_s: float, percentage: int) -> None:
        while True:
            await asyncio.sleep(interval_s)
            if self.active:
                self.post("leader_imbalance_check", percentage)

    # --- brokers --------------------------------------------------------------------------

    async def _load_brokers(self) -> None:
        brokers = await self.zk.call("get_all_brokers")
        self.live_brokers = {b.id: b for b in brokers}
        self.channel.set_live_brokers(brokers)
        log.info("[Controller id=%d] Live brokers: %s", self.broker_id,
                 sorted(self.live_brokers))

    async def _on_brokers_change(self, _ids: Any) -> None:
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
                decision = await self._elect_if_needed(name, topic, index)
                if decision is not None:
                    changed.append(decision)
        await self.announce(changed, rejoined=new)
        if changed and self.on_election_round is not None:
            self.on_election_round((time.monotonic() - started) * 1000)

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
            await self.announce(decisions)
        else:
            await self._send_update_metadata([], [])
        # moves a previous controller left running may have caught up meanwhile
        await self.reassigner.maybe_complete({
            (name, index) for name in new if name in self.topics
            for index in self.topics[name].reassigning})

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
        recorded = reassignments_in_znode(assignment)
        for index, move in recorded.items():
            known = topic.reassigning.get(index)
            if known is not None and (known.origin, known.target) == (move.origin, move.target):
                move.from_znode = known.from_znode
        topic.reassigning = recorded
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
        """Partitions added to a topic (CreatePartitions rewrites the assignment). Only the
        partitions whose state changed here (new ones, a leader elected) are announced,
        as in Kafka: the reassigner writes this znode for every move, and re-announcing
        every partition of the topic each time queued LeaderAndIsr and UpdateMetadata
        requests for all of them behind each other (a 50-partition __consumer_offsets
        moved off a broker sent thousands), so brokers heard of new leader epochs up to a
        second apart."""
        topic = self.topics.get(name)
        if topic is None:
            return
        before = dict(topic.partitions)
        decisions = await self._load_topic(name)
        changed = [d for d in decisions if before.get(d.partition) != d]
        if changed:
            await self.announce(changed)

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
            await self.zk.call("create_partition_states", name, {index: state},
                               self._epoch_zk_version())
            decision = self._decision(name, topic, index, state, 0)
            state_change_log.info(
                "[Controller id=%d epoch=%d] Changed partition %s-%d from NewPartition to "
                "OnlinePartition with state LeaderAndIsr(leader=%d, leaderEpoch=0, isr=%s)",
                self.broker_id, self.epoch, name, index, leader, state.isr)
            topic.partitions[index] = decision
            return decision
        state, version = found
        decision = self._decision(name, topic, index, state, version)
        choice = await self._choose(name, index, replicas, state)
        if choice is None:  # nothing to change
            known = topic.partitions.get(index)
            topic.partitions[index] = decision
            return None if known == decision else decision
        leader, isr, unclean = choice
        return await self.write_state(name, topic, index, state, version, leader, isr,
                                       "unclean election" if unclean else "election")

    def eligible(self, broker_id: int, tp: tuple[str, int] | None = None) -> bool:
        """Whether a replica may lead: alive, not shutting down, and (for a partition)
        not on a failed log dir of its broker."""
        return (broker_id in self.live_brokers and broker_id not in self.shutting_down
                and (tp is None or tp not in self.offline_replicas.get(broker_id, ())))

    async def _choose(self, name: str, index: int, replicas: list[int],
                      state: zk_data.PartitionState
                      ) -> tuple[int, list[int], bool] | None:
        """The new (leader, ISR, unclean) of a partition after brokers came or went, or
        None when it stays. Dead replicas leave the ISR (all of it stays when none is
        alive, so any member can lead again cleanly when it returns); a dead leader is
        replaced by the first live ISR member in assignment order (Kafka's
        OfflinePartitionLeaderElectionStrategy), or, only when
        unclean.leader.election.enable allows it, by any live replica."""
        isr_live = [r for r in state.isr if r in self.live_brokers]
        if state.leader in self.live_brokers:
            return None if isr_live == state.isr else (state.leader, isr_live, False)
        candidates = [r for r in replicas if r in isr_live and self.eligible(r, (name, index))]
        if candidates:
            return candidates[0], isr_live, False
        live = [r for r in replicas if self.eligible(r, (name, index))]
        if live and await self._unclean_allowed(name):
            return live[0], [live[0]], True
        # No ISR member is alive. Every member holds every committed record, so the ISR
        # stays whole and whichever returns first leads cleanly (Kafka narrows it to its
        # last member, which only delays that).
        kept = isr_live or list(state.isr)
        if state.leader == NO_LEADER and kept == state.isr:
            return None
        return NO_LEADER, kept, False

    async def _unclean_allowed(self, name: str) -> bool:
        overrides = await self.zk.call("get_entity_config", "topics", name)
        value = overrides.get("unclean.leader.election.enable")
        return self.unclean_election if value is None else value.strip().lower() == "true"

    async def write_state(self, name: str, topic: TopicState, index: int,
                           state: zk_data.PartitionState, version: int, leader: int,
                           isr: list[int], why: str) -> PartitionDecision:
        """Write a partition's new leader and ISR (a new leader epoch) conditionally on the
        state we read, and remember the decision."""
        new_state = zk_data.PartitionState(leader=leader, leader_epoch=state.leader_epoch + 1,
                                           isr=isr, controller_epoch=self.epoch)
        new_version = await self.zk.call("update_partition_state", name, index, new_state,
                                         version, self._epoch_zk_version())
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
        return int(self.zk.client.controller_epoch_zk_version)

    def _decision(self, name: str, topic: TopicState, index: int,
                  state: zk_data.PartitionState, version: int) -> PartitionDecision:
        move = topic.reassigning.get(index)
        return PartitionDecision(name, topic.topic_id, index, state.leader, state.leader_epoch,
                                 list(state.isr), list(topic.assignment[index]), version,
                                 self.epoch, move.adding if move is not None else [])

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

    # --- ISR changes made by leaders ---------------------------------------------------------

    async def _on_isr_change(self, _names: Any) -> None:
        """Leaders wrote new ISRs to ZooKeeper: read them and tell every broker."""
        changed = await self.zk.call("take_isr_change_notifications")
        decisions = []
        for name, index in sorted(changed):
            topic = self.topics.get(name)
            if topic is None or index not in topic.assignment:
                continue
            found = await self.zk.call("get_partition_state", name, index)
            if found is not None:
                decision = self._decision(name, topic, index, *found)
                topic.partitions[index] = decision
                decisions.append(decision)
        if decisions:
            await self._send_update_metadata(decisions, [])
        await self.reassigner.maybe_complete(changed)

    # --- failed log dirs ----------------------------------------------------------------

    async def _on_log_dir_event(self, _names: Any) -> None:
        """A broker lost a log dir (/log_dir_event_notification): ask it about every
        replica it hosts; its LeaderAndIsr answer names the offline ones (Kafka's
        onBrokerLogDirFailure)."""
        for broker_id in sorted(await self.zk.call("take_log_dir_event_notifications")):
            if broker_id not in self.live_brokers:
                continue
            log.info("[Controller id=%d] Handling a log dir failure on broker %d",
                     self.broker_id, broker_id)
            hosted = [d for t in self.topics.values() for d in t.partitions.values()
                      if broker_id in d.replicas]
            if hosted:
                await self.channel.leader_and_isr(broker_id, hosted)

    async def _on_offline_replicas(self, payload: Any) -> None:
        """Replicas a broker reported on failed log dirs leave the ISR, and a partition
        they led gets the first other live ISR member as leader (offline without one)."""
        broker_id, partitions = payload
        if broker_id not in self.live_brokers:
            return
        self.offline_replicas.setdefault(broker_id, set()).update(partitions)
        changed: list[PartitionDecision] = []
        for name, index in sorted(set(partitions)):
            topic = self.topics.get(name)
            found = (await self.zk.call("get_partition_state", name, index)
                     if topic is not None and index in topic.assignment else None)
            if topic is None or found is None:
                continue
            state, version = found
            isr = [r for r in state.isr if r != broker_id]
            leader = state.leader
            if leader == broker_id:
                others = [r for r in topic.assignment[index]
                          if r in isr and self.eligible(r, (name, index))]
                leader = others[0] if others else NO_LEADER
            if not isr:
                isr = list(state.isr)  # it held every committed record: it stays in
            if (leader, isr) != (state.leader, state.isr):
                changed.append(await self.write_state(name, topic, index, state, version,
                                                      leader, isr, "log dir failure"))
        if changed:
            await self.announce(changed)

    # --- controlled shutdown ------------------------------------------------------------------

    async def controlled_shutdown(self, broker_id: int,
                                  broker_epoch: int) -> list[tuple[str, int]]:
        """Move leadership off a broker that is stopping; the replicated partitions it
        still leads (no other ISR member alive) are returned, as Kafka does."""
        return await self._ask(self._shut_down, broker_id, broker_epoch)

    async def _shut_down(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        registration = self.live_brokers.get(broker_id)
        if registration is None:
            raise BrokerNotAvailableError(f"broker {broker_id} is not alive")
        if broker_epoch != -1 and broker_epoch < registration.epoch:
            raise StaleBrokerEpochError(f"broker epoch {broker_epoch} is stale")
        log.info("[Controller id=%d] Shutting down broker %d", self.broker_id, broker_id)
        self.shutting_down.add(broker_id)
        changed: list[PartitionDecision] = []
        followed: list[tuple[str, int]] = []
        for name, topic in self.topics.items():
            for index, replicas in topic.assignment.items():
                if broker_id not in replicas or len(replicas) < 2:
                    continue
                found = await self.zk.call("get_partition_state", name, index)
                if found is None:
                    continue
                state, version = found
                isr = [r for r in state.isr if r != broker_id]
                if state.leader == broker_id:
                    others = [r for r in replicas
                              if r in isr and self.eligible(r, (name, index))]
                    if others:
                        changed.append(await self.write_state(
                            name, topic, index, state, version, others[0], isr,
                            "controlled shutdown"))
                elif broker_id in state.isr and isr:
                    changed.append(await self.write_state(
                        name, topic, index, state, version, state.leader, isr,
                        "controlled shutdown"))
                    followed.append((name, index))
        await self.announce(changed)
        if followed:
            await self.channel.stop_replica(broker_id, followed, delete=False)
        return sorted((name, index) for name, topic in self.topics.items()
                      for index, d in topic.partitions.items()
                      if d.leader == broker_id and len(topic.assignment[index]) > 1)

    # --- leader elections on request (ElectLeaders, the znode, auto rebalance) ---------------

    async def elect_leaders(self, partitions: list[tuple[str, int]] | None,
                            preferred: bool) -> dict[tuple[str, int], KafkaError | None]:
        """Run a preferred (or unclean) election for the partitions (None: all); each gets
        None when its leader changed, else the error Kafka answers for it."""
        return await self._ask(self._elect_partitions, partitions, preferred)

    async def _elect_partitions(self, partitions: list[tuple[str, int]] | None,
                                preferred: bool) -> dict[tuple[str, int], KafkaError | None]:
        if partitions is None:
            partitions = [(n, i) for n, t in self.topics.items() for i in t.assignment]
        results: dict[tuple[str, int], KafkaError | None] = {}
        changed: list[PartitionDecision] = []
        for name, index in partitions:
            topic = self.topics.get(name)
            found = (await self.zk.call("get_partition_state", name, index)
                     if topic is not None and index in topic.assignment else None)
            if topic is None or found is None:
                results[(name, index)] = UnknownTopicOrPartitionError(
                    f"{name}-{index} does not exist")
                continue
            state, version = found
            replicas = topic.assignment[index]
            if preferred:
                wanted = replicas[0]
                if state.leader == wanted:
                    results[(name, index)] = ElectionNotNeededError(
                        "Leader election not needed for topic partition.")
                    continue
                if wanted not in state.isr or not self.eligible(wanted, (name, index)):
                    results[(name, index)] = PreferredLeaderNotAvailableError(
                        f"Failed to elect leader for partition {name}-{index} under "
                        "strategy PreferredReplicaPartitionLeaderElectionStrategy")
                    continue
                leader, isr, why = wanted, list(state.isr), "preferred replica election"
            else:
                if state.leader in self.live_brokers:
                    results[(name, index)] = ElectionNotNeededError(
                        "Leader election not needed for topic partition.")
                    continue
                live = [r for r in replicas if self.eligible(r, (name, index))]
                in_isr = [r for r in live if r in state.isr]
                if not live:
                    results[(name, index)] = EligibleLeadersNotAvailableError(
                        f"Failed to elect leader for partition {name}-{index} under "
                        "strategy UncleanPartitionLeaderElectionStrategy")
                    continue
                leader = (in_isr or live)[0]
                isr = [r for r in state.isr if r in self.live_brokers] if in_isr else [leader]
                why = "election" if in_isr else "unclean election"
            changed.append(await self.write_state(name, topic, index, state, version,
                                                   leader, isr, why))
            results[(name, index)] = None
        await self.announce(changed)
        return results

    async def _on_preferred_election_znode(self, data: bytes | None) -> None:
        """The old tools' way: partitions listed in /admin/preferred_replica_election get
        a preferred election; the controller deletes the znode when done."""
        if data is None:
            return
        wanted = sorted(zk_data.decode_preferred_replica_election(data))
        log.info("[Controller id=%d] Starting replica leader election (PREFERRED) for "
                 "partitions %s triggered by ZkTriggered", self.broker_id,
                 ",".join(f"{t}-{p}" for t, p in wanted))
        await self._elect_partitions(wanted, preferred=True)
        await self.zk.call("delete_recursive", zk_data.PREFERRED_REPLICA_ELECTION_PATH)

    async def _check_leader_imbalance(self, percentage: Any) -> None:
        """auto.leader.rebalance.enable: a broker leading fewer than its share of the
        partitions it is the preferred leader of, by more than
        leader.imbalance.per.broker.percentage, gets them back (Kafka's
        checkAndTriggerAutoLeaderRebalance)."""
        by_preferred: dict[int, list[tuple[str, int]]] = {}
        for name, topic in self.topics.items():
            for index, replicas in topic.assignment.items():
                if replicas:
                    by_preferred.setdefault(replicas[0], []).append((name, index))
        for broker_id, partitions in sorted(by_preferred.items()):
            if not self.eligible(broker_id):
                continue
            elsewhere = [(n, i) for n, i in partitions
                         if (d := self.topics[n].partitions.get(i)) is not None
                         and d.leader != broker_id and broker_id in d.isr]
            imbalance = len(elsewhere) / len(partitions)
            if elsewhere and imbalance * 100 > percentage:
                log.info("[Controller id=%d] Leader imbalance ratio for broker %d is %.3f: "
                         "starting a preferred replica election", self.broker_id,
                         broker_id, imbalance)
                await self._elect_partitions(elsewhere, preferred=True)

    # --- partition reassignment (moldau.cluster.reassignment) ---------------------------------

    async def alter_reassignments(self, wanted: dict[tuple[str, int], list[int] | None]
                                  ) -> dict[tuple[str, int], KafkaError | None]:
        """Start or cancel (None) reassignments; each partition gets None or its error."""
        return await self._ask(self.reassigner.alter, wanted)

    # --- telling brokers ------------------------------------------------------------------

    async def announce(self, decisions: list[PartitionDecision],
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
