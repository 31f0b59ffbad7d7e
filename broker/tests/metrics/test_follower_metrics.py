"""A follower's lag metrics on two real brokers: the follower is stopped, the leader
takes records it does not have, and when it comes back (fetching at most one batch at a
time) ReplicaFetcherManager MaxLag and FetcherLagMetrics ConsumerLag show the distance
to the leader's high watermark, then fall to 0 as it catches up."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from broker.raw import connect, produce, records, wait_leaders, wait_until
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.devcluster.brokers import BrokerProcess, free_port

from .jmx import beans

BATCHES = 1500
PROPERTIES = {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "3000",
              "offsets.topic.replication.factor": "1", "auto.leader.rebalance.enable": "false",
              "replica.fetch.max.bytes": "1024", "replica.fetch.response.max.bytes": "1024"}


def test_a_catching_up_follower_reports_its_lag(tmp_path_factory: pytest.TempPathFactory,
                                                zk_ensemble: Any) -> None:
    zk = zk_ensemble.connect_string + f"/lag-{uuid.uuid4().hex[:8]}"
    port = free_port()
    leader = BrokerProcess(str(tmp_path_factory.mktemp("leader")), 1, zk,
                           properties=PROPERTIES)
    follower = BrokerProcess(str(tmp_path_factory.mktemp("follower")), 2, zk,
                             properties=PROPERTIES, env={"MOLDAU_METRICS_PORT": str(port)})
    leader.start()
    follower.start()
    try:
        topic = f"lagging-{uuid.uuid4().hex[:8]}"
        admin = AdminClient({"bootstrap.servers": leader.bootstrap})
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1, 2]])])[topic].result(30)
        assert follower.stop() == 0
        with connect(leader) as conn:
            wait_leaders(conn, topic)
            for _ in range(BATCHES):  # one ~900-byte batch each: one per follower fetch
                assert produce(conn, topic, records(1, size=900), acks=1).error_code == 0
        follower.start()
        max_lag = "kafka.server:type=ReplicaFetcherManager,name=MaxLag,clientId=Replica"
        seen: list[int] = []

        end = f"kafka.log:type=Log,name=LogEndOffset,topic={topic},partition=0"

        def caught_up() -> bool:
            found = beans(port, "*:*")  # one read: the lag and the log end together
            seen.append(found[max_lag]["Value"])
            return seen[-1] == 0 and found.get(end, {}).get("Value") == BATCHES
        assert wait_until(caught_up, timeout=60)
        assert max(seen) > 0, seen
        assert max(seen) <= BATCHES
        lags = beans(port, "kafka.server:type=FetcherLagMetrics,*")
        assert list(lags) == [f"kafka.server:type=FetcherLagMetrics,name=ConsumerLag,"
                              f"clientId=ReplicaFetcherThread-0-1,topic={topic},partition=0"]
        assert next(iter(lags.values()))["Value"] == 0
        replicated = "kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec"
        assert beans(port, replicated)[replicated]["Count"] >= BATCHES * 900
    finally:
        for broker in (follower, leader):
            if broker.running():
                broker.stop()
