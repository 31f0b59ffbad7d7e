"""The partitions this broker hosts and their leadership state (Kafka's ReplicaManager and
Partition, ZooKeeper mode).

The controller decides who leads (LeaderAndIsr); this module applies that: a leader
appends client batches and serves fetches up to the high watermark. The high watermark
is the smallest log end offset in the ISR; with only this broker in the ISR it follows
the log end at once. Requests that must wait (a fetch below min_bytes, acks=all) wait on
futures that appends and high-watermark moves complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from moldau.errors import (
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog
from moldau.storage.log_manager import LogManager

state_change_log = logging.getLogger("state.change.logger")
log = logging.getLogger("kafka.server.ReplicaManager")

TopicPartition = tuple[str, int]


@dataclass
class LeaderAndIsr:
    """What the controller decided for one partition (LeaderAndIsr request's state)."""

    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    controller_epoch: int = 0
    zk_version: int = 0


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: UUID | None
    log: PartitionLog
    broker_id: int
    state: LeaderAndIsr
    waiters: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark to the smallest log end in the ISR (just ours while the
        ISR is only this broker; followers' positions join with replication). True when it
        moved; the caller wakes the waiters once for everything that changed."""
        if not self.is_leader:
            return False
        old = self.log.high_watermark
        return self.log.update_high_watermark(self.log.log_end_offset) != old

    def wake(self) -> None:
        """Complete every waiting fetch or produce: something they wait for moved."""
        if self.waiters:
            waiters, self.waiters = self.waiters, []
            for future in waiters:
                if not future.done():
                    future.set_result(None)


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}

    # --- leadership (from the controller) ------------------------------------------------

    def become_leader_or_follower(
        self, topic: str, index: int, topic_id: UUID | None, state: LeaderAndIsr,
        config: LogConfig | None = None,
    ) -> Partition:
        tp = (topic, index)
        partition = self.partitions.get(tp)
        if partition is None:
            partition_log = self.log_manager.get_or_create_log(
                topic, index, topic_id=topic_id, config=config)
            partition = Partition(topic, index, topic_id, partition_log, self.broker_id, state)
            self.partitions[tp] = partition
        elif state.leader_epoch < partition.state.leader_epoch:
            state_change_log.warning(
                "Ignoring LeaderAndIsr for partition %s with leader epoch %d: the current "
                "epoch %d is newer", partition.name, state.leader_epoch,
                partition.state.leader_epoch)
            return partition
        partition.state = state
        if partition.is_leader:
            # a new leader epoch starts at the log end (Kafka's leader epoch cache entry)
            partition.log.epochs.assign(state.leader_epoch, partition.log.log_end_offset)
            partition.maybe_increment_high_watermark()
            state_change_log.info(
                "Leader %s starts at leader epoch %d from offset %d with partition epoch %d, "
                "high watermark %d, ISR %s", partition.name, state.leader_epoch,
                partition.log.log_end_offset, state.zk_version, partition.log.high_watermark,
                state.isr)
        else:
            state_change_log.info("Follower %s starts at leader epoch %d with leader %d",
                                  partition.name, state.leader_epoch, state.leader)
        partition.wake()
        return partition

    def stop_replica(self, topic: str, index: int, delete: bool) -> None:
        partition = self.partitions.pop((topic, index), None)
        if partition is not None:
            partition.wake()
        if delete:
            self.log_manager.delete_log(topic, index)
        state_change_log.info("Stopped replica %s-%d (delete=%s)", topic, index, delete)

    # --- lookups --------------------------------------------------------------------------

    def get_partition(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def leader_partition(self, topic: str, index: int, topic_known: bool) -> Partition:
        """The partition if this broker leads it, else the error a client should see."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            if topic_known:
                raise NotLeaderOrFollowerError(f"this broker does not host {topic}-{index}")
            raise UnknownTopicOrPartitionError(f"this server does not host {topic}-{index}")
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} is not the leader of {partition.name} "
                f"(leader is {partition.state.leader})")
        if self.log_manager.logs.get((topic, index)) is not partition.log:
            # its log dir went offline (the log manager forgot its logs)
            raise KafkaStorageError(f"the log dir of {partition.name} is offline")
        return partition

    # --- waiting ----------------------------------------------------------------------------

    async def wait_for_change(self, partitions: Iterable[Partition], timeout_s: float) -> None:
        """Wait until any of the partitions gets data or changes state, or the timeout."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        for partition in partitions:
            partition.waiters.append(future)
        try:
            await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            pass
        finally:
            if not future.done():
                future.cancel()
            for partition in partitions:
                with contextlib.suppress(ValueError):  # a wake() already took it
                    partition.waiters.remove(future)

    def shutdown(self) -> None:
        for partition in self.partitions.values():
            partition.wake()
        self.partitions.clear()

