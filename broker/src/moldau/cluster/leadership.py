"""Leadership moves the controller makes besides reacting to brokers coming and going:
controlled shutdown, elections asked for (ElectLeaders, /admin/preferred_replica_election,
the auto leader rebalance), and replicas on failed log dirs. Runs inside the
controller's event loop; the rules are in `elections`."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

from moldau.cluster import elections, zk_data
from moldau.cluster.controller_state import (
    ControllerHost,
    PartitionDecision,
    TopicPartition,
    TopicState,
)
from moldau.errors import (
    BrokerNotAvailableError,
    KafkaError,
    StaleBrokerEpochError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger("kafka.controller")


class LeadershipHost(ControllerHost, Protocol):
    """What these moves use of the controller they run in, beyond what every helper does."""

    @property
    def shutting_down(self) -> set[int]: ...

    @property
    def offline_replicas(self) -> dict[int, set[TopicPartition]]: ...


class LeadershipMoves:
    def __init__(self, controller: LeadershipHost) -> None:
        self.controller = controller

    def _eligible(self, name: str, index: int, replicas: Iterable[int]) -> set[int]:
        return {r for r in replicas if self.controller.eligible(r, (name, index))}

    async def _state(self, name: str, index: int
                     ) -> tuple[TopicState, zk_data.PartitionState, int] | None:
        """A partition's topic and (state, znode version); None when either is unknown."""
        topic = self.controller.topics.get(name)
        if topic is None or index not in topic.assignment:
            return None
        zk = self.controller.zk
        found = await zk.call(zk.client.get_partition_state, name, index)
        return None if found is None else (topic, *found)

    # --- controlled shutdown ------------------------------------------------------------------

    async def shut_down(self, broker_id: int, broker_epoch: int) -> list[TopicPartition]:
        """Move leadership off a broker that is stopping, and take it out of the ISRs it
        follows in; returns the replicated partitions it still leads."""
        controller = self.controller
        registration = controller.live_brokers.get(broker_id)
        if registration is None:
            raise BrokerNotAvailableError(f"broker {broker_id} is not alive")
        if broker_epoch != -1 and broker_epoch < registration.epoch:
            raise StaleBrokerEpochError(f"broker epoch {broker_epoch} is stale")
        log.info("[Controller id=%d] Shutting down broker %d", controller.broker_id, broker_id)
        controller.shutting_down.add(broker_id)
        changed: list[PartitionDecision] = []
        followed: list[TopicPartition] = []
        for name, topic in controller.topics.items():
            for index, replicas in topic.assignment.items():
                if broker_id not in replicas or len(replicas) < 2:
                    continue
                read = await self._state(name, index)
                if read is None:
                    continue
                _, state, version = read
                election = elections.for_controlled_shutdown(
                    state.leader, state.isr, replicas, broker_id,
                    self._eligible(name, index, replicas))
                if election is None:
                    continue
                changed.append(await controller.write_state(
                    name, topic, index, state, version, election.leader, list(election.isr),
                    "controlled shutdown"))
                if state.leader != broker_id:
                    followed.append((name, index))
        await controller.announce(changed)
        if followed:
            await controller.channel.stop_replica(broker_id, followed, delete=False)
        return sorted((name, index) for name, topic in controller.topics.items()
                      for index, d in topic.partitions.items()
                      if d.leader == broker_id and len(topic.assignment[index]) > 1)

    # --- elections asked for ---------------------------------------------------------------

    async def elect(self, partitions: Sequence[TopicPartition] | None,
                    preferred: bool) -> dict[TopicPartition, KafkaError | None]:
        """A preferred (or unclean) election for the partitions (None: all); each gets None
        when its leader changed, else the error Kafka answers for it."""
        controller = self.controller
        if partitions is None:
            partitions = [(n, i) for n, t in controller.topics.items() for i in t.assignment]
        results: dict[TopicPartition, KafkaError | None] = {}
        changed: list[PartitionDecision] = []
        for name, index in partitions:
            read = await self._state(name, index)
            if read is None:
                # Kafka 3.9's controller words it so, without the partition's name
                results[(name, index)] = UnknownTopicOrPartitionError(
                    "The partition does not exist.")
                continue
            topic, state, version = read
            replicas = topic.assignment[index]
            eligible = self._eligible(name, index, replicas)
            outcome = (
                elections.preferred_on_request((name, index), state.leader, state.isr,
                                               replicas, eligible) if preferred
                else elections.unclean_on_request((name, index), state.leader, state.isr,
                                                  replicas, controller.live_brokers, eligible))
            if isinstance(outcome, KafkaError):
                results[(name, index)] = outcome
                continue
            why = ("preferred replica election" if preferred
                   else "unclean election" if outcome.unclean else "election")
            changed.append(await controller.write_state(name, topic, index, state, version,
                                                        outcome.leader, list(outcome.isr), why))
            results[(name, index)] = None
        await controller.announce(changed)
        return results

    async def on_preferred_election_znode(self, data: bytes | None) -> None:
        """The old tools' way: partitions listed in /admin/preferred_replica_election get
        a preferred election; the controller deletes the znode when done."""
        if data is None:
            return
        wanted = sorted(zk_data.decode_preferred_replica_election(data))
        log.info("[Controller id=%d] Starting replica leader election (PREFERRED) for "
                 "partitions %s triggered by ZkTriggered", self.controller.broker_id,
                 ",".join(f"{t}-{p}" for t, p in wanted))
        await self.elect(wanted, preferred=True)
        zk = self.controller.zk
        await zk.call(zk.client.delete_recursive, zk_data.PREFERRED_REPLICA_ELECTION_PATH)

    async def check_leader_imbalance(self, percentage: int) -> None:
        """auto.leader.rebalance.enable: brokers leading too few of their preferred
        partitions get them back (elections.leader_imbalances)."""
        controller = self.controller
        assignments = {(n, i): replicas for n, t in controller.topics.items()
                       for i, replicas in t.assignment.items()}
        current = {(n, i): (d.leader, d.isr) for n, t in controller.topics.items()
                   for i, d in t.partitions.items()}
        eligible = {b for b in controller.live_brokers if controller.eligible(b)}
        for imbalance in elections.leader_imbalances(assignments, current, eligible,
                                                     percentage):
            log.info("[Controller id=%d] Leader imbalance ratio for broker %d is %.3f: "
                     "starting a preferred replica election", controller.broker_id,
                     imbalance.broker_id, imbalance.ratio)
            await self.elect(imbalance.partitions, preferred=True)

    # --- failed log dirs ----------------------------------------------------------------

    async def on_log_dir_event(self) -> None:
        """A broker lost a log dir (/log_dir_event_notification): ask it about every
        replica it hosts; its LeaderAndIsr answer names the offline ones (Kafka's
        onBrokerLogDirFailure)."""
        controller = self.controller
        zk = controller.zk
        for broker_id in sorted(await zk.call(zk.client.take_log_dir_event_notifications)):
            if broker_id not in controller.live_brokers:
                continue
            log.info("[Controller id=%d] Handling a log dir failure on broker %d",
                     controller.broker_id, broker_id)
            hosted = [d for t in controller.topics.values() for d in t.partitions.values()
                      if broker_id in d.replicas]
            if hosted:
                await controller.channel.leader_and_isr(broker_id, hosted)

    async def on_offline_replicas(self, broker_id: int,
                                  partitions: Sequence[TopicPartition]) -> None:
        """Replicas a broker reported on failed log dirs leave the ISR, and a partition
        they led gets the first other live ISR member as leader (offline without one)."""
        controller = self.controller
        if broker_id not in controller.live_brokers:
            return
        controller.offline_replicas.setdefault(broker_id, set()).update(partitions)
        changed: list[PartitionDecision] = []
        for name, index in sorted(set(partitions)):
            read = await self._state(name, index)
            if read is None:
                continue
            topic, state, version = read
            replicas = topic.assignment[index]
            election = elections.after_log_dir_failure(
                state.leader, state.isr, replicas, broker_id,
                self._eligible(name, index, replicas))
            if election is not None:
                changed.append(await controller.write_state(
                    name, topic, index, state, version, election.leader, list(election.isr),
                    "log dir failure"))
        if changed:
            await controller.announce(changed)
