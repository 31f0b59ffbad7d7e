"""Broker configuration: Kafka 3.9 (ZooKeeper mode) `server.properties` keys.

The table `KEYS` declares every broker key Moldau knows with Kafka's name, type, default,
validator and importance, plus a Moldau status:

* ``implemented``: the broker of issue 4 honours it (parsed, validated, effective value
  exposed by BrokerConfig);
* ``accepted``: a Kafka file may set it and still loads, but Moldau does not act on it
  (the note says why, or which issue will implement it);
* ``rejected``: setting it is an error (KRaft-only keys: Moldau runs in ZooKeeper mode).

`BrokerConfig.from_properties()` parses a properties file (Java syntax), converts and
validates values, applies Kafka's precedence rules, and collects unknown keys as
warnings. `markdown_table()` renders the table that docs/broker-config.md holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau import properties
from moldau.replication import protocol_versions
from moldau.storage.config import ConfigError as _StorageConfigError
from moldau.storage.config import LogConfig

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
SHORT_MIN, SHORT_MAX = -(2**15), 2**15 - 1
DOUBLE_MAX = 1.7976931348623157e308

TYPES = ("boolean", "string", "int", "short", "long", "double", "list", "class", "password")
STATUSES = ("implemented", "accepted", "rejected")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's default listener.security.protocol.map, in the order Kafka documents it.
DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
INTER_BROKER_PROTOCOL_VERSION = "3.9-IV0"

P_REPL = "planned: issue 6 (replication, controller)"
P_METRICS = "planned: issue 10 (metrics)"
P_SECURITY = "planned: security issue (SASL, ACLs, quotas)"
P_TXN = "planned: transactions (later issue)"
P_BROKER = "planned: issue 4 (server wiring)"
JVM_ONLY = "JVM-specific; no Python equivalent"
ONE_LOOP = "Moldau runs one asyncio event loop per broker process (ARCHITECTURE §4)"
NO_TIERED = "tiered storage is not part of Moldau"
NO_DIR_MOVES = "intra-broker log dir moves (AlterReplicaLogDirs) are out of scope"
TOKEN_BUCKET = ("the replication throttle is a token bucket holding one second of the rate "
                "(docs/replication.md), not Kafka's sampled windows")
YAMMER_METERS = ("Moldau's broker metrics are Yammer-style meters and histograms (as Kafka's "
                 "kafka.server MBeans), which these client-metrics samples do not shape")
KRAFT = "KRaft-only; Moldau runs in ZooKeeper mode"
ACLS_UNENFORCED = ("Moldau does not enforce ACLs yet, so an authorizer would allow every "
                   "client every operation")


class ConfigError(ValueError):
    """An invalid broker configuration; the message names the key and the bad value."""

    def __init__(self, key: str, value: Any, reason: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {key}: {reason}")
        self.key = key
        self.value = value
        self.reason = reason


# --------------------------------------------------------------------------- validators


@dataclass(frozen=True)
class Range:
    """Kafka's ConfigDef.Range: inclusive bounds, either side optional."""

    low: float | None = None
    high: float | None = None

    def check(self, key: str, value: Any) -> None:
        if value is None:
            return
        if self.low is not None and value < self.low:
            if self.high is None:
                raise ConfigError(key, value, f"Value must be at least {self.low}")
            raise ConfigError(key, value, f"Value must be in [{self.low}, {self.high}]")
        if self.high is not None and value > self.high:
            if self.low is None:
                raise ConfigError(key, value, f"Value must be no more than {self.high}")
            raise ConfigError(key, value, f"Value must be in [{self.low}, {self.high}]")

    def __str__(self) -> str:
        if self.high is None:
            return f"[{self.low},...]"
        if self.low is None:
            return f"[...,{self.high}]"
        return f"[{self.low},...,{self.high}]"


@dataclass(frozen=True)
class OneOf:
    """Kafka's ValidString / ValidList / CaseInsensitiveValidString; lists check each item."""

    values: tuple[str, ...]
    case_insensitive: bool = False

    def check(self, key: str, value: Any) -> None:
        if value is None:
            return
        items = value if isinstance(value, list) else [value]
        allowed = {v.lower() for v in self.values} if self.case_insensitive else set(self.values)
        for item in items:
            probe = item.lower() if self.case_insensitive else item
            if probe not in allowed:
                raise ConfigError(key, value, f"String must be one of: {', '.join(self.values)}")

    def __str__(self) -> str:
        return "[" + ", ".join(self.values) + "]"


@dataclass(frozen=True)
class InterBrokerProtocol:
    """Kafka's MetadataVersion validator, limited to the versions Moldau speaks."""

    def check(self, key: str, value: Any) -> None:
        try:
            protocol_versions.parse(value)
        except protocol_versions.UnknownProtocolVersionError as exc:
            raise ConfigError(key, value, str(exc)) from None

    def __str__(self) -> str:
        known = protocol_versions.KNOWN_VERSIONS
        return f"[{known[0]}, ..., {known[-1]}]"


@dataclass(frozen=True)
class GzipLevel:
    """Kafka's GzipCompression.LevelValidator: 1..9, or -1 (zlib's default level)."""

    def check(self, key: str, value: Any) -> None:
        if value is None or value == -1 or 1 <= value <= 9:
            return
        raise ConfigError(key, value, "Value must be between 1 and 9, or -1")

    def __str__(self) -> str:
        return "[1,...,9] or -1"


@dataclass(frozen=True)
class Unenforced:
    """A security key Moldau cannot honour yet: any value but the default stops startup,
    since a broker that ignored it would be less safe than its operator believes."""

    default: Any
    reason: str

    def check(self, key: str, value: Any) -> None:
        if value is None or value == self.default:
            return
        raise ConfigError(key, value, f"{self.reason}; Moldau refuses to start rather than "
                          f"ignore it (remove {key} from the configuration)")

    def __str__(self) -> str:
        return "" if self.default in (None, "") else f"only {self.default}"


Validator = Range | OneOf | GzipLevel | Unenforced | InterBrokerProtocol


@dataclass(frozen=True)
class ConfigKey:
    """One broker key: Kafka's definition plus Moldau's status and a short note."""

    name: str
    type: str
    default: Any
    validator: Validator | None
    importance: str
    status: str
    note: str = ""

    def __post_init__(self) -> None:
        assert self.type in TYPES, self.type
        assert self.status in STATUSES, self.status
        assert self.importance in ("high", "medium", "low"), self.importance
        assert self.status == "implemented" or self.note, f"{self.name} needs a note"


_IMPORTANCE = {"H": "high", "M": "medium", "L": "low"}


def _key(name: str, type_: str, default: Any, imp: str, status: str, note: str = "",
         v: Validator | None = None) -> ConfigKey:
    return ConfigKey(name, type_, default, v, _IMPORTANCE[imp], status, note)


def impl(name: str, type_: str, default: Any, imp: str, v: Validator | None = None,
         note: str = "") -> ConfigKey:
    return _key(name, type_, default, imp, "implemented", note, v)


