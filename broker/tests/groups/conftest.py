"""Consumer-group component tests: one real broker process (with the group coordinator)
on 127.0.0.1 against the session's real ZooKeeper ensemble, driven by the real clients.

The broker runs with a one-broker offsets topic of few partitions and short group
timers, so rebalances and expiry happen in test time; everything else is Kafka's
default."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_process import start_broker

from moldau.devcluster.brokers import BrokerProcess

GROUP_BROKER_PROPERTIES = {
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}


def start_group_broker(tmp_path_factory: pytest.TempPathFactory, zk_connect: str,
                       **overrides: str) -> BrokerProcess:
    return start_broker(tmp_path_factory, zk_connect, {**GROUP_BROKER_PROPERTIES, **overrides})


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:
    process = start_group_broker(tmp_path_factory, zk_ensemble.connect_string)
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM\n{process.tail()}"
