"""Component tests: one real broker process on 127.0.0.1 against the real ZooKeeper
ensemble of the session (each module gets its own chroot, so modules never see each
other's topics), driven by real clients."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_process import start_broker

from moldau.devcluster.brokers import BrokerProcess

__all__ = ["start_broker"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory, zk_ensemble.connect_string,
                           {"num.partitions": "1", "auto.create.topics.enable": "true"})
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM\n{process.tail()}"
