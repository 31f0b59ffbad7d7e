"""Scenarios as a list of tool steps, run either with Kafka's tools (in as few JVMs as
possible) or with Moldau's kafka-*.sh scripts, so one list of command lines drives both
columns of a "Kafka's tool" and a "Moldau's tool" scenario.

A step names a tool by its Kafka script name (`kafka-get-offsets`); TOOLS maps that to
Kafka's main class and Moldau's script. A step with standard input (the console
producer) runs in a JVM of its own: the batch reads its commands from standard input.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from compat import batch, launcher
from compat.launcher import ToolRun
from compat.normalise import Normaliser, drop, substitute
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side
from compat.transcript import Transcript

# Kafka script name -> (Kafka 3.9.1's main class, Moldau's script)
TOOLS: dict[str, tuple[str, str]] = {
    "kafka-topics": ("org.apache.kafka.tools.TopicCommand", "kafka-topics.sh"),
    "kafka-reassign-partitions": ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
                                  "kafka-reassign-partitions.sh"),
    "kafka-leader-election": ("org.apache.kafka.tools.LeaderElectionCommand",
                              "kafka-leader-election.sh"),
    "kafka-log-dirs": ("org.apache.kafka.tools.LogDirsCommand", "kafka-log-dirs.sh"),
    "kafka-delete-records": ("org.apache.kafka.tools.DeleteRecordsCommand",
                             "kafka-delete-records.sh"),
    "kafka-get-offsets": ("org.apache.kafka.tools.GetOffsetShell", "kafka-get-offsets.sh"),
    "kafka-configs": ("kafka.admin.ConfigCommand", "kafka-configs.sh"),
    "kafka-console-producer": ("kafka.tools.ConsoleProducer", "kafka-console-producer.sh"),
    "kafka-console-consumer": ("org.apache.kafka.tools.consumer.ConsoleConsumer",
                               "kafka-console-consumer.sh"),
    "kafka-producer-perf-test": ("org.apache.kafka.tools.ProducerPerformance",
                                 "kafka-producer-perf-test.sh"),
    "kafka-consumer-perf-test": ("org.apache.kafka.tools.ConsumerPerformance",
                                 "kafka-consumer-perf-test.sh"),
    "kafka-transactions": ("org.apache.kafka.tools.TransactionsCommand",
                           "kafka-transactions.sh"),
}

# A scratch directory is the side's own (its path names the side): files the steps
# write there are named alike on both sides.
SCRATCH_RULE: Normaliser = substitute(r"\S*/scratch/[^/\s]+/", "<scratch>/")
# Java stack frames some tools print on stdout (the common rules drop stderr's): the
# exception's own lines stay.
STDOUT_FRAMES: Normaliser = drop(r"^\t(at \S+\(.*\)|\.\.\. \d+ more)$")
# The Java clients number themselves per JVM (adminclient-3): the batch shares one.
ADMIN_CLIENT_ID: Normaliser = substitute(r"\b(adminclient|producer|consumer)-(\d+)\b",
                                         r"\1-<n>")


@dataclass(frozen=True)
class Step:
    tool: str  # a key of TOOLS
    args: tuple[str, ...]
    stdin: str | None = None
    stderr: bool = True  # False: leave the run's standard error (a client's log) out


Steps = Callable[[Context], Sequence[Step]]


def step(tool: str, *args: str, stdin: str | None = None, stderr: bool = True) -> Step:
    if tool not in TOOLS:
        raise KeyError(f"no tool {tool}")
    return Step(tool, tuple(args), stdin, stderr)


def write(ctx: Context, name: str, text: str) -> str:
    """A file in the side's scratch directory, for a tool's --*-file option."""
    path = Path(ctx.scratch) / name
    path.write_text(text)
    return str(path)


def kafka_runs(steps: Sequence[Step], timeout: float = 300.0) -> list[ToolRun]:
    """The steps with Kafka's tools, in order; consecutive ones without standard input
    share a JVM."""
    runs: list[ToolRun] = []
    pending: list[Step] = []

    def flush() -> None:
        if pending:
            runs.extend(batch.run_batch([(TOOLS[s.tool][0], s.args) for s in pending],
                                        timeout=timeout))
            pending.clear()
    for s in steps:
        if s.stdin is None:
            pending.append(s)
            continue
        flush()
        runs.append(launcher.run_tool(TOOLS[s.tool][0], s.args, stdin=s.stdin,
                                      timeout=timeout))
    flush()
    return runs


def with_kafka_tools(steps: Steps, timeout: float = 300.0) -> Callable[[Context], Transcript]:
    """A column: the steps with Kafka's tools against the context's broker. The steps
    are run in order; consecutive ones without standard input share a JVM."""
    def run(ctx: Context) -> Transcript:
        transcript = Transcript()
        chosen = list(steps(ctx))
        for s, result in zip(chosen, kafka_runs(chosen, timeout), strict=True):
            transcript.command(s.tool, s.args, result, stderr=s.stderr)
        return transcript
    return run


def moldau_runs(steps: Sequence[Step], timeout: float = 120.0) -> list[ToolRun]:
    """The steps with Moldau's kafka-*.sh scripts, a process each, in order."""
    return [launcher.run_command([str(Path(sys.executable).parent / TOOLS[s.tool][1]),
                                  *s.args], stdin=s.stdin, timeout=timeout) for s in steps]


def with_moldau_tools(steps: Steps, timeout: float = 120.0) -> Callable[[Context], Transcript]:
    """A column: the same steps with Moldau's kafka-*.sh scripts."""
    def run(ctx: Context) -> Transcript:
        transcript = Transcript()
        chosen = list(steps(ctx))
        for s, result in zip(chosen, moldau_runs(chosen, timeout), strict=True):
            transcript.command(s.tool, s.args, result, stderr=s.stderr)
        return transcript
    return run


def tool_scenarios(name: str, steps: Steps, rules: Sequence[Normaliser], kafka_summary: str,
                   moldau_summary: str, requires: Sequence[str] = ()) -> list[Scenario]:
    """The pair each tool module defines: `<name>.kafka-tool`, Kafka's tools against each
    broker (in batches: make test's fast subset), and `<name>.moldau-tool`, Moldau's
    scripts against Moldau beside Kafka's tools on Kafka (a process a command: make
    compat only)."""
    on_kafka = Side(f"{name}/kafka-tool@kafka", KAFKA, with_kafka_tools(steps))
    return [
        Scenario(f"{name}.kafka-tool", kafka_summary, on_kafka,
                 Side(f"{name}/kafka-tool@moldau", MOLDAU, with_kafka_tools(steps)), rules,
                 requires=requires),
        Scenario(f"{name}.moldau-tool", moldau_summary, on_kafka,
                 Side(f"{name}/moldau-tool@moldau", MOLDAU, with_moldau_tools(steps)), rules,
                 requires=requires, fast=False),
    ]
