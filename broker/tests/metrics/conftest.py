"""One real broker per test module, serving its metrics endpoint on a free port."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from broker_process import start_broker

from moldau.devcluster.brokers import BrokerProcess, free_port


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any
           ) -> Iterator[tuple[BrokerProcess, int]]:
    port = free_port()
    process = start_broker(tmp_path_factory, zk_ensemble.connect_string,
                           {"num.partitions": "1", "offsets.topic.replication.factor": "1",
                            # transactions on one broker (test_broker_metrics.py)
                            "transaction.state.log.replication.factor": "1",
                            "transaction.state.log.min.isr": "1",
                            "transaction.state.log.num.partitions": "3"},
                           env={"MOLDAU_METRICS_PORT": str(port)})
    yield process, port
    assert process.stop() == 0
