"""Which broker keys Kafka changes without a restart, and at which level (KIP-226).

Kafka's sets of reconfigurable keys (DynamicBrokerConfig and the components it
reconfigures), the keys that only a broker's own level may set (listener settings and
the `listener.name.<l>.*` overrides), the names that set the same config (synonyms), the
key types (for validation and for hiding passwords) and DescribeConfigs' source ids.
Pure tables and lookups: no state, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from moldau.cluster import zk_data

from .config import KEYS, TOPIC_SYNONYMS, ConfigKey

# DescribeConfigs' ConfigSource ids
UNKNOWN = 0
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_LOGGER_CONFIG = 6

DEFAULT_ENTITY = zk_data.DEFAULT_ENTITY  # "<default>"

# --------------------------------------------------------------------------- Kafka's sets

# SslConfigs.RECONFIGURABLE_CONFIGS: only per listener (listener.name.<l>.<key>)
DYNAMIC_SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
# LogCleaner.RECONFIGURABLE_CONFIGS
LOG_CLEANER_CONFIGS = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
})
# DynamicLogConfig.ReconfigurableConfigs: the broker synonyms of the topic configs
# (ServerTopicConfigSynonyms), including the topic keys Moldau's LogConfig does not model.
DYNAMIC_LOG_CONFIGS = frozenset(TOPIC_SYNONYMS) - {"log.message.format.version"}
# DynamicThreadPool.RECONFIGURABLE_CONFIGS
THREAD_POOL_CONFIGS = frozenset({
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads",
})
# DynamicListenerConfig.ReconfigurableConfigs
LISTENER_CONFIGS = frozenset({
    "listeners", "listener.security.protocol.map", "principal.builder.class",
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate", "num.network.threads",
})
# SocketServer.ReconfigurableConfigs
SOCKET_SERVER_CONFIGS = frozenset({
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections",
    "max.connection.creation.rate",
})
# DynamicProducerStateManagerConfig
PRODUCER_STATE_CONFIGS = frozenset({
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
})

ALL_DYNAMIC_CONFIGS = (DYNAMIC_SECURITY_CONFIGS | LOG_CLEANER_CONFIGS | DYNAMIC_LOG_CONFIGS
                       | THREAD_POOL_CONFIGS | {"metric.reporters"} | LISTENER_CONFIGS
                       | SOCKET_SERVER_CONFIGS | PRODUCER_STATE_CONFIGS | {"config.providers"})

CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({
    "max.connections", "max.connection.creation.rate", "num.network.threads"})
PER_BROKER_CONFIGS = (DYNAMIC_SECURITY_CONFIGS | LISTENER_CONFIGS) - CLUSTER_LEVEL_LISTENER_CONFIGS
LISTENER_MECHANISM_CONFIGS = ("sasl.jaas.config", "sasl.login.callback.handler.class",
                              "sasl.login.class", "sasl.server.callback.handler.class",
                              "connections.max.reauth.ms")
RELOADABLE_FILE_CONFIGS = ("ssl.keystore.location", "ssl.truststore.location")
# Broker quota configs: dynamic only (QuotaConfigs.brokerQuotaConfigs), not in server.properties
BROKER_QUOTA_CONFIGS = {"leader.replication.throttled.rate": "long",
                        "follower.replication.throttled.rate": "long",
                        "replica.alter.log.dirs.io.max.bytes.per.second": "long"}

DYNAMIC_PASSWORD_CONFIGS = tuple(sorted(
    n for n in ALL_DYNAMIC_CONFIGS if n in KEYS and KEYS[n].type == "password"))

LISTENER_CONFIG_RE = re.compile(r"^listener\.name\.([^.]*)\.(.*)$")
_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
_ROLL = ("log.roll.ms", "log.roll.hours")
_JITTER = ("log.roll.jitter.ms", "log.roll.jitter.hours")
_FLUSH = ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")

# topic config -> its primary broker synonym
TOPIC_TO_BROKER = {topic: broker for broker, topic in TOPIC_SYNONYMS.items()}

# --------------------------------------------------------------------------- names


def broker_config_synonyms(name: str, match_listener_override: bool) -> list[str]:
    """DynamicBrokerConfig.brokerConfigSynonyms: the names that set the same config, in
    precedence order."""
    for group in (_ROLL, _JITTER, _RETENTION):
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":
        return list(_FLUSH)
    match = LISTENER_CONFIG_RE.match(name)
    if match and match_listener_override:
        base = match.group(2)
        mechanism = next((c for c in LISTENER_MECHANISM_CONFIGS if base.endswith(c)), None)
        return [name, mechanism or base]
    return [name]


def base_name(name: str) -> str:
    """listener.name.<l>.<key> -> <key>; other names unchanged."""
    match = LISTENER_CONFIG_RE.match(name)
    return match.group(2) if match else name


def config_key(name: str) -> ConfigKey | None:
    """The broker ConfigKey of a name (listener-prefixed names use their base key)."""
    return KEYS.get(name) or KEYS.get(base_name(name))


def config_type(name: str) -> str | None:
    key = config_key(name)
    if key is not None:
        return key.type
    return BROKER_QUOTA_CONFIGS.get(name)


def is_sensitive(name: str) -> bool:
    """KafkaConfig.maybeSensitive: passwords (and unknown types) are never shown."""
    t = config_type(name)
    return t == "password"


def is_password_config(name: str) -> bool:
    """DynamicBrokerConfig.isPasswordConfig: stored encrypted in ZooKeeper."""
    return any(name.endswith(p) for p in DYNAMIC_PASSWORD_CONFIGS)


# --------------------------------------------------------------------------- levels


def non_dynamic(names: Iterable[str]) -> set[str]:
    """Kafka broker keys that cannot change without a restart (custom names can)."""
    return {n for n in names if n in KEYS and n not in ALL_DYNAMIC_CONFIGS}


def security_without_prefix(names: Iterable[str]) -> set[str]:
    """Store and password keys set without a listener prefix (Kafka takes them only per
    listener)."""
    return {n for n in names if n in DYNAMIC_SECURITY_CONFIGS}


def per_broker_names(names: Iterable[str]) -> set[str]:
    """The names only a broker's own level may set (never the cluster default)."""
    out = set()
    for name in names:
        if name in PER_BROKER_CONFIGS:
            out.add(name)
        match = LISTENER_CONFIG_RE.match(name)
        if match and match.group(2) not in CLUSTER_LEVEL_LISTENER_CONFIGS:
            out.add(name)
    return out

