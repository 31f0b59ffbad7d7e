"""roles/broker/files/moldau_ops.py's command line against a real ZooKeeper: the playbooks
run it on a broker host, so its reading of the cluster and its exit codes are what they
branch on (the planners themselves: test_ops_planner.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "broker" / "files"))

import moldau_ops


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
