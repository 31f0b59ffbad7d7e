"""Kafka 3.9's ZooKeeper layout: znode paths and JSON payloads (pure, no I/O).

Encoders produce the bytes Kafka 3.9 (Scala 2.13 build) writes, key order included, so a
znode written by Moldau is byte-for-byte what `kafka-server-start.sh` would have written and
existing tooling (zkCli, Burrow, kafka-manager, scripts that grep JSON) sees no difference.
Kafka serialises Scala and Java hash maps with Jackson, so its key order is the iteration
order of those maps; the `_*_order` helpers below reproduce it from the JVM hash functions.
Decoders are tolerant: every version Kafka ever wrote decodes, unknown keys are ignored.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from moldau.storage.checkpoints import kafka_uuid_from_str, kafka_uuid_to_str

# -- paths -------------------------------------------------------------------------------------

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


# -- Kafka's Uuid ------------------------------------------------------------------------------

ZERO_UUID = uuid.UUID(int=0)
ONE_UUID = uuid.UUID(int=1)
METADATA_TOPIC_ID = ONE_UUID
RESERVED_UUIDS = frozenset({ZERO_UUID, ONE_UUID})

uuid_to_str = kafka_uuid_to_str  # Uuid.toString: URL-safe base64, no padding, 22 chars
uuid_from_str = kafka_uuid_from_str  # Uuid.fromString


def random_uuid() -> uuid.UUID:
    """Uuid.randomUuid: a version-4 UUID, never a reserved one nor one printed with a leading
    dash (a leading '-' would read as an option on a command line)."""
    while True:
        value = uuid.uuid4()
        if value not in RESERVED_UUIDS and not uuid_to_str(value).startswith("-"):
            return value


def generate_cluster_id() -> str:
    """A new cluster id in Kafka's form: a random Uuid string (22 chars)."""
    return uuid_to_str(random_uuid())


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


# -- JVM map iteration orders ------------------------------------------------------------------


def _u32(value: int) -> int:
    return value & 0xFFFFFFFF


def _s32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _java_hash(text: str) -> int:
    """String.hashCode (over UTF-16 code units), as an unsigned 32-bit value."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def _spread(h: int) -> int:
    """h ^ (h >>> 16): the hash spreading of Scala's mutable.HashMap and Java's HashMap."""
    return h ^ (h >> 16)


@lru_cache(maxsize=256)
def _scala_mutable_order(keys: tuple[str, ...], table_size: int) -> tuple[str, ...]:
    """Iteration order of a Scala 2.13 mutable.HashMap after inserting `keys` in order.

    Buckets are visited in index order; inside a bucket nodes are kept sorted by their
    (signed) improved hash. The table doubles before an insert that would reach 3/4 full.
    """
    for size in range(len(keys)):  # `size` entries before each insert
        if size + 1 >= int(table_size * 0.75):
            table_size *= 2
    hashes = [_spread(_java_hash(k)) for k in keys]
    ranked = sorted(range(len(keys)),
                    key=lambda i: (hashes[i] & (table_size - 1), _s32(hashes[i]), i))
    return tuple(keys[i] for i in ranked)


def _scala_mutable_initial_table(known_size: int) -> int:
    """Table size of mutable.HashMap.from(elems) (mutable.Map(k -> v, ...)) for n elems."""
    if known_size <= 0:
        return 16
    capacity = int((known_size + 1) / 0.75)
    return 1 << max(capacity - 1, 4).bit_length()  # highestOneBit(max(c - 1, 4)) * 2


def _champ_improve(h: int) -> int:
    """scala.collection.Hashing.improve, used by the immutable HashMap (CHAMP)."""
    h = _u32(h + _u32(~(h << 9)))
    h ^= h >> 14
    h = _u32(h + (h << 4))
    return h ^ (h >> 10)


def _champ_order(keys: Sequence[str], shift: int = 0) -> list[str]:
    if shift >= 32:  # full hash collision: a collision node keeps insertion order
        return list(keys)
    groups: dict[int, list[str]] = {}
    for key in keys:
        groups.setdefault((_champ_improve(_java_hash(key)) >> shift) & 31, []).append(key)
    # A node iterates its own entries (by bit position) before its sub-nodes.
    order = [g[0] for _, g in sorted(groups.items()) if len(g) == 1]
    for _, group in sorted(groups.items()):
        if len(group) > 1:
            order.extend(_champ_order(group, shift + 5))
    return order


@lru_cache(maxsize=256)
def _scala_immutable_order(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Iteration order of a Scala 2.13 immutable Map built from `keys`: Map1..Map4 keep
    insertion order, five or more keys make a CHAMP HashMap."""
    unique = tuple(dict.fromkeys(keys))
    return unique if len(unique) <= 4 else tuple(_champ_order(unique))


