"""compat/java/ToolBatch runs Kafka's tools in one JVM: each command's output and exit
status must be what the same command prints and returns in a JVM of its own. Kafka's
tools only (Java and Scala ones, success, usage errors, failures), no broker."""

from __future__ import annotations

import re

from compat import batch, launcher

# Stack frames differ below the tool's main (the batch calls it by reflection); the
# scenarios' normalisation drops frames anyway.
FRAME = re.compile(r"^\s+(at |\.\.\. \d+ more)")


def without_frames(text: str) -> list[str]:
    return [line for line in text.splitlines() if not FRAME.match(line)]

COMMANDS: list[tuple[str, list[str]]] = [
    ("org.apache.kafka.tools.TopicCommand", ["--version"]),
    # no --bootstrap-server: a usage error through Kafka's Exit, then a normal run
    ("org.apache.kafka.tools.TopicCommand", ["--list"]),
    ("kafka.tools.DumpLogSegments", ["--files", "/nonexistent/00000000000000000000.log"]),
    ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", ["--version"]),
    ("kafka.tools.DumpLogSegments", ["--help"]),
]


def test_a_batch_prints_and_exits_as_separate_runs_do() -> None:
    together = batch.run_batch(COMMANDS)
    alone = [launcher.run_tool(main_class, args) for main_class, args in COMMANDS]
    assert [run.exit_code for run in together] == [run.exit_code for run in alone]
    assert [run.stdout for run in together] == [run.stdout for run in alone]
    assert [without_frames(run.stderr) for run in together] == \
        [without_frames(run.stderr) for run in alone]
    assert together[0].stdout.startswith(launcher.KAFKA_VERSION)
    assert together[1].exit_code == 1  # the usage error really is one
