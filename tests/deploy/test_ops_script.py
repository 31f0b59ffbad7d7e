"""roles/broker/files/moldau_ops.py's command line against a real ZooKeeper: the playbooks
run it on a broker host, so its reading of the cluster and its exit codes are what they
branch on (the planners themselves: test_ops_planner.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "broker" / "files"))

import moldau_ops

from moldau.cluster import zk_data


def test_leads_names_the_partitions_a_broker_leads(cluster, capsys) -> None:
    _, properties = cluster
    assert moldau_ops.main([str(properties), "leads", "1"]) == 1
    assert capsys.readouterr().out.strip() == "t-0"
    assert moldau_ops.main([str(properties), "leads", "2"]) == 0
    assert capsys.readouterr().out.strip() == "broker 2 leads no partition"


def test_holds_reports_registration_and_replicas(cluster, capsys) -> None:
    _, properties = cluster
    assert moldau_ops.main([str(properties), "holds", "2"]) == 1
    assert json.loads(capsys.readouterr().out) == {"registered": False, "partitions": ["t-0"]}
    assert moldau_ops.main([str(properties), "holds", "3"]) == 0


def test_an_unreadable_file_is_reported(tmp_path, capsys) -> None:
    assert moldau_ops.main([str(tmp_path / "missing.properties"), "counts"]) == 2
    assert "cannot read" in capsys.readouterr().out


def test_the_hosts_come_from_the_registrations(cluster) -> None:
    """`moldau_host` (moldau.broker.host) as the broker reads it: only a name counts, and a
    broker without one (broker 1's bare registration) is left out: a host of its own."""
    zk, _ = cluster
    for broker, extra in ((2, {"moldau_host": "server-a", "rack": "r1"}),
                          (3, {"moldau_host": "server-a"}), (4, {"moldau_host": 7}),
                          (5, {"moldau_host": ""})):
        zk.create(zk_data.broker_path(broker), json.dumps({"version": 5, **extra}).encode())
    read = moldau_ops.read_cluster(zk, 1)
    assert read.hosts == {2: "server-a", 3: "server-a"}
    assert read.brokers == {1: "", 2: "r1", 3: "", 4: "", 5: ""}
