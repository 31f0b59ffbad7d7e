"""kafka-leader-election and kafka-preferred-replica-election against the real cluster:
leadership moved off the preferred replica by killing it, then handed back."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from moldau.tools import leader_election
from moldau.tools.admin import Admin
from moldau.tools.runner import ArgumentError

from .toolrun import ToolCluster, run, wait_for

ELECTION = "kafka-leader-election.sh"


def _leader(cluster: ToolCluster, topic: str, partition: int) -> int | None:
    found = re.search(rf"\tPartition: {partition}\tLeader: (\d+)\t", cluster.describe(topic))
    return int(found.group(1)) if found else None


def test_preferred_election_brings_leadership_back(cluster: ToolCluster,
                                                   tmp_path: Path) -> None:
    with Admin(cluster.bootstrap) as admin:
        controller = admin.controller_id()
    preferred, other = (3, 2) if controller != 3 else (2, 3)  # never kill the controller
    cluster.ok("kafka-topics.sh", "--create", "--topic", "elect", "--replica-assignment",
               f"{preferred}:{other},{other}:{preferred}")
    cluster.wait_full_isr("elect", 2)
    cluster.brokers[preferred].kill()
    try:
        wait_for(lambda: _leader(cluster, "elect", 0) == other, 60, "the failover")
    finally:
        cluster.brokers[preferred].start()
    cluster.wait_full_isr("elect", 2)
    assert _leader(cluster, "elect", 0) == other
    out = cluster.ok(ELECTION, "--election-type", "preferred", "--topic", "elect",
                     "--partition", "0")
    assert out == "Successfully completed leader election (PREFERRED) for partitions elect-0\n"
    assert _leader(cluster, "elect", 0) == preferred
    again = cluster.ok(ELECTION, "--election-type", "PREFERRED", "--topic", "elect",
                       "--partition", "0")
    assert again == "Valid replica already elected for partitions elect-0\n"
    plan = tmp_path / "election.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "elect", "partition": 1}]}))
    older = cluster.ok("kafka-preferred-replica-election.sh", "--path-to-json-file", str(plan))
    assert older == "Valid replica already elected for partitions elect-1\n"
    unclean = cluster.ok(ELECTION, "--election-type", "unclean", "--path-to-json-file",
                         str(plan))
    assert unclean == "Valid replica already elected for partitions elect-1\n"
    assert cluster.tool(ELECTION, "--election-type", "preferred",
                        "--all-topic-partitions").code == 0


def test_bad_input(cluster: ToolCluster, tmp_path: Path) -> None:
    # Kafka 3.9.1's words: the message, the exception, an empty line, on stderr
    failed = "org.apache.kafka.server.common.AdminCommandFailedException"
    missing = cluster.tool(ELECTION, "--topic", "elect", "--partition", "0")
    assert (missing.code, missing.err) == (
        1, f"Missing required option(s): election-type\n{failed}: Missing required "
           "option(s): election-type\n\n")
    no_partition = cluster.tool(ELECTION, "--election-type", "preferred", "--topic", "elect")
    assert no_partition.err.startswith("Missing required option(s): partition\n")
    two = cluster.tool(ELECTION, "--election-type", "preferred", "--topic", "elect",
                       "--partition", "0", "--all-topic-partitions")
    assert two.err.startswith("One and only one of the following options is required: "
                              "topic, all-topic-partitions, path-to-json-file\n")
    fastest = cluster.tool(ELECTION, "--election-type", "fastest", "--topic", "elect",
                           "--partition", "0")
    assert (fastest.code, fastest.err) == (
        1, "Cannot parse argument 'fastest' of option election-type\njoptsimple."
           "OptionArgumentConversionException: Cannot parse argument 'fastest' of option "
           "election-type\nCaused by: joptsimple.ValueConversionException: Value [fastest] "
           "is not one of [[PREFERRED,UNCLEAN]]\n\n")
    malformed = tmp_path / "bad.json"
    malformed.write_text('{"partitions": [')
    bad = cluster.tool(ELECTION, "--election-type", "preferred", "--path-to-json-file",
                       str(malformed))
    assert (bad.code, bad.out) == (1, "")
    assert bad.err.startswith("The input string is not a valid JSON: ")
    unknown = cluster.tool(ELECTION, "--election-type", "preferred", "--topic",
                           "no-such-topic", "--partition", "0")
    assert unknown.code == 1
    assert unknown.out.startswith("Error completing leader election (PREFERRED) for "
                                  "partition: no-such-topic-0: org.apache.kafka.common."
                                  "errors.UnknownTopicOrPartitionException: ")
    assert unknown.out.endswith("UnknownTopicOrPartitionException: The partition does not "
                                "exist.\n")  # the controller's words, as Kafka's
    assert unknown.err == (
        f"1 replica(s) could not be elected\n{failed}: 1 replica(s) could not be elected\n"
        "\tSuppressed: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "The partition does not exist.\n\n")
    unreachable = run(ELECTION, "--bootstrap-server", "127.0.0.1:1", "--election-type",
                      "preferred", "--all-topic-partitions")
    assert unreachable.code == 1 and unreachable.err.endswith("(Connection refused)\n")


def test_a_preferred_leader_that_is_down_is_named_as_kafka_names_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    """PREFERRED_LEADER_NOT_AVAILABLE (80) is Kafka's PreferredLeaderNotAvailableException
    on standard output and in the Suppressed line (compat scenario cluster.moldau-tool:
    the preferred replica stopped)."""
    message = ("Failed to elect leader for partition t-1 under strategy "
               "PreferredReplicaPartitionLeaderElectionStrategy")
    with pytest.raises(ArgumentError) as raised:
        leader_election.report("PREFERRED", [("t", 0, 84, None), ("t", 1, 80, message)])
    assert capsys.readouterr().out == (
        "Valid replica already elected for partitions t-0\n"
        "Error completing leader election (PREFERRED) for partition: t-1: "
        f"org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: {message}\n")
    assert ("\tSuppressed: org.apache.kafka.common.errors."
            f"PreferredLeaderNotAvailableException: {message}") in str(raised.value)
