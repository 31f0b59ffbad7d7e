"""kafka-topics against a real three-broker cluster: the seeds' command lines in their
Kafka 3.9 form, output compared with the 3.9 golden files; bad input leaves the cluster
as it was."""

from __future__ import annotations

import re

from moldau.tools.admin import Admin

from .toolrun import (
    Result,
    ToolCluster,
    assert_golden,
    normalise,
    run,
    short_wait_config,
    wait_for,
)

TOPICS = "kafka-topics.sh"
PREFIX = "Error while executing topic command : "
# Kafka's tools-log4j layout, "[%d] %p %m (%c)%n", with an exception's toString as %m
LOGGED = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] ERROR ([\w.]+): (.*)\n"
                    r" \(org\.apache\.kafka\.tools\.TopicCommand\)\n")


def assert_failed(result: Result, message: str, exception: str) -> None:
    """Kafka 3.9's TopicCommand failure: exit 1, the prefixed message on stdout, and the
    exception logged at ERROR on stderr."""
    assert (result.code, result.out) == (1, PREFIX + message + "\n"), result
    logged = LOGGED.fullmatch(result.err)
    assert logged is not None, result.err
    assert logged.groups() == (exception, message)


def _shape(text: str) -> str:
    """A describe with random placement: broker ids replaced, the layout kept."""
    text = re.sub(r"(Leader|Replicas|Isr): [0-9,]+", r"\1: <B>", normalise(text))
    return text


def _check_placement(text: str, rf: int) -> None:
    """Auto placement: distinct replicas, the first one leads, the whole ISR in sync."""
    rows = re.findall(r"Leader: (\d+)\tReplicas: ([0-9,]+)\tIsr: ([0-9,]+)", text)
    assert rows
    for leader, replicas, isr in rows:
        ids = replicas.split(",")
        assert len(set(ids)) == len(ids) == rf and ids[0] == leader
        assert sorted(isr.split(",")) == sorted(ids)


def test_seed_create_list_describe(cluster: ToolCluster) -> None:
    out = cluster.ok(TOPICS, "--create", "--topic", "helloworld", "--partitions", "3",
                     "--replication-factor", "3")
    assert out == "Created topic helloworld.\n"
    assert "helloworld" in cluster.topics()
    text = cluster.wait_full_isr("helloworld")
    assert_golden("topics-describe-helloworld.txt", _shape(text))
    _check_placement(text, 3)
    # a regular expression selects topics, as in Kafka (IncludeList)
    assert cluster.ok(TOPICS, "--describe", "--topic", "hello.*") == text


def test_created_with_assignment_and_config(cluster: ToolCluster) -> None:
    out = cluster.ok(TOPICS, "--create", "--topic", "my_test_topic", "--replica-assignment",
                     "1:2,2:3", "--config", "cleanup.policy=compact",
                     "--config", "segment.bytes=1000000")
    assert_golden("topics-create-collision.txt", out)
    text = cluster.wait_full_isr("my_test_topic", replicas=2)
    assert_golden("topics-describe-assigned.txt", text, sort_isr=True)
    # other modules share the cluster: only these two topics (helloworld has no override)
    overrides = cluster.ok(TOPICS, "--describe", "--topics-with-overrides",
                           "--topic", "my_test_topic|helloworld")
    assert_golden("topics-describe-overrides.txt", overrides)
    # --if-not-exists: the request is sent, the existing topic is not an error
    again = cluster.tool(TOPICS, "--create", "--topic", "my_test_topic", "--if-not-exists",
                         "--partitions", "5")
    assert (again.code, again.err) == (0, "")
    assert "PartitionCount: 2" in cluster.describe("my_test_topic")


def test_alter_adds_partitions_silently(cluster: ToolCluster) -> None:
    cluster.ok(TOPICS, "--create", "--topic", "grow", "--replica-assignment", "1:2,2:3")
    added = cluster.tool(TOPICS, "--alter", "--topic", "grow", "--partitions", "3",
                         "--replica-assignment", "1:2,2:3,3:1")
    # Kafka 3.9 prints nothing (the pre-3.0 tool printed a warning and "succeeded")
    assert (added.code, added.out, added.err) == (0, "", "")
    text = cluster.wait_full_isr("grow", replicas=2)
    assert_golden("topics-describe-grown.txt", text, sort_isr=True)
    shrink = cluster.tool(TOPICS, "--alter", "--topic", "grow", "--partitions", "2")
    assert_failed(shrink, "Topic currently has 3 partitions, which is higher than the "
                  "requested 2.", "org.apache.kafka.common.errors.InvalidPartitionsException")


def test_delete_and_if_exists(cluster: ToolCluster) -> None:
    cluster.ok(TOPICS, "--create", "--topic", "doomed", "--partitions", "1",
               "--replication-factor", "1")
    assert cluster.ok(TOPICS, "--delete", "--topic", "doomed") == ""
    wait_for(lambda: "doomed" not in cluster.topics(), 60, "doomed to be deleted")
    assert cluster.ok(TOPICS, "--delete", "--topic", "doomed", "--if-exists") == ""
    gone = cluster.tool(TOPICS, "--delete", "--topic", "doomed")
    # Kafka 3.9 formats the Optional that holds the name
    assert_failed(gone, "Topic 'Optional[doomed]' does not exist as expected",
                  "java.lang.IllegalArgumentException")


def test_list_excludes_internal_topics_on_request(cluster: ToolCluster) -> None:
    cluster.ok(TOPICS, "--create", "--topic", "listed", "--partitions", "1")
    names = cluster.topics()
    assert names == sorted(names) and "listed" in names
    # __consumer_offsets exists once a group has asked for its coordinator
    with Admin(cluster.bootstrap) as admin:
        admin.find_coordinator("lister")
    names = cluster.topics()
    assert "__consumer_offsets" in names and "listed" in names
    external = cluster.ok(TOPICS, "--list", "--exclude-internal").split()
    assert [n for n in names if not n.startswith("__")] == external


