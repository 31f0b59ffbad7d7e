"""A partition directory of another topic of the same name is never taken over: a topic
created after a ZooKeeper backup that was then restored, or deleted while this broker was
away, leaves a directory whose partition.metadata names another topic id. When the name
is created again, Kafka answers the controller's LeaderAndIsr with INCONSISTENT_TOPIC_ID
for that partition and keeps the old records out of the new topic; so does Moldau."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from moldau.errors import InconsistentTopicIdError
from moldau.protocol.records import build_batch
from moldau.replication.replica_manager import LeaderAndIsr, ReplicaManager
from moldau.storage import checkpoints
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager, ManagerConfig

BROKER_ID = 1


def manager_over(log_dir: Path) -> LogManager:
    return LogManager(ManagerConfig([str(log_dir)], BROKER_ID, "cluster"), LogConfig())


def leader_state(epoch: int = 0) -> LeaderAndIsr:
    return LeaderAndIsr(BROKER_ID, epoch, [BROKER_ID], [BROKER_ID])


def write_old_topic(log_dir: Path, old_id: uuid.UUID) -> None:
    """The stray: three records of the topic's earlier life, then a clean shutdown."""
    manager = manager_over(log_dir)
    replicas = ReplicaManager(BROKER_ID, manager)
    partition = replicas.become_leader_or_follower("orders", 0, old_id, leader_state())
    partition.log.append_as_leader(
        build_batch([(b"k", b"old-1"), (b"k", b"old-2"), (b"k", b"old-3")]), 0)
    manager.shutdown()


def test_a_stray_directory_of_another_topic_id_is_refused_and_kept(tmp_path: Path) -> None:
    old_id, new_id = uuid.uuid4(), uuid.uuid4()
    write_old_topic(tmp_path, old_id)

    manager = manager_over(tmp_path)  # the restart loads the stray with the rest
    try:
        replicas = ReplicaManager(BROKER_ID, manager)
        with pytest.raises(InconsistentTopicIdError) as refused:
            replicas.become_leader_or_follower("orders", 0, new_id, leader_state(1))
        assert str(refused.value) == (
            f"Topic ID in memory: {checkpoints.kafka_uuid_to_str(old_id)} does not match "
            f"the topic ID for partition orders-0 received: "
            f"{checkpoints.kafka_uuid_to_str(new_id)}.")
        assert refused.value.code == 103
        # nothing hosted, nothing rewritten: the old records stay where they were
        assert replicas.get_partition("orders", 0) is None
        stray = manager.get_log("orders", 0)
        assert stray is not None and stray.log_end_offset == 3
        assert checkpoints.read_partition_metadata(
            os.path.join(stray.directory, checkpoints.PARTITION_METADATA)).topic_id == old_id
        # the broker's other partitions are unaffected
        other = replicas.become_leader_or_follower("payments", 0, uuid.uuid4(), leader_state())
        assert other.is_leader
        # and the directory's own topic id still leads it
        same = replicas.become_leader_or_follower("orders", 0, old_id, leader_state(1))
        assert same.is_leader and same.log.log_end_offset == 3
    finally:
        manager.shutdown()


def test_a_hosted_partition_named_with_another_topic_id_keeps_its_state(
        tmp_path: Path) -> None:
    old_id = uuid.uuid4()
    manager = manager_over(tmp_path)
    try:
        replicas = ReplicaManager(BROKER_ID, manager)
        hosted = replicas.become_leader_or_follower("orders", 0, old_id, leader_state())
        with pytest.raises(InconsistentTopicIdError):
            replicas.become_leader_or_follower("orders", 0, uuid.uuid4(), leader_state(5))
        assert replicas.get_partition("orders", 0) is hosted
        assert hosted.state.leader_epoch == 0 and hosted.log.topic_id == old_id
    finally:
        manager.shutdown()


def test_a_log_from_before_topic_ids_takes_the_controllers(tmp_path: Path) -> None:
    write_old_topic(tmp_path, uuid.uuid4())
    metadata = tmp_path / "orders-0" / checkpoints.PARTITION_METADATA
    metadata.unlink()  # as a log written by a broker older than Kafka 2.8
    topic_id = uuid.uuid4()
    manager = manager_over(tmp_path)
    try:
        replicas = ReplicaManager(BROKER_ID, manager)
        partition = replicas.become_leader_or_follower("orders", 0, topic_id, leader_state(1))
        assert partition.log.log_end_offset == 3
        assert checkpoints.read_partition_metadata(str(metadata)).topic_id == topic_id
    finally:
        manager.shutdown()
