"""The partition leader's side of transactions on real logs in a temporary directory and
a real ReplicaManager (small fakes for the group coordinator and the authorizer):
WriteTxnMarkers' decisions per partition, DescribeProducers, and the AbortedTransactions
of a read_committed Fetch."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from moldau.errors import (
    ClusterAuthorizationFailedError,
    InvalidProducerEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from moldau.metrics.registry import MetricsRegistry
from moldau.protocol.generated.describe_producers_request import DescribeProducersRequest
from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.generated.write_txn_markers_request import WriteTxnMarkersRequest
from moldau.protocol.records import RecordBatch, build_batch, iter_batches
from moldau.replication.replica_manager import LeaderAndIsr, ReplicaManager
from moldau.replication.throttle import LEADER, ReplicationThrottle
from moldau.server.broker_metrics import DelayedOperations, NoTopicStats
from moldau.server.handlers.describe_producers import DescribeProducersHandler
from moldau.server.handlers.fetch import FetchHandler
from moldau.server.handlers.produce import ProduceAppends
from moldau.server.handlers.txn_markers import WriteTxnMarkersHandler
from moldau.server.metadata_cache import MetadataCache, PartitionInfo, TopicInfo
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog
from moldau.storage.log_manager import LogManager, ManagerConfig

from .test_handler_ports import Config, Denying, context, run

BROKER_ID = 1
OFFSETS = "__consumer_offsets"
PID = 4000


@dataclass
class GroupCoordinator:
    """Records the markers WriteTxnMarkers reports for __consumer_offsets."""

    markers: list[tuple[int, int, bool]] = field(default_factory=list)

    def on_transaction_marker(self, partition_index: int, producer_id: int,
                              commit: bool) -> None:
        self.markers.append((partition_index, producer_id, commit))


@dataclass
class Leader:
    replicas: ReplicaManager
    metadata: MetadataCache
    appends: ProduceAppends
    coordinator: GroupCoordinator
    markers: WriteTxnMarkersHandler

    def log(self, topic: str = "orders", index: int = 0) -> PartitionLog:
        partition = self.replicas.get_partition(topic, index)
        assert partition is not None
        return partition.log

    def produce(self, pid: int = PID, seq: int = 0, *, epoch: int = 0, topic: str = "orders",
                index: int = 0, transactional: bool = True) -> int:
        """Append a client's two-record batch; its first offset."""
        partition = self.replicas.get_partition(topic, index)
        assert partition is not None
        batch = build_batch([(b"k", b"v"), (b"k", b"w")], producer_id=pid,
                            producer_epoch=epoch, base_sequence=seq,
                            is_transactional=transactional)
        info = partition.log.append_as_leader(batch, partition.leader_epoch)
        partition.maybe_increment_high_watermark()
        return info.first_offset


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Leader]:
    """orders-0 and __consumer_offsets-0 led here (ISR of this broker alone), orders-1
    followed (broker 2 leads), orders-2 led with broker 2 in the ISR."""
    manager = LogManager(ManagerConfig([str(tmp_path)], BROKER_ID, "cluster"), LogConfig())
    replicas = ReplicaManager(BROKER_ID, manager)
    metadata = MetadataCache(BROKER_ID)
    orders, offsets = uuid.uuid4(), uuid.uuid4()
    alone = LeaderAndIsr(BROKER_ID, 0, [BROKER_ID], [BROKER_ID])
    replicas.become_leader_or_follower("orders", 0, orders, alone)
    replicas.become_leader_or_follower("orders", 1, orders,
                                       LeaderAndIsr(2, 0, [2, BROKER_ID], [2, BROKER_ID]))
    replicas.become_leader_or_follower("orders", 2, orders,
                                       LeaderAndIsr(BROKER_ID, 0, [BROKER_ID, 2],
                                                    [BROKER_ID, 2]))
    replicas.become_leader_or_follower(OFFSETS, 0, offsets, alone)
    metadata.put_topic(TopicInfo("orders", orders, {
        0: PartitionInfo(0, BROKER_ID, 0, [BROKER_ID], [BROKER_ID]),
        1: PartitionInfo(1, 2, 0, [2, BROKER_ID], [2, BROKER_ID]),
        2: PartitionInfo(2, BROKER_ID, 0, [BROKER_ID, 2], [BROKER_ID, 2]),
        3: PartitionInfo(3, 2, 0, [2], [2])}))
    metadata.put_topic(TopicInfo(OFFSETS, offsets, {
        0: PartitionInfo(0, BROKER_ID, 0, [BROKER_ID], [BROKER_ID])}))
    registry = MetricsRegistry()
    appends = ProduceAppends(metadata, replicas, manager, NoTopicStats(registry),
                             {"Produce": DelayedOperations(registry, "Produce")})
    coordinator = GroupCoordinator()
    markers = WriteTxnMarkersHandler(Config({"request.timeout.ms": 300}), appends,
                                     coordinator)  # type: ignore[arg-type]
    yield Leader(replicas, metadata, appends, coordinator, markers)
    manager.shutdown()


