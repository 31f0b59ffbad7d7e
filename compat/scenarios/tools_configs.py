"""Kafka's ConfigCommand (--bootstrap-server) and Moldau's kafka-configs.sh: a topic's
dynamic configs (add, list, --all, delete, an unknown key, a missing topic), the broker's
(a dynamic key set and deleted, a read-only key refused, the cluster default), a broker
logger, user and client quotas (alone, together, the client default), SCRAM credentials
(added, described, refused, deleted)."""

from __future__ import annotations

from compat.normalise import Normaliser, sort_runs
from compat.scenarios.base import Context
from compat.scenarios.tool_steps import (
    ADMIN_CLIENT_ID,
    STDOUT_FRAMES,
    Step,
    step,
    tool_scenarios,
)


def steps(ctx: Context) -> list[Step]:
    topic, missing = f"configs-{ctx.token}", f"configs-{ctx.token}-missing"
    user, client = f"user-{ctx.token}", f"client-{ctx.token}"
    boot = ("--bootstrap-server", ctx.bootstrap)
    configs = ("kafka-configs", *boot)
    of_topic = (*configs, "--entity-type", "topics", "--entity-name", topic)
    of_broker = (*configs, "--entity-type", "brokers", "--entity-name", "1")
    of_user = (*configs, "--entity-type", "users", "--entity-name", user)
    of_client = (*configs, "--entity-type", "clients", "--entity-name", client)
    return [
        step("kafka-topics", *boot, "--create", "--topic", topic, "--partitions", "1",
             "--replication-factor", "1"),
        # topics
        step(*of_topic, "--describe"),
        step(*of_topic, "--alter", "--add-config",
             "retention.ms=86400000,cleanup.policy=[compact,delete],max.message.bytes=2000000"),
        step(*of_topic, "--describe"),
        step(*of_topic, "--describe", "--all"),
        step(*of_topic, "--alter", "--delete-config", "retention.ms"),
        step(*of_topic, "--describe"),
        step(*of_topic, "--alter", "--add-config", "no.such.config=1"),
        step(*of_topic, "--alter", "--add-config", "retention.ms=soon"),
        step(*of_topic, "--alter", "--delete-config", "segment.bytes"),
        step(*configs, "--entity-type", "topics", "--entity-name", missing, "--describe"),
        step(*configs, "--topic", topic, "--describe"),
        # the broker
        step(*of_broker, "--describe"),
        step(*of_broker, "--alter", "--add-config", "log.cleaner.backoff.ms=16000"),
        # Kafka's broker learns of its new dynamic config through ZooKeeper's change
        # notification, a moment after the alter: other steps come first
        step(*of_broker, "--alter", "--add-config", "broker.id=2"),
        step(*of_broker, "--alter", "--add-config", "zookeeper.connect=elsewhere:2181"),
        step(*configs, "--entity-type", "brokers", "--entity-default", "--describe"),
        step(*of_broker, "--describe"),
        step(*of_broker, "--alter", "--delete-config", "log.cleaner.backoff.ms"),
        # a broker logger
        step(*configs, "--entity-type", "broker-loggers", "--entity-name", "1", "--alter",
             "--add-config", "kafka.server.ReplicaManager=DEBUG"),
        step(*configs, "--entity-type", "broker-loggers", "--entity-name", "1", "--alter",
             "--delete-config", "kafka.server.ReplicaManager"),
        step(*configs, "--entity-type", "broker-loggers", "--entity-name", "1", "--alter",
             "--add-config", "kafka.server.ReplicaManager=LOUD"),
        # quotas
        step(*of_user, "--alter", "--add-config",
             "producer_byte_rate=1048576,consumer_byte_rate=2097152"),
        step(*of_user, "--describe"),
        step(*of_client, "--alter", "--add-config", "request_percentage=50"),
        step(*of_client, "--describe"),
        step(*configs, "--entity-type", "users", "--entity-name", user, "--entity-type",
             "clients", "--entity-name", client, "--alter", "--add-config",
             "producer_byte_rate=4096"),
        step(*configs, "--entity-type", "users", "--entity-name", user, "--entity-type",
             "clients", "--entity-name", client, "--describe"),
        step(*configs, "--entity-type", "clients", "--entity-default", "--alter",
             "--add-config", "consumer_byte_rate=8192"),
        step(*configs, "--entity-type", "clients", "--entity-default", "--describe"),
        step(*configs, "--entity-type", "clients", "--entity-default", "--alter",
             "--delete-config", "consumer_byte_rate"),
        step(*of_user, "--alter", "--add-config", "producer_byte_rate=fast"),
        step(*of_client, "--alter", "--add-config", "retention.ms=1"),
        # SCRAM
        step(*of_user, "--alter", "--add-config",
             "SCRAM-SHA-256=[iterations=8192,password=alice-secret]"),
        step(*of_user, "--alter", "--add-config",
             "SCRAM-SHA-512=[iterations=1000,password=alice-secret]"),
        step(*of_user, "--describe"),
        step(*of_user, "--alter", "--delete-config",
             "SCRAM-SHA-256,producer_byte_rate,consumer_byte_rate"),
        step(*of_user, "--describe"),
        step(*of_client, "--alter", "--delete-config", "request_percentage"),
        step(*configs, "--entity-type", "users", "--entity-name", user, "--entity-type",
             "clients", "--entity-name", client, "--alter", "--delete-config",
             "producer_byte_rate"),
        # usage
        step(*configs, "--describe"),
        step(*configs, "--entity-type", "topics", "--alter", "--add-config", "retention.ms=1"),
        step(*configs, "--entity-type", "widgets", "--describe"),
        step("kafka-topics", *boot, "--delete", "--topic", topic),
    ]


# `--all` lists a topic's configs in the order of the broker's answer: sorted on both.
RULES: tuple[Normaliser, ...] = (STDOUT_FRAMES, ADMIN_CLIENT_ID,
                                 sort_runs(r"^  [a-z][a-z0-9._]*=.*sensitive="))

SCENARIOS = tool_scenarios(
    "configs", steps, RULES,
    "ConfigCommand: topics, brokers, broker-loggers, quotas, SCRAM, on each broker",
    "Moldau's kafka-configs.sh against Moldau vs ConfigCommand against Kafka")
