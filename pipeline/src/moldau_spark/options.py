"""The data source's options: Spark's Kafka source and sink names, checked before a query
starts so that a typo or malformed JSON fails at `load()` / `start()` with a clear message
instead of as a task failure minutes later.

Spark hands options over lower-cased (its CaseInsensitiveDict), so every name here is
compared lower-cased; messages quote the documented spelling.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

KAFKA_PREFIX = "kafka."

# Documented spelling of every option, by lower-cased name.
_SOURCE = ["assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets",
           "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingTimestamp",
           "endingTimestamp", "startingOffsetsByTimestampStrategy", "maxOffsetsPerTrigger",
           "minPartitions", "failOnDataLoss", "includeHeaders", "kafkaConsumer.pollTimeoutMs",
           "groupIdPrefix"]
_SINK = ["topic", "replayScanMaxRecords"]
# Spark itself adds these to a sink's options (writeStream.option("checkpointLocation")).
_SPARK_ADDED = ["checkpointLocation", "path", "queryName"]
SOURCE_OPTIONS = {name.lower(): name for name in _SOURCE}
SINK_OPTIONS = {name.lower(): name for name in _SINK + _SPARK_ADDED}

# Client settings the data source owns: letting users set them would break exactly-once.
_MANAGED_CLIENT_KEYS = {
    "auto.offset.reset": "the source reads exact offset ranges; use startingOffsets",
    "enable.auto.commit": "offsets live in the query's checkpoint, not in a consumer group",
    "enable.idempotence": "the sink's producer is always idempotent",
    "transactional.id": "the sink does not use transactions (see docs/spark.md)",
}

EARLIEST, LATEST = -2, -1  # Spark's sentinels in per-partition offset JSON

TopicPartition = tuple[str, int]


class OptionError(ValueError):
    """An option is unknown, missing, malformed or contradicts another one."""


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: exactly one of assign, subscribe, subscribePattern."""

    kind: Literal["assign", "subscribe", "subscribePattern"]
    topics: tuple[str, ...] = ()  # subscribe
    pattern: str = ""  # subscribePattern
    assignment: tuple[TopicPartition, ...] = ()  # assign

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.assignment)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a range starts or ends: earliest, latest, per-partition offsets (with -2/-1
    sentinels), per-partition timestamps, or one timestamp for every partition."""

    kind: Literal["earliest", "latest", "offsets", "timestamps", "timestamp"]
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)  # offsets/timestamps
    timestamp: int = 0  # kind == "timestamp"


@dataclass(frozen=True)
class SourceOptions:
    subscription: Subscription
    starting: OffsetSpec | None  # None: the mode's default (latest streaming, earliest batch)
    ending: OffsetSpec | None
    timestamp_strategy: Literal["error", "latest"]
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    group_id_prefix: str
    client: Mapping[str, str]  # librdkafka settings from the kafka.* options

    def check_streaming(self) -> None:
        if self.ending is not None:
            raise OptionError("endingOffsets / endingOffsetsByTimestamp / endingTimestamp are "
                              "for batch queries only; a stream has no end")

    def check_batch(self) -> None:
        if self.starting is not None and self.starting.kind == "latest":
            raise OptionError("startingOffsets='latest' is not allowed in a batch query "
                              "(it would always read nothing)")
        if self.starting is not None and self.starting.kind == "offsets" and any(
                v == LATEST for v in self.starting.offsets.values()):
            raise OptionError("startingOffsets: -1 (latest) is not allowed in a batch query")
        if self.ending is not None and self.ending.kind == "earliest":
            raise OptionError("endingOffsets='earliest' is not allowed in a batch query")
        if self.max_offsets_per_trigger is not None:
            raise OptionError("maxOffsetsPerTrigger is for streaming queries only")


@dataclass(frozen=True)
class SinkOptions:
    topic: str | None
    replay_scan_max_records: int
    client: Mapping[str, str]


def _unknown(options: Mapping[str, str], known: Mapping[str, str], role: str) -> None:
    unknown = sorted(k for k in options if k not in known and not k.startswith(KAFKA_PREFIX))
    if unknown:
        names = ", ".join(sorted(known[k] for k in known if k not in _lower(_SPARK_ADDED)))
        raise OptionError(f"unknown {role} option(s) {', '.join(map(repr, unknown))} for the "
                          f"moldau data source; known: {names}, and kafka.<client setting>")


def _lower(names: list[str]) -> set[str]:
    return {name.lower() for name in names}


def client_settings(options: Mapping[str, str]) -> dict[str, str]:
    settings = {k[len(KAFKA_PREFIX):]: v for k, v in options.items()
                if k.startswith(KAFKA_PREFIX)}
    if not settings.get("bootstrap.servers"):
        raise OptionError("option kafka.bootstrap.servers is required "
                          "(e.g. .option('kafka.bootstrap.servers', 'host1:9092,host2:9092'))")
    for key, why in _MANAGED_CLIENT_KEYS.items():
        if key in settings:
            raise OptionError(f"option kafka.{key} is not supported: {why}")
    return settings


def _json(name: str, text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {name} is not valid JSON ({exc.msg} at character "
                          f"{exc.pos}): {text!r}") from None


def _integer(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise OptionError(f"option {name}: expected an integer >= {minimum}, got {value!r}")
    return value


def _partition_map(name: str, text: str, minimum: int) -> dict[TopicPartition, int]:
    """`{"topicA":{"0":23,"1":-1}}` -> {("topicA", 0): 23, ("topicA", 1): -1}."""
    data = _json(name, text)
    example = '{"topicA":{"0":23,"1":-2}}'
    if not isinstance(data, dict) or not data:
        raise OptionError(f"option {name}: expected a JSON object of topics like {example}, "
                          f"got {text!r}")
    result: dict[TopicPartition, int] = {}
    for topic, partitions in data.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map partition numbers to "
                              f"values, like {example}; got {partitions!r}")
        for partition, value in partitions.items():
            if not str(partition).isdigit():
                raise OptionError(f"option {name}: partition {partition!r} of topic {topic!r} "
                                  "is not a partition number")
            result[(topic, int(partition))] = _integer(f"{name} ({topic}-{partition})",
                                                       value, minimum)
    return result


def _offset_spec(options: Mapping[str, str], edge: str) -> OffsetSpec | None:
    by_timestamp = f"{edge}OffsetsByTimestamp"
    timestamp = f"{edge}Timestamp"
    offsets = f"{edge}Offsets"
    # Spark's precedence: <edge>Timestamp > <edge>OffsetsByTimestamp > <edge>Offsets.
    if timestamp.lower() in options:
        text = options[timestamp.lower()]
        if not text.strip().isdigit():
            raise OptionError(f"option {timestamp}: expected milliseconds since the epoch, "
                              f"got {text!r}")
        return OffsetSpec("timestamp", timestamp=int(text))
    if by_timestamp.lower() in options:
        return OffsetSpec("timestamps", _partition_map(by_timestamp,
                                                       options[by_timestamp.lower()], 0))
    if offsets.lower() not in options:
        return None
    text = options[offsets.lower()].strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())  # type: ignore[arg-type]
    if not text.startswith("{"):
        raise OptionError(f"option {offsets}: expected 'earliest', 'latest' or JSON like "
                          f'{{"topicA":{{"0":23,"1":-2}}}}, got {text!r}')
    values = _partition_map(offsets, text, EARLIEST)
    if edge == "ending" and EARLIEST in values.values():
        raise OptionError("option endingOffsets: -2 (earliest) is not allowed as an end")
    return OffsetSpec("offsets", values)


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = [name for name in ("assign", "subscribe", "subscribePattern")
             if name.lower() in options]
    if len(given) != 1:
        raise OptionError("exactly one of the options assign, subscribe, subscribePattern "
                          f"must be given; got {given or 'none'}")
    kind = given[0]
    text = options[kind.lower()]
    if kind == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise OptionError(f"option subscribe: expected a comma-separated list of topics, "
                              f"got {text!r}")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        try:
            re.compile(text)
        except re.error as exc:
            raise OptionError(f"option subscribePattern: {text!r} is not a regular "
                              f"expression ({exc})") from None
        return Subscription("subscribePattern", pattern=text)
    data = _json("assign", text)
    if not isinstance(data, dict) or not data or not all(
            isinstance(v, list) and v and all(isinstance(p, int) and not isinstance(p, bool)
                                              and p >= 0 for p in v)
            for v in data.values()):
        raise OptionError(f'option assign: expected JSON like {{"topicA":[0,1]}}, got {text!r}')
    return Subscription("assign", assignment=tuple(
        (topic, p) for topic, parts in data.items() for p in sorted(set(parts))))


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = options.get(name.lower())
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise OptionError(f"option {name}: expected true or false, got {text!r}")
    return text.strip().lower() == "true"


def _positive(options: Mapping[str, str], name: str) -> int | None:
    text = options.get(name.lower())
    if text is None:
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise OptionError(f"option {name}: expected a positive integer, got {text!r}")
    return int(text)


def parse_source(options: Mapping[str, str]) -> SourceOptions:
    """Checks everything that does not depend on batch vs streaming (see check_*)."""
    options = {k.lower(): v for k, v in options.items()}
    _unknown(options, SOURCE_OPTIONS, "source")
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option startingOffsetsByTimestampStrategy: expected error or "
                          f"latest, got {strategy!r}")
    ending = _offset_spec(options, "ending")
    if ending is not None and ending.kind == "earliest":
        raise OptionError("option endingOffsets: 'earliest' is not allowed as an end")
    return SourceOptions(
        subscription=_subscription(options),
        starting=_offset_spec(options, "starting"),
        ending=ending,
        timestamp_strategy=strategy,  # type: ignore[arg-type]
        max_offsets_per_trigger=_positive(options, "maxOffsetsPerTrigger"),
        min_partitions=_positive(options, "minPartitions"),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        include_headers=_bool(options, "includeHeaders", False),
        poll_timeout_ms=_positive(options, "kafkaConsumer.pollTimeoutMs") or 120_000,
        group_id_prefix=options.get("groupidprefix", "spark-kafka-source"),
        client=client_settings(options),
    )


def parse_sink(options: Mapping[str, str]) -> SinkOptions:
    options = {k.lower(): v for k, v in options.items()}
    _unknown(options, SINK_OPTIONS, "sink")
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option topic is empty")
    return SinkOptions(topic=topic.strip() if topic else None,
                       replay_scan_max_records=_positive(options, "replayScanMaxRecords")
                       or 1_000_000,
                       client=client_settings(options))