def marker_request(partitions: list[tuple[str, int]], *, pid: int = PID, epoch: int = 0,
                   commit: bool = True, coordinator_epoch: int = 0
                   ) -> WriteTxnMarkersRequest.WritableTxnMarker:
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    return WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=commit,
        coordinator_epoch=coordinator_epoch, topics=[
            WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=p)
            for t, p in topics.items()])


def write_markers(leader: Leader, *markers: WriteTxnMarkersRequest.WritableTxnMarker,
                  authorizer: Any = None) -> dict[tuple[int, str, int], int]:
    answer = run(leader.markers(context(27, 1, authorizer),
                                WriteTxnMarkersRequest(markers=list(markers))))
    return {(m.producer_id, t.name, p.partition_index): p.error_code
            for m in answer.markers for t in m.topics for p in t.partitions}


def control_batches(plog: PartitionLog) -> list[RecordBatch]:
    data = plog.read_bytes(plog.read(plog.log_start_offset, 1 << 20))
    return [b for b in iter_batches(data) if b.is_control]


# --- WriteTxnMarkers ------------------------------------------------------------------------


def test_a_commit_marker_closes_the_transaction_and_releases_the_lso(leader: Leader) -> None:
    plog = leader.log()
    first = leader.produce()
    assert plog.last_stable_offset == first == 0
    assert write_markers(leader, marker_request([("orders", 0)], coordinator_epoch=3)) == {
        (PID, "orders", 0): 0}
    [control] = control_batches(plog)
    assert (control.base_offset, control.producer_id, control.is_transactional) == (2, PID, True)
    assert control.control_records() is not None
    entry = plog.producer_state.producers[PID]
    assert (entry.current_txn_first_offset, entry.coordinator_epoch) == (-1, 3)
    assert plog.last_stable_offset == plog.high_watermark == 3


def test_each_partition_is_answered_on_its_own(leader: Leader) -> None:
    leader.produce()
    answer = write_markers(leader, marker_request(
        [("orders", 0), ("orders", 1), ("orders", 3), ("orders", 9), ("absent", 0)]))
    assert answer == {(PID, "orders", 0): 0,
                      # a replica here, not the leader
                      (PID, "orders", 1): NotLeaderOrFollowerError.code,
                      # not hosted here, whatever the metadata says (Kafka)
                      (PID, "orders", 3): UnknownTopicOrPartitionError.code,
                      (PID, "orders", 9): UnknownTopicOrPartitionError.code,
                      (PID, "absent", 0): UnknownTopicOrPartitionError.code}
    assert len(control_batches(leader.log())) == 1
    assert control_batches(leader.log("orders", 1)) == []


def test_a_stale_producer_epoch_is_refused_with_47(leader: Leader) -> None:
    leader.produce(epoch=5)
    before = leader.log().log_end_offset
    assert write_markers(leader, marker_request([("orders", 0)], epoch=4)) == {
        (PID, "orders", 0): InvalidProducerEpochError.code}
    assert leader.log().log_end_offset == before  # nothing written
    assert leader.log().producer_state.producers[PID].current_txn_first_offset == 0
    assert write_markers(leader, marker_request([("orders", 0)], epoch=5)) == {
        (PID, "orders", 0): 0}


def test_a_stale_coordinator_epoch_is_refused_with_52(leader: Leader) -> None:
    leader.produce()
    assert write_markers(leader, marker_request([("orders", 0)], coordinator_epoch=7)) == {
        (PID, "orders", 0): 0}
    leader.produce(seq=2)
    assert write_markers(leader, marker_request([("orders", 0)], commit=False,
                                                coordinator_epoch=6)) == {
        (PID, "orders", 0): TransactionCoordinatorFencedError.code}
    # the same epoch passes: kafka-transactions.sh abort sends the producer's own
    assert write_markers(leader, marker_request([("orders", 0)], commit=False,
                                                coordinator_epoch=7)) == {
        (PID, "orders", 0): 0}


