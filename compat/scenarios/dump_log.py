"""Kafka reading Moldau's bytes: Kafka's DumpLogSegments over the segments and indexes the
Java client's records left on each broker, and over the __consumer_offsets segment that
holds the group's commits (--offsets-decoder). The same client sent the same batches to
both, so the data segments must match byte for byte (CRCs included)."""

from __future__ import annotations

from compat.normalise import Normaliser, sort_runs, substitute
from compat.scenarios.base import KAFKA, MOLDAU, Context, Scenario, Side, kafka_tools, moldau_tool
from compat.scenarios.java_client import CODECS, GROUP, TOPIC_PREFIX
from compat.transcript import Transcript

DUMP_LOG_SEGMENTS = "kafka.tools.DumpLogSegments"
LABEL = "kafka-dump-log"
FIRST_SEGMENT = "00000000000000000000"
OFFSETS_TOPIC_PARTITIONS = 50  # offsets.topic.num.partitions, Kafka's default on both


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as a signed 32-bit int."""
    value = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        value = (31 * value + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def offsets_partition(group: str, partitions: int = OFFSETS_TOPIC_PARTITIONS) -> int:
    """The __consumer_offsets partition of a group: Kafka's Utils.abs(hashCode) % n."""
    return (java_string_hash(group) & 0x7FFFFFFF) % partitions


def segment_commands(ctx: Context) -> list[list[str]]:
    """One run per partition: the tool reports index mismatches at the end in a hash
    order of the file paths, which differ between the brokers' directories."""
    commands = []
    for codec in CODECS:
        base = ctx.data_dir / f"{TOPIC_PREFIX}-{codec}-0" / FIRST_SEGMENT
        files = [f"{base}.log", f"{base}.index", f"{base}.timeindex"]
        commands.append(["--files", ",".join(files), "--print-data-log"])
    return commands


def dump_segments(ctx: Context) -> Transcript:
    transcript = Transcript()
    kafka_tools(transcript, DUMP_LOG_SEGMENTS, LABEL, segment_commands(ctx))
    return transcript


def dump_segments_with_moldau_tool(ctx: Context) -> Transcript:
    transcript = Transcript()
    for args in segment_commands(ctx):
        moldau_tool(transcript, "kafka-dump-log.sh", LABEL, args)
    return transcript


def dump_offsets(ctx: Context) -> Transcript:
    partition = offsets_partition(GROUP)
    segment = ctx.data_dir / f"__consumer_offsets-{partition}" / f"{FIRST_SEGMENT}.log"
    transcript = Transcript()
    kafka_tools(transcript, DUMP_LOG_SEGMENTS, LABEL,
                [["--files", str(segment), "--offsets-decoder"]])
    return transcript


# The group's records carry the coordinator's clock (batch and record CreateTime, the
# commit and state timestamps), and the CRC covers them. Kafka writes one commit's
# offsets in the order of a Scala hash map, so the records of a batch are compared as a
# set: without their offsets, sorted.
OFFSETS_RULES: tuple[Normaliser, ...] = (
    substitute(r"CreateTime: \d+", "CreateTime: <time>"),
    substitute(r'"(currentStateTimestamp|commitTimestamp)":\d+', r'"\1":<time>'),
    substitute(r"\bcrc: \d+", "crc: <crc>"),
    substitute(r"^\| offset: \d+ ", "| offset: <n> "),
    sort_runs(r"^\| offset: <n> "),
)

KAFKA_TOOL_ON_KAFKA = Side("dump-log/segments@kafka", KAFKA, dump_segments)

SCENARIOS = [
    Scenario("dump-log.segments",
             "DumpLogSegments --print-data-log over the client's .log/.index/.timeindex",
             KAFKA_TOOL_ON_KAFKA, Side("dump-log/segments@moldau", MOLDAU, dump_segments),
             requires=("java-client.produce-consume",)),
    Scenario("dump-log.moldau-tool",
             "Moldau's kafka-dump-log.sh over Moldau's segments vs DumpLogSegments over Kafka's",
             KAFKA_TOOL_ON_KAFKA,
             Side("dump-log/moldau-tool@moldau", MOLDAU, dump_segments_with_moldau_tool),
             requires=("java-client.produce-consume",)),
    Scenario("dump-log.consumer-offsets",
             "DumpLogSegments --offsets-decoder over the group's __consumer_offsets segment",
             Side("dump-log/offsets@kafka", KAFKA, dump_offsets),
             Side("dump-log/offsets@moldau", MOLDAU, dump_offsets),
             OFFSETS_RULES, requires=("java-client.produce-consume",)),
]
