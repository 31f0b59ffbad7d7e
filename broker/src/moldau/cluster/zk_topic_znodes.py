"""/brokers/topics/<t> (the replica assignment, topic id and ongoing reassignment of a
topic) and /brokers/topics/<t>/partitions/<p>/state (leader, epoch and ISR)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .zk_cluster_znodes import uuid_from_str, uuid_to_str
from .zk_json import (
    json_bytes,
    ordered,
    parse_json,
    parse_object,
    scala_immutable_order,
    scala_mutable_initial_table,
    scala_mutable_order,
)

# -- /brokers/topics/<t> -----------------------------------------------------------------------

TOPIC_ASSIGNMENT_VERSION = 3


def _replica_map(obj: object) -> dict[int, list[int]]:
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
            return ordered(items, scala_mutable_order(tuple(items), 16))

        obj: dict[str, Any] = {
            "version": TOPIC_ASSIGNMENT_VERSION,
            "partitions": replica_json(self.partitions, False),
            "adding_replicas": replica_json(self.adding_replicas, True),
            "removing_replicas": replica_json(self.removing_replicas, True),
        }
        if self.topic_id is not None:
            obj["topic_id"] = uuid_to_str(self.topic_id)
        keys = ("version", "partitions", "adding_replicas", "removing_replicas", "topic_id")
        table = scala_mutable_initial_table(4)  # built from 4 entries, then topic_id added
        order = scala_mutable_order(tuple(k for k in keys if k in obj), table)
        return json_bytes(ordered(obj, order))

    @classmethod
    def decode(cls, data: bytes | None, zk_version: int = -1) -> TopicAssignment:
        """TopicZNode.decode: versions 1 and 2 have no topic_id; empty data, no partitions."""
        obj = parse_json(data)
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
        return json_bytes(ordered(obj, scala_immutable_order(tuple(obj))))

    @classmethod
    def decode(cls, data: bytes) -> PartitionState:
        obj = parse_object(data, "partition state")
        return cls(
            leader=int(obj["leader"]),
            leader_epoch=int(obj["leader_epoch"]),
            isr=[int(r) for r in obj["isr"]],
            controller_epoch=int(obj["controller_epoch"]),
            leader_recovery_state=int(obj.get("leader_recovery_state", LEADER_RECOVERY_RECOVERED)),
        )