def test_a_hanging_transactions_abort_with_coordinator_epoch_0_passes(leader: Leader) -> None:
    """kafka-transactions.sh abort --start-offset: DescribeProducers shows coordinator
    epoch -1 for a producer no marker reached; the tool sends 0."""
    first = leader.produce(epoch=2)
    assert leader.log().producer_state.producers[PID].coordinator_epoch == -1
    assert write_markers(leader, marker_request([("orders", 0)], epoch=2, commit=False)) == {
        (PID, "orders", 0): 0}
    plog = leader.log()
    assert plog.last_stable_offset == plog.high_watermark
    [aborted] = plog.active_segment.txn_index.entries()
    assert (aborted.producer_id, aborted.first_offset) == (PID, first)


def test_a_marker_for_a_producer_without_a_transaction_is_accepted(leader: Leader) -> None:
    assert write_markers(leader, marker_request([("orders", 0)], pid=77)) == {
        (77, "orders", 0): 0}
    assert leader.log().active_segment.txn_index.entries() == []


def test_markers_of_several_producers_in_one_request(leader: Leader) -> None:
    leader.produce(pid=1)
    leader.produce(pid=2)
    answer = write_markers(leader, marker_request([("orders", 0)], pid=1),
                           marker_request([("orders", 0)], pid=2, commit=False))
    assert answer == {(1, "orders", 0): 0, (2, "orders", 0): 0}
    assert [e.producer_id for e in leader.log().active_segment.txn_index.entries()] == [2]


def test_a_marker_waits_for_the_isr(leader: Leader) -> None:
    partition = leader.replicas.get_partition("orders", 2)
    assert partition is not None
    leader.produce(index=2)

    async def follower_catches_up() -> dict[tuple[int, str, int], int]:
        pending = leader.markers(context(27, 1), WriteTxnMarkersRequest(
            markers=[marker_request([("orders", 2)])]))
        task = asyncio.ensure_future(pending)
        await asyncio.sleep(0.05)
        assert not task.done()  # the follower has not fetched the marker
        partition.follower_fetched(2, partition.log.log_end_offset, time.time() * 1000)
        partition.wake()
        answer = await task
        return {(m.producer_id, t.name, p.partition_index): p.error_code
                for m in answer.markers for t in m.topics for p in t.partitions}

    assert asyncio.run(follower_catches_up()) == {(PID, "orders", 2): 0}
    # a follower that does not fetch: REQUEST_TIMED_OUT after request.timeout.ms
    leader.produce(index=2, seq=2)
    assert write_markers(leader, marker_request([("orders", 2)])) == {
        (PID, "orders", 2): RequestTimedOutError.code}


def test_a_marker_needs_min_insync_replicas(leader: Leader) -> None:
    partition = leader.replicas.get_partition("orders", 2)
    assert partition is not None
    partition.state.isr = [BROKER_ID]
    partition.log.config = LogConfig(min_insync_replicas=2)
    assert write_markers(leader, marker_request([("orders", 2)])) == {
        (PID, "orders", 2): NotEnoughReplicasError.code}


def test_offsets_markers_reach_the_group_coordinator_once_written(leader: Leader) -> None:
    leader.produce(pid=9, topic=OFFSETS)
    answer = write_markers(leader, marker_request([(OFFSETS, 0), ("orders", 1)], pid=9))
    assert answer == {(9, OFFSETS, 0): 0, (9, "orders", 1): NotLeaderOrFollowerError.code}
    assert leader.coordinator.markers == [(0, 9, True)]
    write_markers(leader, marker_request([(OFFSETS, 0)], pid=10, commit=False))
    assert leader.coordinator.markers == [(0, 9, True), (0, 10, False)]
    # a refused marker settles nothing
    leader.produce(pid=11, epoch=3, topic=OFFSETS)
    write_markers(leader, marker_request([(OFFSETS, 0)], pid=11, epoch=2))
    assert len(leader.coordinator.markers) == 2


def test_write_txn_markers_needs_alter_or_cluster_action_on_the_cluster(leader: Leader) -> None:
    leader.produce()
    both = Denying(("ALTER", "CLUSTER", "kafka-cluster"),
                   ("CLUSTER_ACTION", "CLUSTER", "kafka-cluster"))
    assert write_markers(leader, marker_request([("orders", 0), ("absent", 0)]),
                         authorizer=both) == {
        (PID, "orders", 0): ClusterAuthorizationFailedError.code,
        (PID, "absent", 0): ClusterAuthorizationFailedError.code}
    assert control_batches(leader.log()) == []
    operator = Denying(("CLUSTER_ACTION", "CLUSTER", "kafka-cluster"))
    assert write_markers(leader, marker_request([("orders", 0)]), authorizer=operator) == {
        (PID, "orders", 0): 0}


# --- DescribeProducers ----------------------------------------------------------------------