def test_bad_input_changes_nothing(cluster: ToolCluster) -> None:
    before = cluster.topics()
    missing = cluster.tool(TOPICS, "--create")
    assert missing.code == 1 and missing.out == ""
    first, _, usage = missing.err.partition("\n")
    assert first == 'Missing required argument "[topic]"'
    assert usage.startswith("Option ") and "--replication-factor <Integer:" in usage
    # the seeds' --zookeeper form: Kafka 3.9 no longer knows the option; a command line
    # it cannot parse gets the message on stderr (then Java's stack trace), no prefix
    legacy = run(TOPICS, "--zookeeper", "localhost:2181", "--list")
    assert (legacy.code, legacy.out, legacy.err) == (
        1, "", "zookeeper is not a recognized option\n")
    no_bootstrap = run(TOPICS, "--list")
    assert (no_bootstrap.code, no_bootstrap.out, no_bootstrap.err) == (
        1, "", "--bootstrap-server must be specified\n")
    # once the command line is accepted, Kafka's TopicCommand prints failures on stdout
    unknown = cluster.tool(TOPICS, "--describe", "--topic", "no-such-topic")
    assert_failed(unknown, "Topic 'Optional[no-such-topic]' does not exist as expected",
                  "java.lang.IllegalArgumentException")
    unreachable = run(TOPICS, "--bootstrap-server", "127.0.0.1:1", "--list",
                      "--command-config", short_wait_config())
    assert_failed(unreachable, "Could not connect to any bootstrap server: 127.0.0.1:1 "
                  "(Connection refused)", "org.apache.kafka.common.KafkaException")
    exists = cluster.tool(TOPICS, "--create", "--topic", "helloworld", "--partitions", "1")
    assert_failed(exists, "Topic 'helloworld' already exists.",
                  "org.apache.kafka.common.errors.TopicExistsException")
    bad_config = cluster.tool(TOPICS, "--create", "--topic", "bad1", "--config", "nonsense")
    assert_failed(bad_config, 'requirement failed: Invalid topic config: all configs to be '
                  'added must be in the format "key=val".', "java.lang.IllegalArgumentException")
    duplicate = cluster.tool(TOPICS, "--create", "--topic", "bad2", "--replica-assignment",
                             "1:1")
    assert duplicate.code == 1 and duplicate.out == (
        PREFIX + "Partition replica lists may not contain duplicate entries: 1\n")
    too_many = cluster.tool(TOPICS, "--create", "--topic", "bad3", "--replication-factor", "4")
    assert_failed(too_many, "Replication factor: 4 larger than available brokers: 3.",
                  "org.apache.kafka.common.errors.InvalidReplicationFactorException")
    two_actions = cluster.tool(TOPICS, "--list", "--describe")
    assert two_actions.err.startswith("Command must include exactly one action: --list, "
                                      "--describe, --create, --alter or --delete\nOption")
    no_args = run(TOPICS)
    assert no_args.code == 1 and no_args.err.startswith(
        "This tool helps to create, delete, describe, or change a topic.\nOption")
    for result in (missing, unknown, exists, bad_config, duplicate, too_many, two_actions):
        assert result.code == 1
    assert cluster.topics() == before


def test_describe_offline_replicas_and_reports(cluster: ToolCluster) -> None:
    """Offline replicas and the report options: `ghost` names a broker that never
    existed (Kafka takes such an assignment; the replica stays offline), `lonely` lives
    only on a broker V that is killed for the describes and started again after. V is
    not the controller, so what is measured is the controller's reaction, not its
    failover; the other broker S holds `pair` with broker 1."""
    with Admin(cluster.bootstrap) as admin:
        controller = admin.controller_id()
    victim, survivor = (3, 2) if controller != 3 else (2, 3)
    cluster.ok(TOPICS, "--create", "--topic", "ghost", "--replica-assignment", "1:4",
               "--config", "min.insync.replicas=2")
    cluster.ok(TOPICS, "--create", "--topic", "pair", "--replica-assignment",
               f"1:{survivor}", "--config", "min.insync.replicas=2")
    cluster.ok(TOPICS, "--create", "--topic", "lonely", "--replica-assignment", str(victim))
    for topic, rf in (("ghost", 1), ("pair", 2), ("lonely", 1)):
        cluster.wait_full_isr(topic, rf)
    topics = ("--topic", "ghost|pair|lonely")
    assert cluster.ok(TOPICS, "--describe", "--unavailable-partitions", *topics) == ""

    def named(text: str) -> str:
        return (text.replace(f"Replicas: {victim}\tIsr: {victim}", "Replicas: V\tIsr: V")
                .replace(f"Replicas: 1,{survivor}\tIsr: 1,{survivor}",
                         "Replicas: 1,S\tIsr: 1,S"))
    cluster.brokers[victim].kill()  # the controller sees it go when its session expires
    try:
        wait_for(lambda: "Leader: none" in cluster.describe("lonely"), 60,
                 "lonely to lose its only replica")
        assert_golden("topics-describe-offline.txt",
                      named(cluster.ok(TOPICS, "--describe", *topics)), sort_isr=True)
        for report in ("under-replicated-partitions", "unavailable-partitions",
                       "under-min-isr-partitions", "at-min-isr-partitions"):
            assert_golden(f"topics-{report}.txt",
                          named(cluster.ok(TOPICS, "--describe", f"--{report}", *topics)),
                          sort_isr=True)
    finally:
        cluster.brokers[victim].start()
    wait_for(lambda: f"Leader: {victim}" in cluster.describe("lonely"), 60, "lonely back")
