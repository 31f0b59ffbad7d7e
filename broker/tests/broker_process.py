"""Starting one real broker process for component tests, each under its own ZooKeeper
chroot so test modules never see each other's topics."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from moldau.devcluster.brokers import BrokerProcess, free_port


def start_broker(tmp_path_factory: pytest.TempPathFactory, zk_connect: str,
                 properties: dict[str, str] | None = None, broker_id: int = 1,
                 env: dict[str, str] | None = None) -> BrokerProcess:
    chroot = f"/moldau-{uuid.uuid4().hex[:12]}"
    directory = str(tmp_path_factory.mktemp("broker"))
    broker = BrokerProcess(directory, broker_id, zk_connect + chroot,
                           properties=properties or {}, env=env or {})
    broker.start()
    return broker


def mutual_tls_broker(tmp_path_factory: pytest.TempPathFactory, zk_connect: str, tls: Any,
                      name: str) -> tuple[BrokerProcess, str]:
    """A started broker with a PLAINTEXT listener and an SSL listener that requires client
    certificates (`tls`: tls_material.TlsMaterial, PKCS12 stores); returns it and the SSL
    bootstrap address."""
    plain, secure = free_port(), free_port()
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}",
             **tls.server_settings("PKCS12", client_auth="required"),
             "num.partitions": "1", "offsets.topic.replication.factor": "1"}
    broker = BrokerProcess(str(tmp_path_factory.mktemp(name)), 1,
                           f"{zk_connect}/{name}-{uuid.uuid4().hex[:8]}", port=plain,
                           properties=props)
    broker.start(wait=60)
    return broker, f"127.0.0.1:{secure}"
