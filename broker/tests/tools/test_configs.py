"""kafka-configs against the real three-broker cluster: topic, broker, cluster-default and
broker-logger configs, output compared with the Kafka 3.9 golden files."""

from __future__ import annotations

from pathlib import Path

from .toolrun import ToolCluster, assert_golden, run, short_wait_config

CONFIGS = "kafka-configs.sh"


def test_seed_topic_config_round_trip(cluster: ToolCluster) -> None:
    cluster.ok("kafka-topics.sh", "--create", "--topic", "test", "--partitions", "1")
    alter = ("--alter", "--entity-type", "topics", "--entity-name", "test")
    out = cluster.ok(CONFIGS, *alter, "--add-config", "segment.bytes=1000000")
    assert out == "Completed updating config for topic test.\n"
    out = cluster.ok(CONFIGS, *alter, "--add-config",
                     "min.insync.replicas=2,cleanup.policy=[compact,delete]")
    described = cluster.ok(CONFIGS, "--describe", "--entity-type", "topics",
                           "--entity-name", "test")
    assert_golden("configs-describe-topic.txt", described)
    # the shortcut flag describes the same entity; the topic describe shows the overrides
    assert cluster.ok(CONFIGS, "--describe", "--topic", "test") == described
    assert ("Configs: cleanup.policy=compact,delete,min.insync.replicas=2,segment.bytes=1000000"
            in cluster.describe("test"))
    out = cluster.ok(CONFIGS, *alter, "--delete-config", "segment.bytes,min.insync.replicas")
    assert out == "Completed updating config for topic test.\n"
    assert_golden("configs-describe-topic-deleted.txt",
                  cluster.ok(CONFIGS, "--describe", "--topic", "test"))
    every = cluster.ok(CONFIGS, "--describe", "--topic", "test", "--all")
    assert every.startswith("All configs for topic test are:\n")
    assert "  segment.bytes=1073741824 sensitive=false synonyms={DEFAULT_CONFIG:" \
           "log.segment.bytes=1073741824}\n" in every


def test_broker_and_default_configs(cluster: ToolCluster, tmp_path: Path) -> None:
    config_file = tmp_path / "new.properties"
    config_file.write_text("# added from a file\nlog.cleaner.threads=2\n")
    try:
        out = cluster.ok(CONFIGS, "--alter", "--broker", "1", "--add-config-file",
                         str(config_file))
        assert out == "Completed updating config for broker 1.\n"
        out = cluster.ok(CONFIGS, "--alter", "--broker-defaults", "--add-config",
                         "log.cleaner.threads=3")
        assert out == "Completed updating default config for brokers in the cluster.\n"
        assert_golden("configs-describe-broker.txt",
                      cluster.ok(CONFIGS, "--describe", "--broker", "1"))
        assert_golden("configs-describe-brokers.txt",
                      cluster.ok(CONFIGS, "--describe", "--entity-type", "brokers"))
        every = cluster.ok(CONFIGS, "--describe", "--broker", "2", "--all")
        assert "  log.cleaner.threads=3 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_" \
               "CONFIG:log.cleaner.threads=3, DEFAULT_CONFIG:log.cleaner.threads=1}\n" in every
    finally:
        cluster.ok(CONFIGS, "--alter", "--broker", "1", "--delete-config",
                   "log.cleaner.threads")
        cluster.ok(CONFIGS, "--alter", "--entity-type", "brokers", "--entity-default",
                   "--delete-config", "log.cleaner.threads")
    assert cluster.ok(CONFIGS, "--describe", "--broker-defaults") == (
        "Default configs for brokers in the cluster are:\n")


def test_broker_logger_levels(cluster: ToolCluster) -> None:
    logger = "kafka.controller"
    out = cluster.ok(CONFIGS, "--alter", "--broker-logger", "2", "--add-config",
                     f"{logger}=DEBUG")
    assert out == "Completed updating config for broker-logger 2.\n"
    try:
        lines = cluster.ok(CONFIGS, "--describe", "--broker-logger", "2").splitlines()
        assert lines[0] == "Dynamic configs for broker-logger 2 are:"
        assert f"  {logger}=DEBUG sensitive=false synonyms={{}}" in lines
    finally:
        cluster.ok(CONFIGS, "--alter", "--broker-logger", "2", "--add-config",
                   f"{logger}=INFO")
    bad = cluster.tool(CONFIGS, "--alter", "--broker-logger", "2", "--add-config",
                       "no.such.logger.anywhere=DEBUG")
    assert (bad.code, bad.out, bad.err) == (
        1, "", "Invalid broker logger(s): no.such.logger.anywhere\n")


