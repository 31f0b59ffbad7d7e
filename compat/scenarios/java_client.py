"""Kafka's Java client (kafka-clients 3.9.1) against both brokers: compat/java/
ClientTranscript.java, compiled here against the cached jar, creates a topic per codec,
produces with an idempotent acks=all producer (none, gzip, snappy, lz4, zstd; keys,
headers, explicit timestamps, a tombstone), consumes in a group, commits, and prints
what it saw. The groups and dump-log scenarios read what this one leaves behind."""

from __future__ import annotations

from compat import javac, launcher
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side
from compat.transcript import Transcript

MAIN_CLASS = "ClientTranscript"
TOPIC_PREFIX = "jc"  # the program appends -<codec>
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
GROUP = "compat-group"


def run_client(ctx: Context) -> Transcript:
    transcript = Transcript()
    args = [ctx.bootstrap, TOPIC_PREFIX, GROUP]
    run = launcher.run_tool(MAIN_CLASS, args, extra_classpath=[str(javac.classes_dir())],
                            timeout=180)
    transcript.command("ClientTranscript", args, run, stderr=False)
    consumed = [line for line in run.stdout.splitlines() if line.startswith("consumed ")
                and " of " in line]
    transcript.note = f"exit {run.exit_code}, " + (consumed[-1] if consumed else "no records")
    return transcript


SCENARIOS = [
    Scenario("java-client.produce-consume",
             "kafka-clients 3.9.1: idempotent acks=all producer per codec, group consumer, commit",
             Side("java-client@kafka", KAFKA, run_client),
             Side("java-client@moldau", MOLDAU, run_client)),
]
