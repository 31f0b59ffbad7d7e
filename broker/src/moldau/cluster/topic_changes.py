"""What the controller does when topics come, change and go (Kafka's TopicChange,
PartitionModifications and TopicDeletion events): load a topic's assignment and elect
leaders for its new partitions, give an id to a topic written without one, and delete a
topic's replicas and znodes. Runs inside the controller's event loop."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from typing import Protocol
from uuid import UUID

from moldau.cluster import zk_data
from moldau.cluster.controller_events import ControllerEvent, PartitionModifications
from moldau.cluster.controller_state import (
    ControllerHost,
    PartitionDecision,
    TopicPartition,
    TopicState,
)
from moldau.cluster.reassignment import PartitionReassigner, reassignments_in_znode

log = logging.getLogger("kafka.controller")


class TopicChangesHost(ControllerHost, Protocol):
    """What topic changes use of the controller they run in, beyond what every helper
    does."""

    @property
    def delete_topic_enable(self) -> bool: ...

    @property
    def reassigner(self) -> PartitionReassigner: ...

    def post(self, event: ControllerEvent) -> None: ...

    async def elect_if_needed(self, name: str, topic: TopicState,
                              index: int) -> PartitionDecision | None: ...

    async def send_update_metadata(self, decisions: list[PartitionDecision],
                                   deleted: list[str]) -> None: ...


class TopicChanges:
    def __init__(self, controller: TopicChangesHost) -> None:
        self.controller = controller
        self._watched: set[str] = set()  # topics whose znode this controller watches

    async def on_topics(self, names: Iterable[str]) -> None:
        """/brokers/topics' children: load the new topics, forget vanished ones."""
        controller = self.controller
        current = set(names)
        new = [n for n in sorted(current) if n not in controller.topics]
        decisions: list[PartitionDecision] = []
        for name in new:
            decisions.extend(await self._load(name))
        for name in list(controller.topics):
            if name not in current:
                controller.topics.pop(name, None)  # deleted behind our back
        if decisions:
            await controller.announce(decisions)
        else:
            await controller.send_update_metadata([], [])
        # moves a previous controller left running may have caught up meanwhile
        await controller.reassigner.maybe_complete({
            (name, index) for name in new if name in controller.topics
            for index in controller.topics[name].reassigning})

    async def on_topic_data(self, name: str) -> None:
        """Partitions added to a topic (CreatePartitions rewrites the assignment). Only the
        partitions whose state changed here (new ones, a leader elected) are announced,
        as in Kafka: the reassigner writes this znode for every move, and re-announcing
        every partition of the topic each time queued LeaderAndIsr and UpdateMetadata
        requests for all of them behind each other (a 50-partition __consumer_offsets
        moved off a broker sent thousands), so brokers heard of new leader epochs up to a
        second apart."""
        topic = self.controller.topics.get(name)
        if topic is None:
            return
        before = dict(topic.partitions)
        decisions = await self._load(name)
        changed = [d for d in decisions if before.get(d.partition) != d]
        if changed:
            await self.controller.announce(changed)

    async def on_deletions(self, names: Iterable[str]) -> None:
        """/admin/delete_topics' children: stop and delete the replicas, then the znodes."""
        controller = self.controller
        names = sorted(set(names))
        if not names:
            return
        if not controller.delete_topic_enable:
            log.info("[Controller id=%d] Topic deletion is disabled; ignoring the deletion "
                     "of %s", controller.broker_id, names)
            return
        deleted = []
        for name in names:
            topic = controller.topics.pop(name, None)
            if topic is not None:
                by_broker: dict[int, list[TopicPartition]] = {}
                for index, replicas in topic.assignment.items():
                    for replica in replicas:
                        by_broker.setdefault(replica, []).append((name, index))
                for broker_id, partitions in by_broker.items():
                    if broker_id in controller.live_brokers:
                        await controller.channel.stop_replica(broker_id, partitions,
                                                              delete=True)
            await controller.zk.call(controller.zk.client.delete_topic_znodes, name)
            self._watched.discard(name)
            deleted.append(name)
            log.info("[Controller id=%d] Deletion of topic %s successfully completed",
                     controller.broker_id, name)
        await controller.send_update_metadata([], deleted)

    async def _load(self, name: str) -> list[PartitionDecision]:
        """Read a topic's assignment, watch its znode, and elect where needed: the
        decisions of its partitions (changed or just read)."""
        controller = self.controller
        zk = controller.zk
        assignment = await zk.call(zk.client.get_topic_assignment, name)
        if assignment is None:
            return []
        topic = controller.topics.get(name)
        if topic is None:
            topic_id = assignment.topic_id or await self._assign_id(name, assignment)
            topic = TopicState(topic_id, dict(assignment.partitions))
            controller.topics[name] = topic
            log.info("[Controller id=%d] New topic %s with partitions %s",
                     controller.broker_id, name, dict(sorted(assignment.partitions.items())))
        else:
            topic.assignment = dict(assignment.partitions)
        recorded = reassignments_in_znode(assignment)
        for index, move in recorded.items():
            known = topic.reassigning.get(index)
            if known is not None and (known.origin, known.target) == (move.origin, move.target):
                move.from_znode = known.from_znode
        topic.reassigning = recorded
        if name not in self._watched:
            self._watched.add(name)
            await zk.watch_data(zk_data.topic_path(name),
                                lambda *_args, n=name: controller.post(PartitionModifications(n)))
        decisions = []
        for index in sorted(topic.assignment):
            decision = await controller.elect_if_needed(name, topic, index)
            if decision is not None:
                decisions.append(decision)
            elif index in topic.partitions:
                decisions.append(topic.partitions[index])
        return decisions

    async def _assign_id(self, name: str, assignment: zk_data.TopicAssignment) -> UUID:
        """A topic znode without an id (written by tools before Kafka 2.8) gets one, as
        Kafka's controller does (processTopicIds): LeaderAndIsr and the logs need it."""
        zk = self.controller.zk
        topic_id = zk_data.random_uuid()
        await zk.call(zk.client.set_topic_assignment, name,
                      dataclasses.replace(assignment, topic_id=topic_id), assignment.zk_version)
        log.info("[Controller id=%d] Assigned topic id %s to topic %s",
                 self.controller.broker_id, topic_id, name)
        return topic_id
