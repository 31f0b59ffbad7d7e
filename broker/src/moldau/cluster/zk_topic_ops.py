"""KafkaZkClient's operations on topics and partitions: creation (AdminZkClient), the
replica assignment, deletion marks and the controller's last deletion step, and the
partition state znodes (conditional on the controller epoch when the controller writes).

Each function is a method of KafkaZkClient, which binds it in its class body (zk_client.py);
it takes the ZkSession it runs on and uses its generic operations (zk_session.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_data import PartitionState, TopicAssignment
from moldau.cluster.zk_errors import (
    ControllerMovedError,
    ZkBadVersionError,
    ZkNoNodeError,
    check_multi_results,
)
from moldau.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

if TYPE_CHECKING:
    from moldau.cluster.zk_session import ZkSession


def topic_exists(self: ZkSession, topic: str) -> bool:
    return self.exists(zd.topic_path(topic))


def create_topic(
    self: ZkSession,
    topic: str,
    topic_id: uuid.UUID | None,
    assignment: Mapping[int, list[int]],
    config: Mapping[str, str] | None = None,
) -> None:
    """AdminZkClient.createTopicWithAssignment: the config znode first (so a broker that
    sees the topic also sees its overrides), then the assignment."""
    if topic_exists(self, topic):
        raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.")
    if self.exists(zd.delete_topic_path(topic)):
        raise TopicAlreadyExistsError(f"Topic '{topic}' is marked for deletion.")
    self._set_or_create(zd.config_entity_path(zd.ConfigType.TOPIC, topic),
                        zd.encode_entity_config(config or {}))
    data = TopicAssignment({int(p): list(r) for p, r in assignment.items()}, topic_id).encode()
    try:
        self._call(self._client().create, zd.topic_path(topic), data, makepath=True)
    except NodeExistsError:
        raise TopicAlreadyExistsError(f"Topic '{topic}' already exists.") from None


def get_topic_assignment(self: ZkSession, topic: str) -> TopicAssignment | None:
    found = self.get(zd.topic_path(topic))
    if found is None:
        return None
    return TopicAssignment.decode(found[0], zk_version=found[1].version)


def get_topic_assignments(self: ZkSession, topics: Iterable[str]) -> dict[str, TopicAssignment]:
    """Pipelined get_topic_assignment; missing topics are left out."""
    names = list(topics)
    found = self._get_many([zd.topic_path(t) for t in names])
    return {t: TopicAssignment.decode(f[0], zk_version=f[1].version)
            for t, f in zip(names, found, strict=True) if f}


def set_topic_assignment(self: ZkSession, topic: str, assignment: TopicAssignment,
                         expected_version: int = -1) -> int:
    """Rewrite /brokers/topics/<t> (CreatePartitions, reassignment); conditional on
    `expected_version` (-1: any). Returns the new znode version."""
    try:
        stat = self._call(self._client().set, zd.topic_path(topic), assignment.encode(),
                          expected_version)
    except BadVersionError:
        raise ZkBadVersionError(
            f"topic {topic} assignment changed concurrently (expected version"
            f" {expected_version})") from None
    except NoNodeError:
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.") from None
    return stat.version


def set_partition_reassignment(
        self: ZkSession, reassignment: Mapping[tuple[str, int], Sequence[int]]) -> None:
    """Write /admin/reassign_partitions (the legacy way to ask for a reassignment,
    which the controller rewrites as partitions complete)."""
    self._set_or_create(zd.REASSIGN_PARTITIONS_PATH, zd.encode_reassignment(reassignment))


def get_all_topics(self: ZkSession) -> list[str]:
    return self.get_children(zd.TOPICS_PATH)


def get_topics_marked_for_deletion(self: ZkSession) -> list[str]:
    return self.get_children(zd.DELETE_TOPICS_PATH)


def mark_topic_for_deletion(self: ZkSession, topic: str) -> bool:
    """AdminZkClient.deleteTopic: create /admin/delete_topics/<t> for the controller.
    False when it was already marked; UnknownTopicOrPartitionError when no such topic."""
    if not topic_exists(self, topic):
        raise UnknownTopicOrPartitionError(f"Topic `{topic}` to delete does not exist")
    return self._create_if_missing(zd.delete_topic_path(topic))


def delete_topic_znodes(self: ZkSession, topic: str) -> None:
    """The controller's last deletion step: the topic (with its partition states), its
    config and its deletion marker, in Kafka's order."""
    self.delete_recursive(zd.topic_path(topic))
    self.delete_recursive(zd.config_entity_path(zd.ConfigType.TOPIC, topic))
    self.delete_recursive(zd.delete_topic_path(topic))


