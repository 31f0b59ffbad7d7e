"""A consumer's long-polled fetch on a leader with a follower in the ISR (RF 2), on a real
log in a temporary directory, the real FetchHandler, ProduceAppends and ReplicaManager:
an append alone leaves the fetch parked (its records are not readable until the follower
has them), the follower's fetch that moves the high watermark answers it, and a
read_committed fetch waits for the last stable offset, not the high watermark."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from moldau.metrics.registry import MetricsRegistry
from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.records import CONTROL_COMMIT, build_batch, build_control_batch
from moldau.replication.replica_manager import LeaderAndIsr, Partition, ReplicaManager
from moldau.replication.throttle import LEADER, ReplicationThrottle
from moldau.server.broker_metrics import DelayedOperations, NoTopicStats
from moldau.server.handlers.fetch import FetchHandler
from moldau.server.handlers.produce import ProduceAppends
from moldau.server.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from moldau.storage.config import LogConfig
from moldau.storage.log import READ_COMMITTED, READ_UNCOMMITTED
from moldau.storage.log_manager import LogManager, ManagerConfig

from .test_handler_ports import Config, context

LEADER_ID, FOLLOWER_ID = 1, 2
TOPIC = "orders"
PID = 4000
MAX_WAIT_MS = 5000  # far beyond what any answer below may take


@dataclass
class Leader:
    replicas: ReplicaManager
    partition: Partition
    appends: ProduceAppends
    fetch: FetchHandler

    def produce(self, seq: int = 0, transactional: bool = False) -> None:
        """A client's two-record batch through the leader's append path."""
        batch = build_batch([(b"k", b"v"), (b"k", b"w")], producer_id=PID, producer_epoch=0,
                            base_sequence=seq, is_transactional=transactional)
        self._append(batch, from_client=True)

    def commit(self) -> None:
        """The transaction's COMMIT marker, as WriteTxnMarkers appends it."""
        self._append(build_control_batch(CONTROL_COMMIT, producer_id=PID, producer_epoch=0,
                                         coordinator_epoch=0), from_client=False)

    def _append(self, batch: bytes, from_client: bool) -> None:
        partition = self.partition
        info = partition.log.append_as_leader(batch, partition.leader_epoch,
                                              from_client=from_client)
        self.appends.after_append(TOPIC, partition, info, len(batch))

    def follower_catches_up(self) -> None:
        """The follower fetches at the leader's log end: the high watermark follows."""
        self.replicas.follower_fetched(self.partition, FOLLOWER_ID,
                                       self.partition.log.log_end_offset, time.time() * 1000)

    def consume(self, offset: int, isolation: int) -> asyncio.Future[Any]:
        """A consumer's fetch (min_bytes 1) in a task: its answer's one partition."""
        request = FetchRequest(
            replica_id=-1, max_wait_ms=MAX_WAIT_MS, min_bytes=1, max_bytes=1 << 20,
            isolation_level=isolation, session_id=0, session_epoch=-1,
            topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                            partition_max_bytes=1 << 20,
                                            current_leader_epoch=-1, last_fetched_epoch=-1,
                                            log_start_offset=-1)])])
        answer = self.fetch(context(1, 12), request)
        assert asyncio.iscoroutine(answer), "the fetch must park: nothing is readable yet"

        async def partition_data() -> Any:
            [topic] = (await answer).responses
            [data] = topic.partitions
            return data

        return asyncio.ensure_future(partition_data())


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Leader]:
    manager = LogManager(ManagerConfig([str(tmp_path)], LEADER_ID, "cluster"), LogConfig())
    replicas = ReplicaManager(LEADER_ID, manager)
    topic_id = uuid.uuid4()
    isr = [LEADER_ID, FOLLOWER_ID]
    partition = replicas.become_leader_or_follower(TOPIC, 0, topic_id,
                                                   LeaderAndIsr(LEADER_ID, 0, isr, isr))
    metadata = MetadataCache(LEADER_ID)
    metadata.put_topic(TopicInfo(TOPIC, topic_id, {0: PartitionInfo(0, LEADER_ID, 0, isr,
                                                                     isr)}))
    registry = MetricsRegistry()
    purgatory = {kind: DelayedOperations(registry, kind) for kind in ("Produce", "Fetch")}
    appends = ProduceAppends(metadata, replicas, manager, NoTopicStats(registry), purgatory)
    fetch = FetchHandler(
        Config({"max.incremental.fetch.session.cache.slots": 10,  # type: ignore[arg-type]
                "replica.selector.class": None}),
        metadata, replicas, NoTopicStats(registry), purgatory,
        ReplicationThrottle(LEADER, LEADER_ID, lambda _: LogConfig(), lambda: 0.0))
    yield Leader(replicas, partition, appends, fetch)
    manager.shutdown()


async def _settle() -> None:
    """Let every ready callback and task run (a woken fetch re-reads within a few)."""
    for _ in range(10):
        await asyncio.sleep(0)


def test_an_append_leaves_the_consumer_parked_until_the_high_watermark_moves(
        leader: Leader) -> None:
    async def scenario() -> None:
        consumer = leader.consume(0, READ_UNCOMMITTED)
        await _settle()
        [parked] = leader.partition.waiters
        leader.produce()
        leader.produce(seq=2)
        await _settle()
        assert leader.partition.log.high_watermark == 0
        # not woken: the same wait is parked (a wake takes it, and the re-read parks a
        # new one)
        assert leader.partition.waiters == [parked] and not consumer.done()
        leader.follower_catches_up()
        data = await asyncio.wait_for(consumer, MAX_WAIT_MS / 2000)
        assert data.error_code == 0 and data.high_watermark == 4 and len(data.records) > 0
        assert leader.partition.waiters == []

    asyncio.run(scenario())


def test_read_committed_waits_for_the_last_stable_offset(leader: Leader) -> None:
    """An open transaction holds the LSO while the high watermark moves past its records:
    the read_committed fetch stays parked where a read_uncommitted one answers; the
    marker answers it once the follower has it too."""
    async def scenario() -> None:
        committed = leader.consume(0, READ_COMMITTED)
        uncommitted = leader.consume(0, READ_UNCOMMITTED)
        await _settle()
        [parked] = leader.partition.committed_waiters
        leader.produce(transactional=True)
        leader.follower_catches_up()
        assert (await asyncio.wait_for(uncommitted, MAX_WAIT_MS / 2000)).high_watermark == 2
        await _settle()
        assert leader.partition.log.last_stable_offset == 0
        assert leader.partition.committed_waiters == [parked] and not committed.done()
        leader.commit()  # the marker is not stable before the follower has it
        await _settle()
        assert leader.partition.committed_waiters == [parked] and not committed.done()
        leader.follower_catches_up()
        data = await asyncio.wait_for(committed, MAX_WAIT_MS / 2000)
        assert data.error_code == 0 and data.last_stable_offset == 3
        assert len(data.records) > 0 and data.aborted_transactions == []

    asyncio.run(scenario())


def test_with_no_follower_in_the_isr_an_append_answers_at_once(leader: Leader) -> None:
    """RF 1 in effect (the follower left the ISR): the high watermark moves with the
    append, and so the parked fetch answers."""
    leader.partition.state.isr = [LEADER_ID]

    async def scenario() -> None:
        consumer = leader.consume(0, READ_UNCOMMITTED)
        await _settle()
        leader.produce()
        data = await asyncio.wait_for(consumer, MAX_WAIT_MS / 2000)
        assert data.high_watermark == 2 and len(data.records) > 0

    asyncio.run(scenario())
