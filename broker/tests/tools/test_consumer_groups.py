"""kafka-consumer-groups against the real cluster with a real consumer (confluent-kafka):
the LAG table after a partial consume and after partitions are added, members and state,
the refusals on an active group, then reset, delete-offsets and delete once it is empty."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .toolrun import ToolCluster, assert_golden, run, short_wait_config, wait_for

GROUPS = "kafka-consumer-groups.sh"
TOPIC, GROUP = "orders", "lagging"
CONSUMER_ID = re.compile(r"lag-client-[0-9a-f-]{36}")
COORDINATOR = re.compile(r"127\.0\.0\.1:\d{5}  \(\d\)")  # free ports have 5 digits
# --members when there is no member to list: Kafka 3.9 still prints the header
MEMBERS_HEADER = "\n" + "".join(f"{column:<15} " for column in (
    "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"))


def _normal(text: str) -> str:
    """Member ids and the coordinator (placement is random) replaced, widths kept."""
    text = CONSUMER_ID.sub("lag-client-<MEMBER-UUID" + "-" * 23 + ">", text)
    return COORDINATOR.sub("127.0.0.1:PPPPP  (N)", text)


@pytest.fixture(scope="module")
def consumer(cluster: ToolCluster) -> Iterator[Any]:
    """A group member that consumed part of the topic and committed 3 and 2."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster.ok("kafka-topics.sh", "--create", "--topic", TOPIC, "--replica-assignment",
               "1:2:3,2:3:1")
    cluster.wait_full_isr(TOPIC)
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(10):
        producer.produce(TOPIC, value=b"order-%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    member = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP,
                       "client.id": "lag-client", "enable.auto.commit": False,
                       "auto.offset.reset": "earliest",
                       "topic.metadata.refresh.interval.ms": 1000})
    member.subscribe([TOPIC])
    wait_for(lambda: member.poll(0.2) is not None and len(member.assignment()) == 2, 60,
             "the consumer's assignment")
    member.commit(offsets=[TopicPartition(TOPIC, 0, 3), TopicPartition(TOPIC, 1, 2)],
                  asynchronous=False)
    try:
        yield member
    finally:
        member.close()


def test_lag_table_of_an_active_group(cluster: ToolCluster, consumer: Any) -> None:
    out = cluster.ok(GROUPS, "--describe", "--group", GROUP)
    assert_golden("groups-describe-lag.txt", _normal(out))
    assert cluster.ok(GROUPS, "--describe", "--group", GROUP, "--offsets") == out
    assert GROUP in cluster.ok(GROUPS, "--list").split()
    members = cluster.ok(GROUPS, "--describe", "--group", GROUP, "--members", "--verbose")
    assert_golden("groups-describe-members.txt", _normal(members))
    state = cluster.ok(GROUPS, "--describe", "--group", GROUP, "--state")
    assert_golden("groups-describe-state.txt", _normal(state))


def test_active_group_is_not_reset_or_deleted(cluster: ToolCluster, consumer: Any) -> None:
    reset = cluster.tool(GROUPS, "--reset-offsets", "--group", GROUP, "--to-earliest",
                         "--topic", TOPIC, "--execute")
    assert (reset.code, reset.out) == (1, "")
    assert reset.err == (f"Error: Assignments can only be reset if the group '{GROUP}' is "
                         "inactive, but the current state is Stable.\n")
    delete = cluster.tool(GROUPS, "--delete", "--group", GROUP)
    assert (delete.code, delete.out) == (1, "")
    assert delete.err == (
        "Error: Deletion of some consumer groups failed:\n"
        f"* Group '{GROUP}' could not be deleted due to: "
        "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.\n")
    assert "3               10" not in cluster.ok(GROUPS, "--describe", "--group", GROUP)


def test_lag_table_after_partitions_are_added(cluster: ToolCluster, consumer: Any) -> None:
    cluster.ok("kafka-topics.sh", "--alter", "--topic", TOPIC, "--partitions", "3",
               "--replica-assignment", "1:2:3,2:3:1,3:1:2")
    wait_for(lambda: consumer.poll(0.2) is None and len(consumer.assignment()) == 3, 60,
             "the consumer to take the new partition")
    out = cluster.ok(GROUPS, "--describe", "--group", GROUP)
    assert_golden("groups-describe-lag-grown.txt", _normal(out))


