"""What brokers ask of the controller besides a controlled shutdown: ISR changes
(AlterPartition, how a Kafka broker at IBP 2.7 or later changes an ISR) and blocks of
producer ids (AllocateProducerIds, how one at IBP 3.0 or later gets them), with the rules
of Kafka's KafkaController (processAlterPartition, processAllocateProducerIds). Runs
inside the controller's event loop, in order with its other events.

Unlike Kafka's controller, which compares a request with its cached partition state,
this reads the state znode: Moldau's own leaders still write their ISR changes to
ZooKeeper directly (announced through /isr_change_notification), so the cache may lag a
write the requester has already seen.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from moldau.cluster import zk_data
from moldau.cluster.controller_state import ControllerHost, PartitionDecision, TopicPartition
from moldau.cluster.zk_errors import ZkBadVersionError, ZkNoNodeError
from moldau.errors import (
    BrokerIdNotRegisteredError,
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidRequestError,
    InvalidUpdateVersionError,
    KafkaError,
    NotControllerError,
    NotLeaderOrFollowerError,
    OperationNotAttemptedError,
    StaleBrokerEpochError,
    UnknownTopicOrPartitionError,
)

log = logging.getLogger("kafka.controller")
state_change_log = logging.getLogger("state.change.logger")

RECOVERED = zk_data.LEADER_RECOVERY_RECOVERED
RECOVERING = 1  # LeaderRecoveryState.RECOVERING: after an unclean election (KIP-704)


@dataclass(frozen=True)
class IsrChange:
    """One partition of an AlterPartition request: the ISR its leader wants, at the
    leader and partition epochs (the state znode's version) it last saw."""

    topic: str
    partition: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    leader_recovery_state: int = RECOVERED
    # v3 (KIP-903): each member's broker epoch as the leader knows it, -1 when unknown
    broker_epochs: Mapping[int, int] = field(default_factory=dict)


class BrokerRequestsHost(ControllerHost, Protocol):
    @property
    def shutting_down(self) -> set[int]: ...

    @property
    def epoch(self) -> int: ...

    def decision(self, name: str, index: int, state: zk_data.PartitionState,
                 version: int) -> PartitionDecision: ...

    async def isr_changed(self, decisions: list[PartitionDecision]) -> None: ...


class BrokerRequests:
    def __init__(self, controller: BrokerRequestsHost) -> None:
        self.controller = controller

    def _check_broker(self, broker_id: int, broker_epoch: int,
                      unknown: type[KafkaError]) -> None:
        """The requester must be a live broker at the epoch of its registration."""
        registration = self.controller.live_brokers.get(broker_id)
        if registration is None:
            log.info("[Controller id=%d] Ignoring a request from broker %d: it is not "
                     "registered", self.controller.broker_id, broker_id)
            raise unknown(f"broker {broker_id} is not registered")
        if broker_epoch != registration.epoch:
            log.info("[Controller id=%d] Ignoring a request from broker %d at broker epoch "
                     "%d: its registration's is %d", self.controller.broker_id, broker_id,
                     broker_epoch, registration.epoch)
            raise StaleBrokerEpochError(f"broker epoch {broker_epoch} is not "
                                        f"{registration.epoch}")

    # --- AllocateProducerIds ---------------------------------------------------------------

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """The next block of producer ids for a broker, from /latest_producer_id_block as
        Moldau's brokers take their own: (first id, count)."""
        self._check_broker(broker_id, broker_epoch, BrokerIdNotRegisteredError)
        zk = self.controller.zk
        first, last = await zk.call(zk.client.allocate_producer_id_block, broker_id)
        log.info("[Controller id=%d] Allocated producer ids %d to %d for broker %d",
                 self.controller.broker_id, first, last, broker_id)
        return first, last - first + 1

    # --- AlterPartition -----------------------------------------------------------------------

    async def alter_partition(self, broker_id: int, broker_epoch: int,
                              changes: Iterable[IsrChange], version: int
                              ) -> dict[TopicPartition, PartitionDecision | KafkaError]:
        """Write the ISR changes a leader asks for; each partition gets its new state or
        the error Kafka's controller answers for it."""
        self._check_broker(broker_id, broker_epoch, StaleBrokerEpochError)
        results: dict[TopicPartition, PartitionDecision | KafkaError] = {}
        written: list[PartitionDecision] = []
        for change in changes:
            tp = (change.topic, change.partition)
            try:
                decision, new = await self._alter_one(broker_id, change, version)
            except KafkaError as exc:
                results[tp] = exc
                continue
            results[tp] = decision
            if new:  # written now (not a retry of a change already made)
                written.append(decision)
        if written:
            await self.controller.isr_changed(written)
        return results

    async def _alter_one(self, broker_id: int, change: IsrChange,
                         version: int) -> tuple[PartitionDecision, bool]:
        controller = self.controller
        topic = controller.topics.get(change.topic)
        if topic is None or change.partition not in topic.assignment:
            raise UnknownTopicOrPartitionError(f"{change.topic}-{change.partition}")
        zk = controller.zk
        found = await zk.call(zk.client.get_partition_state, change.topic, change.partition)
        if found is None:
            raise UnknownTopicOrPartitionError(f"{change.topic}-{change.partition} has no state")
        current, partition_epoch = found
        name = f"{change.topic}-{change.partition}"
        if change.partition_epoch > partition_epoch or change.leader_epoch > current.leader_epoch:
            # the leader knows a newer state than this controller reads: it may have lost
            # its office (Kafka answers so that the leader looks for the new controller)
            raise NotControllerError(f"{name}: the request's epochs are newer")
        if change.leader_epoch < current.leader_epoch:
            raise FencedLeaderEpochError(
                f"{name}: leader epoch {change.leader_epoch} < {current.leader_epoch}")
        if broker_id != current.leader:
            raise NotLeaderOrFollowerError(f"{name}: broker {broker_id} is not its leader")
        if (sorted(change.isr) == sorted(current.isr)
                and change.leader_recovery_state == current.leader_recovery_state):
            # already so (a retry whose answer was lost): answered before the version check
            return controller.decision(change.topic, change.partition, current,
                                       partition_epoch), False
        if change.partition_epoch < partition_epoch:
            raise InvalidUpdateVersionError(
                f"{name}: partition epoch {change.partition_epoch} < {partition_epoch}")
        if change.leader_recovery_state == RECOVERING and len(change.isr) > 1:
            raise InvalidRequestError(f"{name}: a recovering leader's ISR is itself only")
        if (current.leader_recovery_state, change.leader_recovery_state) == (RECOVERED,
                                                                             RECOVERING):
            raise InvalidRequestError(f"{name}: a recovered partition cannot go back")
        ineligible = self._ineligible(change)
        if ineligible:
            log.info("[Controller id=%d] Rejecting the ISR %s of %s: replicas %s are not "
                     "eligible", controller.broker_id, change.isr, name, sorted(ineligible))
            if version > 1:
                raise IneligibleReplicaError(f"{name}: replicas {sorted(ineligible)}")
            raise OperationNotAttemptedError(f"{name}: replicas {sorted(ineligible)}")
        new_state = zk_data.PartitionState(
            leader=current.leader, leader_epoch=current.leader_epoch, isr=list(change.isr),
            controller_epoch=controller.epoch,
            leader_recovery_state=change.leader_recovery_state)
        try:
            new_version = await zk.call(zk.client.update_partition_state, change.topic,
                                        change.partition, new_state, partition_epoch,
                                        zk.client.controller_epoch_zk_version)
        except ZkBadVersionError:
            raise InvalidUpdateVersionError(f"{name}: changed while being written") from None
        except ZkNoNodeError:
            raise UnknownTopicOrPartitionError(name) from None
        # a ControllerMovedError goes to the event loop: the request answers NOT_CONTROLLER
        # and this broker resigns
        state_change_log.info(
            "[Controller id=%d epoch=%d] Changed the ISR of partition %s from %s to %s at "
            "broker %d's request (leaderEpoch=%d, partitionEpoch=%d)", controller.broker_id,
            controller.epoch, name, current.isr, change.isr, broker_id,
            current.leader_epoch, new_version)
        return controller.decision(change.topic, change.partition, new_state, new_version), True

    def _ineligible(self, change: IsrChange) -> set[int]:
        """ISR members that may not be in it (KIP-841): not alive, shutting down, or (v3,
        KIP-903) known to the leader at another registration than the live one."""
        controller = self.controller
        ineligible = set()
        for replica in change.isr:
            registration = controller.live_brokers.get(replica)
            epoch = change.broker_epochs.get(replica, -1)
            if (registration is None or replica in controller.shutting_down
                    or (epoch != -1 and epoch != registration.epoch)):
                ineligible.add(replica)
        return ineligible
