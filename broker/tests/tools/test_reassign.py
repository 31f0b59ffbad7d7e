"""kafka-reassign-partitions against the real cluster: the course's lab 5b (replication
factor 1 -> 3 with a plan file) with a throttle, a throttle change, --verify until done
and the throttles gone; --generate, --list, --cancel and bad plans."""

from __future__ import annotations

import json
import re
from pathlib import Path

from moldau.tools.reassign_partitions import EXISTING

from .toolrun import ToolCluster, assert_golden, run, short_wait_config, wait_for

REASSIGN = "kafka-reassign-partitions.sh"
THROTTLE_KEYS = ("leader.replication.throttled", "follower.replication.throttled")


def _plan(path: Path, topic: str, replicas: dict[int, list[int]]) -> str:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in replicas.items()]}))
    return str(path)


def _throttles(cluster: ToolCluster, *args: str) -> list[str]:
    """The throttle entries kafka-configs describes (name=value)."""
    out = cluster.ok("kafka-configs.sh", "--describe", *args)
    return sorted(line.split()[0] for line in out.splitlines()[1:]
                  if line.split()[0].startswith(THROTTLE_KEYS))


def test_raise_replication_factor_with_a_throttle(cluster: ToolCluster, tmp_path: Path) -> None:
    from confluent_kafka import Producer

    cluster.ok("kafka-topics.sh", "--create", "--topic", "lab5b", "--replica-assignment", "1")
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for _ in range(200):
        producer.produce("lab5b", value=b"x" * 1000, partition=0)
    assert producer.flush(30) == 0
    plan = _plan(tmp_path / "replicacount.json", "lab5b", {0: [1, 2, 3]})
    # 200 kB at 1 kB/s: the new replicas stay behind until the throttle is raised
    out = cluster.ok(REASSIGN, "--execute", "--reassignment-json-file", plan,
                     "--throttle", "1000")
    assert_golden("reassign-execute.txt", out)
    assert _throttles(cluster, "--broker", "2") == [
        "follower.replication.throttled.rate=1000", "leader.replication.throttled.rate=1000"]
    assert _throttles(cluster, "--topic", "lab5b") == [
        "follower.replication.throttled.replicas=0:2,0:3",
        "leader.replication.throttled.replicas=0:1"]
    assert cluster.ok(REASSIGN, "--list") == (
        "Current partition reassignments:\nlab5b-0: replicas: 1,2,3. adding: 2,3.\n")
    running = cluster.ok(REASSIGN, "--verify", "--reassignment-json-file", plan)
    assert running == ("Status of partition reassignment:\nReassignment of partition lab5b-0 "
                       "is still in progress.\n\n")  # throttles kept while it runs
    again = cluster.tool(REASSIGN, "--execute", "--reassignment-json-file", plan)
    assert (again.code, again.err) == (1, EXISTING + "\n")
    # the throttle changed by resubmitting the running plan with --additional
    changed = cluster.ok(REASSIGN, "--execute", "--additional", "--reassignment-json-file",
                         plan, "--throttle", "2000")
    assert "The inter-broker throttle limit was set to 2000 B/s\n" in changed
    assert _throttles(cluster, "--broker", "3") == [
        "follower.replication.throttled.rate=2000", "leader.replication.throttled.rate=2000"]
    # then raised with kafka-configs, the other way Kafka's docs give, to let it finish
    for broker in ("1", "2", "3"):
        cluster.ok("kafka-configs.sh", "--alter", "--broker", broker, "--add-config",
                   "leader.replication.throttled.rate=100000000,"
                   "follower.replication.throttled.rate=100000000")

    def verified() -> str | None:
        text = cluster.ok(REASSIGN, "--verify", "--reassignment-json-file", plan)
        return text if "is completed." in text else None
    done = wait_for(verified, 60, "the reassignment to complete")
    assert_golden("reassign-verify.txt", done)
    assert _throttles(cluster, "--broker", "2") == []
    assert _throttles(cluster, "--topic", "lab5b") == []
    text = cluster.wait_full_isr("lab5b", 3)
    assert "ReplicationFactor: 3" in text and "Replicas: 1,2,3" in text
    assert cluster.ok(REASSIGN, "--list") == "No partition reassignments found.\n"
    cancelled = cluster.ok(REASSIGN, "--cancel", "--reassignment-json-file", plan)
    assert_golden("reassign-cancel-none.txt", cancelled)


