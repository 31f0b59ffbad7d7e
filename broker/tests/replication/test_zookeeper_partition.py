"""A leader cut off from ZooKeeper while clients still reach it: broker 1 talks to the
(real) ensemble through relays that the test silences. Its session expires, the
controller moves its leaderships away, and the isolated broker, still believing it
leads, cannot acknowledge acks=all writes (its followers now fetch from the new leader
and it cannot shrink its ISR without ZooKeeper). When the relays heal it registers again,
follows, and drops what it appended alone. The durability checker finds every
acknowledged record exactly once, in order."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from moldau.checker.producer import ProducerRun
from moldau.devcluster.brokers import BrokerProcess

from .conftest import CLUSTER_PROPERTIES, SESSION_S, Cluster, running
from .faults import (
    RATE,
    AckWatch,
    acked,
    broker_epoch,
    isrs_full,
    judge,
    leaders,
    log_text,
    wait_acks,
)
from .partition_proxy import PartitionProxy


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory,
            zk_ensemble: Any) -> Iterator[tuple[Cluster, PartitionProxy]]:
    chroot = f"/moldau-partition-{uuid.uuid4().hex[:12]}"
    proxy = PartitionProxy(list(zk_ensemble.client_ports))
    brokers = {}
    for i in (1, 2, 3):
        hosts = proxy.connect_string if i == 1 else zk_ensemble.connect_string
        brokers[i] = BrokerProcess(str(tmp_path_factory.mktemp(f"zkpart{i}")), i,
                                   hosts + chroot, properties=dict(CLUSTER_PROPERTIES))
    try:
        with running(Cluster(brokers, zk_ensemble.connect_string + chroot)) as cluster:
            yield cluster, proxy
            proxy.heal()  # broker 1 must reach ZooKeeper to stop cleanly
    finally:
        proxy.close()


def test_a_leader_cut_off_from_zookeeper_loses_nothing_acknowledged(
        proxied: tuple[Cluster, PartitionProxy]) -> None:
    cluster, proxy = proxied
    topic = f"zk-cut-{uuid.uuid4().hex[:8]}"
    admin = cluster.admin()  # held until the answer: its destruction fails the future
    admin.create_topics([NewTopic(topic, 3, replica_assignment=[[1, 2, 3], [2, 3, 1], [3, 1, 2]],
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    cluster.wait_for(lambda: isrs_full(cluster, topic), 30, "full ISRs")
    run = ProducerRun(cluster.bootstrap, topic, rate=RATE, delivery_timeout_ms=30_000).start()
    watch = AckWatch(run).start()
    try:
        cluster.wait_for(lambda: all(acked(run, p) > 0 for p in range(3)), 15,
                         "first acknowledgements on every partition")
        with cluster.zookeeper() as zk:
            epoch_before = broker_epoch(zk, 1)
            proxy.cut()
            cut_at = time.monotonic()
            # seen from the others: broker 1's session ends, partition 0 gets a new leader
            cluster.wait_for(lambda: leaders(cluster, topic, 2)[0] in (2, 3), 4 * SESSION_S,
                             "a new leader for partition 0")
            assert broker_epoch(zk, 1) is None
            # writes go on: the client finds the new leader (its requests to the isolated
            # one wait for their delivery timeout at worst)
            wait_acks(cluster, run, "while broker 1 is cut off", timeout=60)
            time.sleep(max(0.0, cut_at + 2 * SESSION_S - time.monotonic()))
            proxy.heal()
            cluster.wait_for(lambda: broker_epoch(zk, 1) not in (None, epoch_before),
                             6 * SESSION_S, "broker 1 registered again")
        cluster.wait_for(lambda: isrs_full(cluster, topic), 45, "broker 1 back in every ISR")
        assert "Re-registered broker" in log_text(cluster, 1)
        wait_acks(cluster, run, "after broker 1 came back")
        judge(run, watch, "leader cut off from ZooKeeper")
    finally:
        proxy.heal()
        if run.running:
            watch.stop()
            run.stop(flush_timeout=5)
