"""Tool tests: one real three-broker cluster for the whole package (in its own chroot of
the session's real ZooKeeper ensemble); every tool runs as a subprocess through its
installed console script, the way an operator runs it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess

from .toolrun import ToolCluster

CLUSTER_PROPERTIES = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "controlled.shutdown.retry.backoff.ms": "500",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "3",
    "num.partitions": "1",
    "default.replication.factor": "3",
}


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[ToolCluster]:
    connect = zk_ensemble.connect_string + f"/tools-{uuid.uuid4().hex[:12]}"
    brokers = {i: BrokerProcess(str(tmp_path_factory.mktemp(f"tools-broker{i}")), i, connect,
                                properties=dict(CLUSTER_PROPERTIES)) for i in (1, 2, 3)}
    try:
        for broker in brokers.values():
            broker.start()
        yield ToolCluster(brokers, connect)
    finally:
        codes = {i: b.stop() for i, b in brokers.items() if b.pid() is not None}
        assert all(code == 0 for code in codes.values()), codes


@pytest.fixture(scope="module")
def zk(cluster: ToolCluster) -> Iterator[KafkaZkClient]:
    """A ZooKeeper session in the cluster's chroot, to check what a tool wrote."""
    client = KafkaZkClient(cluster.zk_connect, session_timeout_ms=6000)
    client.start()
    yield client
    client.close()
