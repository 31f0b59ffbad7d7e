"""Topic-level log configuration: Kafka's names, defaults and validation.

A LogConfig is what one partition log obeys. The broker builds it from the topic's
overrides on top of the broker-level `log.*` defaults (Kafka's precedence); this module
only knows the topic-level keys and their types.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace
from typing import Any, Final, Literal

LONG_MAX = 0x7FFFFFFFFFFFFFFF
INT_MAX = 0x7FFFFFFF

CLEANUP_POLICIES = ("compact", "delete")  # Kafka's order, which its error lists
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# compression.type -> the codec id of a batch's attributes ("producer": none, keep the batch's)
CODEC_IDS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


class ConfigError(ValueError):
    """A config value Kafka would reject (InvalidConfigurationException)."""


def _policies(value: object) -> tuple[str, ...]:
    """The policies in the order given (Kafka's list type keeps it, and describeConfigs
    shows it: APPEND puts "compact" after "delete"); the first unknown one is refused."""
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    policies = tuple(dict.fromkeys(str(p).strip() for p in items if str(p).strip()))
    bad = [p for p in policies if p not in CLEANUP_POLICIES]
    if bad:
        raise ConfigError(
            f"Invalid value {bad[0]} for configuration cleanup.policy: "
            f"String must be one of: {', '.join(CLEANUP_POLICIES)}"
        )
    return policies


def _boolean(value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ConfigError(f"Expected value to be either true or false, got {value!r}")
    return text == "true"


ALL_REPLICAS: Final = "*"


@functools.lru_cache(maxsize=1024)
def parse_throttled_replicas(value: str) -> Literal["*"] | frozenset[tuple[int, int]] | None:
    """A `*.replication.throttled.replicas` value: "*", the (partition, broker) pairs, or
    None when malformed. Cached: replica fetches ask for every partition they read."""
    text = value.strip()
    if text == ALL_REPLICAS:
        return ALL_REPLICAS
    pairs = set()
    for entry in filter(None, (e.strip() for e in text.split(","))):
        partition, sep, broker = entry.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            return None
        pairs.add((int(partition), int(broker)))
    return frozenset(pairs)


@dataclass(frozen=True)
class LogConfig:
    """Field names are Kafka's keys with dots as underscores (segment.bytes -> segment_bytes)."""

    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    index_interval_bytes: int = 4096
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 24 * 3600 * 1000
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1024 * 1024 + 12  # Kafka's default: 1 MiB plus the log overhead
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    compression_type: str = "producer"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    preallocate: bool = False
    # Kept, shown and validated, but not acted on: recompression uses each codec's
    # default level; magic 2 is the only stored format; there is no tiered storage.
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    message_format_version: str = "3.0-IV1"
    message_downconversion_enable: bool = True
    message_timestamp_difference_max_ms: int = LONG_MAX
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    # tiered storage (KIP-405): off, as on a Kafka broker without
    # remote.log.storage.system.enable; turning it on for a topic is refused
    remote_storage_enable: bool = False
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    # replication throttles (KIP-73): "*" or "partition:broker" pairs naming the replicas
    # whose replication traffic the leader / follower rate limits apply to
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""

    # Kafka's lower bounds (ConfigDef "atLeast") for the keys that have one.
    _MINIMUMS = {
        "segment_bytes": 14,
        "segment_ms": 1,
        "segment_jitter_ms": 0,
        "segment_index_bytes": 4,
        "index_interval_bytes": 0,
        "retention_ms": -1,  # -1 = forever; Kafka rejects anything below
        "min_compaction_lag_ms": 0,
        "max_compaction_lag_ms": 1,
        "delete_retention_ms": 0,
        "file_delete_delay_ms": 0,
        "flush_messages": 1,
        "flush_ms": 0,
        "max_message_bytes": 0,
        "message_timestamp_before_max_ms": 0,
        "message_timestamp_after_max_ms": 0,
        "min_insync_replicas": 1,
    }

    def __post_init__(self) -> None:
        for name, low in self._MINIMUMS.items():
            if getattr(self, name) < low:
                raise ConfigError(
                    f"Invalid value {getattr(self, name)} for configuration "
                    f"{name.replace('_', '.')}: Value must be at least {low}"
                )
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ConfigError("min.cleanable.dirty.ratio must be between 0 and 1")
        if self.compression_type not in COMPRESSION_TYPES:
            raise ConfigError(
                f"Invalid value {self.compression_type} for configuration compression.type: "
                f"String must be one of: {', '.join(COMPRESSION_TYPES)}"
            )
        if self.message_timestamp_type not in TIMESTAMP_TYPES:
            raise ConfigError(
                f"Invalid value {self.message_timestamp_type} for configuration "
                f"message.timestamp.type: String must be one of: {', '.join(TIMESTAMP_TYPES)}"
            )
        if self.remote_storage_enable:
            raise ConfigError("Tiered Storage functionality is disabled in the broker. Topic "
                              "cannot be configured with remote log storage.")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError("min.compaction.lag.ms must not exceed max.compaction.lag.ms")
        for name in ("leader_replication_throttled_replicas",
                     "follower_replication_throttled_replicas"):
            if parse_throttled_replicas(getattr(self, name)) is None:
                raise ConfigError(
                    f"Invalid value {getattr(self, name)} for configuration "
                    f"{name.replace('_', '.')}: {name.replace('_', '.')} must be the literal "
                    "'*' or a list of replicas in the following format: "
                    "[partitionId]:[brokerId],[partitionId]:[brokerId],...")

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @functools.cached_property
    def leader_checks(self) -> tuple[bool, int | None, int, bool, int, int, int]:
        """What validating a produced batch reads of this config, worked out once (the
        config is frozen): compact, the target codec id (None: the producer's), the
        max.message.bytes, LogAppendTime, the timestamp bounds before and after the
        broker's clock (LONG_MAX: none), segment.bytes."""
        log_append = self.message_timestamp_type == "LogAppendTime"
        return (
            self.compact,
            CODEC_IDS.get(self.compression_type),
            self.max_message_bytes,
            log_append,
            LONG_MAX if log_append else self.message_timestamp_before_max_ms,
            LONG_MAX if log_append else self.message_timestamp_after_max_ms,
            self.segment_bytes,
        )

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @classmethod
    def from_properties(cls, props: dict[str, Any],  # Any: int()/float() take what they can
                        base: LogConfig | None = None) -> LogConfig:
        """Apply Kafka-named topic configs (strings or values) on top of base."""
        known = {f.name: f for f in fields(cls)}
        changes: dict[str, Any] = {}
        for key, value in props.items():
            name = key.replace(".", "_")
            if name not in known or name.startswith("_"):
                raise ConfigError(f"Unknown topic config name: {key}")
            default = getattr(cls, name)
            try:
                if name == "cleanup_policy":
                    changes[name] = _policies(value)
                elif isinstance(default, bool):
                    changes[name] = _boolean(value)
                elif isinstance(default, int):
                    changes[name] = int(value)
                elif isinstance(default, float):
                    changes[name] = float(value)
                else:
                    changes[name] = str(value)
            except ValueError as exc:
                if isinstance(exc, ConfigError):
                    raise
                raise ConfigError(f"Invalid value {value} for configuration {key}") from None
        return replace(base or cls(), **changes)
