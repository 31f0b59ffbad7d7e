"""Kafka's Java consumer (kafka-clients 3.9.1) in groups, against both brokers: compat/
java/GroupTranscript.java runs the range and cooperative-sticky assignors while members
join and leave, static members (group.instance.id) closing and coming back, then one
consumer of assigned partitions that seeks, pauses, resumes, looks offsets up by time
and commits. Each step waits for the assignments it expects, so the transcript holds the
rebalance callbacks per generation, never timings."""

from __future__ import annotations

from compat import javac, launcher
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side
from compat.transcript import Transcript

MAIN_CLASS = "GroupTranscript"


def run_groups(ctx: Context) -> Transcript:
    transcript = Transcript()
    args = [ctx.bootstrap, f"jg-{ctx.token}"]
    run = launcher.run_tool(MAIN_CLASS, args, extra_classpath=[str(javac.classes_dir())],
                            timeout=300)
    transcript.command(MAIN_CLASS, args, run, stderr=False)
    timed_out = sum("TIMED OUT" in line for line in run.stdout.splitlines())
    transcript.note = f"exit {run.exit_code}" + (f", {timed_out} timeouts" if timed_out else "")
    return transcript


SCENARIOS = [
    Scenario("java-client.groups",
             "kafka-clients 3.9.1 consumer groups: range, cooperative-sticky, static "
             "members, seek, pause, offsetsForTimes, commits",
             Side("java-groups@kafka", KAFKA, run_groups),
             Side("java-groups@moldau", MOLDAU, run_groups),
             fast=False),  # about 45 s of rebalances: `make compat`, not `make test`
]
