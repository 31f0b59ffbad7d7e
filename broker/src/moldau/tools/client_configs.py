"""The producer and consumer settings the tools honour, typed and checked as Kafka 3.9's
ProducerConfig and ConsumerConfig (ConfigDef) check them: a value of the wrong type or
outside its validator is refused with Kafka's ConfigException message; a key not listed
here is no error (Kafka logs it as unused) and is left to the tool."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from moldau.tools.options import ToolError

INT_MAX = 2**31 - 1
CONFIG_EXCEPTION = "org.apache.kafka.common.config.ConfigException"
# keys the security layer (moldau.client.security) reads: not "unused"
SECURITY_PREFIXES = ("ssl.", "sasl.", "security.")


class ConfigError(ToolError):
    """Kafka's ConfigException: `Invalid value V for configuration K: why`."""

    def __init__(self, name: str, value: object, why: str | None = None) -> None:
        super().__init__(f"Invalid value {value} for configuration {name}"
                         + (f": {why}" if why else ""))


def _int(bits: int, kind: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text.strip(), 10)  # Java's parseInt: no underscores, no spaces
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)) or "_" in text:
            raise ValueError(kind)
        return value
    parse.__name__ = kind
    return parse


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("BOOLEAN")
    return lowered == "true"


def _double(text: str) -> float:
    return float(text.strip())


def _string(text: str) -> str:
    return text.strip()


def _list(text: str) -> list[str]:
    stripped = text.strip()
    return [item.strip() for item in stripped.split(",")] if stripped else []


INT, LONG, SHORT = _int(32, "INT"), _int(64, "LONG"), _int(16, "SHORT")
# ConfigDef.parseType's message for each type's unparsable value
TYPE_ERRORS: dict[Callable[[str], Any], str] = {
    INT: "Not a number of type INT", LONG: "Not a number of type LONG",
    SHORT: "Not a number of type SHORT", _double: "Not a number of type DOUBLE",
    _boolean: "Expected value to be either true or false",
}
Validator = Callable[[Any], str | None]  # the refusal's reason, None when valid


def at_least(low: int) -> Validator:
    return lambda value: f"Value must be at least {low}" if value < low else None


def between(low: int, high: int) -> Validator:
    def check(value: int) -> str | None:
        if value < low:
            return f"Value must be at least {low}"
        return f"Value must be no more than {high}" if value > high else None
    return check


def one_of(*allowed: str) -> Validator:
    """ConfigDef.ValidString.in: exact (case-sensitive) strings."""
    return lambda value: None if value in allowed else \
        "String must be one of: " + ", ".join(allowed)


@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[str], Any]
    default: Any
    validator: Validator | None = None


def _table(*keys: Key) -> dict[str, Key]:
    return {key.name: key for key in keys}


