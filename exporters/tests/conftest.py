"""Fixtures of the exporter suite: the real ZooKeeper ensemble of the broker tests and one
real Moldau broker serving its metrics endpoint."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "broker" / "tests"))

from zk_fixtures import zk_ensemble  # noqa: E402, F401  (the real ZooKeeper ensemble)

from moldau.devcluster.brokers import BrokerProcess, free_port  # noqa: E402


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory,
           zk_ensemble) -> Iterator[tuple[BrokerProcess, int]]:  # noqa: F811
    port = free_port()
    process = BrokerProcess(str(tmp_path_factory.mktemp("broker")), 1,
                            zk_ensemble.connect_string + f"/exporters-{uuid.uuid4().hex[:8]}",
                            properties={"num.partitions": "1",
                                        "offsets.topic.replication.factor": "1"},
                            env={"MOLDAU_METRICS_PORT": str(port)})
    process.start(wait=60)
    yield process, port
    assert process.stop() == 0