# -- partition state -----------------------------------------------------------------------


def create_partition_states(
    self: ZkSession,
    topic: str,
    states: Mapping[int, PartitionState],
    expected_controller_epoch_zk_version: int | None = None,
) -> None:
    """Create partitions/<p> and partitions/<p>/state for new partitions, atomically (one
    multi-op). Raises ZkNodeExistsError when a state already exists, ControllerMovedError
    when /controller_epoch moved (if an expected version is given)."""
    zk = self._client()
    self._create_if_missing(zd.topic_partitions_path(topic))

    def commit() -> list[Any]:  # Any: kazoo's untyped per-op results
        txn = zk.transaction()
        if expected_controller_epoch_zk_version is not None:
            txn.check(zd.CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version)
        for p, state in states.items():
            if not zk.exists(zd.partition_path(topic, p)):
                txn.create(zd.partition_path(topic, p), b"")
            txn.create(zd.partition_state_path(topic, p), state.encode())
        return txn.commit()

    check_multi_results(self._call(commit), f"partition states of {topic}")


def get_partition_state(self: ZkSession, topic: str,
                        partition: int) -> tuple[PartitionState, int] | None:
    """(state, znode version), or None when the partition has no state znode."""
    found = self.get(zd.partition_state_path(topic, partition))
    if found is None or not found[0]:
        return None
    return PartitionState.decode(found[0]), found[1].version


def get_partition_states(self: ZkSession, topic: str) -> dict[int, tuple[PartitionState, int]]:
    """Every partition state of a topic (pipelined)."""
    parts = sorted(int(p) for p in self.get_children(zd.topic_partitions_path(topic))
                   if p.isdigit())
    found = self._get_many([zd.partition_state_path(topic, p) for p in parts])
    return {p: (PartitionState.decode(f[0]), f[1].version)
            for p, f in zip(parts, found, strict=True) if f and f[0]}


def update_partition_state(
    self: ZkSession,
    topic: str,
    partition: int,
    state: PartitionState,
    expected_version: int,
    expected_controller_epoch_zk_version: int | None = None,
) -> int:
    """Conditional write of a partition state (the controller, and the leader shrinking
    or expanding its ISR). Returns the new version; ZkBadVersionError on conflict."""
    zk = self._client()
    path = zd.partition_state_path(topic, partition)
    if expected_controller_epoch_zk_version is None:
        try:
            return self._call(zk.set, path, state.encode(), expected_version).version
        except BadVersionError:
            raise ZkBadVersionError(
                f"{topic}-{partition} state changed concurrently (expected version"
                f" {expected_version})") from None
        except NoNodeError:
            raise ZkNoNodeError(f"{topic}-{partition} has no state znode") from None

    def commit() -> list[Any]:  # Any: kazoo's untyped per-op results
        txn = zk.transaction()
        txn.check(zd.CONTROLLER_EPOCH_PATH, expected_controller_epoch_zk_version)
        txn.set_data(path, state.encode(), expected_version)
        return txn.commit()

    results = self._call(commit)
    check, result = results[0], results[1]
    if isinstance(check, BadVersionError):
        raise ControllerMovedError(f"{topic}-{partition}: the controller epoch moved")
    if isinstance(result, BadVersionError):
        raise ZkBadVersionError(f"{topic}-{partition} state changed concurrently")
    check_multi_results(results, f"{topic}-{partition} state")
    return result.version
