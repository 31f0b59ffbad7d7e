"""Replication metrics on two real brokers.

- A follower that was stopped while the leader took records it does not have comes back
  fetching at most one batch at a time: ReplicaFetcherManager MaxLag and FetcherLagMetrics
  ConsumerLag show the distance to the leader's high watermark, then fall to 0. That is
  replication, not a reassignment: the Reassignment meters stay at 0.
- An acks=all produce waits in the leader's Produce purgatory while the follower is
  frozen (SIGSTOP), and leaves it when the follower runs again.
- A partition reassigned from broker 1 to brokers 1 and 2: the bytes the new replica
  copies count as ReassignmentBytesInPerSec on broker 2 and ReassignmentBytesOutPerSec on
  broker 1.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from broker.raw import (
    PRODUCE,
    connect,
    produce,
    produce_request,
    records,
    wait_leaders,
    wait_until,
)
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.protocol.headers import decode_response

from .jmx import beans

BATCHES = 1500
PROPERTIES = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "3000",
              "offsets.topic.replication.factor": "1", "auto.leader.rebalance.enable": "false",
              "replica.fetch.max.bytes": "1024", "replica.fetch.response.max.bytes": "1024"}
REASSIGNMENT = "kafka.server:type=BrokerTopicMetrics,name=Reassignment{}PerSec"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any
         ) -> Iterator[tuple[BrokerProcess, int, BrokerProcess, int]]:
    """(leader, its metrics port, follower, its metrics port)."""
    zk = zk_ensemble.connect_string + f"/replicated-{uuid.uuid4().hex[:8]}"
    ports = free_port(), free_port()
    brokers = [BrokerProcess(str(tmp_path_factory.mktemp(f"b{i}")), i, zk,
                             properties=PROPERTIES, env={"MOLDAU_METRICS_PORT": str(port)})
               for i, port in ((1, ports[0]), (2, ports[1]))]
    for broker in brokers:
        broker.start()
    try:
        yield brokers[0], ports[0], brokers[1], ports[1]
    finally:
        for broker in brokers:  # nothing left to check: no controlled shutdown rounds
            if broker.running():
                broker.kill()


def fill(leader: BrokerProcess, topic: str) -> None:
    with connect(leader) as conn:
        wait_leaders(conn, topic)
        for _ in range(BATCHES):  # one ~900-byte batch each: one per follower fetch
            assert produce(conn, topic, records(1, size=900), acks=1).error_code == 0


def count(port: int, name: str) -> int:
    return beans(port, name)[name]["Count"]


def test_a_catching_up_follower_reports_its_lag(pair: tuple) -> None:
    leader, _, follower, port = pair
    topic = f"lagging-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])])[topic].result(30)
    assert follower.stop() == 0
    fill(leader, topic)
    follower.start()
    max_lag = "kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica"
    end = f"kafka.log:type=Log,name=LogEndOffset,topic={topic},partition=0"
    seen: list[int] = []

    def caught_up() -> bool:
        found = beans(port, "*:*")  # one read: the lag and the log end together
        seen.append(found[max_lag]["Value"])
        return seen[-1] == 0 and found.get(end, {}).get("Value") == BATCHES
    assert wait_until(caught_up, timeout=60)
    assert 0 < max(seen) <= BATCHES, seen
    lags = beans(port, "kafka.server:type=FetcherLagMetrics,*")
    assert list(lags) == [f"kafka.server:type=FetcherLagMetrics,name=ConsumerLag,"
                          f"clientId=ReplicaFetcherThread-0-1,topic={topic},partition=0"]
    assert next(iter(lags.values()))["Value"] == 0
    replicated = "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec"
    assert count(port, replicated) >= BATCHES * 900
    assert count(port, REASSIGNMENT.format("BytesIn")) == 0  # replication, not a move


def test_a_reassignment_counts_the_bytes_it_moves(pair: tuple) -> None:
    from kafka import KafkaAdminClient, TopicPartition

    leader, leader_port, _, follower_port = pair
    topic = f"moved-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1]])])[topic].result(30)
    fill(leader, topic)
    in_before = count(follower_port, REASSIGNMENT.format("BytesIn"))
    out_before = count(leader_port, REASSIGNMENT.format("BytesOut"))
    client = KafkaAdminClient(bootstrap_servers=leader.bootstrap, request_timeout_ms=30000)
    try:
        tp = TopicPartition(topic, 0)
        assert client.alter_partition_reassignments({tp: [1, 2]}) == {tp: None}
        assert wait_until(lambda: not client.list_partition_reassignments([tp]), timeout=60)
    finally:
        client.close()
    moved = BATCHES * 900
    assert count(follower_port, REASSIGNMENT.format("BytesIn")) - in_before >= moved
    assert count(leader_port, REASSIGNMENT.format("BytesOut")) - out_before >= moved


def test_an_acks_all_produce_waits_in_the_purgatory(pair: tuple) -> None:
    leader, port, follower, _ = pair
    topic = f"waiting-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": leader.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])])[topic].result(30)
    purgatory = "kafka.server:type=DelayedOperationPurgatory,name={},delayedOperation=Produce"

    def value(name: str) -> int:
        bean = purgatory.format(name)
        return beans(port, bean)[bean]["Value"]

    with connect(leader) as conn:
        wait_leaders(conn, topic)
        assert value("NumDelayedOperations") == 0
        pid = follower.pid()
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)  # the follower cannot fetch: the record waits for it
        try:
            correlation = conn.send(PRODUCE, 9, produce_request(topic, records(1)))
            assert wait_until(lambda: value("NumDelayedOperations") == 1)
            assert value("PurgatorySize") == 1
        finally:
            os.kill(pid, signal.SIGCONT)
        got, answer = decode_response(conn.read_frame(), PRODUCE, 9)
    assert got == correlation
    assert answer.responses[0].partition_responses[0].error_code == 0
    assert value("NumDelayedOperations") == 0
