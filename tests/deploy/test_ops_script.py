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


def test_moving_lists_reassignments_and_throttle_rates(cluster, capsys) -> None:
    """What reassignment-throttle.yml branches on: the topic znode's adding and removing
    replicas (as the controller writes them during a move) and each broker's rates."""
    zk, properties = cluster
    assert moldau_ops.main([str(properties), "moving"]) == 1
    assert json.loads(capsys.readouterr().out)["partitions"] == []
    zk.set(zk_data.topic_path("t"), json.dumps({
        "version": 3, "partitions": {"0": [3, 1, 2]}, "adding_replicas": {"0": [3]},
        "removing_replicas": {"0": [2]}}).encode())
    zk.create(zk_data.broker_path(3), b"{}")
    zk.create(zk_data.config_entity_path("brokers", "3"), json.dumps({
        "version": 1, "config": {"leader.replication.throttled.rate": "1024",
                                 "follower.replication.throttled.rate": "1024"}}).encode(),
        makepath=True)
    assert moldau_ops.main([str(properties), "moving"]) == 0
    moving = json.loads(capsys.readouterr().out)
    assert moving["partitions"] == ["t-0: replicas [3, 1, 2] adding [3] removing [2]"]
    assert moving["brokers"] == [1, 3]  # the live ones among the replicas
    assert moving["throttles"] == {"1": {}, "3": {"leader.replication.throttled.rate": "1024",
                                                 "follower.replication.throttled.rate": "1024"}}


def test_check_plan_prints_the_rollback_or_the_bad_entries(cluster, tmp_path, capsys) -> None:
    zk, properties = cluster
    zk.create(zk_data.broker_path(2), b"{}")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [2, 1]}]}))
    assert moldau_ops.main([str(properties), "check-plan", str(plan)]) == 0
    assert json.loads(capsys.readouterr().out) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2]}]}  # the current replicas
    plan.write_text(json.dumps({"partitions": [{"topic": "t", "partition": 0,
                                                "replicas": [2, 5]}]}))
    assert moldau_ops.main([str(properties), "check-plan", str(plan)]) == 1
    assert capsys.readouterr().out.strip() == (
        "entry 1 (t-0): broker(s) [5] not registered (live brokers: [1, 2])")
    assert moldau_ops.main([str(properties), "check-plan", str(tmp_path / "none")]) == 1
    assert "No such file" in capsys.readouterr().out


def test_balance_and_increase_from_zookeeper(cluster, tmp_path, capsys) -> None:
    zk, properties = cluster
    zk.create(zk_data.broker_path(2), b"{}")
    zk.create(zk_data.broker_path(3), b"{}")
    assert moldau_ops.main([str(properties), "plan-increase-rf", "t", "3"]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"] == [
        {"topic": "t", "partition": 0, "replicas": [1, 2, 3]}]
    assert moldau_ops.main([str(properties), "plan-increase-rf", "t", "1"]) == 1
    assert "decreasing is a different procedure" in capsys.readouterr().out
    # one partition over three brokers: counts 1, 1, 0 are within one
    assert moldau_ops.main([str(properties), "balance"]) == 0
    assert json.loads(capsys.readouterr().out)["within_one"] is True
    sizes = tmp_path / "log-dirs.txt"
    sizes.write_text('{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/d",'
                     '"error":null,"partitions":[{"partition":"t-0","size":5,'
                     '"offsetLag":0,"isFuture":false}]}]}]}\n')
    assert moldau_ops.main([str(properties), "balance", "--sizes", str(sizes)]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["now"]["bytes"] == {"1": 5, "2": 5, "3": 0}
    assert moldau_ops.main([str(properties), "plan-rebalance", "--sizes",
                            str(tmp_path / "none")]) == 2
