"""roles/broker/files/moldau_host_risk.py, host-roll.yml's gate: which partitions stopping
a server's brokers together takes below min.insync.replicas or offline, on clusters
built by hand, and its command line against a real ZooKeeper."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "broker" / "files"))

import moldau_host_risk
from moldau_ops import TP, Cluster

from moldau.cluster import zk_data


def made(replicas: dict[TP, list[int]], min_isr: int,
         isr: dict[TP, list[int]] | None = None) -> Cluster:
    isr = isr or dict(replicas)
    return Cluster(brokers={b: "" for r in replicas.values() for b in r}, replicas=replicas,
                   isr=isr, leader={tp: r[0] for tp, r in replicas.items()},
                   min_isr={tp: min_isr for tp in replicas})


def test_one_replica_per_server_keeps_rf2_min_isr1_available() -> None:
    # brokers 1, 2 on one server, 3, 4 on the other; host-aware placement
    c = made({("t", 0): [1, 3], ("t", 1): [4, 2], ("t", 2): [2, 3]}, min_isr=1)
    assert moldau_host_risk.stop_risks(c, {1, 2}) == []
    assert moldau_host_risk.stop_risks(c, {3, 4}) == []


def test_two_replicas_on_the_stopping_server_fall_below_min_isr() -> None:
    """RF 3 on two servers: one server holds two replicas, and stopping it leaves one."""
    c = made({("t", 0): [1, 2, 3], ("u", 0): [3, 1, 4]}, min_isr=2)
    assert moldau_host_risk.stop_risks(c, {1, 2}) == [
        "t-0 below min ISR: isr=[1, 2, 3] would be [3], min.insync.replicas=2 replicas=[1, 2, 3]"]
    assert moldau_host_risk.stop_risks(c, {3, 4}) == [
        "u-0 below min ISR: isr=[3, 1, 4] would be [1], min.insync.replicas=2 replicas=[3, 1, 4]"]


def test_every_replica_on_the_server_is_offline_and_others_are_untouched() -> None:
    c = made({("t", 0): [1, 2], ("t", 1): [2], ("v", 0): [3, 4]}, min_isr=1,
                isr={("t", 0): [1, 2], ("t", 1): [2], ("v", 0): [3]})
    assert moldau_host_risk.stop_risks(c, {1, 2}) == [
        "t-0 offline: every replica is on these brokers (replicas=[1, 2])",
        "t-1 offline: every replica is on these brokers (replicas=[2])"]
    # v-0's ISR is short already, but these brokers hold none of it
    assert moldau_host_risk.stop_risks(c, {5}) == []


def test_a_short_isr_counts_what_is_left_not_the_replicas() -> None:
    """A follower out of the ISR elsewhere: stopping the server's one in-sync replica
    leaves fewer than min ISR although another replica exists."""
    c = made({("t", 0): [1, 3, 5]}, min_isr=2, isr={("t", 0): [1, 3]})
    assert moldau_host_risk.stop_risks(c, {1, 2}) == [
        "t-0 below min ISR: isr=[1, 3] would be [3], min.insync.replicas=2 replicas=[1, 3, 5]"]


def test_the_command_reports_each_server_and_exits_3(cluster, capsys) -> None:
    zk, properties = cluster  # conftest's: a real ZooKeeper, broker 1 and topic t
    # the fixture's t-0 is on 1 and 2 with ISR [1]; add u-0 on 1 and 3, fully in sync
    zk.create(zk_data.topic_path("u"), json.dumps({"partitions": {"0": [1, 3]}}).encode())
    zk.create(zk_data.partition_state_path("u", 0),
              json.dumps({"leader": 1, "isr": [1, 3]}).encode(), makepath=True)
    assert moldau_host_risk.main([str(properties), "1,2", "3"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert report == {"1,2": ["t-0 offline: every replica is on these brokers (replicas=[1, 2])"],
                      "3": []}
    assert moldau_host_risk.main([str(properties), "3"]) == 0


def test_unreadable_properties_exit_2(tmp_path, capsys) -> None:
    assert moldau_host_risk.main([str(tmp_path / "missing.properties"), "1"]) == 2
    assert "cannot read" in capsys.readouterr().out
