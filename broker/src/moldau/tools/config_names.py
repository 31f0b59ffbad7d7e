"""The config names Kafka 3.9.1's ConfigCommand and TopicCommand list in their usage
tables ("The following is a list of valid configurations"), per entity type, in the order
they print them: the usage tables match Kafka's, whatever subset Moldau's broker acts on."""

from __future__ import annotations

TOPICS = (
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.format.version", "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms", "message.timestamp.difference.max.ms",
    "message.timestamp.type", "min.cleanable.dirty.ratio", "min.compaction.lag.ms",
    "min.insync.replicas", "preallocate", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "remote.storage.enable", "retention.bytes", "retention.ms",
    "segment.bytes", "segment.index.bytes", "segment.jitter.ms", "segment.ms",
    "unclean.leader.election.enable",
)

BROKERS = (
    "advertised.listeners", "background.threads", "compression.gzip.level",
    "compression.lz4.level", "compression.type", "compression.zstd.level",
    "follower.replication.throttled.rate", "leader.replication.throttled.rate",
    "listener.security.protocol.map", "listeners", "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size", "log.cleaner.delete.retention.ms",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.threads", "log.cleanup.policy", "log.flush.interval.messages",
    "log.flush.interval.ms", "log.index.interval.bytes", "log.index.size.max.bytes",
    "log.local.retention.bytes", "log.local.retention.ms", "log.message.downconversion.enable",
    "log.message.timestamp.after.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.difference.max.ms", "log.message.timestamp.type", "log.preallocate",
    "log.retention.bytes", "log.retention.ms", "log.roll.jitter.ms", "log.roll.ms",
    "log.segment.bytes", "log.segment.delete.delay.ms", "max.connection.creation.rate",
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
    "message.max.bytes", "metric.reporters", "min.insync.replicas", "num.io.threads",
    "num.network.threads", "num.recovery.threads.per.data.dir", "num.replica.fetchers",
    "principal.builder.class", "producer.id.expiration.ms", "remote.fetch.max.wait.ms",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second",
    "replica.alter.log.dirs.io.max.bytes.per.second", "sasl.enabled.mechanisms",
    "sasl.jaas.config", "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.refresh.buffer.seconds", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.mechanism.inter.broker.protocol", "ssl.cipher.suites", "ssl.client.auth",
    "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class", "ssl.key.password", "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.type", "transaction.partition.verification.enable",
    "unclean.leader.election.enable",
)

USERS = (
    "SCRAM-SHA-256", "SCRAM-SHA-512", "consumer_byte_rate", "controller_mutation_rate",
    "producer_byte_rate", "request_percentage",
)

CLIENTS = (
    "consumer_byte_rate", "controller_mutation_rate", "producer_byte_rate",
    "request_percentage",
)

IPS = (
    "connection_creation_rate",
)

CLIENT_METRICS = (
    "interval.ms", "match", "metrics",
)

BY_ENTITY_TYPE = {"topics": TOPICS, "brokers": BROKERS, "users": USERS, "clients": CLIENTS,
                  "ips": IPS, "client-metrics": CLIENT_METRICS}


def listed(names: tuple[str, ...]) -> str:
    """One name a line, each after a tab, as the usage tables show them."""
    return "".join(f"\t{name}\n" for name in names)
