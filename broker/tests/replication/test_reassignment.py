"""Partition reassignment with a real client (kafka-python's admin client speaks
AlterPartitionReassignments and ListPartitionReassignments): a partition moves to other
brokers under acks=all load with nothing lost and byte-identical replicas, the legacy
/admin/reassign_partitions znode raises a replication factor from 1 to 3, and bad
requests get Kafka's errors without changing anything."""

from __future__ import annotations

import filecmp
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import NewTopic
from kafka import KafkaAdminClient, TopicPartition
from kafka import errors as kafka_errors

from moldau.checker.consumer import verify
from moldau.checker.producer import ProducerRun
from moldau.cluster import zk_data

from .conftest import Cluster


@pytest.fixture
def admin(cluster: Cluster) -> Iterator[Any]:
    cluster.ensure_all_running()
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30000)
    try:
        yield client
    finally:
        client.close()


def create_placed(cluster: Cluster, prefix: str, replicas: list[int], **config: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = cluster.admin()
    admin.create_topics([NewTopic(name, 1, replica_assignment=[replicas],
                                  config=config)])[name].result(30)
    cluster.wait_for(lambda: sorted(cluster.partitions(name)[0].isrs) == sorted(replicas), 30,
                     f"{name} with a full ISR")
    return name


def settled(cluster: Cluster, admin: Any, topic: str, replicas: list[int]) -> bool:
    """The move is over: no reassignment listed, the metadata shows the target replicas
    all in sync."""
    partition = cluster.partitions(topic)[0]
    return (not admin.list_partition_reassignments([TopicPartition(topic, 0)])
            and partition.replicas == replicas and sorted(partition.isrs) == sorted(replicas))


def partition_dir(cluster: Cluster, broker_id: int, topic: str) -> str:
    return os.path.join(cluster.brokers[broker_id].data_dir, f"{topic}-0")


def test_a_partition_moves_to_other_brokers_under_load(cluster: Cluster, admin: Any) -> None:
    topic = create_placed(cluster, "move", [1, 2])
    run = ProducerRun(cluster.bootstrap, topic, rate=300).start()
    try:
        cluster.wait_for(lambda: run.acknowledged > 300, 20, "writes before the move")
        tp = TopicPartition(topic, 0)
        assert admin.alter_partition_reassignments({tp: [3, 2]}) == {tp: None}
        cluster.wait_for(lambda: settled(cluster, admin, topic, [3, 2]), 60,
                         "the partition on brokers 3 and 2")
        assert cluster.partitions(topic)[0].leader in (2, 3)  # broker 1 led; it left
        before = run.acknowledged
        cluster.wait_for(lambda: run.acknowledged > before + 300, 20, "writes after the move")
    finally:
        report = verify(run)
    assert report.ok, report.summary()
    assert report.acknowledged > 600, report.summary()
    # the removed replica's log is gone; the new one is a byte-for-byte copy
    cluster.wait_for(lambda: not os.path.exists(partition_dir(cluster, 1, topic)), 20,
                     "broker 1's replica deleted")
    segment = "00000000000000000000.log"
    cluster.wait_for(lambda: filecmp.cmp(os.path.join(partition_dir(cluster, 2, topic), segment),
                                         os.path.join(partition_dir(cluster, 3, topic), segment),
                                         shallow=False), 20, "identical segments on 2 and 3")


def test_the_legacy_znode_raises_the_replication_factor(cluster: Cluster, admin: Any) -> None:
    """The course's lab 5b: a topic of replication factor 1 gets three replicas."""
    topic = create_placed(cluster, "raise-rf", [1])
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(100):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(20) == 0
    with cluster.zookeeper() as zk:
        zk.set_partition_reassignment({(topic, 0): [1, 2, 3]})
        cluster.wait_for(lambda: settled(cluster, admin, topic, [1, 2, 3]), 60,
                         "three replicas in sync")
        cluster.wait_for(lambda: not zk.exists(zk_data.REASSIGN_PARTITIONS_PATH), 20,
                         "the controller deleting the znode")
    # every record is on the new replicas: read them from broker 3 alone once it leads
    cluster.brokers[1].stop()
    cluster.brokers[2].stop()
    try:
        consumer = Consumer({"bootstrap.servers": cluster.brokers[3].bootstrap,
                             "group.id": f"g-{topic}", "enable.auto.commit": False})
        consumer.assign([ConfluentPartition(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 100 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
        consumer.close()
        assert values == [b"v%d" % i for i in range(100)]
    finally:
        cluster.ensure_all_running()


def test_bad_reassignments_get_kafkas_errors_and_change_nothing(cluster: Cluster,
                                                                 admin: Any) -> None:
    topic = create_placed(cluster, "bad-move", [1, 2])
    tp = TopicPartition(topic, 0)
    results = admin.alter_partition_reassignments({
        tp: [2, 2],  # duplicates
        TopicPartition(topic, 7): [1, 2],  # no such partition
        TopicPartition(f"{topic}-missing", 0): [1],
    })
    assert results == {tp: kafka_errors.InvalidReplicationAssignmentError,
                       TopicPartition(topic, 7): kafka_errors.UnknownTopicOrPartitionError,
                       TopicPartition(f"{topic}-missing", 0):
                           kafka_errors.UnknownTopicOrPartitionError}
    assert admin.alter_partition_reassignments({tp: [1, 9]}) == {  # broker 9 is not alive
        tp: kafka_errors.InvalidReplicationAssignmentError}
    assert admin.alter_partition_reassignments({tp: None}) == {  # nothing to cancel
        tp: kafka_errors.NoReassignmentInProgressError}
    assert admin.list_partition_reassignments() == {}
    partition = cluster.partitions(topic)[0]
    assert (partition.replicas, sorted(partition.isrs)) == ([1, 2], [1, 2])


def test_only_the_controller_reassigns(cluster: Cluster) -> None:
    from moldau.client.blocking import BlockingConnection
    from moldau.protocol.generated.alter_partition_reassignments_request import (
        AlterPartitionReassignmentsRequest as Request,
    )
    from moldau.protocol.generated.list_partition_reassignments_request import (
        ListPartitionReassignmentsRequest,
    )

    cluster.ensure_all_running()
    with cluster.zookeeper() as zk:
        controller = zk.get_controller_id()
    other = next(b for b in cluster.brokers.values() if b.broker_id != controller)
    request = Request(topics=[Request.ReassignableTopic(name="anything", partitions=[
        Request.ReassignablePartition(partition_index=0, replicas=[1])])])
    with BlockingConnection("127.0.0.1", other.port) as conn:
        altered = conn.request(45, 0, request)
        listed = conn.request(46, 0, ListPartitionReassignmentsRequest())
    assert (altered.error_code, altered.responses) == (41, [])  # NOT_CONTROLLER
    assert (listed.error_code, listed.topics) == (41, [])


def log_bytes(cluster: Cluster, broker_id: int, topic: str) -> int:
    directory = partition_dir(cluster, broker_id, topic)
    try:
        return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)
                   if f.endswith(".log"))
    except FileNotFoundError:
        return 0


def set_broker_config(cluster: Cluster, broker_id: int, name: str, value: str | None) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    from confluent_kafka.admin import ResourceType as Type

    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(Type.BROKER, str(broker_id), incremental_configs=[
        ConfigEntry(name, value, incremental_operation=op)])
    admin = cluster.admin()
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def test_a_throttled_reassignment_holds_its_rate_and_can_be_cancelled(
        cluster: Cluster, admin: Any) -> None:
    rate = 200_000  # bytes per second for the new replica's fetches
    topic = create_placed(cluster, "throttled", [1], **{
        "follower.replication.throttled.replicas": "0:2"})
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1",
                         "batch.size": 16384, "linger.ms": 5})
    for i in range(9000):  # 9 MB: more than the throttle lets through during the test
        producer.produce(topic, value=os.urandom(1000), partition=0)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    set_broker_config(cluster, 2, "follower.replication.throttled.rate", str(rate))
    tp = TopicPartition(topic, 0)
    try:
        assert admin.alter_partition_reassignments({tp: [1, 2]}) == {tp: None}
        listed = admin.list_partition_reassignments([tp])
        assert listed[tp]["replicas"] == [1, 2] and listed[tp]["adding_replicas"] == [2]
        cluster.wait_for(lambda: log_bytes(cluster, 2, topic) > 0, 20,
                         "the new replica fetching")
        start_bytes, start = log_bytes(cluster, 2, topic), time.monotonic()
        time.sleep(30)
        copied = log_bytes(cluster, 2, topic) - start_bytes
        elapsed = time.monotonic() - start
        print(f"\nthrottled follower: {copied} bytes in {elapsed:.1f}s = "
              f"{copied / elapsed:.0f} B/s against a limit of {rate} B/s")
        assert copied <= 1.1 * rate * elapsed, copied
        assert copied >= 0.3 * rate * elapsed, copied  # throttled, not stopped
        # still moving: cancel it; the partition is back on broker 1 alone
        assert admin.list_partition_reassignments([tp])[tp]["adding_replicas"] == [2]
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
        cluster.wait_for(lambda: settled(cluster, admin, topic, [1]), 30,
                         "the reassignment cancelled")
        cluster.wait_for(lambda: not os.path.exists(partition_dir(cluster, 2, topic)), 20,
                         "broker 2's partial replica deleted")
    finally:
        set_broker_config(cluster, 2, "follower.replication.throttled.rate", None)
