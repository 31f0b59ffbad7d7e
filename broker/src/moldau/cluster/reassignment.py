"""Partition reassignment as Kafka's ZooKeeper-mode controller runs it (KIP-455).

A reassignment moves a partition from its origin replicas (ORS) to target replicas (TRS):

1. The topic znode gets the full replica set RS = TRS + ORS (target first, no repeats)
   with `adding_replicas` (TRS - ORS) and `removing_replicas` (ORS - TRS); the leader
   epoch is bumped and every replica of RS hears LeaderAndIsr, so new replicas start
   fetching from the leader.
2. The controller waits until every target replica is in the ISR (leaders report ISR
   changes through /isr_change_notification).
3. Then the partition moves to TRS: a leader outside TRS (or dead) is replaced by the
   first live target replica in the ISR, removed replicas leave the ISR, the new state
   goes to the target replicas, the removed ones get StopReplica with delete, and the
   topic znode loses the adding/removing entries.

Cancelling (a reassignment to nothing) is a reassignment back to the origin replicas. A
new target for a partition being moved keeps the original origin; replicas the earlier
target added and the new one drops are stopped and deleted. Reassignments come from
AlterPartitionReassignments or the legacy /admin/reassign_partitions znode, which the
controller empties as partitions complete; after a controller change they resume from
the adding/removing replicas of the topic znodes.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from moldau.cluster import elections, zk_data
from moldau.cluster.controller_state import (
    ControllerHost,
    PartitionDecision,
    Reassignment,
    TopicPartition,
    TopicState,
)
from moldau.errors import (
    InvalidReplicaAssignmentError,
    KafkaError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

if TYPE_CHECKING:
    pass

log = logging.getLogger("kafka.controller")


def reassignments_in_znode(assignment: zk_data.TopicAssignment) -> dict[int, Reassignment]:
    """The moves a topic znode records (after a controller change)."""
    moving = set(assignment.adding_replicas) | set(assignment.removing_replicas)
    out = {}
    for index in moving:
        replicas = assignment.partitions.get(index, [])
        adding = assignment.adding_replicas.get(index, [])
        removing = assignment.removing_replicas.get(index, [])
        out[index] = Reassignment([r for r in replicas if r not in adding],
                                  [r for r in replicas if r not in removing])
    return out


def validate_target(target: list[int], adding: list[int], live: set[int]) -> KafkaError | None:
    """Kafka's validateReplicas."""
    if not target:
        return InvalidReplicaAssignmentError(
            "Empty replica list specified in partition reassignment.")
    if len(set(target)) != len(target):
        return InvalidReplicaAssignmentError(
            f"Duplicate replica ids in partition reassignment replica list: {_scala(target)}")
    if any(r < 0 for r in target):
        return InvalidReplicaAssignmentError(
            f"Invalid broker id in replica list: {_scala(target)}")
    if not set(adding) <= live:
        # Kafka prints Scala collections here: the replicas being added, then the live set
        return InvalidReplicaAssignmentError(
            "Replica assignment has brokers that are not alive. Replica list: "
            f"{_scala(adding)}, live broker list: {_scala(sorted(live), 'Set')}")
    return None


def _scala(items: list[int], kind: str = "ArrayBuffer") -> str:
    """A list as Kafka's controller prints it in these messages (a Scala collection)."""
    return f"{kind}({', '.join(map(str, items))})"


@dataclass
class _Batch:
    """What a group of partition changes sends together (see PartitionReassigner._send)."""

    decisions: list[PartitionDecision] = field(default_factory=list)
    stops: dict[int, list[TopicPartition]] = field(default_factory=dict)  # by broker
    completed: list[tuple[str, int, list[int]]] = field(default_factory=list)
    from_znode: bool = False  # a completed move came from /admin/reassign_partitions

    def stop(self, name: str, index: int, replicas: list[int]) -> None:
        for replica in replicas:
            self.stops.setdefault(replica, []).append((name, index))


