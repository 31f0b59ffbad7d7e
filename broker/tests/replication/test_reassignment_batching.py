"""A reassignment of many partitions in one request reaches each broker as one
LeaderAndIsr, not one per partition: requests queued one behind the other reached the
replicas of a partition up to a second apart, and a follower fetching with an epoch its
leader did not have yet (or no longer had) could not fetch meanwhile, which stalled
acks=all produces for that long. Counted on the brokers' RequestsPerSec meters while a
throttle holds the new replicas behind (the moves stay at step 1)."""

from __future__ import annotations

import json
import os
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient, TopicPartition

from moldau.devcluster.brokers import free_port

from .conftest import Cluster, make_cluster, running
from .test_reassignment import set_broker_config

PARTITIONS = 8


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any
            ) -> Iterator[tuple[Cluster, dict[int, int]]]:
    cluster = make_cluster(tmp_path_factory, zk_ensemble)
    ports = {i: free_port() for i in cluster.brokers}
    for i, broker in cluster.brokers.items():
        broker.env = {"MOLDAU_METRICS_PORT": str(ports[i])}
    with running(cluster) as started:
        yield started, ports


def leader_and_isr_requests(port: int) -> int:
    """LeaderAndIsr requests the broker has served (its RequestsPerSec meters, any
    version)."""
    query = "kafka.network:type=RequestMetrics,name=RequestsPerSec,*"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/jmx?qry={query}", timeout=10) as r:
        found = json.load(r)["beans"]
    return sum(int(b["Count"]) for b in found if ",request=LeaderAndIsr," in b["name"] + ",")


def test_one_leader_and_isr_per_broker_for_a_many_partition_move(
        metered: tuple[Cluster, dict[int, int]]) -> None:
    cluster, ports = metered
    with cluster.zookeeper() as zk:
        controller = zk.get_controller_id()
    # the source and the new replica are not the controller, whose own broker applies
    # the controller's decisions in place (no request to count)
    source, new = [i for i in sorted(cluster.brokers) if i != controller][:2]
    topic = f"batched-{uuid.uuid4().hex[:8]}"
    creator = cluster.admin()  # held until the answer: its destruction fails the future
    creator.create_topics([NewTopic(
        topic, PARTITIONS, replica_assignment=[[source]] * PARTITIONS,
        config={"follower.replication.throttled.replicas": "*"})])[topic].result(30)
    cluster.wait_for(lambda: len(cluster.partitions(topic)) == PARTITIONS, 30, topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1",
                         "batch.size": 16384, "linger.ms": 5})
    for i in range(PARTITIONS * 200):  # 200 kB a partition, in many batches
        producer.produce(topic, value=os.urandom(1000), partition=i % PARTITIONS)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    # the new replica copies at most ~1 kB/s: every move stays in progress
    set_broker_config(cluster, new, "follower.replication.throttled.rate", "1000")
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    try:
        before = {i: leader_and_isr_requests(ports[i]) for i in (source, new)}
        assert admin.alter_partition_reassignments({tp: [source, new] for tp in tps}) == \
            dict.fromkeys(tps)
        data = cluster.brokers[new].data_dir
        cluster.wait_for(lambda: all(os.path.exists(os.path.join(data, f"{topic}-{p}"))
                                     for p in range(PARTITIONS)), 20, "the new replicas")
        assert len(admin.list_partition_reassignments(tps)) == PARTITIONS  # all at step 1
        sent = {i: leader_and_isr_requests(ports[i]) - before[i] for i in (source, new)}
        assert sent == {source: 1, new: 1}
        assert admin.alter_partition_reassignments(dict.fromkeys(tps)) == dict.fromkeys(tps)
        cluster.wait_for(lambda: not admin.list_partition_reassignments(tps), 30,
                         "the moves cancelled")
    finally:
        set_broker_config(cluster, new, "follower.replication.throttled.rate", None)
        admin.close()
