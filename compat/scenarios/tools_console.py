"""Kafka's ConsoleProducer and ConsoleConsumer, and Moldau's kafka-console-*.sh: keyed
records, records with headers, plain lines and a refused producer property; then the
records read back with the formatter's properties (keys, partitions, offsets, headers,
timestamps, separators, no value), a partition from an offset, --max-messages, a timeout
before --max-messages is reached, and the option errors."""

from __future__ import annotations

from compat.normalise import Normaliser, substitute
from compat.scenarios.base import Context
from compat.scenarios.tool_steps import (
    ADMIN_CLIENT_ID,
    STDOUT_FRAMES,
    Step,
    step,
    tool_scenarios,
)


def steps(ctx: Context) -> list[Step]:
    topic = f"console-{ctx.token}"
    boot = ("--bootstrap-server", ctx.bootstrap)
    produce = ("kafka-console-producer", *boot, "--topic", topic)
    consume = ("kafka-console-consumer", *boot, "--topic", topic)
    everything = ("--from-beginning", "--max-messages", "8", "--timeout-ms", "20000")
    keyed = "".join(f"k{i}:v{i}\n" for i in range(1, 5))
    return [
        step("kafka-topics", *boot, "--create", "--topic", topic, "--partitions", "1",
             "--replication-factor", "1"),
        step(*produce, "--property", "parse.key=true", "--property", "key.separator=:",
             stdin=keyed, stderr=False),
        step(*produce, "--property", "parse.key=true", "--property", "parse.headers=true",
             stdin="h1:x,h2:y\tk5\tv5\nh3:z\tk6\tv6\n", stderr=False),
        step(*produce, "--producer-property", "acks=1", stdin="plain-7\nplain-8\n",
             stderr=False),
        step(*produce, "--producer-property", "acks=2", stdin="never\n"),
        step(*consume, *everything),
        step(*consume, *everything, "--property", "print.key=true", "--property",
             "print.partition=true", "--property", "print.offset=true", "--property",
             "print.headers=true"),
        step(*consume, *everything, "--property", "print.key=true", "--property",
             "key.separator= | ", "--property", "print.timestamp=true", "--property",
             "print.value=false", "--property", "null.literal=<none>"),
        step(*consume, *everything, "--property", "print.headers=true", "--property",
             "headers.separator=;", "--property", "headers.key.separator==", "--property",
             "headers.deserializer=org.apache.kafka.common.serialization.StringDeserializer",
             "--property", "line.separator=|"),
        step(*consume, "--partition", "0", "--offset", "5", "--max-messages", "2",
             "--timeout-ms", "20000", "--property", "print.offset=true"),
        step(*consume, "--partition", "0", "--offset", "earliest", "--max-messages", "1",
             "--timeout-ms", "20000"),
        step(*consume, "--partition", "0", "--offset", "6", "--max-messages", "5",
             "--timeout-ms", "3000"),
        step(*consume, "--offset", "2", "--max-messages", "1"),
        step(*consume, "--partition", "0", "--offset", "soon", "--max-messages", "1"),
        step(*consume, "--group", f"console-{ctx.token}", "--partition", "0",
             "--max-messages", "1"),
        step(*consume, "--from-beginning", "--max-messages", "1", "--formatter",
             "org.example.NoSuchFormatter"),
        step("kafka-console-consumer", *boot, "--max-messages", "1"),
        step("kafka-topics", *boot, "--delete", "--topic", topic),
    ]


# CreateTime is the producer's clock.
RULES: tuple[Normaliser, ...] = (STDOUT_FRAMES, ADMIN_CLIENT_ID,
                                 substitute(r"CreateTime:\d+", "CreateTime:<time>"))

SCENARIOS = tool_scenarios(
    "console", steps, RULES,
    "ConsoleProducer and ConsoleConsumer (formatter properties) against each broker",
    "Moldau's kafka-console-producer/-consumer vs Kafka's tools on Kafka")
