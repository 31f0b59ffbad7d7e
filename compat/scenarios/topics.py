"""Kafka's TopicCommand against both brokers, and Moldau's kafka-topics.sh against Moldau
beside Kafka's tool against Kafka: create, the errors of an existing or missing topic,
list, describe, configs, alter --partitions, delete."""

from __future__ import annotations

from compat.normalise import Normaliser
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side, kafka_tools, moldau_tool
from compat.transcript import Transcript

TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
LABEL = "kafka-topics"


def steps(token: str) -> list[list[str]]:
    """The command lines of the scenario, after --bootstrap-server."""
    topic, compacted, missing = f"ct-{token}", f"ct-{token}-compacted", f"ct-{token}-missing"
    create = ["--create", "--topic", topic, "--partitions", "3", "--replication-factor", "1"]
    return [
        create,
        create,  # TopicExistsException
        [*create, "--if-not-exists"],
        ["--create", "--topic", compacted, "--partitions", "1", "--replication-factor", "1",
         "--config", "cleanup.policy=compact", "--config", "retention.ms=86400000"],
        # more replicas than brokers: the broker's InvalidReplicationFactorException
        ["--create", "--topic", missing, "--partitions", "1", "--replication-factor", "2"],
        ["--list", "--topic", f"ct-{token}.*"],
        ["--describe", "--topic", topic],
        ["--describe", "--topic", compacted],
        ["--alter", "--topic", topic, "--partitions", "4"],
        ["--alter", "--topic", topic, "--partitions", "2"],  # fewer: refused
        ["--describe", "--topic", topic],
        ["--describe", "--topic", missing],
        ["--alter", "--topic", missing, "--partitions", "2"],
        ["--delete", "--topic", topic],
        ["--delete", "--topic", compacted],
        ["--delete", "--topic", missing],
    ]


def with_kafka_tool(ctx: Context) -> Transcript:
    transcript = Transcript()
    kafka_tools(transcript, TOPIC_COMMAND, LABEL,
                [["--bootstrap-server", ctx.bootstrap, *args] for args in steps(ctx.token)])
    return transcript


def with_moldau_tool(ctx: Context) -> Transcript:
    transcript = Transcript()
    for args in steps(ctx.token):
        moldau_tool(transcript, "kafka-topics.sh", LABEL,
                    ["--bootstrap-server", ctx.bootstrap, *args])
    return transcript


KAFKA_TOOL_ON_KAFKA = Side("topics/kafka-tool@kafka", KAFKA, with_kafka_tool)
RULES: tuple[Normaliser, ...] = ()

SCENARIOS = [
    Scenario("topics.kafka-tool",
             "Kafka's TopicCommand against each broker",
             KAFKA_TOOL_ON_KAFKA, Side("topics/kafka-tool@moldau", MOLDAU, with_kafka_tool),
             RULES),
    Scenario("topics.moldau-tool",
             "Moldau's kafka-topics.sh against Moldau vs Kafka's TopicCommand against Kafka",
             KAFKA_TOOL_ON_KAFKA, Side("topics/moldau-tool@moldau", MOLDAU, with_moldau_tool),
             RULES),
]