class PartitionReassigner:
    """The controller's reassignment steps; runs inside the controller's event loop."""

    def __init__(self, controller: ControllerHost) -> None:
        self.controller = controller

    # --- starting ---------------------------------------------------------------------

    async def alter(self, wanted: dict[TopicPartition, list[int] | None],
                    from_znode: bool = False) -> dict[TopicPartition, KafkaError | None]:
        """Start (or cancel, for None) the reassignment of each partition."""
        results: dict[TopicPartition, KafkaError | None] = {}
        starting: list[tuple[str, TopicState, int, list[int]]] = []
        for (name, index), target in wanted.items():
            topic = self.controller.topics.get(name)
            if topic is None or index not in topic.assignment:
                results[(name, index)] = UnknownTopicOrPartitionError(
                    "The partition does not exist.")
                continue
            ongoing = topic.reassigning.get(index)
            if target is None:
                if ongoing is None:
                    results[(name, index)] = NoReassignmentInProgressError()  # as Kafka
                    continue
                target = list(ongoing.origin)
            origin = ongoing.origin if ongoing else list(topic.assignment[index])
            move = Reassignment(origin, list(target), from_znode)
            error = validate_target(move.target, move.adding,
                                    set(self.controller.live_brokers))
            if error is not None:
                results[(name, index)] = error
                continue
            starting.append((name, topic, index, self._begin(name, topic, index, move)))
            results[(name, index)] = None
        if starting:
            await self._start(starting)
        if not from_znode and starting:
            await self._rewrite_znode()
        return results

    def _begin(self, name: str, topic: TopicState, index: int, move: Reassignment
               ) -> list[int]:
        """The move in the controller's memory; returns the replicas it no longer needs
        (an earlier target's that the new one drops)."""
        before = topic.assignment[index]
        log.info("[Controller id=%d] Reassigning %s-%d from %s to %s (adding %s, removing "
                 "%s)", self.controller.broker_id, name, index, move.origin, move.target,
                 move.adding, move.removing)
        topic.reassigning[index] = move
        topic.assignment[index] = move.replicas
        return [r for r in before if r not in move.replicas]

    async def _start(self, starting: list[tuple[str, TopicState, int, list[int]]]) -> None:
        """Step 1 for every partition of one request together: the topic znodes (once per
        topic), each partition's new leader epoch, then one LeaderAndIsr per broker for all
        of them. Per-partition requests queued behind each other reached the brokers up to
        a second apart, and a follower that heard of a new epoch before its leader (or
        after) could not fetch meanwhile, stalling acks=all produces."""
        batch = _Batch()
        for name in dict.fromkeys(name for name, _, _, _ in starting):
            await self._write_topic(name, self.controller.topics[name])
        zk = self.controller.zk
        for name, topic, index, unneeded in starting:
            found = await zk.call(zk.client.get_partition_state, name, index)
            if found is None:
                continue
            state, version = found
            move = topic.reassigning[index]
            if set(move.target) <= set(state.isr):
                await self._prepare_completion(name, topic, index, batch)
            else:
                isr = [r for r in state.isr if r not in unneeded]
                batch.decisions.append(await self.controller.write_state(
                    name, topic, index, state, version, state.leader, isr, "reassignment"))
            batch.stop(name, index, unneeded)
        await self._send(batch)

    # --- finishing ----------------------------------------------------------------------

    async def maybe_complete(self, partitions: set[TopicPartition]) -> None:
        """ISR changes arrived: finish the moves whose targets are all in sync."""
        batch = _Batch()
        zk = self.controller.zk
        for name, index in sorted(partitions):
            topic = self.controller.topics.get(name)
            if topic is None or index not in topic.reassigning:
                continue
            found = await zk.call(zk.client.get_partition_state, name, index)
            if found is not None and set(topic.reassigning[index].target) <= set(found[0].isr):
                log.info("[Controller id=%d] Target replicas %s have all caught up with the "
                         "leader for reassigning partition %s-%d", self.controller.broker_id,
                         topic.reassigning[index].target, name, index)
                await self._prepare_completion(name, topic, index, batch)
        await self._send(batch)

    async def _prepare_completion(self, name: str, topic: TopicState, index: int,
                                  batch: _Batch) -> None:
        """Step 3's state for one partition; _send tells the brokers."""
        move = topic.reassigning.pop(index)
        zk = self.controller.zk
        found = await zk.call(zk.client.get_partition_state, name, index)
        if found is None:
            return
        state, version = found
        topic.assignment[index] = list(move.target)
        # not yet excluding replicas on failed log dirs, which Kafka's isReplicaOnline does
        eligible = {r for r in move.target if self.controller.eligible(r)}
        election = elections.after_reassignment(state.leader, state.isr, move.target, eligible)
        batch.decisions.append(await self.controller.write_state(
            name, topic, index, state, version, election.leader, list(election.isr),
            "reassignment completed"))
        batch.stop(name, index, move.removing)
        batch.completed.append((name, index, list(move.target)))
        batch.from_znode = batch.from_znode or move.from_znode

    async def _send(self, batch: _Batch) -> None:
        """The new states to their replicas (one LeaderAndIsr per broker), then the removed
        replicas stopped and deleted, then the completed moves leave the znodes."""
        if batch.decisions:
            await self.controller.announce(batch.decisions)
        for replica, partitions in batch.stops.items():
            if replica in self.controller.live_brokers:
                await self.controller.channel.stop_replica(replica, partitions, delete=True)
        for name in dict.fromkeys(name for name, _, _ in batch.completed):
            topic = self.controller.topics.get(name)
            if topic is not None:
                await self._write_topic(name, topic)
        if batch.from_znode:
            await self._rewrite_znode()
        for name, index, target in batch.completed:
            log.info("[Controller id=%d] Reassignment of %s-%d to %s completed",
                     self.controller.broker_id, name, index, target)

    async def _write_topic(self, name: str, topic: TopicState) -> None:
        moves = topic.reassigning
        assignment = zk_data.TopicAssignment(
            partitions=dict(topic.assignment), topic_id=topic.topic_id,
            adding_replicas={i: m.adding for i, m in moves.items() if m.adding},
            removing_replicas={i: m.removing for i, m in moves.items() if m.removing})
        zk = self.controller.zk
        await zk.call(zk.client.set_topic_assignment, name, assignment)

    # --- the legacy znode ------------------------------------------------------------------

    async def on_znode(self, data: bytes | None) -> None:
        """/admin/reassign_partitions was written: start what it lists; what cannot start
        leaves the znode."""
        if data is None:
            return
        try:
            wanted = zk_data.decode_reassignment(data)
        except Exception as exc:
            log.error("[Controller id=%d] Ignoring an unreadable %s: %s",
                      self.controller.broker_id, zk_data.REASSIGN_PARTITIONS_PATH, exc)
            zk = self.controller.zk
            await zk.call(zk.client.delete_recursive, zk_data.REASSIGN_PARTITIONS_PATH)
            return
        fresh: dict[TopicPartition, list[int] | None] = {}
        for (name, index), target in wanted.items():
            topic = self.controller.topics.get(name)
            ongoing = topic.reassigning.get(index) if topic else None
            if ongoing is not None and ongoing.target == target:
                ongoing.from_znode = True  # already running (a controller change)
            else:
                fresh[(name, index)] = list(target)
        results = await self.alter(fresh, from_znode=True)
        failed = {tp for tp, error in results.items() if error is not None}
        if failed:
            log.warning("[Controller id=%d] Failed reassignment through zk with the "
                        "following errors: %s", self.controller.broker_id,
                        {tp: str(results[tp]) for tp in failed})
        await self._rewrite_znode()

    async def _rewrite_znode(self) -> None:
        """The znode lists the znode-started moves still running (a move started by the
        API replaces one the znode asked for); it is deleted when none is left."""
        zk = self.controller.zk
        if not await zk.call(zk.client.exists, zk_data.REASSIGN_PARTITIONS_PATH):
            return
        remaining = {(name, index): move.target
                     for name, topic in self.controller.topics.items()
                     for index, move in topic.reassigning.items() if move.from_znode}
        found = await zk.call(zk.client.get, zk_data.REASSIGN_PARTITIONS_PATH)
        with contextlib.suppress(Exception):  # unreadable: rewrite it
            if found is not None and zk_data.decode_reassignment(found[0]) == remaining:
                return  # unchanged: a write would only fire the watch again
        if remaining:
            await zk.call(zk.client.set_partition_reassignment, remaining)
        else:
            await zk.call(zk.client.delete_recursive, zk_data.REASSIGN_PARTITIONS_PATH)

    # --- listing ------------------------------------------------------------------------

    def ongoing(self, partitions: list[TopicPartition] | None
                ) -> dict[TopicPartition, Reassignment]:
        """The moves in progress, of the given partitions or of all."""
        out = {}
        for name, topic in self.controller.topics.items():
            for index, move in topic.reassigning.items():
                if partitions is None or (name, index) in partitions:
                    out[(name, index)] = move
        return out
