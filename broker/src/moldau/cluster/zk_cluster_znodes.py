"""Kafka's Uuid as ZooKeeper holds it, /cluster/id, and /latest_producer_id_block (the
producer ids handed out to brokers, a block at a time)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from moldau.storage.checkpoints import kafka_uuid_from_str, kafka_uuid_to_str

from .zk_json import json_bytes, parse_object

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


# -- /cluster/id -------------------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    """ClusterIdZNode.toJson: the version is a string here."""
    return json_bytes({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(parse_object(data, "cluster id")["id"])


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
        return json_bytes({"version": 1, "broker": self.broker_id,
                            "block_start": str(self.first), "block_end": str(self.last)})

    @classmethod
    def decode(cls, data: bytes) -> ProducerIdBlock:
        obj = parse_object(data, "producer id block")
        first, last = int(obj["block_start"]), int(obj["block_end"])
        return cls(int(obj["broker"]), first, last - first + 1)