def _java_hashmap_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a java.util.HashMap (default capacity) filled with `keys`."""
    table = 16
    for size in range(1, len(keys) + 1):  # resize once the size passes 3/4 of the table
        if size > table * 3 // 4:
            table *= 2
    ranked = sorted(range(len(keys)), key=lambda i: (_spread(_java_hash(keys[i])) & (table - 1), i))
    return [keys[i] for i in ranked]


def _java_properties_order(keys: Sequence[str]) -> list[str]:
    """Iteration order of a java.util.Properties (a ConcurrentHashMap of 16 bins inside).

    Bins are visited in index order, a bin lists its keys in insertion order, and a resize
    (at 3/4 full) moves each bin's last run of same-destination nodes as it is and prepends
    the others one by one, as ConcurrentHashMap.transfer does.
    """
    table: list[list[str]] = [[] for _ in range(16)]
    for count, key in enumerate(dict.fromkeys(keys), start=1):
        n = len(table)
        table[(_spread(_java_hash(key)) & 0x7FFFFFFF) & (n - 1)].append(key)
        if count >= n - (n >> 2):
            new: list[list[str]] = [[] for _ in range(2 * n)]
            for i, bin_keys in enumerate(table):
                if not bin_keys:
                    continue
                bits = [(_spread(_java_hash(k)) & 0x7FFFFFFF) & n for k in bin_keys]
                last_run = len(bits) - 1
                while last_run > 0 and bits[last_run - 1] == bits[-1]:
                    last_run -= 1
                low = bin_keys[last_run:] if bits[-1] == 0 else []
                high = bin_keys[last_run:] if bits[-1] != 0 else []
                for k, bit in zip(bin_keys[:last_run], bits[:last_run], strict=True):
                    (high if bit else low).insert(0, k)
                new[i], new[i + n] = low, high
            table = new
    return [k for bin_keys in table for k in bin_keys]


def _ordered(obj: Mapping[str, Any], order: Iterable[str]) -> dict[str, Any]:
    return {k: obj[k] for k in order if k in obj}


def _json_bytes(obj: Any) -> bytes:
    """Jackson's compact output: no spaces, non-ASCII written as UTF-8."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _parse(data: bytes | None) -> Any:
    """Json.parseBytes: None for a null or empty znode."""
    if not data:
        return None
    return json.loads(data.decode("utf-8"))


def _parse_object(data: bytes | None, what: str) -> dict[str, Any]:
    parsed = _parse(data)
    if not isinstance(parsed, dict):
        raise ValueError(f"{what}: expected a JSON object, got {data!r}")
    return parsed


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- /brokers/ids/<id> -------------------------------------------------------------------------

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
BROKER_REGISTRATION_VERSION = 5  # what a 3.9 broker (inter.broker.protocol.version >= 2.7) writes


class EndPoint(NamedTuple):
    """An advertised listener: Kafka's EndPoint (a plain tuple works wherever one is taken)."""

    listener_name: str
    host: str | None
    port: int
    security_protocol: str

    def connection_string(self) -> str:
        """EndPoint.connectionString: NAME://host:port, IPv6 hosts in brackets."""
        if self.host is None:
            return f"{self.listener_name}://:{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: Mapping[str, str] | None = None) -> EndPoint:
        """Parse NAME://host:port; the protocol comes from the map, else from the name."""
        name, sep, rest = text.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon:
            raise ValueError(f"unable to parse {text!r} to a broker endpoint")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        protocol = (protocol_map or {}).get(name)
        if protocol is None:
            # Registrations before v4 had no map: the listener name is the protocol name.
            protocol = name.upper() if name.upper() in SECURITY_PROTOCOLS else name
        return cls(name, host or None, int(port), protocol)


