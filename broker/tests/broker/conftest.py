"""Component tests: one real broker process on 127.0.0.1 against the real ZooKeeper
ensemble of the session (each module gets its own chroot, so modules never see each
other's topics), driven by real clients."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from moldau.devcluster.brokers import BrokerProcess


def start_broker(tmp_path_factory: pytest.TempPathFactory, zk_connect: str,
                 properties: dict[str, str] | None = None, broker_id: int = 1) -> BrokerProcess:
    chroot = f"/moldau-{uuid.uuid4().hex[:12]}"
    directory = str(tmp_path_factory.mktemp("broker"))
    broker = BrokerProcess(directory, broker_id, zk_connect + chroot,
                           properties=properties or {})
    broker.start()
    return broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory, zk_ensemble.connect_string,
                           {"num.partitions": "1", "auto.create.topics.enable": "true"})
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM\n{process.tail()}"
