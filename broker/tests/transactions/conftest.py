"""Transaction tests against a real cluster: three broker processes on 127.0.0.1 in one
ZooKeeper chroot of the session's real ensemble (the replication tests' cluster, see
tests/replication/conftest.py), with a small `__transaction_state` (5 partitions,
replication factor 3, min ISR 2) so its creation and loading take test time only. One
cluster per test module: every broker start costs seconds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from replication.conftest import Cluster, make_cluster, running

TRANSACTION_PROPERTIES = {
    "transaction.state.log.num.partitions": "5",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory,
                zk_ensemble: Any) -> Iterator[Cluster]:
    with running(make_cluster(tmp_path_factory, zk_ensemble,
                              **TRANSACTION_PROPERTIES)) as started:
        yield started