@dataclass
class BrokerRegistration:
    """The data of /brokers/ids/<id> (Kafka's BrokerInfo)."""

    id: int
    endpoints: list[EndPoint]
    rack: str | None = None
    jmx_port: int = -1
    # feature name -> {"min_version": n, "max_version": m}; a ZooKeeper-mode broker sends {}
    features: dict[str, dict[str, int]] = field(default_factory=dict)
    timestamp: int | None = None  # ms; None: the time of encoding, as Kafka does
    version: int = BROKER_REGISTRATION_VERSION
    epoch: int = field(default=-1, compare=False)  # czxid of the znode, when read from it

    def __post_init__(self) -> None:
        self.endpoints = [EndPoint(*e) for e in self.endpoints]

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)

    def encode(self) -> bytes:
        """BrokerIdZNode.encode. The top-level host and port are those of the first PLAINTEXT
        endpoint (for pre-0.9 clients), else null and -1."""
        plaintext = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        obj: dict[str, Any] = {
            "version": self.version,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "endpoints": [e.connection_string() for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp if self.timestamp is not None else _now_ms()),
        }
        if self.rack is not None and self.version >= 3:
            obj["rack"] = self.rack
        if self.version >= 4:
            names = [e.listener_name for e in self.endpoints]
            protocols = {e.listener_name: e.security_protocol for e in self.endpoints}
            obj["listener_security_protocol_map"] = _ordered(
                protocols, _scala_immutable_order(tuple(names))
            )
        if self.version >= 5:
            # Features.toMap is a java.util.HashMap; each range a LinkedHashMap (min, max).
            obj["features"] = {
                name: {k: self.features[name][k] for k in ("min_version", "max_version")
                       if k in self.features[name]}
                for name in _java_hashmap_order(list(self.features))
            }
        # mutable.Map(6 entries) starts with a 16-slot table; rack/map/features join it.
        keys = ("version", "host", "port", "endpoints", "jmx_port", "timestamp", "rack",
                "listener_security_protocol_map", "features")
        present = tuple(k for k in keys if k in obj)
        return _json_bytes(_ordered(obj, _scala_mutable_order(present, 16)))

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        """BrokerIdZNode.decode: versions 1 to 5."""
        obj = _parse_object(data, f"registration of broker {broker_id}")
        version = int(obj.get("version", 1))
        if version < 1:
            raise ValueError(f"unsupported version of broker registration: {data!r}")
        if version == 1 or "endpoints" not in obj:
            endpoints = [EndPoint("PLAINTEXT", obj.get("host"), int(obj["port"]), "PLAINTEXT")]
        else:
            protocol_map = obj.get("listener_security_protocol_map") or None
            endpoints = [EndPoint.parse(s, protocol_map) for s in obj["endpoints"]]
        features = {
            name: {k: int(v) for k, v in ranges.items()}
            for name, ranges in (obj.get("features") or {}).items()
        }
        timestamp = obj.get("timestamp")
        return cls(
            id=broker_id,
            endpoints=endpoints,
            rack=obj.get("rack"),
            jmx_port=int(obj.get("jmx_port", -1)),
            features=features,
            timestamp=int(timestamp) if timestamp not in (None, "") else None,
            version=version,
        )


# -- /brokers/topics/<t> -----------------------------------------------------------------------

TOPIC_ASSIGNMENT_VERSION = 3


def _replica_map(obj: Any) -> dict[int, list[int]]:
    if not isinstance(obj, dict):
        return {}
    return {int(p): [int(r) for r in replicas] for p, replicas in obj.items()}


