"""The transaction coordinator end to end on three brokers: confluent-kafka's
transactional producer commits and aborts (FindCoordinator creates __transaction_state,
InitProducerId, AddPartitionsToTxn, EndTxn, then the markers through WriteTxnMarkers),
a read_committed consumer sees exactly the committed records, and a second producer with
the same transactional.id fences the first. Then the coordinator's answers to bad input
over the wire, and DescribeTransactions / ListTransactions."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from replication.conftest import Cluster

from moldau.client.blocking import BlockingConnection
from moldau.coordinator.transaction.partitioning import transaction_partition_for
from moldau.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.describe_transactions_request import (
    DescribeTransactionsRequest,
)
from moldau.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from moldau.protocol.generated.init_producer_id_request import InitProducerIdRequest
from moldau.protocol.generated.list_transactions_request import ListTransactionsRequest

from .conftest import TRANSACTION_PROPERTIES

TXN_PARTITIONS = int(TRANSACTION_PROPERTIES["transaction.state.log.num.partitions"])
NONE, NOT_AVAILABLE, UNKNOWN_TOPIC, INVALID_TIMEOUT, NOT_ATTEMPTED = 0, 15, 3, 50, 55


def producer(cluster: Cluster, transactional_id: str) -> Producer:
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": transactional_id,
                  "transaction.timeout.ms": 60000, "linger.ms": 5})
    p.init_transactions(60)
    return p


def committed_values(cluster: Cluster, topic: str, expected: int,
                     isolation: str = "read_committed") -> list[str]:
    """Values a fresh consumer reads from the start, until `expected` arrive and the
    partitions stay quiet for a moment."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap,
                         "group.id": f"check-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": isolation})
    consumer.subscribe([topic])
    values: list[str] = []
    deadline = time.monotonic() + 60
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                if len(values) >= expected:
                    quiet_until = quiet_until or time.monotonic() + 2
                    if time.monotonic() > quiet_until:
                        break
                continue
            if message.error():
                continue
            values.append((message.value() or b"").decode())
    finally:
        consumer.close()
    return sorted(values)


def send(p: Producer, topic: str, values: list[str]) -> None:
    for i, value in enumerate(values):
        p.produce(topic, value=value.encode(), partition=i % 3)
    p.flush(30)


@pytest.fixture(scope="module")
def topic(txn_cluster: Cluster) -> str:
    return txn_cluster.create_topic("txn", partitions=3, replication_factor=3)


def test_committed_records_are_visible_and_aborted_ones_are_not(txn_cluster: Cluster,
                                                                topic: str) -> None:
    p = producer(txn_cluster, f"committer-{uuid.uuid4().hex[:8]}")
    first = [f"c1-{i}" for i in range(30)]
    aborted = [f"a-{i}" for i in range(20)]
    second = [f"c2-{i}" for i in range(10)]
    p.begin_transaction()
    send(p, topic, first)
    p.commit_transaction(30)
    p.begin_transaction()
    send(p, topic, aborted)
    p.abort_transaction(30)
    p.begin_transaction()
    send(p, topic, second)
    p.commit_transaction(30)
    assert committed_values(txn_cluster, topic, 40) == sorted(first + second)
    # the aborted records are in the log all the same (read_uncommitted sees them)
    assert committed_values(txn_cluster, topic, 60, "read_uncommitted") == sorted(
        first + aborted + second)


def test_a_second_producer_fences_the_first(txn_cluster: Cluster) -> None:
    topic = txn_cluster.create_topic("fence", partitions=3, replication_factor=3)
    tid = f"fenced-{uuid.uuid4().hex[:8]}"
    zombie = producer(txn_cluster, tid)
    zombie.begin_transaction()
    send(zombie, topic, ["zombie-0", "zombie-1"])
    # the new instance's InitProducerId aborts the zombie's open transaction
    successor = producer(txn_cluster, tid)
    with pytest.raises(KafkaException) as failed:
        send(zombie, topic, ["zombie-2"])
        zombie.commit_transaction(30)
    error = failed.value.args[0]
    assert error.fatal() or "fenced" in error.str().lower(), error
    successor.begin_transaction()
    send(successor, topic, ["successor-0", "successor-1"])
    successor.commit_transaction(30)
    assert committed_values(txn_cluster, topic, 2) == ["successor-0", "successor-1"]


# --- the coordinator over the wire ----------------------------------------------------------


def coordinator_of(cluster: Cluster, tid: str) -> BlockingConnection:
    """A connection to the transactional id's coordinator (FindCoordinator, then the
    leader of its partition, once it answers)."""
    deadline = time.monotonic() + 30
    while True:
        broker = next(iter(cluster.brokers.values()))
        with BlockingConnection("127.0.0.1", broker.port) as conn:
            found = conn.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                key_type=1, coordinator_keys=[tid])).coordinators[0]
        if found.error_code == NONE:
            conn = BlockingConnection("127.0.0.1", found.port)
            answer = init_producer_id(conn, tid, 60000)
            if answer.error_code == NONE:
                return conn
            conn.close()
        assert time.monotonic() < deadline, f"no coordinator for {tid}: {found}"
        time.sleep(0.3)


def init_producer_id(conn: BlockingConnection, tid: str, timeout_ms: int,
                     version: int = 4) -> Any:
    return conn.request(ApiKey.INIT_PRODUCER_ID, version, InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=-1,
        producer_epoch=-1))


def test_bad_input_gets_kafkas_codes_and_changes_nothing(txn_cluster: Cluster,
                                                         topic: str) -> None:
    tid = f"raw-{uuid.uuid4().hex[:8]}"
    conn = coordinator_of(txn_cluster, tid)
    with conn:
        assert init_producer_id(conn, tid, 900001).error_code == INVALID_TIMEOUT
        ok = init_producer_id(conn, tid, 60000)
        assert ok.error_code == NONE
        # a missing partition fails the request: the good one is not attempted
        A = AddPartitionsToTxnRequest
        answer = conn.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, A(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=ok.producer_id,
            v3_and_below_producer_epoch=ok.producer_epoch,
            v3_and_below_topics=[A.AddPartitionsToTxnTopic(name=topic, partitions=[0, 7])]))
        codes = {p.partition_index: p.partition_error_code
                 for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition}
        assert codes == {0: NOT_ATTEMPTED, 7: UNKNOWN_TOPIC}
        described = conn.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(
            transactional_ids=[tid])).transaction_states[0]
        assert (described.error_code, described.transaction_state, described.producer_id,
                described.topics) == (NONE, "Empty", ok.producer_id, [])
        listed = conn.request(ApiKey.LIST_TRANSACTIONS, 1, ListTransactionsRequest(
            state_filters=["Empty", "Nope"], producer_id_filters=[ok.producer_id],
            duration_filter=-1))
        assert listed.error_code == NONE and listed.unknown_state_filters == ["Nope"]
        assert [(t.transactional_id, t.transaction_state)
                for t in listed.transaction_states] == [(tid, "Empty")]
    assert transaction_partition_for(tid, TXN_PARTITIONS) in range(TXN_PARTITIONS)
