"""Kafka's ConsumerGroupCommand against both brokers, after the Java client's group
committed and left: --list, --describe (offsets, members, state) and a missing group."""

from __future__ import annotations

from compat.normalise import Normaliser, sort_runs
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side, kafka_tools, moldau_tool
from compat.scenarios.java_client import GROUP, TOPIC_PREFIX
from compat.transcript import Transcript

GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
LABEL = "kafka-consumer-groups"


def steps() -> list[list[str]]:
    return [
        ["--list"],
        ["--describe", "--group", GROUP],
        ["--describe", "--group", GROUP, "--members", "--verbose"],
        ["--describe", "--group", GROUP, "--state"],
        ["--describe", "--group", "compat-no-such-group"],
    ]


def with_kafka_tool(ctx: Context) -> Transcript:
    transcript = Transcript()
    kafka_tools(transcript, GROUP_COMMAND, LABEL,
                [["--bootstrap-server", ctx.bootstrap, *args] for args in steps()])
    return transcript


def with_moldau_tool(ctx: Context) -> Transcript:
    transcript = Transcript()
    for args in steps():
        moldau_tool(transcript, "kafka-consumer-groups.sh", LABEL,
                    ["--bootstrap-server", ctx.bootstrap, *args])
    return transcript


# The offsets table lists partitions in the order of a Java HashMap filled from the
# OffsetFetch response: no order a user can rely on, on either broker.
RULES: tuple[Normaliser, ...] = (sort_runs(rf"^{GROUP}\s+{TOPIC_PREFIX}-"),)

KAFKA_TOOL_ON_KAFKA = Side("groups/kafka-tool@kafka", KAFKA, with_kafka_tool)

SCENARIOS = [
    Scenario("groups.kafka-tool",
             "Kafka's ConsumerGroupCommand --list/--describe after the Java client's group",
             KAFKA_TOOL_ON_KAFKA, Side("groups/kafka-tool@moldau", MOLDAU, with_kafka_tool),
             RULES, requires=("java-client.produce-consume",)),
    Scenario("groups.moldau-tool",
             "Moldau's kafka-consumer-groups.sh against Moldau vs Kafka's tool against Kafka",
             KAFKA_TOOL_ON_KAFKA, Side("groups/moldau-tool@moldau", MOLDAU, with_moldau_tool),
             RULES, requires=("java-client.produce-consume",)),
]
