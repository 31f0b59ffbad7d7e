"""Kafka's ProducerPerformance, ConsumerPerformance and TransactionsCommand, and Moldau's
kafka-*-perf-test.sh and kafka-transactions.sh: the shape of the perf tools' lines (every
number and date normalised), a transactional perf run, then the transactions tool's
list, describe, describe-producers and find-hanging over what it left, and its errors.
The tables' ids, epochs and times are a broker's clock and counters: normalised too."""

from __future__ import annotations

import re

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
    topic, txn_topic = f"perf-{ctx.token}", f"perf-{ctx.token}-txn"
    txn_id = f"perf-txn-{ctx.token}"
    boot = ("--bootstrap-server", ctx.bootstrap)
    props = ("--producer-props", f"bootstrap.servers={ctx.bootstrap}")
    txns = ("kafka-transactions", *boot)
    return [
        step("kafka-topics", *boot, "--create", "--topic", topic, "--partitions", "1",
             "--replication-factor", "1"),
        step("kafka-topics", *boot, "--create", "--topic", txn_topic, "--partitions", "1",
             "--replication-factor", "1"),
        step("kafka-producer-perf-test", "--topic", topic, "--num-records", "200",
             "--record-size", "100", "--throughput", "-1", *props, "acks=1", stderr=False),
        step("kafka-producer-perf-test", "--topic", txn_topic, "--num-records", "50",
             "--record-size", "10", "--throughput", "-1", "--transactional-id", txn_id,
             "--transaction-duration-ms", "100000", *props, stderr=False),
        step("kafka-producer-perf-test", "--topic", topic, "--num-records", "10",
             "--throughput", "-1", *props),
        step("kafka-consumer-perf-test", *boot, "--topic", topic, "--messages", "200",
             "--timeout", "20000", stderr=False),
        step("kafka-consumer-perf-test", *boot, "--topic", topic, "--messages", "200",
             "--timeout", "20000", "--hide-header", stderr=False),
        step("kafka-consumer-perf-test", *boot, "--messages", "10"),
        step(*txns, "describe", "--transactional-id", txn_id),
        step(*txns, "describe-producers", "--topic", txn_topic, "--partition", "0"),
        step(*txns, "describe-producers", "--topic", topic, "--partition", "0"),
        step(*txns, "find-hanging", "--topic", txn_topic, "--partition", "0"),
        step(*txns, "describe", "--transactional-id", f"perf-txn-{ctx.token}-missing"),
        step(*txns, "describe-producers", "--topic", topic),
        step(*txns, "list", "--duration-filter", "x"),
        step(*txns),
        step("kafka-topics", *boot, "--delete", "--topic", topic),
        step("kafka-topics", *boot, "--delete", "--topic", txn_topic),
    ]


NUMBER = re.compile(r"(?<![\w<])-?\d+(\.\d+)?([eE][-+]?\d+)?(?![\w>])")
DATE = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}\b")


def shape_only(lines: list[str]) -> list[str]:
    """Every number of a tool's output is a measure or a broker's counter: only where
    numbers stand and what surrounds them are compared, the column padding collapsed.
    Command lines, exit statuses and standard error (usage errors) stay as they are."""
    out = []
    for line in lines:
        if not (line.startswith(("$ ", "exit ", "! "))):
            line = NUMBER.sub("<n>", DATE.sub("<date>", line))
            line = re.sub(r"[ \t]+", " ", line).rstrip()
        out.append(line)
    return out


# The usage table's default group id (perf-consumer-<random>) wraps by the width of its
# number, a clock: its continuation line gets the table's fixed indent
CLIENT_ID_PADDING: Normaliser = substitute(r"^!\s+(perf-consumer-<n>\))\s*$",
                                           "!" + " " * 44 + r"\1")
RULES: tuple[Normaliser, ...] = (STDOUT_FRAMES, ADMIN_CLIENT_ID, CLIENT_ID_PADDING, shape_only)

SCENARIOS = tool_scenarios(
    "perf", steps, RULES,
    "ProducerPerformance, ConsumerPerformance, TransactionsCommand on each broker",
    "Moldau's perf tools and kafka-transactions.sh vs Kafka's tools on Kafka")