def test_bad_input_changes_nothing(cluster: ToolCluster) -> None:
    cluster.ok("kafka-topics.sh", "--create", "--topic", "steady", "--partitions", "1",
               "--config", "retention.ms=5000")
    before = cluster.ok(CONFIGS, "--describe", "--topic", "steady")
    cases = {
        ("--alter", "--topic", "steady", "--delete-config", "segment.ms"):
            "Invalid config(s): segment.ms\n",
        ("--alter", "--topic", "steady", "--add-config", "retention.ms"):
            'requirement failed: Invalid entity config: all configs to be added must be in '
            'the format "key=val".\n',
        ("--alter", "--topic", "steady"):
            "At least one of --add-config, --add-config-file, or --delete-config must be "
            "specified with --alter\n",
        ("--describe", "--entity-type", "topic", "--entity-name", "steady"):
            "Invalid entity type topic, the entity type must be one of topics, clients, "
            "users, brokers, ips, broker-loggers, client-metrics with a "
            "--bootstrap-server or --bootstrap-controller argument\n",
        ("--alter", "--broker", "one", "--add-config", "log.cleaner.threads=2"):
            "The entity name for brokers must be a valid integer broker id, but it is: one\n",
        ("--alter", "--topic", "steady", "--add-config-file", "/nonexistent/x.properties"):
            "Error while executing config command with args '--bootstrap-server "
            f"{cluster.bootstrap} --alter --topic steady --add-config-file "
            "/nonexistent/x.properties' : /nonexistent/x.properties (No such file or "
            "directory)\n",
    }
    for args, message in cases.items():
        result = cluster.tool(CONFIGS, *args)
        assert (result.code, result.out, result.err) == (1, "", message), args
    # a broker's refusal as Kafka 3.9.1's ConfigCommand prints it: the command line, then
    # the AdminClient's ExecutionException and its cause (no stack frames)
    bogus = cluster.tool(CONFIGS, "--alter", "--topic", "steady", "--add-config", "bogus.key=1")
    cause = ("org.apache.kafka.common.errors.InvalidConfigurationException: Unknown topic "
             "config name: bogus.key")
    assert (bogus.code, bogus.out, bogus.err) == (
        1, "", f"Error while executing config command with args '--bootstrap-server "
               f"{cluster.bootstrap} --alter --topic steady --add-config bogus.key=1'\n"
               f"java.util.concurrent.ExecutionException: {cause}\nCaused by: {cause}\n")
    unknown = cluster.tool(CONFIGS, "--describe", "--topic", "no-such-topic")
    assert unknown.code == 1
    assert unknown.out == "Dynamic configs for topic no-such-topic are:\n"  # printed first
    assert unknown.err.splitlines()[1:] == [  # Kafka's broker sends an empty message
        "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors."
        "UnknownTopicOrPartitionException: ",
        "Caused by: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "]
    # the seeds' --zookeeper form for topic configs: Kafka 3.9 refuses it
    legacy = run(CONFIGS, "--zookeeper", "localhost:2181", "--alter", "--entity-type",
                 "topics", "--entity-name", "steady", "--add-config", "segment.ms=60000")
    assert (legacy.code, legacy.out, legacy.err) == (
        1, "", "Invalid entity type topics, the entity type must be one of users, brokers "
               "with a --zookeeper argument\n")
    unreachable = run(CONFIGS, "--bootstrap-server", "127.0.0.1:1", "--describe",
                      "--command-config", short_wait_config(),
                      "--topic", "steady")
    assert unreachable.code == 1 and unreachable.err.endswith(
        "Could not connect to any bootstrap server: 127.0.0.1:1 (Connection refused)\n")
    missing = run(CONFIGS, "--bootstrap-server", cluster.bootstrap, "--topic", "steady")
    assert missing.code == 1 and missing.err.startswith(
        "Command must include exactly one action: --describe, --alter\nOption")
    assert cluster.ok(CONFIGS, "--describe", "--topic", "steady") == before