def test_inactive_group_reset_and_delete(cluster: ToolCluster, consumer: Any,
                                         tmp_path: Path) -> None:
    consumer.close()
    wait_for(lambda: "Empty" in cluster.ok(GROUPS, "--describe", "--group", GROUP,
                                             "--state"), 60, "the group to be empty")
    empty = cluster.tool(GROUPS, "--describe", "--group", GROUP)
    no_members = f"\nConsumer group '{GROUP}' has no active members.\n"
    assert (empty.code, empty.err) == (0, no_members)
    assert_golden("groups-describe-empty.txt", empty.out)
    members = cluster.tool(GROUPS, "--describe", "--group", GROUP, "--members")
    assert (members.code, members.out, members.err) == (0, MEMBERS_HEADER + "\n", no_members)
    verbose = cluster.tool(GROUPS, "--describe", "--group", GROUP, "--members", "--verbose")
    assert verbose.out == MEMBERS_HEADER + "ASSIGNMENT\n"
    # no assignment strategy without members: the column stays blank
    state = cluster.ok(GROUPS, "--describe", "--group", GROUP, "--state")
    assert_golden("groups-describe-state-empty.txt", _normal(state))
    dry = cluster.ok(GROUPS, "--reset-offsets", "--group", GROUP, "--to-earliest",
                     "--topic", TOPIC, "--dry-run")
    assert_golden("groups-reset-dry-run.txt", dry)
    assert "CURRENT-OFFSET" in cluster.ok(GROUPS, "--describe", "--group", GROUP)
    assert "lagging         orders          0          3 " in cluster.ok(
        GROUPS, "--describe", "--group", GROUP)  # a dry run changes nothing
    shifted = cluster.ok(GROUPS, "--reset-offsets", "--group", GROUP, "--shift-by", "1",
                         "--all-topics", "--execute", "--export")
    assert shifted == "orders,0,4\norders,1,3\n"
    csv = tmp_path / "offsets.csv"
    csv.write_text("orders,0,1\norders,1,99\norders,2,2\n")
    cluster.ok(GROUPS, "--reset-offsets", "--group", GROUP, "--from-file", str(csv),
               "--execute")
    assert_golden("groups-describe-after-reset.txt",
                  cluster.ok(GROUPS, "--describe", "--group", GROUP))
    deleted = cluster.ok(GROUPS, "--delete-offsets", "--group", GROUP, "--topic",
                         f"{TOPIC}:2")
    assert_golden("groups-delete-offsets.txt", deleted)
    out = cluster.ok(GROUPS, "--delete", "--group", GROUP)
    assert out == f"Deletion of requested consumer groups ('{GROUP}') was successful.\n"
    # Kafka 3.9 reports a group that does not exist on stdout, and exits 0
    missing = f"\nError: Consumer group '{GROUP}' does not exist.\n"
    gone = cluster.tool(GROUPS, "--describe", "--group", GROUP)
    assert (gone.code, gone.out, gone.err) == (0, missing, "")
    gone_state = cluster.tool(GROUPS, "--describe", "--group", GROUP, "--state")
    assert (gone_state.code, gone_state.out, gone_state.err) == (0, missing, "")
    gone_members = cluster.tool(GROUPS, "--describe", "--group", GROUP, "--members")
    assert (gone_members.code, gone_members.out) == (0, missing + MEMBERS_HEADER + "\n")
    # several groups: each once, in order of their ids (Kafka's TreeMap)
    both = cluster.ok(GROUPS, "--describe", "--group", GROUP, "--group", "absent",
                      "--group", GROUP, "--state")
    assert both == "\nError: Consumer group 'absent' does not exist.\n" + missing


def test_bad_input(cluster: ToolCluster) -> None:
    missing = cluster.tool(GROUPS, "--describe")
    assert missing.code == 1 and missing.err.startswith(
        "Option [describe] takes one of these options: [all-groups], [group]\nOption")
    no_scenario = cluster.tool(GROUPS, "--reset-offsets", "--group", "g", "--topic", "t")
    assert no_scenario.code == 1 and no_scenario.err.startswith(
        "Option [reset-offsets] takes exactly one of these options: [to-offset]")
    bad_csv = cluster.tool(GROUPS, "--reset-offsets", "--group", "nobody", "--from-file",
                           "/nonexistent.csv", "--execute")
    assert (bad_csv.code, bad_csv.err.splitlines()[-1]) == (
        1, "/nonexistent.csv (No such file or directory)")
    unknown_topic = cluster.tool(GROUPS, "--reset-offsets", "--group", "nobody",
                                 "--topic", "no-such-topic", "--to-earliest", "--execute")
    assert unknown_topic.code == 1
    assert unknown_topic.err.splitlines()[-1] == "Error: Topic no-such-topic does not exist."
    assert "nobody" not in cluster.ok(GROUPS, "--list").split()
    unreachable = run(GROUPS, "--bootstrap-server", "127.0.0.1:1", "--list",
                      "--command-config", short_wait_config())
    assert (unreachable.code, unreachable.err) == (
        1, "Error: Executing consumer group command failed due to Could not connect to any "
           "bootstrap server: 127.0.0.1:1 (Connection refused)\n")
