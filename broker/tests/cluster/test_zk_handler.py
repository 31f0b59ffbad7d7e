"""zk_handler.poll_select keeps the contract of kazoo's selector_select (over real
sockets), and kazoo runs on it against a real ZooKeeper: requests, replies, watches."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.cluster.zk_handler import PollingHandler, poll_select


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_nothing_to_read_waits_out_the_timeout(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    started = time.monotonic()
    assert poll_select([a], [], [], 0.05) == ([], [], [])
    assert time.monotonic() - started >= 0.04


def test_readable_and_writable_objects_come_back_as_given(
        pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    other, other_peer = socket.socketpair()
    try:
        b.send(b"x")
        # a has a byte to read; `other` has none; both can be written
        assert poll_select([other, a], [a, other], [], 1.0) == ([a], [a, other], [])
        assert poll_select([a.fileno()], [], [], 0) == ([a.fileno()], [], [])
    finally:
        other.close()
        other_peer.close()


def test_a_hang_up_is_readable(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    b.close()
    assert poll_select([a], [], [], 1.0) == ([a], [], [])
    assert a.recv(1) == b""  # the read that reports it


def test_bad_arguments_are_refused_as_kazoo_refuses_them(
        pair: tuple[socket.socket, socket.socket]) -> None:
    a, _ = pair
    with pytest.raises(ValueError, match="non-negative"):
        poll_select([a], [], [], -1)
    with pytest.raises(TypeError):
        poll_select([a], [], [], "1")  # type: ignore[arg-type]
    closed, peer = socket.socketpair()
    closed.close()
    peer.close()
    with pytest.raises(ValueError):
        poll_select([closed], [], [], 0)


def test_the_brokers_zookeeper_client_runs_on_the_polling_handler(
        zk_client: KafkaZkClient) -> None:
    kazoo = zk_client._zk
    assert isinstance(kazoo, KazooClient)
    assert isinstance(kazoo.handler, PollingHandler)


def test_kazoo_on_the_polling_handler_serves_requests_and_watches(
        zk_ensemble: ZooKeeperEnsemble, zk_chroot: str) -> None:
    zk = KazooClient(hosts=zk_ensemble.connect_string, handler=PollingHandler(), timeout=6)
    zk.start(timeout=15)
    base = f"{zk_chroot}/w"
    try:
        changed = threading.Event()
        zk.ensure_path(base)
        zk.DataWatch(base, lambda data, stat: changed.set() if data == b"v2" else None)
        for i in range(50):  # many requests and replies through the connection loop
            zk.create(f"{base}/n{i}", b"%d" % i)
        assert sorted(zk.get_children(base), key=lambda n: int(n[1:])) == [
            f"n{i}" for i in range(50)]
        zk.set(base, b"v2")
        assert changed.wait(10)
    finally:
        zk.stop()
        zk.close()