def acc(name: str, type_: str, default: Any, imp: str, note: str,
        v: Validator | None = None) -> ConfigKey:
    return _key(name, type_, default, imp, "accepted", note, v)


def rej(name: str, type_: str, note: str = KRAFT) -> ConfigKey:
    return _key(name, type_, None, "H", "rejected", note)


def at_least(low: float) -> Range:
    return Range(low, None)


# replica.selector.class values Moldau implements (moldau.server.replica_selector)
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
LEADER_SELECTOR = "org.apache.kafka.common.replica.LeaderSelector"
REPLICA_SELECTORS = (RACK_AWARE_SELECTOR, LEADER_SELECTOR)
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TS_TYPES = ("CreateTime", "LogAppendTime")
_HOUR_MS = 3600 * 1000

# --------------------------------------------------------------------------- the table

KEYS_LIST: list[ConfigKey] = [
    # ---- server basics
    impl("broker.id", "int", -1, "H",
         note="-1: generated from /brokers/seqid above reserved.broker.max.id"),
    impl("broker.id.generation.enable", "boolean", True, "M"),
    impl("reserved.broker.max.id", "int", 1000, "M", at_least(0)),
    impl("broker.rack", "string", None, "M"),
    impl("message.max.bytes", "int", 1024 * 1024 + 12, "H", at_least(0),
         note="topic synonym max.message.bytes"),
    impl("queued.max.requests", "int", 500, "H", at_least(1),
         note="stop reading sockets while this many requests wait"),
    impl("queued.max.request.bytes", "long", -1, "M",
         note="-1: no byte bound; with queued.max.requests"),
    impl("request.timeout.ms", "int", 30000, "H"),
    impl("delete.topic.enable", "boolean", True, "H"),
    impl("auto.create.topics.enable", "boolean", True, "H"),
    impl("num.partitions", "int", 1, "M", at_least(1)),
    impl("default.replication.factor", "int", 1, "M"),
    impl("min.insync.replicas", "int", 1, "H", at_least(1)),
    impl("compression.type", "string", "producer", "H", OneOf(_COMPRESSION),
         note="producer keeps the batch; other codecs recompress on a slow path"),
    impl("compression.gzip.level", "int", -1, "M", GzipLevel(),
         note="when the broker recompresses (topic compression.type)"),
    impl("compression.lz4.level", "int", 9, "M", Range(1, 17),
         note="when the broker recompresses; 17 is the lz4 library's 16"),
    impl("compression.zstd.level", "int", 3, "M", Range(-131072, 22),
         note="when the broker recompresses (topic compression.type)"),
    impl("unclean.leader.election.enable", "boolean", False, "H"),
    impl("inter.broker.protocol.version", "string", INTER_BROKER_PROTOCOL_VERSION, "M",
         InterBrokerProtocol(),
         note="gates inter-broker request versions and the registration format"),
    impl("fetch.max.bytes", "int", 55 * 1024 * 1024, "M", at_least(1024)),
    impl("max.incremental.fetch.session.cache.slots", "int", 1000, "M", at_least(0),
         note="bounds the followers' fetch sessions (KIP-227); consumers get none: "
         "session id 0, what Kafka answers when this cache is full"),
    acc("fetch.purgatory.purge.interval.requests", "int", 1000, "M", ONE_LOOP),
    acc("producer.purgatory.purge.interval.requests", "int", 1000, "M", ONE_LOOP),
    acc("delete.records.purgatory.purge.interval.requests", "int", 1, "M", ONE_LOOP),
    acc("background.threads", "int", 10, "H", ONE_LOOP, at_least(1)),
    acc("num.network.threads", "int", 3, "H", ONE_LOOP, at_least(1)),
    acc("num.io.threads", "int", 8, "H", ONE_LOOP, at_least(1)),
    acc("num.recovery.threads.per.data.dir", "int", 1, "H", ONE_LOOP, at_least(1)),
    impl("num.replica.fetchers", "int", 1, "H"),
    acc("num.replica.alter.log.dirs.threads", "int", None, "H", NO_DIR_MOVES),
    acc("create.topic.policy.class.name", "class", None, "L", JVM_ONLY),
    acc("alter.config.policy.class.name", "class", None, "L", JVM_ONLY),
    acc("early.start.listeners", "string", None, "H",
        "no authorizer loads at startup (authorize() allows all until ACLs exist): every "
        "listener starts once the broker is registered"),
    acc("unstable.api.versions.enable", "boolean", False, "H",
        "Moldau advertises stable APIs only"),
    acc("unstable.feature.versions.enable", "boolean", False, "H",
        "Moldau advertises stable features only"),
    acc("auto.include.jmx.reporter", "boolean", True, "L", JVM_ONLY),
    acc("telemetry.max.bytes", "int", 1024 * 1024, "L", "client telemetry (KIP-714) not offered",
        at_least(1)),
    impl("controlled.shutdown.enable", "boolean", True, "M"),
    impl("controlled.shutdown.max.retries", "int", 3, "M"),
    impl("controlled.shutdown.retry.backoff.ms", "long", 5000, "M"),
    impl("controller.socket.timeout.ms", "int", 30000, "M"),
    impl("auto.leader.rebalance.enable", "boolean", True, "H"),
    impl("leader.imbalance.per.broker.percentage", "int", 10, "H"),
    impl("leader.imbalance.check.interval.seconds", "long", 300, "H", at_least(1)),
    impl("producer.id.expiration.ms", "int", 86400000, "L", at_least(1)),
    impl("producer.id.expiration.check.interval.ms", "int", 600000, "L", at_least(1)),
    # ---- listeners and sockets
    impl("listeners", "string", "PLAINTEXT://:9092", "H"),
    impl("advertised.listeners", "string", None, "H", note="defaults to listeners"),
    impl("listener.security.protocol.map", "string", DEFAULT_PROTOCOL_MAP, "L"),
    impl("inter.broker.listener.name", "string", None, "M",
         note="exclusive with security.inter.broker.protocol"),
    impl("security.inter.broker.protocol", "string", "PLAINTEXT", "M",
         OneOf(SECURITY_PROTOCOLS)),
    impl("socket.send.buffer.bytes", "int", 100 * 1024, "H", note="-1: OS default"),
    impl("socket.receive.buffer.bytes", "int", 100 * 1024, "H", note="-1: OS default"),
    impl("socket.request.max.bytes", "int", 100 * 1024 * 1024, "H", at_least(1)),
    impl("socket.listen.backlog.size", "int", 50, "M", at_least(1)),
    impl("socket.connection.setup.timeout.ms", "long", 10000, "M",
         note="replica fetcher connections; doubles per failed attempt"),
    impl("socket.connection.setup.timeout.max.ms", "long", 30000, "M"),
    impl("connections.max.idle.ms", "long", 600000, "M"),
    impl("max.connections", "int", INT_MAX, "M", at_least(0),
         note="not the inter-broker listener's; one over it is closed (Kafka delays it)"),
    impl("max.connections.per.ip", "int", INT_MAX, "M", at_least(0),
         note="a connection over it is closed at once, as in Kafka"),
    impl("max.connections.per.ip.overrides", "string", "", "M"),
    acc("max.connection.creation.rate", "int", INT_MAX, "M",
        P_SECURITY + ": connection creation rate, KIP-612; startup fails when it is set",
        Unenforced(INT_MAX, "connection creation rate limits (KIP-612) are not enforced "
                   "yet")),
    acc("connection.failed.authentication.delay.ms", "int", 100, "L", P_SECURITY, at_least(0)),
    acc("connections.max.reauth.ms", "long", 0, "M", P_SECURITY),
    # ---- ZooKeeper
    impl("zookeeper.connect", "string", None, "H", note="host:port[,host:port...][/chroot]"),
    impl("zookeeper.session.timeout.ms", "int", 18000, "H"),
    impl("zookeeper.connection.timeout.ms", "int", None, "H",
         note="defaults to zookeeper.session.timeout.ms"),
    impl("zookeeper.max.in.flight.requests", "int", 10, "H", at_least(1)),
    impl("zookeeper.set.acl", "boolean", False, "H",
         note="needs a client certificate (zookeeper.ssl.keystore.location)"),
    impl("zookeeper.ssl.client.enable", "boolean", False, "M"),
    acc("zookeeper.clientCnxnSocket", "string", None, "M", JVM_ONLY),
    impl("zookeeper.ssl.keystore.location", "string", None, "M"),
    impl("zookeeper.ssl.keystore.password", "password", None, "M"),
    impl("zookeeper.ssl.keystore.type", "string", None, "M"),
    impl("zookeeper.ssl.truststore.location", "string", None, "M"),
    impl("zookeeper.ssl.truststore.password", "password", None, "M"),
    impl("zookeeper.ssl.truststore.type", "string", None, "M"),
    impl("zookeeper.ssl.protocol", "string", "TLSv1.2", "L"),
    impl("zookeeper.ssl.enabled.protocols", "list", None, "L"),
    impl("zookeeper.ssl.cipher.suites", "list", None, "L"),
    impl("zookeeper.ssl.endpoint.identification.algorithm", "string", "HTTPS", "L"),
    acc("zookeeper.ssl.crl.enable", "boolean", False, "L", JVM_ONLY),
    acc("zookeeper.ssl.ocsp.enable", "boolean", False, "L", JVM_ONLY),
    acc("zookeeper.metadata.migration.enable", "boolean", False, "H",
        "ZooKeeper-to-KRaft migration is not supported; only false is allowed"),
    acc("zookeeper.metadata.migration.min.batch.size", "int", 200, "M",
        "ZooKeeper-to-KRaft migration is not supported", at_least(1)),
    # ---- log.*
    impl("log.dir", "string", "/tmp/kafka-logs", "H", note="used when log.dirs is unset"),
    impl("log.dirs", "string", None, "H", note="comma-separated; wins over log.dir"),
    impl("log.segment.bytes", "int", 1024 * 1024 * 1024, "H", at_least(14),
         note="topic synonym segment.bytes"),
    impl("log.roll.ms", "long", None, "H", note="wins over log.roll.hours; topic segment.ms"),
    impl("log.roll.hours", "int", 168, "H", at_least(1)),
    impl("log.roll.jitter.ms", "long", None, "H",
         note="wins over log.roll.jitter.hours; topic segment.jitter.ms"),
    impl("log.roll.jitter.hours", "int", 0, "H", at_least(0)),
    impl("log.retention.ms", "long", None, "H",
         note="wins over .minutes and .hours; negative = forever (-1); topic retention.ms"),
    impl("log.retention.minutes", "int", None, "H", note="wins over log.retention.hours"),
    impl("log.retention.hours", "int", 168, "H"),
    impl("log.retention.bytes", "long", -1, "H", note="topic synonym retention.bytes"),
    impl("log.retention.check.interval.ms", "long", 300000, "M", at_least(1)),
    impl("log.cleanup.policy", "list", ["delete"], "M", OneOf(("compact", "delete")),
         note="topic synonym cleanup.policy"),
    impl("log.cleaner.enable", "boolean", True, "M"),
    impl("log.cleaner.threads", "int", 1, "M", at_least(0)),
    impl("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX, "M"),
    impl("log.cleaner.dedupe.buffer.size", "long", 128 * 1024 * 1024, "M"),
    acc("log.cleaner.io.buffer.size", "int", 512 * 1024, "M",
        "the cleaner reads each batch whole with one pread, sized by the batch", at_least(0)),
    impl("log.cleaner.io.buffer.load.factor", "double", 0.9, "M"),
    impl("log.cleaner.backoff.ms", "long", 15000, "M", at_least(0)),
    impl("log.cleaner.min.cleanable.ratio", "double", 0.5, "M", Range(0, 1),
         note="topic synonym min.cleanable.dirty.ratio"),
    impl("log.cleaner.delete.retention.ms", "long", 86400000, "M", at_least(0),
         note="topic synonym delete.retention.ms"),
    impl("log.cleaner.min.compaction.lag.ms", "long", 0, "M", at_least(0),
         note="topic synonym min.compaction.lag.ms"),
    impl("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "M", at_least(1),
         note="topic synonym max.compaction.lag.ms"),
    impl("log.index.size.max.bytes", "int", 10 * 1024 * 1024, "M", at_least(4),
         note="topic synonym segment.index.bytes"),
    impl("log.index.interval.bytes", "int", 4096, "M", at_least(0),
         note="topic synonym index.interval.bytes"),
    impl("log.flush.interval.messages", "long", LONG_MAX, "H", at_least(1),
         note="topic synonym flush.messages"),
    impl("log.flush.interval.ms", "long", None, "H",
         note="defaults to log.flush.scheduler.interval.ms; topic flush.ms"),
    impl("log.flush.scheduler.interval.ms", "long", LONG_MAX, "H"),
    impl("log.flush.offset.checkpoint.interval.ms", "int", 60000, "H", at_least(0)),
    impl("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "H", at_least(0)),
    impl("log.segment.delete.delay.ms", "long", 60000, "H", at_least(0),
         note="topic synonym file.delete.delay.ms"),
    impl("log.preallocate", "boolean", False, "M", note="topic synonym preallocate"),
    impl("log.message.timestamp.type", "string", "CreateTime", "M", OneOf(_TS_TYPES),
         note="topic synonym message.timestamp.type"),
    impl("log.message.timestamp.before.max.ms", "long", LONG_MAX, "M", at_least(0),
         note="topic synonym message.timestamp.before.max.ms"),
    impl("log.message.timestamp.after.max.ms", "long", LONG_MAX, "M", at_least(0),
         note="topic synonym message.timestamp.after.max.ms"),
    impl("log.message.timestamp.difference.max.ms", "long", LONG_MAX, "M", at_least(0),
         note="deprecated: fallback for .before.max.ms and .after.max.ms left at default"),
    acc("log.message.format.version", "string", "3.0-IV1", "M",
        "ignored as in Kafka 3.x: the record format follows inter.broker.protocol.version"),
    acc("log.message.downconversion.enable", "boolean", True, "L",
        "Moldau keeps v2 batches; old fetch versions are answered per Kafka 3.9"),
    acc("log.local.retention.ms", "long", -2, "M", NO_TIERED, at_least(-2)),
    acc("log.local.retention.bytes", "long", -2, "M", NO_TIERED, at_least(-2)),
    acc("log.initial.task.delay.ms", "long", 30000, "L", "testing-only knob in Kafka",
        at_least(0)),
    acc("log.dir.failure.timeout.ms", "long", 30000, "L", KRAFT + " (JBOD failure reporting)",
        at_least(1)),
    # ---- replica.*
    impl("replica.lag.time.max.ms", "long", 30000, "H"),
    impl("replica.socket.timeout.ms", "int", 30000, "H"),
    impl("replica.socket.receive.buffer.bytes", "int", 64 * 1024, "H", note="-1: OS default"),
    impl("replica.fetch.max.bytes", "int", 1024 * 1024, "M", at_least(0)),
    impl("replica.fetch.wait.max.ms", "int", 500, "M"),
    impl("replica.fetch.min.bytes", "int", 1, "H"),
    impl("replica.fetch.backoff.ms", "int", 1000, "M", at_least(0)),
    impl("replica.fetch.response.max.bytes", "int", 10 * 1024 * 1024, "M", at_least(0)),
    impl("replica.high.watermark.checkpoint.interval.ms", "long", 5000, "H"),
    impl("replica.selector.class", "string", None, "M", OneOf(REPLICA_SELECTORS),
         note="KIP-392: Kafka's two selectors, by their class names"),
    # ---- quotas
    acc("quota.window.num", "int", 11, "L", P_SECURITY, at_least(1)),
    acc("quota.window.size.seconds", "int", 1, "L", P_SECURITY, at_least(1)),
    acc("replication.quota.window.num", "int", 11, "L", TOKEN_BUCKET, at_least(1)),
    acc("replication.quota.window.size.seconds", "int", 1, "L", TOKEN_BUCKET, at_least(1)),
    acc("alter.log.dirs.replication.quota.window.num", "int", 11, "L", NO_DIR_MOVES,
        at_least(1)),
    acc("alter.log.dirs.replication.quota.window.size.seconds", "int", 1, "L", NO_DIR_MOVES,
        at_least(1)),
    acc("controller.quota.window.num", "int", 11, "L", P_SECURITY, at_least(1)),
    acc("controller.quota.window.size.seconds", "int", 1, "L", P_SECURITY, at_least(1)),
    acc("client.quota.callback.class", "class", None, "L", JVM_ONLY),
    # ---- offsets.* and group.*
    impl("offset.metadata.max.bytes", "int", 4096, "H"),
    impl("offsets.load.buffer.size", "int", 5 * 1024 * 1024, "H", at_least(1)),
    impl("offsets.topic.replication.factor", "short", 3, "H", at_least(1)),
    impl("offsets.topic.num.partitions", "int", 50, "H", at_least(1)),
    impl("offsets.topic.segment.bytes", "int", 100 * 1024 * 1024, "H", at_least(1)),
    impl("offsets.topic.compression.codec", "int", 0, "H", Range(0, 4),
         note="the codec id of the coordinator's batches: 0 none, 1 gzip, 2 snappy, 3 lz4, "
              "4 zstd"),
    impl("offsets.retention.minutes", "int", 7 * 24 * 60, "H", at_least(1)),
    impl("offsets.retention.check.interval.ms", "long", 600000, "H", at_least(1)),
    impl("offsets.commit.timeout.ms", "int", 5000, "H", at_least(1)),
    acc("offsets.commit.required.acks", "short", -1, "H",
        "deprecated in Kafka; commits always wait for the ISR (acks=all)"),
    impl("group.min.session.timeout.ms", "int", 6000, "M"),
    impl("group.max.session.timeout.ms", "int", 1800000, "M"),
    impl("group.initial.rebalance.delay.ms", "int", 3000, "M"),
    impl("group.max.size", "int", INT_MAX, "M", at_least(1)),
    acc("group.coordinator.rebalance.protocols", "list", ["classic"], "M",
        "only the classic group protocol is offered (KIP-848 groups are KRaft-only in 3.9)",
        OneOf(("classic", "consumer", "share"))),
    acc("group.coordinator.threads", "int", 1, "M", ONE_LOOP, at_least(1)),
    acc("group.coordinator.append.linger.ms", "int", 10, "M",
        "the new (KIP-848) coordinator's batching; the classic one appends at once",
        at_least(0)),
    acc("group.consumer.session.timeout.ms", "int", 45000, "M",
        "KIP-848 protocol not offered", at_least(1)),
    acc("group.consumer.min.session.timeout.ms", "int", 45000, "M",
        "KIP-848 protocol not offered", at_least(1)),
    acc("group.consumer.max.session.timeout.ms", "int", 60000, "M",
        "KIP-848 protocol not offered", at_least(1)),
    acc("group.consumer.heartbeat.interval.ms", "int", 5000, "M",
        "KIP-848 protocol not offered", at_least(1)),
    acc("group.consumer.min.heartbeat.interval.ms", "int", 5000, "M",
        "KIP-848 protocol not offered", at_least(1)),
    acc("group.consumer.max.heartbeat.interval.ms", "int", 15000, "M",
        "KIP-848 protocol not offered", at_least(1)),
    acc("group.consumer.max.size", "int", INT_MAX, "M",
        "KIP-848 protocol not offered", at_least(1)),
    acc("group.consumer.assignors", "list",
        ["org.apache.kafka.coordinator.group.assignor.UniformAssignor",
         "org.apache.kafka.coordinator.group.assignor.RangeAssignor"], "M",
        "KIP-848 protocol not offered"),
    acc("group.consumer.migration.policy", "string", "disabled", "M",
        "KIP-848 protocol not offered",
        OneOf(("disabled", "downgrade", "upgrade", "bidirectional"), case_insensitive=True)),
    # ---- transactions
    acc("transactional.id.expiration.ms", "int", 7 * 24 * _HOUR_MS, "H", P_TXN, at_least(1)),
    acc("transaction.max.timeout.ms", "int", 900000, "H", P_TXN, at_least(1)),
    acc("transaction.state.log.min.isr", "int", 2, "H", P_TXN, at_least(1)),
    acc("transaction.state.log.load.buffer.size", "int", 5 * 1024 * 1024, "H", P_TXN,
        at_least(1)),
    acc("transaction.state.log.replication.factor", "short", 3, "H", P_TXN, at_least(1)),
    acc("transaction.state.log.num.partitions", "int", 50, "H", P_TXN, at_least(1)),
    acc("transaction.state.log.segment.bytes", "int", 100 * 1024 * 1024, "H", P_TXN,
        at_least(1)),
    acc("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "L",
        P_TXN, at_least(1)),
    acc("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, "L",
        P_TXN, at_least(1)),
    acc("transaction.partition.verification.enable", "boolean", True, "L", P_TXN),
    # ---- ssl.*
    impl("ssl.protocol", "string", "TLSv1.3", "M"),
    acc("ssl.provider", "string", None, "M", JVM_ONLY),
    impl("ssl.cipher.suites", "list", [], "M"),
    impl("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "M"),
    impl("ssl.keystore.type", "string", "JKS", "M",
         note="PEM and PKCS12 supported; JKS gets a clear error"),
    impl("ssl.keystore.location", "string", None, "M"),
    impl("ssl.keystore.password", "password", None, "M"),
    impl("ssl.key.password", "password", None, "M"),
    impl("ssl.keystore.key", "password", None, "M"),
    impl("ssl.keystore.certificate.chain", "password", None, "M"),
    impl("ssl.truststore.type", "string", "JKS", "M"),
    impl("ssl.truststore.location", "string", None, "M"),
    impl("ssl.truststore.password", "password", None, "M"),
    impl("ssl.truststore.certificates", "password", None, "M"),
    acc("ssl.keymanager.algorithm", "string", "SunX509", "M", JVM_ONLY),
    acc("ssl.trustmanager.algorithm", "string", "PKIX", "M", JVM_ONLY),
    impl("ssl.endpoint.identification.algorithm", "string", "https", "L"),
    acc("ssl.secure.random.implementation", "string", None, "L", JVM_ONLY),
    impl("ssl.client.auth", "string", "none", "M", OneOf(("required", "requested", "none"))),
    impl("ssl.principal.mapping.rules", "string", "DEFAULT", "L"),
    acc("ssl.engine.factory.class", "class", None, "L", JVM_ONLY),
    impl("ssl.allow.dn.changes", "boolean", False, "L", note="checked on a keystore reload"),
    impl("ssl.allow.san.changes", "boolean", False, "L", note="checked on a keystore reload"),
    # ---- sasl.* and the rest of security
    acc("sasl.enabled.mechanisms", "list", ["GSSAPI"], "M", P_SECURITY),
    acc("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "M", P_SECURITY),
    acc("sasl.jaas.config", "password", None, "M", P_SECURITY),
    acc("sasl.client.callback.handler.class", "class", None, "M", JVM_ONLY),
    acc("sasl.server.callback.handler.class", "class", None, "M", JVM_ONLY),
    acc("sasl.login.callback.handler.class", "class", None, "M", JVM_ONLY),
    acc("sasl.login.class", "class", None, "M", JVM_ONLY),
    acc("sasl.server.max.receive.size", "int", 524288, "M", P_SECURITY),
    acc("sasl.kerberos.service.name", "string", None, "M", P_SECURITY),
    acc("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", "M", P_SECURITY),
    acc("sasl.kerberos.ticket.renew.window.factor", "double", 0.8, "M", P_SECURITY),
    acc("sasl.kerberos.ticket.renew.jitter", "double", 0.05, "M", P_SECURITY),
    acc("sasl.kerberos.min.time.before.relogin", "long", 60000, "M", P_SECURITY),
    acc("sasl.kerberos.principal.to.local.rules", "list", ["DEFAULT"], "M", P_SECURITY),
    acc("sasl.login.refresh.window.factor", "double", 0.8, "M", P_SECURITY),
    acc("sasl.login.refresh.window.jitter", "double", 0.05, "M", P_SECURITY),
    acc("sasl.login.refresh.min.period.seconds", "short", 60, "M", P_SECURITY),
    acc("sasl.login.refresh.buffer.seconds", "short", 300, "M", P_SECURITY),
    acc("sasl.login.connect.timeout.ms", "int", None, "L", P_SECURITY),
    acc("sasl.login.read.timeout.ms", "int", None, "L", P_SECURITY),
    acc("sasl.login.retry.backoff.max.ms", "long", 10000, "L", P_SECURITY),
    acc("sasl.login.retry.backoff.ms", "long", 100, "L", P_SECURITY),
    acc("sasl.oauthbearer.scope.claim.name", "string", "scope", "L", P_SECURITY),
    acc("sasl.oauthbearer.sub.claim.name", "string", "sub", "L", P_SECURITY),
    acc("sasl.oauthbearer.token.endpoint.url", "string", None, "M", P_SECURITY),
    acc("sasl.oauthbearer.jwks.endpoint.url", "string", None, "M", P_SECURITY),
    acc("sasl.oauthbearer.jwks.endpoint.refresh.ms", "long", 3600000, "L", P_SECURITY),
    acc("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "long", 10000, "L", P_SECURITY),
    acc("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "long", 100, "L", P_SECURITY),
    acc("sasl.oauthbearer.clock.skew.seconds", "int", 30, "L", P_SECURITY),
    acc("sasl.oauthbearer.expected.audience", "list", None, "L", P_SECURITY),
    acc("sasl.oauthbearer.expected.issuer", "string", None, "L", P_SECURITY),
    acc("security.providers", "string", None, "L", JVM_ONLY),
    acc("principal.builder.class", "class",
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder", "M",
        JVM_ONLY),
    acc("authorizer.class.name", "string", "", "L",
        P_SECURITY + "; startup fails when it is set", Unenforced("", ACLS_UNENFORCED)),
    acc("super.users", "string", None, "L", P_SECURITY + " (authorizer property)"),
    acc("allow.everyone.if.no.acl.found", "boolean", False, "L",
        P_SECURITY + " (authorizer property)"),
    acc("delegation.token.secret.key", "password", None, "M", P_SECURITY),
    acc("delegation.token.max.lifetime.ms", "long", 7 * 24 * _HOUR_MS, "M", P_SECURITY,
        at_least(1)),
    acc("delegation.token.expiry.time.ms", "long", 24 * _HOUR_MS, "M", P_SECURITY,
        at_least(1)),
    acc("delegation.token.expiry.check.interval.ms", "long", _HOUR_MS, "L", P_SECURITY,
        at_least(1)),
    impl("password.encoder.secret", "password", None, "M",
         note="encrypts dynamic password configs in ZooKeeper"),
    impl("password.encoder.old.secret", "password", None, "M",
         note="decrypts what an earlier secret encrypted"),
    impl("password.encoder.keyfactory.algorithm", "string", None, "L",
         note="PBKDF2WithHmacSHA512 (default), SHA256 or SHA1"),
    impl("password.encoder.cipher.algorithm", "string", "AES/CBC/PKCS5Padding", "L",
         note="AES/CBC/PKCS5Padding only"),
    impl("password.encoder.key.length", "int", 128, "L", at_least(8)),
    impl("password.encoder.iterations", "int", 4096, "L", at_least(1024)),
    # ---- metrics
    acc("metric.reporters", "list", [], "L", JVM_ONLY),
    acc("metrics.num.samples", "int", 2, "L", YAMMER_METERS, at_least(1)),
    acc("metrics.sample.window.ms", "long", 30000, "L", YAMMER_METERS, at_least(1)),
    acc("metrics.recording.level", "string", "INFO", "L",
        "every metric Moldau serves is an INFO-level one; it keeps no DEBUG sensors"),
    acc("kafka.metrics.reporters", "list", [], "L", JVM_ONLY),
    acc("kafka.metrics.polling.interval.secs", "int", 10, "L",
        "polls for kafka.metrics.reporters, JVM classes Moldau cannot load", at_least(1)),
    # ---- KRaft-only keys: an error in ZooKeeper mode
    rej("process.roles", "list"),
    rej("node.id", "int"),
    rej("controller.quorum.voters", "list"),
    rej("controller.quorum.bootstrap.servers", "list"),
    rej("controller.listener.names", "string"),
    rej("controller.quorum.election.timeout.ms", "int"),
    rej("controller.quorum.fetch.timeout.ms", "int"),
    rej("controller.quorum.election.backoff.max.ms", "int"),
    rej("controller.quorum.retry.backoff.ms", "int"),
    rej("controller.quorum.request.timeout.ms", "int"),
    rej("controller.quorum.append.linger.ms", "int"),
    rej("metadata.log.dir", "string"),
    rej("metadata.log.segment.bytes", "int"),
    rej("metadata.log.segment.ms", "long"),
    rej("metadata.max.retention.bytes", "long"),
    rej("metadata.max.retention.ms", "long"),
    rej("metadata.log.max.record.bytes.between.snapshots", "long"),
    rej("metadata.log.max.snapshot.interval.ms", "long"),
    rej("metadata.max.idle.interval.ms", "int"),
    rej("broker.heartbeat.interval.ms", "int"),
    rej("broker.session.timeout.ms", "int"),
    rej("initial.broker.registration.timeout.ms", "int"),
    rej("server.max.startup.time.ms", "long"),
]

KEYS: dict[str, ConfigKey] = {k.name: k for k in KEYS_LIST}
assert len(KEYS) == len(KEYS_LIST), "duplicate key in the table"

# Broker key -> topic config key (Kafka's ServerTopicConfigSynonyms, the primary synonym).
TOPIC_SYNONYMS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.bytes": "retention.bytes",
    "log.retention.ms": "retention.ms",
    "message.max.bytes": "max.message.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleanup.policy": "cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
    "log.preallocate": "preallocate",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
    "log.message.format.version": "message.format.version",
    "log.message.downconversion.enable": "message.downconversion.enable",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "log.local.retention.ms": "local.retention.ms",
    "log.local.retention.bytes": "local.retention.bytes",
}

# --------------------------------------------------------------------------- properties syntax


def parse_properties(text: str) -> dict[str, str]:
    """java.util.Properties text (moldau.properties); a malformed \\uxxxx escape is a
    ConfigError naming its key, as every other bad setting is."""
    try:
        return properties.parse(text)
    except properties.PropertiesError as exc:
        raise _config_error(exc) from None


def load_properties(path: str) -> dict[str, str]:
    """A server.properties file, read as Kafka reads it (ISO-8859-1, Java's rules)."""
    try:
        return properties.load(path)
    except properties.PropertiesError as exc:
        raise _config_error(exc) from None


def _config_error(exc: properties.PropertiesError) -> ConfigError:
    return ConfigError(exc.key, exc.value, str(exc))


# --------------------------------------------------------------------------- type conversion


def _to_int(key: str, value: str, low: int, high: int, tname: str) -> int:
    text = value.strip()
    try:
        number = int(text, 10)
    except ValueError:
        raise ConfigError(key, value, f"Not a number of type {tname}") from None
    if not low <= number <= high:
        raise ConfigError(key, value, f"Not a number of type {tname}")
    return number


def convert(key: ConfigKey, value: Any) -> Any:
    """Convert a raw value (string or Python value) to the key's type, as ConfigDef.parseType."""
    if value is None:
        return None
    name, t = key.name, key.type
    if not isinstance(value, str):
        if t == "list" and isinstance(value, list | tuple):
            return [str(v).strip() for v in value]
        if t == "boolean" and isinstance(value, bool):
            return value
        value = str(value).lower() if isinstance(value, bool) else str(value)
    if t == "boolean":
        text = value.strip().lower()
        if text not in ("true", "false"):
            raise ConfigError(name, value, "Expected value to be either true or false")
        return text == "true"
    if t == "int":
        return _to_int(name, value, INT_MIN, INT_MAX, "INT")
    if t == "short":
        return _to_int(name, value, SHORT_MIN, SHORT_MAX, "SHORT")
    if t == "long":
        return _to_int(name, value, LONG_MIN, LONG_MAX, "LONG")
    if t == "double":
        try:
            return float(value.strip())
        except ValueError:
            raise ConfigError(name, value, "Not a number of type DOUBLE") from None
    if t == "list":
        text = value.strip()
        return [item.strip() for item in text.split(",")] if text else []
    return value.strip()  # string, class, password


def _show(key: ConfigKey, value: Any) -> str:
    """Java-style rendering used by the KafkaConfig values dump."""
    if value is None:
        return "null"
    if key.type == "password":
        return "[hidden]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    return str(value)


def _describe_value(key: ConfigKey, value: Any) -> str | None:
    """DescribeConfigs rendering: sensitive values are null, lists comma-joined."""
    if value is None or key.type == "password":
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


# --------------------------------------------------------------------------- derived values


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str  # "" = bind all interfaces / advertise the canonical host name
    port: int
    security_protocol: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class ZkConnect:
    hosts: tuple[tuple[str, int], ...]
    chroot: str | None

    @property
    def connect_string(self) -> str:
        """The host list without the chroot (what kazoo's `hosts` takes)."""
        return ",".join(f"{h}:{p}" for h, p in self.hosts)


_LISTENER_RE = re.compile(r"^([^:/\s]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)$")


_LISTENER_OVERRIDE = re.compile(r"listener\.name\.([^.]+)\.(ssl\..+)")


def _listener_override_base(name: str) -> ConfigKey | None:
    """The ssl.* key a `listener.name.<l>.ssl.*` key overrides, or None."""
    match = _LISTENER_OVERRIDE.fullmatch(name)
    if match is None:
        return None
    base = KEYS.get(match.group(2))
    return base if base is not None and base.status != "rejected" else None


def parse_protocol_map(key: str, text: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or not proto:
            raise ConfigError(key, text, f"entry '{item}' is not LISTENER_NAME:SECURITY_PROTOCOL")
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(key, text, f"unknown security protocol {proto} "
                              f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        if name in mapping:
            raise ConfigError(key, text, f"listener name {name} appears twice")
        mapping[name] = proto
    return mapping


def parse_listeners(key: str, text: str, protocols: Mapping[str, str],
                    distinct_ports: bool) -> list[Endpoint]:
    endpoints: list[Endpoint] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        match = _LISTENER_RE.match(item)
        if not match:
            raise ConfigError(key, text, f"'{item}' is not NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(key, text, f"port {port} of listener {name} is out of range")
        if name not in protocols:
            raise ConfigError(key, text, f"No security protocol defined for listener {name} "
                              "(add it to listener.security.protocol.map)")
        endpoints.append(Endpoint(name, host, port, protocols[name]))
    names = [e.listener for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(key, text, "Each listener must have a different name")
    ports = [e.port for e in endpoints if e.port != 0]
    if distinct_ports and len(set(ports)) != len(ports):
        raise ConfigError(key, text, "Each listener must have a different port")
    return endpoints


def parse_zk_connect(key: str, text: str) -> ZkConnect:
    stripped = text.strip()
    slash = stripped.find("/")
    hosts_part, chroot = (stripped, None) if slash < 0 else (stripped[:slash], stripped[slash:])
    if chroot is not None:
        if chroot == "/":
            chroot = None
        elif chroot.endswith("/") or "//" in chroot:
            raise ConfigError(key, text, f"invalid chroot path {chroot}")
    hosts: list[tuple[str, int]] = []
    for item in (s.strip() for s in hosts_part.split(",")):
        host, sep, port = item.rpartition(":")
        if not item:
            raise ConfigError(key, text, "empty host in the connection string")
        if not sep:
            host, port = item, "2181"
        if not host or not port.isdigit() or not 0 < int(port) <= 65535:
            raise ConfigError(key, text, f"'{item}' is not host:port")
        hosts.append((host.strip("[]"), int(port)))
    return ZkConnect(tuple(hosts), chroot)


# --------------------------------------------------------------------------- BrokerConfig


@dataclass
class BrokerConfig:
    """Typed values of every non-rejected key, plus the effective (derived) values."""

    values: dict[str, Any]
    explicit: frozenset[str]
    warnings: list[str] = field(default_factory=list)
    # `listener.name.<listener>.ssl.*` per-listener overrides (typed like their base key)
    listener_overrides: dict[str, Any] = field(default_factory=dict)

    # derived by _derive()
    log_dirs: list[str] = field(default_factory=list)
    listeners: list[Endpoint] = field(default_factory=list)
    advertised_listeners: list[Endpoint] = field(default_factory=list)
    protocol_map: dict[str, str] = field(default_factory=dict)
    inter_broker_listener_name: str = "PLAINTEXT"
    zookeeper: ZkConnect | None = None

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    # ---- construction

    @classmethod
    def from_properties(cls, source: str | Mapping[str, Any]) -> BrokerConfig:
        raw = parse_properties(source) if isinstance(source, str) else dict(source)
        warnings: list[str] = []
        values: dict[str, Any] = {}
        overrides: dict[str, Any] = {}
        explicit: set[str] = set()
        for name, value in raw.items():
            key = KEYS.get(name)
            if key is None:
                base = _listener_override_base(name)
                if base is not None:
                    converted = convert(base, value)
                    if base.validator is not None:
                        base.validator.check(name, converted)
                    overrides[name] = converted
                    explicit.add(name)
                    continue
                warnings.append(
                    f"The configuration '{name}' was supplied but isn't a known config.")
                continue
            if key.status == "rejected":
                raise ConfigError(name, value, f"{key.note}; remove {name} from the file "
                                  "and set zookeeper.connect")
            values[name] = convert(key, value)
            explicit.add(name)
        for key in KEYS_LIST:
            if key.status == "rejected":
                continue
            if key.name not in values:
                values[key.name] = key.default
            if key.validator is not None:
                key.validator.check(key.name, values[key.name])
        config = cls(values=values, explicit=frozenset(explicit), warnings=warnings,
                     listener_overrides=overrides)
        config._derive()
        return config

    @classmethod
    def from_file(cls, path: str) -> BrokerConfig:
        return cls.from_properties(load_properties(path))

    def _derive(self) -> None:
        v = self.values
        # broker.id and its generation
        broker_id = v["broker.id"]
        if v["broker.id.generation.enable"]:
            reserved = v["reserved.broker.max.id"]
            if not -1 <= broker_id <= reserved:
                raise ConfigError("broker.id", broker_id, "broker.id must be at least -1 and "
                                  f"not above reserved.broker.max.id ({reserved})")
        elif broker_id < 0:
            raise ConfigError("broker.id", broker_id, "broker.id must be at least 0 when "
                              "broker.id.generation.enable is false")
        if v["zookeeper.metadata.migration.enable"]:
            raise ConfigError("zookeeper.metadata.migration.enable", "true",
                              "ZooKeeper-to-KRaft migration is not supported by Moldau")
        # ZooKeeper
        if v["zookeeper.connect"] is None:
            raise ConfigError("zookeeper.connect", None, "Missing required configuration "
                              "zookeeper.connect which has no default value")
        self.zookeeper = parse_zk_connect("zookeeper.connect", v["zookeeper.connect"])
        if v["zookeeper.connection.timeout.ms"] is None:
            v["zookeeper.connection.timeout.ms"] = v["zookeeper.session.timeout.ms"]
        # log dirs: log.dirs wins over log.dir
        dirs_key = "log.dirs" if v["log.dirs"] is not None else "log.dir"
        self.log_dirs = [d.strip() for d in v[dirs_key].split(",") if d.strip()]
        if not self.log_dirs:
            raise ConfigError(dirs_key, v[dirs_key], "at least one log directory is required")
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise ConfigError(dirs_key, v[dirs_key], "duplicate log directory")
        self._derive_listeners()
        # flush.ms falls back to the scheduler interval (Kafka's logFlushIntervalMs)
        if v["log.flush.interval.ms"] is None:
            v["log.flush.interval.ms"] = v["log.flush.scheduler.interval.ms"]
        # the deprecated timestamp difference feeds before/after left at their default
        diff = v["log.message.timestamp.difference.max.ms"]
        for name in ("log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms"):
            if v[name] == LONG_MAX:
                v[name] = diff
        self.log_config()  # validate the topic-level view now, naming broker keys

    def _derive_listeners(self) -> None:
        v = self.values
        self.protocol_map = parse_protocol_map("listener.security.protocol.map",
                                               v["listener.security.protocol.map"])
        self.listeners = parse_listeners("listeners", v["listeners"], self.protocol_map, True)
        if not self.listeners:
            raise ConfigError("listeners", v["listeners"], "at least one listener is required")
        if v["advertised.listeners"] is None:
            self.advertised_listeners = list(self.listeners)
        else:
            self.advertised_listeners = parse_listeners(
                "advertised.listeners", v["advertised.listeners"], self.protocol_map, False)
            names = {e.listener for e in self.listeners}
            for ep in self.advertised_listeners:
                if ep.listener not in names:
                    raise ConfigError("advertised.listeners", v["advertised.listeners"],
                                      f"listener {ep.listener} is not defined in listeners")
                if ep.host == "0.0.0.0":
                    raise ConfigError("advertised.listeners", v["advertised.listeners"],
                                      "cannot use the nonroutable meta-address 0.0.0.0")
        for ep in self.listeners:
            if ep.security_protocol.startswith("SASL_"):
                raise ConfigError("listeners", v["listeners"],
                                  f"listener {ep.listener} uses {ep.security_protocol}; SASL "
                                  "listeners are not supported yet (PLAINTEXT and SSL are)")
        if "inter.broker.listener.name" in self.explicit:
            if "security.inter.broker.protocol" in self.explicit:
                raise ConfigError("inter.broker.listener.name", v["inter.broker.listener.name"],
                                  "inter.broker.listener.name and security.inter.broker.protocol "
                                  "must not both be set; set only inter.broker.listener.name")
            name = v["inter.broker.listener.name"].upper()
        else:
            name = v["security.inter.broker.protocol"]
        if name not in {e.listener for e in self.advertised_listeners}:
            key = ("inter.broker.listener.name" if "inter.broker.listener.name" in self.explicit
                   else "security.inter.broker.protocol")
            raise ConfigError(key, name, "inter.broker.listener.name must be a listener name "
                              "defined in advertised.listeners")
        self.inter_broker_listener_name = name

    def listener_settings(self, listener: str) -> dict[str, Any]:
        """The `ssl.*` settings of one listener, per-listener overrides applied."""
        from moldau.security.ssl_settings import listener_settings

        return listener_settings({**self.values, **self.listener_overrides}, listener)

    # ---- effective values with Kafka's precedence

    @property
    def broker_id(self) -> int:
        return self.values["broker.id"]

    @property
    def log_retention_ms(self) -> int:
        v = self.values
        if v["log.retention.ms"] is not None:
            millis = v["log.retention.ms"]
        elif v["log.retention.minutes"] is not None:
            millis = v["log.retention.minutes"] * 60 * 1000
        else:
            millis = v["log.retention.hours"] * _HOUR_MS
        return -1 if millis < 0 else millis

    @property
    def log_roll_ms(self) -> int:
        v = self.values
        if v["log.roll.ms"] is not None:
            return v["log.roll.ms"]
        return v["log.roll.hours"] * _HOUR_MS

    @property
    def log_roll_jitter_ms(self) -> int:
        v = self.values
        if v["log.roll.jitter.ms"] is not None:
            return v["log.roll.jitter.ms"]
        return v["log.roll.jitter.hours"] * _HOUR_MS

    def _effective_log_value(self, broker_key: str) -> Any:
        if broker_key == "log.retention.ms":
            return self.log_retention_ms
        if broker_key == "log.roll.ms":
            return self.log_roll_ms
        if broker_key == "log.roll.jitter.ms":
            return self.log_roll_jitter_ms
        return self.values[broker_key]

    def log_config(self) -> LogConfig:
        """The broker-level defaults every topic's LogConfig starts from."""
        kwargs: dict[str, Any] = {}
        for broker_key, topic_key in TOPIC_SYNONYMS.items():
            value = self._effective_log_value(broker_key)
            if topic_key == "cleanup.policy":
                value = tuple(sorted(set(value)))
            kwargs[topic_key.replace(".", "_")] = value
        try:
            return LogConfig(**kwargs)
        except _StorageConfigError as exc:
            # name the broker key whose topic synonym the storage layer complained about
            message = str(exc)
            for broker_key, topic_key in TOPIC_SYNONYMS.items():
                if re.search(rf"\b{re.escape(topic_key)}\b", message):
                    value = self._effective_log_value(broker_key)
                    raise ConfigError(broker_key, value, f"{message} (topic synonym "
                                      f"{topic_key})") from None
            raise ConfigError("log.*", "", message) from None

    # ---- reporting

    def describe(self) -> list[tuple[str, str | None, str]]:
        """(key, value, source) per key, with DescribeConfigs' source names."""
        rows = []
        for name in sorted(self.values):
            source = "STATIC_BROKER_CONFIG" if name in self.explicit else "DEFAULT_CONFIG"
            rows.append((name, _describe_value(KEYS[name], self.values[name]), source))
        return rows

    def dump(self) -> str:
        """The startup log block, in the shape of Kafka's 'KafkaConfig values:'."""
        lines = ["KafkaConfig values: "]
        for name in sorted(self.values):
            lines.append(f"\t{name} = {_show(KEYS[name], self.values[name])}")
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- docs


def _doc_default(key: ConfigKey) -> str:
    if key.status == "rejected":
        return ""
    if key.default is None:
        return "null"
    if key.type == "double" and key.default == DOUBLE_MAX:
        return "1.7976931348623157E308"
    if key.default == LONG_MAX:
        return "9223372036854775807"
    return _describe_value(key, key.default) or '""'


def markdown_table() -> str:
    """docs/broker-config.md, generated from KEYS (a test keeps the file in step)."""
    counts = {s: sum(1 for k in KEYS_LIST if k.status == s) for s in STATUSES}
    out = [
        "# Broker configuration (`server.properties`)",
        "",
        "Generated by `moldau.server.config.markdown_table()`; do not edit by hand (the test",
        "`broker/tests/server/test_config.py` fails when this file and the code differ).",
        "",
        "Moldau reads Kafka 3.9's ZooKeeper-mode broker keys with Kafka's names, types, defaults",
        "and validation. Status: **implemented** (the broker of issue 4 honours it), **accepted**",
        "(a Kafka file may set it and still loads; the note says why Moldau ignores it or which",
        "issue implements it), **rejected** (KRaft-only: startup fails naming the key).",
        "An invalid value stops startup with `Invalid value V for configuration K: reason`;",
        "an unknown key is logged as a warning.",
        "",
        "Precedence: `log.retention.ms` > `log.retention.minutes` > `log.retention.hours`",
        "(a negative result means forever, -1); `log.roll.ms` > `log.roll.hours`;",
        "`log.roll.jitter.ms` > `log.roll.jitter.hours`; `log.dirs` > `log.dir`;",
        "`advertised.listeners` defaults to `listeners`; `inter.broker.listener.name` and",
        "`security.inter.broker.protocol` are mutually exclusive.",
        "",
        f"Keys: {len(KEYS_LIST)} ({counts['implemented']} implemented, "
        f"{counts['accepted']} accepted, {counts['rejected']} rejected).",
        "",
        "| key | type | default | valid values | importance | status | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in sorted(KEYS_LIST, key=lambda k: k.name):
        valid = str(key.validator) if key.validator else ""
        cells = [f"`{key.name}`", key.type, _doc_default(key), valid, key.importance,
                 key.status, key.note]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out) + "\n"
