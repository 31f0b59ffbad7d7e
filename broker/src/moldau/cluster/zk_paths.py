"""Kafka 3.9's ZooKeeper layout: the znode paths, the entity names in them (Kafka's
Sanitizer) and the names of sequential znodes. Pure, no I/O."""

from __future__ import annotations

import urllib.parse

BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
TOPICS_PATH = "/brokers/topics"
BROKER_SEQID_PATH = "/brokers/seqid"
CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
LOG_DIR_EVENT_PREFIX = "log_dir_event_"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CLUSTER_PATH = "/cluster"
CLUSTER_ID_PATH = "/cluster/id"
PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
CONSUMERS_PATH = "/consumers"
FEATURE_PATH = "/feature"
# KRaft migration state (KIP-866): ZooKeeper-mode brokers never write it, but Kafka 3.9
# counts it among the roots ZkSecurityMigrator secures
MIGRATION_PATH = "/migration"


class ConfigType:
    """Kafka's ConfigType: the entity types under /config."""

    TOPIC = "topics"
    CLIENT = "clients"
    USER = "users"
    BROKER = "brokers"
    IP = "ips"


# ConfigType.ALL of ZooKeeper mode (client-metrics configs exist only in KRaft mode).
CONFIG_TYPES = (
    ConfigType.TOPIC, ConfigType.CLIENT, ConfigType.USER, ConfigType.BROKER, ConfigType.IP
)
# The entity name of cluster-wide defaults (/config/brokers/<default>, /config/users/<default>).
DEFAULT_ENTITY = "<default>"


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS_PATH}/{topic}/partitions/{partition}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, entity_name: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}/{entity_name}"


def config_change_path(sequence_name: str) -> str:
    """The path of one change notification, from its child name (config_change_0000000007)."""
    return f"{CONFIG_CHANGES_PATH}/{sequence_name}"


# Where a sequential create of a new change notification goes (ZooKeeper appends 10 digits).
CONFIG_CHANGE_CREATE_PATH = f"{CONFIG_CHANGES_PATH}/{CONFIG_CHANGE_PREFIX}"

# ZkData.PersistentZkPaths: created (if missing) by every broker at startup.
PERSISTENT_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH,  # the old consumers' path, still created by Kafka 3.9
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(config_entity_type_path(t) for t in CONFIG_TYPES),
)


# -- entity name sanitising (Kafka's Sanitizer) ------------------------------------------------


def sanitize(name: str) -> str:
    """Sanitizer.sanitize: what user and client-id entity names look like in znode names.

    Java's URLEncoder keeps [A-Za-z0-9._-*] and writes space as '+'; Kafka then turns '*'
    into %2A and '+' into %20, so only [A-Za-z0-9._-] stay literal. Python's quote keeps '~'
    too, which Java encodes.
    """
    return urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    """Sanitizer.desanitize (URLDecoder: '+' also decodes to a space)."""
    return urllib.parse.unquote_plus(name)


def sequence_number(name: str) -> int:
    """The number ZooKeeper appended to a sequential node name (config_change_0000000042)."""
    digits = name[-10:]
    return int(digits) if digits.isdigit() else -1
