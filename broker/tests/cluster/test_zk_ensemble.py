"""ZooKeeperEnsemble: quorum with a node down, crash and rejoin, standalone, reattach."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from moldau.cluster import zk_ensemble
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble, ZooKeeperEnsembleError, four_letter_word


def read_from(port: int, path: str) -> bytes:
    """Read a znode from one particular server (a client pinned to it)."""
    client = KazooClient(hosts=f"127.0.0.1:{port}")
    client.start(timeout=10)
    try:
        client.sync(path)
        return client.get(path)[0]
    finally:
        client.stop()
        client.close()


def test_serves_with_a_node_down_and_a_crashed_leader_rejoins(
        zk_ensemble: ZooKeeperEnsemble, zk_chroot: str) -> None:
    ens = zk_ensemble
    modes = [ens.mode(i) for i in range(ens.size)]
    assert sorted(modes) == ["follower", "follower", "leader"]
    assert all(ens.running(i) for i in range(ens.size))
    leader = modes.index("leader")
    follower = modes.index("follower")
    client = KazooClient(hosts=ens.connect_string)
    client.start(timeout=10)
    try:
        # A follower stops (SIGTERM): 2 of 3 still form a quorum and take writes.
        ens.stop_node(follower)
        assert not ens.running(follower) and ens.mode(follower) is None
        client.create(f"{zk_chroot}/while-down", b"1", makepath=True)
        ens.start_node(follower)
        assert ens.wait_node(follower, timeout=20) == "follower"
        assert read_from(ens.client_ports[follower], f"{zk_chroot}/while-down") == b"1"

        # The leader crashes (SIGKILL): the other two elect a leader; it rejoins as follower.
        ens.kill_node(leader)
        assert not ens.running(leader)
        survivors = [i for i in range(ens.size) if i != leader]
        deadline = time.monotonic() + 20
        while sorted(filter(None, (ens.mode(i) for i in survivors))) != ["follower", "leader"]:
            assert time.monotonic() < deadline, "no new leader"
            time.sleep(0.1)
        client.set(f"{zk_chroot}/while-down", b"2")
        ens.start_node(leader)
        assert ens.wait_node(leader, timeout=20) == "follower"
        assert read_from(ens.client_ports[leader], f"{zk_chroot}/while-down") == b"2"
    finally:
        client.stop()
        client.close()
        ens.start(timeout=30)  # whatever happened, leave the shared ensemble whole
    assert "zk_server_state" in (four_letter_word(ens.client_ports[0], "mntr") or "")


def test_standalone_node_and_reattach_by_pid_file(tmp_path: Path) -> None:
    ens = ZooKeeperEnsemble(tmp_path / "solo", size=1, tick_time=500)
    ens.start(timeout=30)
    try:
        assert ens.mode(0) == "standalone"
        assert ens.connect_string == f"127.0.0.1:{ens.client_ports[0]}"
        cfg = (ens.node_dirs[0] / "zoo.cfg").read_text()
        assert "server.1" not in cfg and "tickTime=500" in cfg
        assert (ens.node_dirs[0] / "data" / "myid").read_text().strip() == "1"
        state = json.loads((tmp_path / "solo" / "ensemble.json").read_text())
        assert state["client_ports"] == ens.client_ports and state["size"] == 1

        # Another process (moldau dev-cluster status/down) finds the node from the base dir.
        found = ZooKeeperEnsemble.load(tmp_path / "solo")
        assert found.client_ports == ens.client_ports and found.tick_time == 500
        assert found.running(0) and found.pid(0) == ens.pid(0)
        found.stop()
        assert not found.running(0)
        # the JVM's main thread may show as a zombie before its last threads exit: the
        # parent (ens) can reap it only then
        deadline = time.monotonic() + 10
        while ens.running(0) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not ens.running(0)
        assert not (ens.node_dirs[0] / "zk.pid").exists()
        ens.start(timeout=30)  # restarts on the same data dir
        assert ens.mode(0) == "standalone"
    finally:
        ens.stop()
    with pytest.raises(ZooKeeperEnsembleError, match="no ZooKeeper ensemble"):
        ZooKeeperEnsemble.load(tmp_path / "nothing")


def test_clear_errors_without_java_or_zookeeper(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ens = ZooKeeperEnsemble(tmp_path / "x", size=1)
    monkeypatch.setattr(zk_ensemble, "JAVA_DIR", tmp_path / "no-java-dir")
    with pytest.raises(ZooKeeperEnsembleError, match="apt-get install zookeeper") as info:
        ens.start()
    assert "zookeeper.jar" in str(info.value)
    monkeypatch.undo()
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ZooKeeperEnsembleError, match=r"java was not found.*apt-get install"):
        ens.start()
