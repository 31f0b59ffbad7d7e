"""Offsets and log directories with Kafka's tools and Moldau's: records sent with keys
(so Kafka's murmur2 partitioner places them alike), then GetOffsetShell (latest,
earliest, max-timestamp, a timestamp, partition filters, a missing topic),
DeleteRecordsCommand (a low watermark moved, an offset past the end, a malformed
file), GetOffsetShell again, and LogDirsCommand over the topic."""

from __future__ import annotations

import json
from collections.abc import Sequence

from compat.normalise import Normaliser, substitute
from compat.scenarios.base import Context
from compat.scenarios.java_client import TOPIC_PREFIX
from compat.scenarios.tool_steps import (
    ADMIN_CLIENT_ID,
    SCRATCH_RULE,
    STDOUT_FRAMES,
    Step,
    step,
    tool_scenarios,
    write,
)

BASE_TIMESTAMP = 1_700_000_000_000  # the Java client's first record (ClientTranscript.java)
KEYS = [f"key-{i}" for i in range(12)]


def _delete_file(ctx: Context, name: str, entries: Sequence[tuple[str, int, int]]) -> str:
    partitions = ",".join(f'{{"topic":"{t}","partition":{p},"offset":{o}}}'
                          for t, p, o in entries)
    return write(ctx, name, f'{{"partitions":[{partitions}],"version":1}}')


def steps(ctx: Context) -> list[Step]:
    topic, missing = f"offsets-{ctx.token}", f"offsets-{ctx.token}-missing"
    boot = ("--bootstrap-server", ctx.bootstrap)
    records = "".join(f"{key}:value-{key}\n" for key in KEYS)
    offsets = ("kafka-get-offsets", *boot)
    deletion = _delete_file(ctx, "delete.json", [(topic, 0, 2)])
    past_end = _delete_file(ctx, "past-end.json", [(topic, 1, 1000)])
    malformed = write(ctx, "malformed.json", '{"partitions":[{"topic":')
    return [
        step("kafka-topics", *boot, "--create", "--topic", topic, "--partitions", "3",
             "--replication-factor", "1"),
        step("kafka-console-producer", *boot, "--topic", topic, "--property", "parse.key=true",
             "--property", "key.separator=:", stdin=records, stderr=False),
        step(*offsets, "--topic", topic),
        step(*offsets, "--topic", topic, "--time", "-2"),
        step(*offsets, "--topic", topic, "--time", "latest"),
        # the Java client's records carry fixed timestamps, one second apart
        step(*offsets, "--topic", f"{TOPIC_PREFIX}-none", "--time", "-3"),
        step(*offsets, "--topic", f"{TOPIC_PREFIX}-none", "--time", "max-timestamp"),
        step(*offsets, "--topic", f"{TOPIC_PREFIX}-none", "--time", str(BASE_TIMESTAMP + 1500)),
        step(*offsets, "--topic", topic, "--time", "0"),
        step(*offsets, "--topic", topic, "--partitions", "0,2"),
        step(*offsets, "--topic-partitions", f"{topic}:1-2"),
        step(*offsets, "--topic-partitions", f"offsets-{ctx.token}.*:0"),
        step(*offsets, "--topic", missing),
        step(*offsets, "--topic", topic, "--time", "yesterday"),
        step(*offsets, "--topic", topic, "--topic-partitions", f"{topic}:0"),
        step("kafka-delete-records", *boot, "--offset-json-file", deletion),
        step("kafka-delete-records", *boot, "--offset-json-file", past_end),
        step("kafka-delete-records", *boot, "--offset-json-file", malformed),
        step("kafka-delete-records", *boot),
        step(*offsets, "--topic", topic, "--time", "earliest"),
        step("kafka-log-dirs", *boot, "--describe", "--topic-list",
             f"{topic},{TOPIC_PREFIX}-none,{TOPIC_PREFIX}-zstd"),
        step("kafka-log-dirs", *boot, "--describe", "--topic-list", missing),
        step("kafka-log-dirs", *boot, "--describe", "--topic-list", topic, "--broker-list", "7"),
        step("kafka-log-dirs", *boot, "--topic-list", topic),
        step("kafka-topics", *boot, "--delete", "--topic", topic),
    ]


def sort_log_dir_partitions(lines: list[str]) -> list[str]:
    """LogDirsCommand lists a log directory's partitions in the order of the broker's
    answer, which Kafka's broker fills from a hash map: sorted here, the keys kept as
    printed."""
    out = []
    for line in lines:
        if line.startswith("{") and '"logDirs"' in line:
            document = json.loads(line)
            for broker in document.get("brokers", []):
                for log_dir in broker.get("logDirs", []):
                    log_dir["partitions"] = sorted(log_dir.get("partitions", []),
                                                   key=lambda p: str(p.get("partition")))
            line = json.dumps(document, separators=(",", ":"))
        out.append(line)
    return out


RULES: tuple[Normaliser, ...] = (
    STDOUT_FRAMES, SCRATCH_RULE, ADMIN_CLIENT_ID, sort_log_dir_partitions,
    # the console producer's batches hold its clock's deltas, whose varints vary in size;
    # the Java client's fixed-timestamp batches are the same bytes on both brokers
    substitute(r'("partition":"offsets-<run>-\d+","size":)\d+', r"\1<size>"))

SCENARIOS = tool_scenarios(
    "offsets", steps, RULES,
    "GetOffsetShell, DeleteRecordsCommand and LogDirsCommand against each broker",
    "Moldau's kafka-get-offsets/-delete-records/-log-dirs vs Kafka's tools on Kafka",
    requires=("java-client.produce-consume",))
