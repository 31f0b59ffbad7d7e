"""Starting one real broker process for component tests, each under its own ZooKeeper
chroot so test modules never see each other's topics."""

from __future__ import annotations

import uuid

import pytest

from moldau.devcluster.brokers import BrokerProcess


def start_broker(tmp_path_factory: pytest.TempPathFactory, zk_connect: str,
                 properties: dict[str, str] | None = None, broker_id: int = 1,
                 env: dict[str, str] | None = None) -> BrokerProcess:
    chroot = f"/moldau-{uuid.uuid4().hex[:12]}"
    directory = str(tmp_path_factory.mktemp("broker"))
    broker = BrokerProcess(directory, broker_id, zk_connect + chroot,
                           properties=properties or {}, env=env or {})
    broker.start()
    return broker