@dataclass
class TopicAssignment:
    """The data of /brokers/topics/<t>: replicas per partition, the topic id, reassignments."""

    partitions: dict[int, list[int]]
    topic_id: uuid.UUID | None = None
    adding_replicas: dict[int, list[int]] = field(default_factory=dict)
    removing_replicas: dict[int, list[int]] = field(default_factory=dict)
    version: int = TOPIC_ASSIGNMENT_VERSION  # as read; encode always writes version 3
    zk_version: int = field(default=-1, compare=False)  # the znode's version when read

    def encode(self) -> bytes:
        """TopicZNode.encode. The three replica maps are Scala mutable.HashMaps (16 slots)."""

        def replica_json(m: Mapping[int, list[int]], non_empty: bool) -> dict[str, list[int]]:
            items = {str(p): list(r) for p, r in m.items() if r or not non_empty}
            return _ordered(items, _scala_mutable_order(tuple(items), 16))

        obj: dict[str, Any] = {
            "version": TOPIC_ASSIGNMENT_VERSION,
            "partitions": replica_json(self.partitions, False),
            "adding_replicas": replica_json(self.adding_replicas, True),
            "removing_replicas": replica_json(self.removing_replicas, True),
        }
        if self.topic_id is not None:
            obj["topic_id"] = uuid_to_str(self.topic_id)
        keys = ("version", "partitions", "adding_replicas", "removing_replicas", "topic_id")
        table = _scala_mutable_initial_table(4)  # built from 4 entries, then topic_id added
        order = _scala_mutable_order(tuple(k for k in keys if k in obj), table)
        return _json_bytes(_ordered(obj, order))

    @classmethod
    def decode(cls, data: bytes | None, zk_version: int = -1) -> TopicAssignment:
        """TopicZNode.decode: versions 1 and 2 have no topic_id; empty data, no partitions."""
        obj = _parse(data)
        if not isinstance(obj, dict):
            return cls({}, zk_version=zk_version, version=0)
        topic_id = obj.get("topic_id")
        return cls(
            partitions=_replica_map(obj.get("partitions")),
            topic_id=uuid_from_str(topic_id) if topic_id else None,
            adding_replicas=_replica_map(obj.get("adding_replicas")),
            removing_replicas=_replica_map(obj.get("removing_replicas")),
            version=int(obj.get("version", 1)),
            zk_version=zk_version,
        )


# -- /brokers/topics/<t>/partitions/<p>/state --------------------------------------------------

LEADER_RECOVERY_RECOVERED = 0
LEADER_RECOVERY_RECOVERING = 1
NO_LEADER = -1


@dataclass
class PartitionState:
    """LeaderIsrAndControllerEpoch: the data of a partition's state znode."""

    leader: int
    leader_epoch: int
    isr: list[int]
    controller_epoch: int
    leader_recovery_state: int = LEADER_RECOVERY_RECOVERED

    def encode(self) -> bytes:
        """TopicPartitionStateZNode.encode: an immutable Scala Map of 5 (or 6) entries;
        leader_recovery_state is written only when it is not RECOVERED."""
        obj: dict[str, Any] = {
            "version": 1,
            "leader": self.leader,
            "leader_epoch": self.leader_epoch,
            "controller_epoch": self.controller_epoch,
            "isr": list(self.isr),
        }
        if self.leader_recovery_state != LEADER_RECOVERY_RECOVERED:
            obj["leader_recovery_state"] = self.leader_recovery_state
        return _json_bytes(_ordered(obj, _scala_immutable_order(tuple(obj))))

    @classmethod
    def decode(cls, data: bytes) -> PartitionState:
        obj = _parse_object(data, "partition state")
        return cls(
            leader=int(obj["leader"]),
            leader_epoch=int(obj["leader_epoch"]),
            isr=[int(r) for r in obj["isr"]],
            controller_epoch=int(obj["controller_epoch"]),
            leader_recovery_state=int(obj.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED)),
        )


# -- /config/<type>/<name> and /config/changes -------------------------------------------------


def encode_entity_config(config: Mapping[str, str]) -> bytes:
    """ConfigEntityZNode.encode: {"version":1,"config":{...}} with the config in the order
    of the java.util.Properties Kafka fills from it."""
    props = {str(k): str(v) for k, v in config.items()}
    ordered = {k: props[k] for k in _java_properties_order(list(props))}
    return _json_bytes({"version": 1, "config": ordered})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    """ConfigEntityZNode.decode: {} for null/empty data or a missing config object."""
    obj = _parse(data)
    config = obj.get("config") if isinstance(obj, dict) else None
    if not isinstance(config, dict):
        return {}
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


class ConfigChangeNotification(NamedTuple):
    """One /config/changes child: its sequence name and the entity whose config changed."""

    seq_name: str
    entity_type: str
    entity_name: str


