"""auto.leader.rebalance.enable: after a broker returns, the controller's periodic check
gives it back the leadership of the partitions it is the preferred leader of."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Cluster, make_cluster, running


@pytest.fixture(scope="module")
def balanced(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[Cluster]:
    with running(make_cluster(tmp_path_factory, zk_ensemble, **{
            "auto.leader.rebalance.enable": "true",
            "leader.imbalance.check.interval.seconds": "2"})) as cluster:
        yield cluster


def test_auto_rebalance_restores_preferred_leaders(balanced: Cluster) -> None:
    topic = balanced.create_topic("balance", partitions=6)
    preferred = {p: m.replicas[0] for p, m in balanced.partitions(topic).items()}
    assert {p: m.leader for p, m in balanced.partitions(topic).items()} == preferred
    balanced.brokers[2].stop()
    moved = {p: m.leader for p, m in balanced.partitions(topic).items()}
    assert 2 not in moved.values(), moved
    balanced.start(2)
    balanced.wait_for(
        lambda: {p: m.leader for p, m in balanced.partitions(topic).items()} == preferred,
        30, "every partition led by its preferred replica again")