_COMMON = (
    Key("bootstrap.servers", _list, []),
    Key("client.id", _string, ""),
    Key("request.timeout.ms", INT, 30000, at_least(0)),
    Key("retry.backoff.ms", LONG, 100, at_least(0)),
    Key("retry.backoff.max.ms", LONG, 1000, at_least(0)),
    Key("metadata.max.age.ms", LONG, 300000, at_least(0)),
    Key("send.buffer.bytes", INT, 131072, at_least(-1)),
    Key("receive.buffer.bytes", INT, 32768, at_least(-1)),
    Key("connections.max.idle.ms", LONG, 540000),
    Key("reconnect.backoff.ms", LONG, 50, at_least(0)),
    Key("reconnect.backoff.max.ms", LONG, 1000, at_least(0)),
    Key("socket.connection.setup.timeout.ms", LONG, 10000),
    Key("socket.connection.setup.timeout.max.ms", LONG, 30000),
    Key("client.dns.lookup", _string, "use_all_dns_ips",
        one_of("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
    Key("key.serializer", _string, None), Key("value.serializer", _string, None),
    Key("key.deserializer", _string, None), Key("value.deserializer", _string, None),
    Key("metrics.num.samples", INT, 2, at_least(1)),
    Key("metrics.sample.window.ms", LONG, 30000, at_least(0)),
    Key("metrics.recording.level", _string, "INFO", one_of("INFO", "DEBUG", "TRACE")),
    Key("metric.reporters", _list, []), Key("interceptor.classes", _list, []),
    Key("auto.include.jmx.reporter", _boolean, True),
    Key("enable.metrics.push", _boolean, True),
)

PRODUCER = _table(
    *_COMMON,
    Key("acks", _string, "all", one_of("all", "-1", "0", "1")),
    Key("batch.size", INT, 16384, at_least(0)),
    Key("linger.ms", LONG, 0, at_least(0)),
    Key("retries", INT, INT_MAX, between(0, INT_MAX)),
    Key("compression.type", _string, "none", one_of("none", "gzip", "snappy", "lz4", "zstd")),
    Key("compression.gzip.level", INT, -1),
    Key("compression.lz4.level", INT, 9, between(1, 17)),
    Key("compression.zstd.level", INT, 3, between(-131072, 22)),
    Key("delivery.timeout.ms", INT, 120000, at_least(0)),
    Key("max.block.ms", LONG, 60000, at_least(0)),
    Key("buffer.memory", LONG, 32 * 1024 * 1024, at_least(0)),
    Key("max.request.size", INT, 1048576, at_least(0)),
    Key("max.in.flight.requests.per.connection", INT, 5, at_least(1)),
    Key("enable.idempotence", _boolean, True),
    Key("transactional.id", _string, None),
    Key("transaction.timeout.ms", INT, 60000),
    Key("partitioner.class", _string, None),
    Key("partitioner.ignore.keys", _boolean, False),
    Key("partitioner.adaptive.partitioning.enable", _boolean, True),
    Key("partitioner.availability.timeout.ms", LONG, 0, at_least(0)),
    Key("metadata.max.idle.ms", LONG, 300000, at_least(5000)),
)

CONSUMER = _table(
    *_COMMON,
    Key("group.id", _string, None),
    Key("group.instance.id", _string, None),
    Key("group.protocol", _string, "classic"),
    Key("auto.offset.reset", _string, "latest", one_of("latest", "earliest", "none")),
    Key("isolation.level", _string, "read_uncommitted",
        one_of("read_uncommitted", "read_committed")),
    Key("enable.auto.commit", _boolean, True),
    Key("auto.commit.interval.ms", INT, 5000, at_least(0)),
    Key("session.timeout.ms", INT, 45000),
    Key("heartbeat.interval.ms", INT, 3000),
    Key("max.poll.interval.ms", INT, 300000, at_least(1)),
    Key("max.poll.records", INT, 500, at_least(1)),
    Key("fetch.min.bytes", INT, 1, at_least(0)),
    Key("fetch.max.bytes", INT, 52428800, at_least(0)),
    Key("fetch.max.wait.ms", INT, 500, at_least(0)),
    Key("max.partition.fetch.bytes", INT, 1048576, at_least(0)),
    Key("partition.assignment.strategy", _list, []),
    Key("check.crcs", _boolean, True),
    Key("exclude.internal.topics", _boolean, True),
    Key("allow.auto.create.topics", _boolean, True),
    Key("default.api.timeout.ms", INT, 60000, at_least(0)),
    Key("client.rack", _string, ""),
)


def parse_config(props: Mapping[str, str], table: Mapping[str, Key],
                 logger: str) -> dict[str, Any]:
    """Every key of the table typed (its default when absent), checked in the table's
    order as ConfigDef.parse does; keys it does not know are warned about as Kafka's
    AbstractConfig.logUnused does (on stderr, where the tools' log4j writes)."""
    parsed: dict[str, Any] = {}
    for key in table.values():
        raw = props.get(key.name)
        if raw is None:
            parsed[key.name] = key.default
            continue
        try:
            value = key.parse(raw)
        except ValueError:
            raise ConfigError(key.name, raw, TYPE_ERRORS.get(key.parse)) from None
        why = key.validator(value) if key.validator is not None else None
        if why is not None:
            raise ConfigError(key.name, raw, why)
        parsed[key.name] = value
    unused = sorted(k for k in props if k not in table and not k.startswith(SECURITY_PREFIXES))
    if unused:
        print(f"WARN These configurations '[{', '.join(unused)}]' were supplied but are "
              f"not used yet. ({logger})", file=sys.stderr)
    return parsed


def idempotence(parsed: Mapping[str, Any], props: Mapping[str, str]) -> bool:
    """Whether the producer is idempotent, as ProducerConfig.postProcessAndValidate
    decides: on by default, off quietly when the other settings cannot have it, refused
    when enable.idempotence=true is asked for with settings that cannot."""
    explicit = "enable.idempotence" in props
    wanted = bool(parsed["enable.idempotence"])
    conflicts = []  # in the order Kafka checks them: the first one is reported
    if parsed["retries"] == 0:
        conflicts.append("Must set retries to non-zero when using the idempotent producer.")
    if parsed["acks"] not in ("all", "-1"):
        conflicts.append("Must set acks to all in order to use the idempotent producer. "
                         "Otherwise we cannot guarantee idempotence.")
    if parsed["max.in.flight.requests.per.connection"] > 5:
        conflicts.append("Must set max.in.flight.requests.per.connection to at most 5 when "
                         "using the idempotent producer.")
    if wanted and conflicts:
        if explicit:
            raise ToolError(f"{CONFIG_EXCEPTION}: {conflicts[0]}")
        wanted = False
    if parsed["transactional.id"] is not None and not wanted:
        raise ToolError(f"{CONFIG_EXCEPTION}: Cannot set a transactional.id without also "
                        "enabling idempotence.")
    return wanted
