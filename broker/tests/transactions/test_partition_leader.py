"""The partition leader's side of transactions on a real three-broker cluster:
WriteTxnMarkers sent with Moldau's own client (markers, their refusals, DescribeProducers),
then a confluent-kafka transactional producer (librdkafka, through the transaction
coordinator) against read_committed consumers: aborted records stay invisible, a consumer
stops at an open transaction's first offset and goes on after its commit, and
read_committed end offsets (the LSO) stay below read_uncommitted's while it is open."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from replication.conftest import Cluster

from moldau.client.blocking import BlockingConnection
from moldau.errors import (
    InvalidProducerEpochError,
    NotLeaderOrFollowerError,
    TransactionCoordinatorFencedError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol.generated.describe_producers_request import DescribeProducersRequest
from moldau.protocol.generated.list_offsets_request import ListOffsetsRequest
from moldau.protocol.generated.produce_request import ProduceRequest
from moldau.protocol.generated.write_txn_markers_request import WriteTxnMarkersRequest
from moldau.protocol.records import build_batch

PID = 987_654


def connect(cluster: Cluster, broker_id: int) -> BlockingConnection:
    return BlockingConnection("127.0.0.1", cluster.brokers[broker_id].port)


def leader_and_follower(cluster: Cluster, topic: str) -> tuple[int, int]:
    meta = cluster.partitions(topic)[0]
    return meta.leader, next(r for r in meta.replicas if r != meta.leader)


def idempotent_produce(conn: BlockingConnection, topic: str, epoch: int, seq: int) -> int:
    batch = build_batch([(b"k", b"v"), (b"k", b"w")], producer_id=PID, producer_epoch=epoch,
                        base_sequence=seq)
    answer = conn.request_by_name("Produce", 9, transactional_id=None, acks=-1,
                                  timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    [partition] = answer.responses[0].partition_responses
    assert partition.error_code == 0
    return int(partition.base_offset)


def markers(conn: BlockingConnection, partitions: list[tuple[str, int]], *, epoch: int,
            coordinator_epoch: int, commit: bool = False) -> dict[tuple[str, int], int]:
    topics: dict[str, list[int]] = {}
    for topic, index in partitions:
        topics.setdefault(topic, []).append(index)
    answer = conn.request_by_name("WriteTxnMarkers", 1, markers=[
        WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=PID, producer_epoch=epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch, topics=[
                WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=t, partition_indexes=p)
                for t, p in topics.items()])])
    [marker] = answer.markers
    assert marker.producer_id == PID
    return {(t.name, p.partition_index): p.error_code for t in marker.topics
            for p in t.partitions}


def producers(conn: BlockingConnection, topic: str) -> dict[int, Any]:
    answer = conn.request_by_name("DescribeProducers", 0, topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[0])])
    [partition] = answer.topics[0].partitions
    assert partition.error_code == 0
    return {p.producer_id: p for p in partition.active_producers}


def end_offset(conn: BlockingConnection, topic: str, isolation: int) -> int:
    answer = conn.request_by_name("ListOffsets", 5, replica_id=-1, isolation_level=isolation,
                                  topics=[ListOffsetsRequest.ListOffsetsTopic(
                                      name=topic, partitions=[
                                          ListOffsetsRequest.ListOffsetsPartition(
                                              partition_index=0, timestamp=-1,
                                              current_leader_epoch=-1)])])
    [partition] = answer.topics[0].partitions
    assert partition.error_code == 0
    return int(partition.offset)


def test_write_txn_markers_on_the_leader(txn_cluster: Cluster) -> None:
    topic = txn_cluster.create_topic("markers", partitions=1)
    leader, follower = leader_and_follower(txn_cluster, topic)
    with connect(txn_cluster, leader) as conn:
        idempotent_produce(conn, topic, epoch=5, seq=0)                      # 0-1
        answer = markers(conn, [(topic, 0), (topic, 7), ("absent-topic", 0)], epoch=5,
                         coordinator_epoch=3, commit=True)                   # marker at 2
        assert answer == {(topic, 0): 0, (topic, 7): UnknownTopicOrPartitionError.code,
                          ("absent-topic", 0): UnknownTopicOrPartitionError.code}
        assert markers(conn, [(topic, 0)], epoch=4, coordinator_epoch=3) == {
            (topic, 0): InvalidProducerEpochError.code}
        assert markers(conn, [(topic, 0)], epoch=5, coordinator_epoch=2) == {
            (topic, 0): TransactionCoordinatorFencedError.code}
        state = producers(conn, topic)[PID]
        assert (state.producer_epoch, state.last_sequence, state.coordinator_epoch,
                state.current_txn_start_offset) == (5, 1, 3, -1)
        # the marker took an offset, and the ISR has it (acks=all)
        assert end_offset(conn, topic, 0) == end_offset(conn, topic, 1) == 3
    with connect(txn_cluster, follower) as conn:
        assert markers(conn, [(topic, 0)], epoch=5, coordinator_epoch=3) == {
            (topic, 0): NotLeaderOrFollowerError.code}
        # DescribeProducers answers on a follower too (describe-producers --broker-id)
        txn_cluster.wait_for(lambda: producers(conn, topic).get(PID) is not None
                             and producers(conn, topic)[PID].coordinator_epoch == 3, 10,
                             "the follower's producer state")


# --- through the transaction coordinator, with librdkafka ------------------------------------


def _producer(cluster: Cluster, **config: Any) -> Any:
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0, **config})


@pytest.fixture
def txn_producer(txn_cluster: Cluster) -> Iterator[Any]:
    producer = _producer(txn_cluster, **{"transactional.id": f"tx-{uuid.uuid4().hex[:8]}",
                                         "transaction.timeout.ms": 60000})
    producer.init_transactions(60)
    yield producer
    producer.flush(10)


def consumer(cluster: Cluster, topic: str, isolation: str) -> Any:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": uuid.uuid4().hex,
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    c.assign([TopicPartition(topic, 0, 0)])
    return c


def values(c: Any, want: int, timeout: float = 15.0) -> list[bytes]:
    """Up to `want` record values within timeout (fewer if no more come)."""
    found: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(found) < want and time.monotonic() < deadline:
        message = c.poll(0.2)
        if message is None or message.error():
            continue
        found.append(message.value())
    return found


def test_aborted_records_are_invisible_to_read_committed(txn_cluster: Cluster,
                                                         txn_producer: Any) -> None:
    topic = txn_cluster.create_topic("txn-abort", partitions=1)
    txn_producer.begin_transaction()
    for value in (b"a1", b"a2"):
        txn_producer.produce(topic, value, partition=0)
    txn_producer.flush(10)  # written: librdkafka's abort purges what it has not sent
    txn_producer.abort_transaction(60)
    txn_producer.begin_transaction()
    for value in (b"c1", b"c2"):
        txn_producer.produce(topic, value, partition=0)
    txn_producer.commit_transaction(60)
    committed = consumer(txn_cluster, topic, "read_committed")
    uncommitted = consumer(txn_cluster, topic, "read_uncommitted")
    try:
        assert values(committed, 2) == [b"c1", b"c2"]
        assert values(committed, 1, timeout=1.0) == []
        assert values(uncommitted, 4) == [b"a1", b"a2", b"c1", b"c2"]
    finally:
        committed.close()
        uncommitted.close()


def test_read_committed_stops_at_an_open_transaction(txn_cluster: Cluster,
                                                     txn_producer: Any) -> None:
    from confluent_kafka import TopicPartition

    topic = txn_cluster.create_topic("txn-open", partitions=1)
    plain = _producer(txn_cluster)
    plain.produce(topic, b"before", partition=0)
    plain.flush(10)                                            # offset 0
    txn_producer.begin_transaction()
    txn_producer.produce(topic, b"inside", partition=0)
    txn_producer.flush(10)                                     # offset 1, the open one
    plain.produce(topic, b"after", partition=0)
    plain.flush(10)                                            # offset 2
    committed = consumer(txn_cluster, topic, "read_committed")
    uncommitted = consumer(txn_cluster, topic, "read_uncommitted")
    tp = TopicPartition(topic, 0)
    leader, _ = leader_and_follower(txn_cluster, topic)
    try:
        assert values(committed, 2, timeout=3.0) == [b"before"]
        assert committed.get_watermark_offsets(tp, timeout=10, cached=False)[1] == 1
        assert uncommitted.get_watermark_offsets(tp, timeout=10, cached=False)[1] == 3
        with connect(txn_cluster, leader) as conn:
            assert (end_offset(conn, topic, 1), end_offset(conn, topic, 0)) == (1, 3)
            [state] = [p for p in producers(conn, topic).values()
                       if p.current_txn_start_offset >= 0]
            assert state.current_txn_start_offset == 1
        txn_producer.commit_transaction(60)                    # marker at 3
        assert values(committed, 2) == [b"inside", b"after"]
        txn_cluster.wait_for(
            lambda: committed.get_watermark_offsets(tp, timeout=10, cached=False)[1] == 4,
            10, "read_committed's end offset past the commit marker")
        assert uncommitted.get_watermark_offsets(tp, timeout=10, cached=False)[1] == 4
    finally:
        committed.close()
        uncommitted.close()


def test_a_partition_outside_the_transaction_is_refused_by_verification(
        txn_cluster: Cluster) -> None:
    """KIP-890 part 1: a transactional batch for a partition the coordinator was not told
    about (a late retry, a buggy client) would open a transaction nobody ends; the
    leader asks the coordinator and refuses it."""
    from moldau.errors import InvalidTxnStateError

    inside = txn_cluster.create_topic("txn-inside", partitions=1)
    outside = txn_cluster.create_topic("txn-outside", partitions=1)
    txn_id = f"tx-{uuid.uuid4().hex[:8]}"
    producer = _producer(txn_cluster, **{"transactional.id": txn_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(inside, b"in", partition=0)
    producer.flush(10)
    leader, _ = leader_and_follower(txn_cluster, inside)
    with connect(txn_cluster, leader) as conn:
        [state] = [p for p in producers(conn, inside).values()
                   if p.current_txn_start_offset >= 0]
    batch = build_batch([(b"k", b"stray")], producer_id=state.producer_id,
                        producer_epoch=state.producer_epoch, base_sequence=0,
                        is_transactional=True)
    outside_leader, _ = leader_and_follower(txn_cluster, outside)
    with connect(txn_cluster, outside_leader) as conn:
        answer = conn.request_by_name("Produce", 10, transactional_id=txn_id, acks=-1,
                                      timeout_ms=10000, topic_data=[
            ProduceRequest.TopicProduceData(name=outside, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=batch)])])
        [partition] = answer.responses[0].partition_responses
        assert (partition.error_code, partition.error_message) == (
            InvalidTxnStateError.code, "Partition was not added to the transaction")
        assert end_offset(conn, outside, 0) == 0  # nothing written, no transaction opened
        assert producers(conn, outside) == {}
    producer.commit_transaction(60)
