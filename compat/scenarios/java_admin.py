"""Kafka's AdminClient (kafka-clients 3.9.1) against both brokers: compat/java/
AdminTranscript.java calls what Moldau implements (topics and partitions, configs
incremental and legacy, consumer groups and their offsets, reassignments and elections
on one broker, log dirs, records deletion, offsets, the cluster) with their answers and
their errors, one line each."""

from __future__ import annotations

from compat import javac, launcher
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side
from compat.transcript import Transcript

MAIN_CLASS = "AdminTranscript"


def run_admin(ctx: Context) -> Transcript:
    transcript = Transcript()
    args = [ctx.bootstrap, f"ja-{ctx.token}"]
    run = launcher.run_tool(MAIN_CLASS, args, extra_classpath=[str(javac.classes_dir())],
                            timeout=300)
    transcript.command(MAIN_CLASS, args, run, stderr=False)
    transcript.note = f"exit {run.exit_code}, {len(run.stdout.splitlines())} lines"
    return transcript


SCENARIOS = [
    Scenario("java-client.admin",
             "kafka-clients 3.9.1 AdminClient: topics, partitions, configs, groups, "
             "offsets, reassignments, elections, log dirs, records, cluster",
             Side("java-admin@kafka", KAFKA, run_admin),
             Side("java-admin@moldau", MOLDAU, run_admin)),
]