def test_generate_proposes_the_given_brokers(cluster: ToolCluster, tmp_path: Path) -> None:
    cluster.ok("kafka-topics.sh", "--create", "--topic", "moving", "--replica-assignment",
               "1:2,2:1")
    topics = tmp_path / "topics.json"
    topics.write_text('{"topics":[{"topic":"moving"}],"version":1}')
    out = cluster.ok(REASSIGN, "--generate", "--topics-to-move-json-file", str(topics),
                     "--broker-list", "2,3")
    match = re.fullmatch(r"Current partition replica assignment\n(.*)\n\n"
                         r"Proposed partition reassignment configuration\n(.*)\n", out)
    assert match, out
    assert match.group(1) == (
        '{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1,2],'
        '"log_dirs":["any","any"]},{"topic":"moving","partition":1,"replicas":[2,1],'
        '"log_dirs":["any","any"]}]}')
    proposed = json.loads(match.group(2))["partitions"]
    assert [(p["topic"], p["partition"]) for p in proposed] == [("moving", 0), ("moving", 1)]
    assert all(sorted(p["replicas"]) == [2, 3] and p["log_dirs"] == ["any", "any"]
               for p in proposed)
    assert proposed[0]["replicas"] != proposed[1]["replicas"]  # leaders spread


def test_bad_plans_change_nothing(cluster: ToolCluster, tmp_path: Path) -> None:
    cluster.ok("kafka-topics.sh", "--create", "--topic", "steady-rf", "--replica-assignment",
               "1:2")
    before = cluster.wait_full_isr("steady-rf", 2)
    malformed = tmp_path / "malformed.json"
    malformed.write_text('{"version":1,"partitions":[')
    unknown_broker = _plan(tmp_path / "unknown.json", "steady-rf", {0: [1, 7]})
    log_dir = tmp_path / "logdir.json"
    log_dir.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "steady-rf", "partition": 0, "replicas": [1, 2],
         "log_dirs": ["/data/a", "any"]}]}))
    missing = _plan(tmp_path / "missing.json", "no-such-topic", {0: [1]})
    # Kafka 3.9.1's ReassignPartitionsCommand prints a failure on stdout: the message,
    # the Java exception (a broker's error wrapped in the AdminClient's
    # ExecutionException), an empty line
    failed = "org.apache.kafka.server.common.AdminCommandFailedException"
    unknown_topic = ("org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
                     "Topic no-such-topic not found.")
    cases = {
        str(malformed): f"Error: The input string is not a valid JSON\n{failed}: The input "
                        "string is not a valid JSON\n\n",
        unknown_broker: f"Error: Unknown broker id 7\n{failed}: Unknown broker id 7\n\n",
        missing: f"Error: {unknown_topic}\njava.util.concurrent.ExecutionException: "
                 f"{unknown_topic}\nCaused by: {unknown_topic}\n\n",
    }
    for path, message in cases.items():
        result = cluster.tool(REASSIGN, "--execute", "--reassignment-json-file", path)
        assert (result.code, result.out, result.err) == (1, message, ""), path
    # as Kafka 3.9: the (unchanged) replicas are reassigned, then the move fails
    dirs = cluster.tool(REASSIGN, "--execute", "--reassignment-json-file", str(log_dir))
    assert dirs.code == 1 and dirs.out.endswith(
        "Error: Failed to alter dir for steady-rf-0-1\n"
        f"{failed}: Failed to alter dir for steady-rf-0-1\nCaused by: "
        "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors."
        "LogDirNotFoundException: The user-specified log directory is not found in the "
        "broker config.\n\n"), dirs.out
    no_file = cluster.tool(REASSIGN, "--verify")
    assert no_file.err.startswith('Missing required argument "[reassignment-json-file]"')
    too_few = tmp_path / "topics.json"
    too_few.write_text('{"topics":[{"topic":"steady-rf"}],"version":1}')
    small = cluster.tool(REASSIGN, "--generate", "--topics-to-move-json-file", str(too_few),
                         "--broker-list", "3")
    assert (small.code, small.out.splitlines()[0]) == (
        1, "Error: Replication factor: 2 larger than available brokers: 1.")
    unreachable = run(REASSIGN, "--bootstrap-server", "127.0.0.1:1", "--list",
                      "--command-config", short_wait_config())
    # as every failure: "Error: ...", the exception and an empty line on standard output
    assert unreachable.code == 1 and unreachable.out.startswith(
        "Error: Could not connect to any bootstrap server: 127.0.0.1:1 (Connection refused)\n")
    assert cluster.describe("steady-rf") == before
    assert cluster.ok(REASSIGN, "--list") == "No partition reassignments found.\n"
