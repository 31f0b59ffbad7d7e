"""The partitions this broker hosts and their leadership state (Kafka's ReplicaManager and
Partition, ZooKeeper mode).

The controller decides who leads (LeaderAndIsr); this module applies that: a leader
appends client batches and serves fetches up to the high watermark. The high watermark
is the smallest log end offset in the ISR; with only this broker in the ISR it follows
the log end at once. Requests that must wait (a fetch below min_bytes, acks=all) wait on
futures that appends and high-watermark moves complete: a follower's fetch on any append,
a consumer's fetch and an acks=all produce only when the offset they read to (the high
watermark, or the last stable offset for read_committed) passes where it was when they
parked.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from moldau.errors import (
    KafkaStorageError,
    NotLeaderOrFollowerError,
    UnknownTopicOrPartitionError,
)
from moldau.metrics.registry import Meter
from moldau.storage.config import LogConfig
from moldau.storage.log import READ_COMMITTED, PartitionLog
from moldau.storage.log_manager import LogManager

from .alter_log_dirs import LogDirMover
from .wait_deadlines import WaitDeadlines

state_change_log = logging.getLogger("state.change.logger")

class KnownPartitions(Protocol):
    """The cluster's metadata, as far as the replica manager asks it: does a partition
    exist (the broker's MetadataCache)."""

    def partition(self, topic: str, partition: int) -> object | None: ...

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
    adding: list[int] = field(default_factory=list)  # replicas a reassignment adds


@dataclass
class FollowerState:
    """The leader's view of one follower (Kafka's Replica): where its log ends and when
    it last caught up with the leader's log end."""

    log_end_offset: int = -1
    last_caught_up_ms: float = 0.0
    last_fetch_leader_end: int = -1  # the leader's log end at the follower's last fetch
    last_fetch_ms: float = 0.0

    def update(self, fetch_offset: int, leader_end: int, now_ms: float) -> None:
        # Kafka's rule: caught up when the fetch reaches the leader's end now, or the end
        # the leader had at the previous fetch (the follower got everything then)
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = now_ms


@dataclass(eq=False)
class Partition:
    topic: str
    index: int
    topic_id: UUID | None
    log: PartitionLog
    broker_id: int
    state: LeaderAndIsr
    # consumers' (read_uncommitted) long-polled fetches and acks=all produces: they end
    # when the high watermark passes waiters_floor, the lowest it was at a park
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    waiters_floor: int = 0
    # read_committed consumers' fetches: they end when the last stable offset passes
    # committed_floor (an open transaction holds it while the high watermark moves)
    committed_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    committed_floor: int = 0
    # followers' long-polled fetches: woken by appends and state changes, not by the high
    # watermark alone (a follower reads to the log end; it learns the high watermark
    # with its next records, as Kafka's DelayedFetch for a follower completes on bytes)
    follower_waiters: list[asyncio.Future[None]] = field(default_factory=list)
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # an ISR change being written to ZooKeeper; the high watermark counts both ISRs
    pending_isr: list[int] | None = None
    leader_epoch_start_offset: int = 0

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    def become_leader(self, now_ms: float, keep_followers: bool) -> None:
        """A new leader gives every follower a fresh lag clock (none is shrunk for the time
        before); a leader that stays keeps what it knows of them. The controller's state
        replaces any ISR change still being written."""
        known = self.followers if keep_followers else {}
        self.followers = {r: known.get(r) or FollowerState(last_caught_up_ms=now_ms)
                          for r in self.state.replicas if r != self.broker_id}
        self.pending_isr = None
        self.leader_epoch_start_offset = self.log.log_end_offset

    def maybe_increment_high_watermark(self) -> bool:
        """Move the high watermark to the smallest log end in the ISR (the pending ISR too,
        while a change is being written), never backwards. True when it moved; the caller
        wakes the waiters once for everything that changed."""
        state, me = self.state, self.broker_id
        if state.leader != me:
            return False
        plog = self.log
        new = plog.log_end_offset
        followers = self.followers
        # a replica in both ISRs counts twice: no matter for the minimum
        for members in (state.isr, self.pending_isr or ()):
            for replica in members:
                if replica != me:
                    follower = followers.get(replica)
                    end = follower.log_end_offset if follower is not None else -1
                    if end < new:
                        new = end
        old = plog.high_watermark
        if new <= old:
            return False
        return plog.update_high_watermark(new) != old

    def follower_fetched(self, replica_id: int, fetch_offset: int, now_ms: float) -> bool:
        """A follower fetched from fetch_offset: it has everything before. True when the
        high watermark moved."""
        follower = self.followers.get(replica_id)
        if follower is None:
            if replica_id not in self.state.replicas:
                return False
            follower = self.followers[replica_id] = FollowerState()
        follower.update(fetch_offset, self.log.log_end_offset, now_ms)
        return self.maybe_increment_high_watermark()

    def may_join_isr(self, replica_id: int) -> bool:
        """A follower outside the ISR that just fetched and caught up (Kafka's
        isFollowerInSync): at the high watermark and inside the current leader epoch.
        Only a fetch can add a follower: one that stopped fetching stays out."""
        follower = self.followers.get(replica_id)
        return (self.pending_isr is None and follower is not None
                and replica_id not in self.state.isr and replica_id in self.state.replicas
                and follower.log_end_offset >= self.log.high_watermark
                and follower.log_end_offset >= self.leader_epoch_start_offset)

    def followers_to_drop(self, now_ms: float, lag_max_ms: float) -> list[int]:
        """ISR followers that have not caught up for replica.lag.time.max.ms."""
        if self.pending_isr is not None:
            return []
        return [r for r in self.state.isr if r != self.broker_id
                and now_ms - self.followers.get(r, FollowerState()).last_caught_up_ms
                > lag_max_ms]

    def wake(self) -> None:
        """Complete every waiting fetch or produce: the partition's state changed
        (leadership, ISR, log), which any of them may have to answer."""
        if self.follower_waiters:
            waiters, self.follower_waiters = self.follower_waiters, []
            _complete_all(waiters)
        if self.waiters:
            waiters, self.waiters = self.waiters, []
            _complete_all(waiters)
        if self.committed_waiters:
            waiters, self.committed_waiters = self.committed_waiters, []
            _complete_all(waiters)

    def appended(self) -> None:
        """Records were appended (the high watermark already updated): followers' fetches
        read them; consumers and acks=all produces wake only if the high watermark (or
        LSO) moved with them, as it does at once with no other replica in the ISR. With
        followers it moves when they fetch, and a consumer's fetch woken by the append
        alone would re-read, find nothing it may return, and park again."""
        if self.follower_waiters:
            waiters, self.follower_waiters = self.follower_waiters, []
            _complete_all(waiters)
        self.wake_for_high_watermark()

    def wake_for_high_watermark(self) -> None:
        """Complete the waits the high watermark ends (acks=all produces, consumers'
        fetches) if it passed where they parked, leaving followers' fetches parked: with
        every acks=all record the high watermark moves once per ISR follower, and each
        wake of a follower's fetch that finds nothing new cost a re-read and a re-park
        on the leader."""
        if self.waiters and self.log.high_watermark > self.waiters_floor:
            waiters, self.waiters = self.waiters, []
            _complete_all(waiters)
        if self.committed_waiters and self.log.last_stable_offset > self.committed_floor:
            waiters, self.committed_waiters = self.committed_waiters, []
            _complete_all(waiters)

    def park(self, future: asyncio.Future[None], isolation: int | None) -> None:
        """Register a wait that read the partition just now: `isolation` as
        PartitionLog.fetch_upper_bound's (None for a follower's fetch, which wakes on
        appends; 0 to wait on the high watermark; READ_COMMITTED on the LSO)."""
        if isolation is None:
            self.follower_waiters.append(future)
        elif isolation == READ_COMMITTED:
            stable = self.log.last_stable_offset
            if not self.committed_waiters or stable < self.committed_floor:
                self.committed_floor = stable
            self.committed_waiters.append(future)
        else:
            high_watermark = self.log.high_watermark
            if not self.waiters or high_watermark < self.waiters_floor:
                self.waiters_floor = high_watermark
            self.waiters.append(future)

    def unpark(self, future: asyncio.Future[None], isolation: int | None) -> None:
        """Forget a park()ed wait (a wake may have taken it already)."""
        waiting = (self.follower_waiters if isolation is None
                   else self.committed_waiters if isolation == READ_COMMITTED
                   else self.waiters)
        try:  # noqa: SIM105 - a try is free; contextlib.suppress builds an object
            waiting.remove(future)
        except ValueError:  # a wake already took it
            pass


@dataclass(frozen=True)
class RecordedIsr:
    """The ISR ZooKeeper holds for a partition's current leader epoch, and the version of
    its state znode."""

    isr: list[int]
    zk_version: int


# writes a leader's new ISR to ZooKeeper; returns what ZooKeeper then holds (the written
# ISR, or the leader's own earlier write when that one landed but its answer was lost)
IsrWriter = Callable[[Partition, list[int]], Awaitable[RecordedIsr]]


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager,
                 isr_writer: IsrWriter | None = None) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        self.isr_writer = isr_writer
        self._isr_tasks: set[asyncio.Future[None]] = set()
        # moves of replicas between this broker's log dirs (AlterReplicaLogDirs)
        self.log_dir_mover = LogDirMover(log_manager, self.partitions)
        # Kafka's ReplicaManager meters (the broker puts registered ones here)
        self.isr_expands, self.isr_shrinks, self.failed_isr_updates = Meter(), Meter(), Meter()
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop waits run on (_loop_now)
        self._deadlines = WaitDeadlines()  # the timeouts of wait_for_change's waits

    # --- the ISR (leaders only) ---------------------------------------------------------

    def follower_fetched(self, partition: Partition, replica_id: int, fetch_offset: int,
                         now_ms: float) -> None:
        """Record a follower's fetch: the high watermark may move (waking acks=all
        produces) and a follower that caught up joins the ISR."""
        if partition.follower_fetched(replica_id, fetch_offset, now_ms):
            partition.wake_for_high_watermark()
        if partition.may_join_isr(replica_id):
            # appended, as Kafka's leader does (its ISR is a Scala Set, which keeps the
            # order members came in up to four): tools print the ISR in this order
            new_isr = [*partition.state.isr, replica_id]
            log.info("[Partition %s broker=%d] Expanding ISR from %s to %s", partition.name,
                     self.broker_id, _ids(partition.state.isr), _ids(new_isr))
            self.isr_expands.mark()
            self._change_isr(partition, new_isr)

    def shrink_lagging_isrs(self, lag_max_ms: float) -> None:
        """Drop followers that have not caught up for replica.lag.time.max.ms (Kafka's
        isr-expiration task)."""
        now_ms = time.time() * 1000
        for partition in list(self.partitions.values()):
            if not partition.is_leader:
                continue
            lagging = partition.followers_to_drop(now_ms, lag_max_ms)
            if not lagging:
                continue
            new_isr = [r for r in partition.state.isr if r not in lagging]
            log.info("[Partition %s broker=%d] Shrinking ISR from %s to %s. Leader: "
                     "(highWatermark: %d, endOffset: %d). Out of sync replicas: %s.",
                     partition.name, self.broker_id, _ids(partition.state.isr), _ids(new_isr),
                     partition.log.high_watermark, partition.log.log_end_offset,
                     ", ".join(f"(brokerId: {r}, endOffset: "
                               f"{partition.followers[r].log_end_offset})"
                               for r in lagging if r in partition.followers))
            self.isr_shrinks.mark()
            self._change_isr(partition, new_isr)

    def _change_isr(self, partition: Partition, new_isr: list[int]) -> None:
        if self.isr_writer is None:
            return
        partition.pending_isr = new_isr
        task = asyncio.ensure_future(self._write_isr(partition, new_isr))
        self._isr_tasks.add(task)
        task.add_done_callback(self._isr_tasks.discard)

    async def _write_isr(self, partition: Partition, new_isr: list[int]) -> None:
        epoch = partition.state.leader_epoch
        assert self.isr_writer is not None
        recorded: RecordedIsr | None = None
        try:
            recorded = await self.isr_writer(partition, new_isr)
        except Exception as exc:  # a conflict or an outage: the controller's word stands
            self.failed_isr_updates.mark()
            log.info("[Partition %s broker=%d] Failed to update the ISR to %s: %s; waiting "
                     "for the controller's state", partition.name, self.broker_id,
                     _ids(new_isr), exc)
        if partition.pending_isr is new_isr:
            partition.pending_isr = None
        # Only this partition's leader changes the ISR within a leader epoch, so what
        # ZooKeeper recorded is newer than any state of the same epoch with an older
        # version, including one a LeaderAndIsr brought while the write was out (read by
        # the controller before the write landed). Dropping it would leave the leader on a
        # stale version: every later ISR change would fail, and no controller request
        # comes to repair it.
        current = partition.state
        if (recorded is not None and current.leader_epoch == epoch
                and current.zk_version < recorded.zk_version):
            current.isr = list(recorded.isr)
            current.zk_version = recorded.zk_version
            log.info("[Partition %s broker=%d] ISR updated to %s and zkVersion updated to "
                     "[%d]", partition.name, self.broker_id, _ids(recorded.isr),
                     recorded.zk_version)
        partition.maybe_increment_high_watermark()
        partition.wake()

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
            if topic_id is not None:  # a log loaded at startup: is it this topic's?
                partition_log.check_or_set_topic_id(topic_id)
            partition = Partition(topic, index, topic_id, partition_log, self.broker_id, state)
            self.partitions[tp] = partition
        elif topic_id is not None and topic_id != partition.log.topic_id:
            partition.log.check_or_set_topic_id(topic_id)
            partition.topic_id = topic_id
        if state.leader_epoch < partition.state.leader_epoch:
            state_change_log.warning(
                "Ignoring LeaderAndIsr for partition %s with leader epoch %d: the current "
                "epoch %d is newer", partition.name, state.leader_epoch,
                partition.state.leader_epoch)
            return partition
        was_leader = partition.is_leader
        partition.state = state
        if partition.is_leader:
            # a new leader epoch starts at the log end (Kafka's leader epoch cache entry)
            partition.log.epochs.assign(state.leader_epoch, partition.log.log_end_offset)
            partition.become_leader(time.time() * 1000, keep_followers=was_leader)
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
        if tp in self.log_manager.futures.logs:  # a move found at startup resumes
            self.log_dir_mover.wake()
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

    def leading(self, topic: str, index: int, metadata: KnownPartitions,
                allow_follower: bool = False) -> Partition:
        """leader_partition for a client's request: the metadata is looked up only for a
        partition this broker does not host (produce and fetch ask for every partition)."""
        known = (topic, index) in self.partitions or metadata.partition(topic, index) is not None
        return self.leader_partition(topic, index, known, allow_follower)

    def leader_partition(self, topic: str, index: int, topic_known: bool,
                         allow_follower: bool = False) -> Partition:
        """The partition if this broker leads it (or follows it, with allow_follower:
        consumers may read from followers, KIP-392), else the error a client should
        see."""
        partition = self.partitions.get((topic, index))
        if partition is None:
            if topic_known:
                raise NotLeaderOrFollowerError(f"this broker does not host {topic}-{index}")
            raise UnknownTopicOrPartitionError(f"this server does not host {topic}-{index}")
        if not partition.is_leader and not (allow_follower and partition.state.leader >= 0):
            raise NotLeaderOrFollowerError(
                f"broker {self.broker_id} is not the leader of {partition.name} "
                f"(leader is {partition.state.leader})")
        if self.log_manager.logs.get((topic, index)) is not partition.log:
            # its log dir went offline (the log manager forgot its logs)
            raise KafkaStorageError(f"the log dir of {partition.name} is offline")
        return partition

    # --- waiting ----------------------------------------------------------------------------

    def _loop_now(self) -> asyncio.AbstractEventLoop:
        """The running loop, remembered: CPython 3.11's asyncio.get_running_loop() makes a
        getpid system call (a check for a fork), and every long-polled fetch and acks=all
        produce needs the loop. A loop no longer running (tests run one after another)
        is asked for again."""
        loop = self._loop
        if loop is None or not loop.is_running():
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def watch(self, partitions: Iterable[Partition],
              isolation: int | None = 0) -> asyncio.Future[None]:
        """A future that the next change of any of the partitions completes, registered
        now, right after the caller read them: one that reads, then returns a coroutine
        that waits (a long-polled fetch, whose task starts a loop pass later), must not
        miss a change between. `isolation` says what the wait reads to (Partition.park):
        None for a follower's fetch (the log end), 0 for the high watermark (consumers,
        acks=all produces), READ_COMMITTED for the last stable offset."""
        future: asyncio.Future[None] = self._loop_now().create_future()
        for partition in partitions:
            partition.park(future, isolation)
        return future

    async def wait_for_change(self, partitions: Iterable[Partition], timeout_s: float,
                              watched: asyncio.Future[None] | None = None,
                              isolation: int | None = 0) -> None:
        """Wait until any of the partitions gets what the wait reads or changes state, or
        the timeout (from `watched`, the partitions' watch() future, when the caller
        registered earlier; `isolation` as there). A timer completes the future, rather
        than asyncio.wait_for: that adds a future, callbacks and a loop pass to every
        long-polled fetch and acks=all wait; and one timer serves all waits
        (wait_deadlines.py), as nearly all of them end before their timeout."""
        partitions = list(partitions)
        future = self.watch(partitions, isolation) if watched is None else watched
        deadlines = self._deadlines
        wait = deadlines.add(future, timeout_s)
        try:
            await future
        finally:
            deadlines.remove(wait)
            self.unwatch(partitions, future, isolation)

    @staticmethod
    def unwatch(partitions: Iterable[Partition], future: asyncio.Future[None],
                isolation: int | None = 0) -> None:
        """Forget a watch() future (completed or not), registered with `isolation`."""
        if not future.done():
            future.cancel()
        for partition in partitions:
            partition.unpark(future, isolation)

    def shutdown(self) -> None:
        self.log_dir_mover.stop()
        for task in self._isr_tasks:
            task.cancel()
        for partition in self.partitions.values():
            partition.wake()
        self.partitions.clear()


def _complete_all(futures: list[asyncio.Future[None]]) -> None:
    for future in futures:
        if not future.done():
            future.set_result(None)


def _ids(replicas: Iterable[int]) -> str:
    return ",".join(str(r) for r in replicas)