def describe(leader: Leader, partitions: list[tuple[str, int]], authorizer: Any = None
             ) -> dict[tuple[str, int], Any]:
    handler = DescribeProducersHandler(leader.metadata, leader.replicas)
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    answer = handler(context(61, 0, authorizer), DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=t, partition_indexes=p)
        for t, p in topics.items()]))
    return {(t.name, p.partition_index): p for t in answer.topics for p in t.partitions}


def test_describe_producers_shows_open_transactions(leader: Leader) -> None:
    leader.produce(pid=1, transactional=False)            # 0-1
    leader.produce(pid=2, epoch=3)                         # 2-3, open
    write_markers(leader, marker_request([("orders", 0)], pid=5, coordinator_epoch=4))
    answer = describe(leader, [("orders", 0)])[("orders", 0)]
    assert answer.error_code == 0
    states = {p.producer_id: (p.producer_epoch, p.last_sequence, p.coordinator_epoch,
                              p.current_txn_start_offset) for p in answer.active_producers}
    assert states == {1: (0, 1, -1, -1), 2: (3, 1, -1, 2), 5: (0, -1, 4, -1)}
    assert all(p.last_timestamp > 0 for p in answer.active_producers)


def test_describe_producers_errors(leader: Leader) -> None:
    answer = describe(leader, [("orders", 1), ("orders", 3), ("orders", 8), ("absent", 0),
                               ("bad name", 0), ("secret", 0)],
                      authorizer=Denying(("READ", "TOPIC", "secret")))
    codes = {tp: p.error_code for tp, p in answer.items()}
    assert codes == {("orders", 1): 0,  # a follower answers too
                     ("orders", 3): NotLeaderOrFollowerError.code,
                     ("orders", 8): UnknownTopicOrPartitionError.code,
                     ("absent", 0): UnknownTopicOrPartitionError.code,
                     ("bad name", 0): 17,
                     ("secret", 0): TopicAuthorizationFailedError.code}
    assert answer[("secret", 0)].error_message


# --- read_committed Fetch -------------------------------------------------------------------


def fetch(leader: Leader, offset: int, isolation: int, max_bytes: int = 1 << 20) -> Any:
    handler = FetchHandler(
        Config({"max.incremental.fetch.session.cache.slots": 10,  # type: ignore[arg-type]
                "replica.selector.class": None}),
        leader.metadata, leader.replicas, NoTopicStats(MetricsRegistry()),
        {"Fetch": DelayedOperations(MetricsRegistry(), "Fetch")},
        ReplicationThrottle(LEADER, BROKER_ID, lambda _: LogConfig(), lambda: 0.0))
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                           isolation_level=isolation, session_id=0, session_epoch=-1,
                           topics=[FetchRequest.FetchTopic(topic="orders", partitions=[
                               FetchRequest.FetchPartition(
                                   partition=0, fetch_offset=offset, partition_max_bytes=max_bytes,
                                   current_leader_epoch=-1, last_fetched_epoch=-1,
                                   log_start_offset=-1)])])
    answer = run(handler(context(1, 12), request))
    [topic] = answer.responses
    [partition] = topic.partitions
    return partition


def test_read_committed_fetch_lists_the_aborted_transactions(leader: Leader) -> None:
    leader.produce(pid=1)                                          # 0-1, aborted
    leader.produce(pid=2)                                          # 2-3, committed
    write_markers(leader, marker_request([("orders", 0)], pid=1, commit=False))  # 4
    write_markers(leader, marker_request([("orders", 0)], pid=2))                # 5
    committed = fetch(leader, 0, 1)
    assert committed.error_code == 0
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [
        (1, 0)]
    assert committed.last_stable_offset == 6
    # the aborted data is sent as it is: the consumer drops it
    assert [b.base_offset for b in iter_batches(bytes(committed.records))] == [0, 2, 4, 5]
    assert fetch(leader, 0, 0).aborted_transactions is None  # read_uncommitted: null
    # from past the marker, nothing overlaps
    assert fetch(leader, 5, 1).aborted_transactions == []
    assert fetch(leader, 6, 1).aborted_transactions == []


def test_read_committed_stops_at_an_open_transaction(leader: Leader) -> None:
    leader.produce(pid=1, transactional=False)  # 0-1
    leader.produce(pid=2)                       # 2-3, open
    leader.produce(pid=1, seq=2, transactional=False)  # 4-5
    committed = fetch(leader, 0, 1)
    assert committed.last_stable_offset == 2
    assert committed.high_watermark == 6
    assert [b.base_offset for b in iter_batches(bytes(committed.records))] == [0]
    assert committed.aborted_transactions == []
    uncommitted = fetch(leader, 0, 0)
    assert [b.base_offset for b in iter_batches(bytes(uncommitted.records))] == [0, 2, 4]
