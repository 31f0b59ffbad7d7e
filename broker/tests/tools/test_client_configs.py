"""The producer/consumer settings table (tools/client_configs.py) on its own: Kafka's
ConfigDef parsing and messages, and ProducerConfig's idempotence rules."""

from __future__ import annotations

import pytest

from moldau.tools.client_configs import (
    CONSUMER,
    PRODUCER,
    ConfigError,
    idempotence,
    parse_config,
)
from moldau.tools.options import ToolError

LOGGER = "org.apache.kafka.clients.producer.ProducerConfig"


def test_defaults_and_parsed_types() -> None:
    parsed = parse_config({"retries": " 7 ", "enable.idempotence": "FALSE",
                           "max.block.ms": "9000000000", "bootstrap.servers": "a:1, b:2"},
                          PRODUCER, LOGGER)
    assert parsed["retries"] == 7 and parsed["enable.idempotence"] is False
    assert parsed["max.block.ms"] == 9000000000  # a LONG
    assert parsed["bootstrap.servers"] == ["a:1", "b:2"]
    assert (parsed["acks"], parsed["batch.size"], parsed["linger.ms"]) == ("all", 16384, 0)
    consumer = parse_config({}, CONSUMER, LOGGER)
    assert (consumer["auto.offset.reset"], consumer["isolation.level"],
            consumer["fetch.min.bytes"], consumer["max.poll.records"]) == (
        "latest", "read_uncommitted", 1, 500)


@pytest.mark.parametrize(("key", "value", "why"), [
    ("retries", "MAX_INT", "Not a number of type INT"),
    ("retries", "2147483648", "Not a number of type INT"),  # Java's int range
    ("retries", "-1", "Value must be at least 0"),
    ("max.block.ms", "1.5", "Not a number of type LONG"),
    ("enable.idempotence", "1", "Expected value to be either true or false"),
    ("acks", "ALL", "String must be one of: all, -1, 0, 1"),
    ("compression.type", "ZSTD", "String must be one of: none, gzip, snappy, lz4, zstd"),
    ("batch.size", "-5", "Value must be at least 0"),
    ("compression.lz4.level", "18", "Value must be no more than 17"),
    ("max.in.flight.requests.per.connection", "0", "Value must be at least 1"),
])
def test_producer_values_refused_with_kafkas_message(key: str, value: str, why: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({key: value}, PRODUCER, LOGGER)
    assert str(refused.value) == f"Invalid value {value} for configuration {key}: {why}"


@pytest.mark.parametrize(("key", "value", "why"), [
    ("isolation.level", "READ_COMMITTED",
     "String must be one of: read_uncommitted, read_committed"),
    ("auto.offset.reset", "smallest", "String must be one of: latest, earliest, none"),
    ("fetch.max.wait.ms", "soon", "Not a number of type INT"),
    ("max.poll.records", "0", "Value must be at least 1"),
    ("enable.auto.commit", "yes", "Expected value to be either true or false"),
])
def test_consumer_values_refused_with_kafkas_message(key: str, value: str, why: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config({key: value}, CONSUMER, LOGGER)
    assert str(refused.value) == f"Invalid value {value} for configuration {key}: {why}"


def test_unknown_keys_are_warned_about_not_refused(capsys: pytest.CaptureFixture[str]) -> None:
    parse_config({"linger.ms": "5", "made.up": "1", "also.made.up": "2",
                  "ssl.truststore.location": "/x"}, PRODUCER, LOGGER)
    assert capsys.readouterr().err == (
        "WARN These configurations '[also.made.up, made.up]' were supplied but are not "
        f"used yet. ({LOGGER})\n")


def _idempotent(props: dict[str, str]) -> bool:
    return idempotence(parse_config(props, PRODUCER, LOGGER), props)


def test_idempotence_rules() -> None:
    assert _idempotent({}) is True  # Kafka 3's default
    assert _idempotent({"acks": "1"}) is False  # quietly off when not asked for
    assert _idempotent({"retries": "0"}) is False
    assert _idempotent({"enable.idempotence": "false"}) is False
    refusals = [
        ({"enable.idempotence": "true", "retries": "0", "acks": "1"},  # the first check
         "Must set retries to non-zero when using the idempotent producer."),
        ({"enable.idempotence": "true", "max.in.flight.requests.per.connection": "6"},
         "Must set max.in.flight.requests.per.connection to at most 5 when using the "
         "idempotent producer."),
        ({"transactional.id": "t", "acks": "1"},
         "Cannot set a transactional.id without also enabling idempotence."),
    ]
    for props, message in refusals:
        with pytest.raises(ToolError) as refused:
            _idempotent(props)
        assert str(refused.value) == \
            f"org.apache.kafka.common.config.ConfigException: {message}"


def test_console_producer_merges_options_as_kafka() -> None:
    """ConsoleProducerOptions.producerProps: an option given wins, its default fills an
    absent key only, client.id defaults to console-producer, compression.type is always
    --compression-codec's."""
    from moldau.tools.console_producer import OPTIONS, producer_props
    from moldau.tools.options import OptionParser

    def props(*argv: str) -> dict[str, str]:
        return producer_props(OptionParser(OPTIONS).parse(
            ["--bootstrap-server", "h:1", "--topic", "t", *argv]))

    defaults = props()
    assert {k: defaults[k] for k in ("acks", "linger.ms", "retries", "request.timeout.ms",
                                     "batch.size", "client.id", "compression.type")} == {
        "acks": "-1", "linger.ms": "1000", "retries": "3", "request.timeout.ms": "1500",
        "batch.size": "16384", "client.id": "console-producer", "compression.type": "none"}
    given = props("--producer-property", "acks=1", "--producer-property", "linger.ms=7",
                  "--producer-property", "client.id=mine", "--producer-property",
                  "compression.type=zstd", "--timeout", "20", "--compression-codec")
    assert (given["acks"], given["linger.ms"], given["client.id"],
            given["compression.type"]) == ("1", "20", "mine", "gzip")
    sized = props("--batch-size", "10", "--max-partition-memory-bytes", "99")
    assert sized["batch.size"] == "99"
