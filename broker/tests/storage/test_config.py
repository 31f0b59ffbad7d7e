"""LogConfig: Kafka's topic config names, defaults and bounds."""

from __future__ import annotations

import pytest

from moldau.storage.config import ConfigError, LogConfig


def test_kafka_defaults():
    c = LogConfig()
    assert c.segment_bytes == 1024**3
    assert c.segment_ms == c.retention_ms == 7 * 24 * 3600 * 1000
    assert c.segment_index_bytes == 10 * 1024 * 1024
    assert c.index_interval_bytes == 4096
    assert c.retention_bytes == -1
    assert c.max_message_bytes == 1048588
    assert c.file_delete_delay_ms == 60000
    assert c.cleanup_policy == ("delete",) and c.delete and not c.compact
    assert (c.compression_type, c.message_timestamp_type) == ("producer", "CreateTime")


def test_from_properties_parses_kafka_names_and_types():
    c = LogConfig.from_properties({
        "segment.bytes": "2048",
        "retention.ms": "-1",
        "cleanup.policy": "compact, delete",
        "preallocate": "TRUE",
        "min.cleanable.dirty.ratio": "0.25",
        "message.timestamp.type": "LogAppendTime",
        "compression.type": "zstd",
    })
    assert c.segment_bytes == 2048 and c.retention_ms == -1
    assert c.cleanup_policy == ("compact", "delete") and c.compact and c.delete
    assert c.preallocate is True and c.min_cleanable_dirty_ratio == 0.25
    assert (c.message_timestamp_type, c.compression_type) == ("LogAppendTime", "zstd")
    # overrides apply on top of a base (topic config over broker defaults)
    d = LogConfig.from_properties({"retention.bytes": 10}, c)
    assert d.retention_bytes == 10 and d.segment_bytes == 2048


@pytest.mark.parametrize(
    "props",
    [
        {"segment.bytes": "13"},
        {"segment.bytes": "lots"},
        {"retention.ms": "-2"},
        {"segment.ms": "0"},
        {"flush.messages": "0"},
        {"cleanup.policy": "compact,forever"},
        {"compression.type": "brotli"},
        {"message.timestamp.type": "WallClock"},
        {"preallocate": "yes"},
        {"min.cleanable.dirty.ratio": "1.5"},
        {"no.such.config": "1"},
        {"_MINIMUMS": "1"},
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
    ],
)
def test_invalid_values_are_rejected(props):
    with pytest.raises(ConfigError):
        LogConfig.from_properties(props)


def test_cleanup_policy_keeps_the_order_given_and_names_the_first_bad_one():
    # Kafka's list type keeps the order (describeConfigs shows "delete,compact" after an
    # APPEND of compact), and its error lists the choices as "compact, delete"
    assert LogConfig.from_properties({"cleanup.policy": "delete,compact"}).cleanup_policy == (
        "delete", "compact")
    with pytest.raises(ConfigError) as refused:
        LogConfig.from_properties({"cleanup.policy": "shred,delete,burn"})
    assert str(refused.value) == ("Invalid value shred for configuration cleanup.policy: "
                                  "String must be one of: compact, delete")
