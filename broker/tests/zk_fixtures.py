"""ZooKeeper fixtures shared by every suite (registered in conftest.py).

* `zk_ensemble` (session): a real 3-node ZooKeeper ensemble (Debian's zookeeper package run
  with java) in a temporary directory, tick 500 ms so sessions can be short; started once,
  stopped at the end. A missing java or zookeeper.jar fails the tests (make test installs
  them), it does not skip them. The nodes die with the pytest process even when it is
  killed before its teardown.
* `zk_single` (session): the same with one standalone server.
* `zk_chroot`: a fresh chroot path ("/t-<hex>") per test, so tests never see each other's
  znodes: `KafkaZkClient(zk_ensemble.connect_string, zk_chroot)`.
* `zk_client`: a started KafkaZkClient on that chroot (6 s sessions), closed afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.cluster.zk_server_security import ZkServerSasl

ZK_TICK_MS = 500  # ZooKeeper allows sessions of 2 to 20 ticks: 1 s to 10 s


def running_ensemble(tmp_path_factory: pytest.TempPathFactory, size: int,
                     sasl: ZkServerSasl | None = None) -> Iterator[ZooKeeperEnsemble]:
    """Start an ensemble (requiring SASL when `sasl` says so), yield it, stop it."""
    ensemble = ZooKeeperEnsemble(tmp_path_factory.mktemp("zk"), size=size, tick_time=ZK_TICK_MS,
                                 die_with_parent=True, sasl=sasl)
    ensemble.start(timeout=60)
    try:
        yield ensemble
    finally:
        ensemble.stop()


@pytest.fixture(scope="session")
def zk_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    yield from running_ensemble(tmp_path_factory, 3)


@pytest.fixture(scope="session")
def zk_single(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    """One standalone ZooKeeper server, for suites that need znodes but no quorum (and
    not the 3-node ensemble's start-up time)."""
    yield from running_ensemble(tmp_path_factory, 1)


@pytest.fixture
def zk_chroot() -> str:
    return f"/t-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def zk_client(zk_ensemble: ZooKeeperEnsemble, zk_chroot: str) -> Iterator[KafkaZkClient]:
    client = KafkaZkClient(zk_ensemble.connect_string, zk_chroot, session_timeout_ms=6000,
                           connection_timeout_ms=15000)
    client.start()
    try:
        yield client
    finally:
        client.close()
