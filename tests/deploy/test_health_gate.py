"""The broker role's health gate (roles/broker/files/moldau_health.py) against a real
ZooKeeper server: with --wait it keeps looking until the ISR is full again, gives up
with the reasons when the time is over, and stops at once on a crash loop. The wait
loop's timing on a fake clock is checked on its own."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "broker" / "files"))

import moldau_health

from moldau.cluster import zk_data


def test_waits_until_the_isr_is_full(cluster, capsys) -> None:
    zk, properties = cluster
    state = zk_data.partition_state_path("t", 0)
    full = json.dumps({"leader": 1, "isr": [1, 2]}).encode()
    rejoin = threading.Timer(1.5, lambda: zk.set(state, full))
    rejoin.start()
    started = time.monotonic()
    try:
        code = moldau_health.main([str(properties), "--wait", "20", "--interval", "0.2"])
    finally:
        rejoin.join()
    took = time.monotonic() - started
    assert code == 0
    assert capsys.readouterr().out.strip() == "broker 1 healthy"
    assert 1.5 <= took < 10


def test_gives_up_with_the_reasons(cluster, capsys) -> None:
    _, properties = cluster
    started = time.monotonic()
    code = moldau_health.main([str(properties), "--wait", "1", "--interval", "0.2"])
    took = time.monotonic() - started
    assert code == 1
    assert "t-0 leader=1 isr=[1] replicas=[1, 2]" in capsys.readouterr().out
    assert 1 <= took < 8


def test_without_wait_looks_once(cluster, capsys) -> None:
    _, properties = cluster
    assert moldau_health.main([str(properties)]) == 1
    assert "isr=[1]" in capsys.readouterr().out


def test_a_crash_loop_stops_the_wait_at_once(cluster, capsys) -> None:
    # NRestarts reads 0 here (no systemd): a gate that began at -1 has seen a restart
    _, properties = cluster
    started = time.monotonic()
    code = moldau_health.main([str(properties), "--wait", "30", "--restarts", "-1"])
    assert code == 4
    assert "crash loop" in capsys.readouterr().out
    assert time.monotonic() - started < 5


def test_an_unreadable_file_is_reported(tmp_path, capsys) -> None:
    code = moldau_health.main([str(tmp_path / "missing.properties")])
    assert code == 2
    assert "cannot read" in capsys.readouterr().out


def test_wait_loop_sleeps_at_most_until_the_deadline() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    code, text = moldau_health.wait_healthy(lambda: (1, "short"), lambda: None, wait=1.2,
                                            interval=0.5, clock=lambda: now[0], sleep=sleep)
    assert (code, text) == (1, "short")
    assert slept == [0.5, 0.5, pytest.approx(0.2)]