def encode_config_change(entity_path: str) -> bytes:
    """ConfigEntityChangeNotificationSequenceZNode.encode: version 2, "topics/foo" or
    "users/alice/clients/app" (sanitized names)."""
    return _json_bytes({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) of a change notification, version 1 or 2."""
    obj = _parse_object(data, "config change notification")
    version = int(obj.get("version", 1))
    if version == 1:
        return str(obj["entity_type"]), str(obj["entity_name"])
    if version == 2:
        entity_type, sep, name = str(obj["entity_path"]).partition("/")
        if not sep or not name:
            raise ValueError(f"invalid entity_path in config change notification: {data!r}")
        return entity_type, name
    raise ValueError(f"unsupported config change notification version {version}: {data!r}")


def sequence_number(name: str) -> int:
    """The number ZooKeeper appended to a sequential node name (config_change_0000000042)."""
    digits = name[-10:]
    return int(digits) if digits.isdigit() else -1


# -- /controller, /controller_epoch ------------------------------------------------------------

INITIAL_CONTROLLER_EPOCH = 1  # the first elected controller gets epoch 1 (the znode starts at 0)


def encode_controller(broker_id: int, timestamp_ms: int | None = None,
                      kraft_controller_epoch: int = -1) -> bytes:
    """ControllerZNode.encode of 3.9: version 2 with kraftControllerEpoch (-1 in ZK mode).
    A Scala Map4, so keys stay in insertion order."""
    ts = timestamp_ms if timestamp_ms is not None else _now_ms()
    return _json_bytes({"version": 2, "brokerid": broker_id, "timestamp": str(ts),
                        "kraftControllerEpoch": kraft_controller_epoch})


def decode_controller(data: bytes) -> int:
    """The controller's broker id (versions 1 and 2)."""
    return int(_parse_object(data, "controller")["brokerid"])


def decode_controller_kraft_epoch(data: bytes) -> int | None:
    """kraftControllerEpoch of a version-2 /controller (a migrating KRaft controller's)."""
    value = _parse_object(data, "controller").get("kraftControllerEpoch")
    return int(value) if value is not None else None


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode("ascii").strip())


# -- /cluster/id -------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    """ClusterIdZNode.toJson: the version is a string here."""
    return _json_bytes({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_parse_object(data, "cluster id")["id"])


# -- /latest_producer_id_block -----------------------------------------------------------------

PRODUCER_ID_BLOCK_SIZE = 1000  # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE
LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class ProducerIdBlock:
    """ProducerIdsBlock: producer ids [first, last] handed to one broker."""

    broker_id: int
    first: int
    size: int = PRODUCER_ID_BLOCK_SIZE

    @property
    def last(self) -> int:
        return self.first + self.size - 1

    @property
    def next_block_first(self) -> int:
        return self.first + self.size

    def encode(self) -> bytes:
        """ProducerIdBlockZNode.generateProducerIdBlockJson (a Scala Map4)."""
        return _json_bytes({"version": 1, "broker": self.broker_id,
                            "block_start": str(self.first), "block_end": str(self.last)})

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        obj = _parse_object(data, "producer id block")
        first, last = int(obj["block_start"]), int(obj["block_end"])
        return cls(int(obj["broker"]), first, last - first + 1)


# -- notifications and admin znodes ------------------------------------------------------------


def encode_isr_change(partitions: Iterable[tuple[str, int]]) -> bytes:
    """IsrChangeNotificationSequenceZNode.encode (version 1)."""
    return _json_bytes({"version": 1, "partitions": [
        {"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change(data: bytes | None) -> set[tuple[str, int]]:
    obj = _parse(data)
    if not isinstance(obj, dict):
        return set()
    return {(str(e["topic"]), int(e["partition"])) for e in obj.get("partitions", [])}


LOG_DIR_FAILURE_EVENT = 1


def encode_log_dir_event(broker_id: int) -> bytes:
    """LogDirEventNotificationSequenceZNode.encode: a log dir of `broker_id` failed."""
    return _json_bytes({"version": 1, "broker": broker_id, "event": LOG_DIR_FAILURE_EVENT})


def decode_log_dir_event(data: bytes) -> int:
    return int(_parse_object(data, "log dir event")["broker"])


def encode_preferred_replica_election(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _json_bytes({"version": 1, "partitions": [
        {"topic": t, "partition": p} for t, p in partitions]})


def decode_preferred_replica_election(data: bytes | None) -> set[tuple[str, int]]:
    return decode_isr_change(data)


def encode_reassignment(reassignment: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    """ReassignPartitionsZNode.encode (the legacy, pre-2.4 way of starting a reassignment)."""
    return _json_bytes({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in reassignment.items()]})


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    obj = _parse_object(data, "partition reassignment")
    return {(str(e["topic"]), int(e["partition"])): [int(r) for r in e["replicas"]]
            for e in obj.get("partitions", [])}
