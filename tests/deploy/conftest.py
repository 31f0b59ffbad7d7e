"""Fixtures of the deployment suite: a real one-server ZooKeeper from the broker tests'
fixtures, and a small cluster's znodes in it for the broker role's scripts
(moldau_health.py, moldau_ops.py) to read."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "broker" / "tests"))

from zk_fixtures import zk_single  # noqa: F401  (a real one-server ZooKeeper)

from moldau.cluster import zk_data
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble


@pytest.fixture
def cluster(zk_single: ZooKeeperEnsemble,  # noqa: F811 (the imported fixture)
            tmp_path: Path) -> Iterator[tuple[KazooClient, Path]]:
    """Broker 1 registered, topic t with partition 0 on brokers 1 and 2, ISR [1] (short);
    the client writes under the chroot the broker's server.properties names."""
    chroot = f"/gate-{uuid.uuid4().hex[:8]}"
    root = KazooClient(hosts=zk_single.connect_string)
    root.start(timeout=15)
    root.ensure_path(chroot)
    root.stop()
    root.close()
    zk = KazooClient(hosts=zk_single.connect_string + chroot)
    zk.start(timeout=15)
    zk.create(zk_data.broker_path(1), b"{}", makepath=True)
    zk.create(zk_data.topic_path("t"), json.dumps({"partitions": {"0": [1, 2]}}).encode(),
              makepath=True)
    zk.create(zk_data.partition_state_path("t", 0), json.dumps({"leader": 1, "isr": [1]}).encode(),
              makepath=True)
    properties = tmp_path / "server.properties"
    properties.write_text(f"broker.id=1\nzookeeper.connect={zk_single.connect_string}{chroot}\n")
    try:
        yield zk, properties
    finally:
        zk.stop()
        zk.close()

