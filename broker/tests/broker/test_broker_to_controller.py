"""AlterPartition and AllocateProducerIds on the wire, as a Kafka broker at IBP 3.9 sends
them to a Moldau controller: one real broker process (the controller) and a second broker
that is only a registration in ZooKeeper, made by the test, which speaks for it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.errors import (
    BrokerIdNotRegisteredError,
    InvalidUpdateVersionError,
    StaleBrokerEpochError,
    UnknownTopicIdError,
)
from moldau.protocol.generated.allocate_producer_ids_request import AllocateProducerIdsRequest
from moldau.protocol.generated.alter_partition_request import AlterPartitionRequest
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest

from .raw import connect, wait_until

KAFKA_BROKER = 2  # the registration the test speaks for

AP = AlterPartitionRequest


@pytest.fixture(scope="module")
def zk(broker: BrokerProcess) -> Iterator[KafkaZkClient]:
    """A session on the broker's chroot holding broker 2's registration (its endpoint a
    closed port: the real broker's fetches from it just fail)."""
    hosts, chroot = broker.zookeeper_connect.split("/", 1)
    client = KafkaZkClient(hosts, "/" + chroot)
    client.start()
    client.register_broker(zd.BrokerRegistration(
        KAFKA_BROKER, [("PLAINTEXT", "127.0.0.1", free_port(), "PLAINTEXT")]))
    yield client
    client.close()


def broker_epoch(zk: KafkaZkClient, broker_id: int = KAFKA_BROKER) -> int:
    registration = zk.get_broker(broker_id)
    assert registration is not None
    return registration.epoch


def test_api_versions_advertise_both_as_kafka_does(broker: BrokerProcess) -> None:
    with connect(broker) as conn:
        response = conn.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert versions[ApiKey.ALTER_PARTITION] == (0, 3)
    assert versions[ApiKey.ALLOCATE_PRODUCER_IDS] == (0, 0)


def test_a_leaders_isr_changes(broker: BrokerProcess, zk: KafkaZkClient) -> None:
    topic = f"alter-{uuid.uuid4().hex[:8]}"
    topic_id = zd.random_uuid()
    zk.create_topic(topic, topic_id, {0: [KAFKA_BROKER, broker.broker_id]}, {})
    state, version = wait_until(lambda: zk.get_partition_state(topic, 0))
    assert (state.leader, state.isr) == (KAFKA_BROKER, [KAFKA_BROKER, broker.broker_id])
    epoch = broker_epoch(zk)
    with connect(broker) as conn:
        # v3, by topic id, with broker epochs: the follower leaves the ISR
        shrink = AP(broker_id=KAFKA_BROKER, broker_epoch=epoch, topics=[AP.TopicData(
            topic_id=topic_id, partitions=[AP.PartitionData(
                partition_index=0, leader_epoch=state.leader_epoch, partition_epoch=version,
                new_isr_with_epochs=[AP.BrokerState(broker_id=KAFKA_BROKER,
                                                    broker_epoch=epoch)])])])
        response = conn.request(ApiKey.ALTER_PARTITION, 3, shrink)
        assert response.error_code == 0
        (answered,) = response.topics
        assert answered.topic_id == topic_id
        (p,) = answered.partitions
        assert (p.error_code, p.leader_id, p.leader_epoch, p.isr, p.partition_epoch) == (
            0, KAFKA_BROKER, state.leader_epoch, [KAFKA_BROKER], version + 1)
        assert zk.get_partition_state(topic, 0)[0].isr == [KAFKA_BROKER]  # type: ignore[index]
        # v0, by name, from the old partition epoch: refused, nothing written
        stale = AP(broker_id=KAFKA_BROKER, broker_epoch=epoch, topics=[AP.TopicData(
            topic_name=topic, partitions=[AP.PartitionData(
                partition_index=0, leader_epoch=state.leader_epoch, partition_epoch=version,
                new_isr=[KAFKA_BROKER, broker.broker_id])])])
        response = conn.request(ApiKey.ALTER_PARTITION, 0, stale)
        (answered,) = response.topics
        assert answered.topic_name == topic
        assert answered.partitions[0].error_code == InvalidUpdateVersionError.code
        # from the new one: the follower is back
        stale.topics[0].partitions[0].partition_epoch = version + 1
        response = conn.request(ApiKey.ALTER_PARTITION, 0, stale)
        p = response.topics[0].partitions[0]
        assert (p.error_code, p.isr, p.partition_epoch) == (
            0, [KAFKA_BROKER, broker.broker_id], version + 2)
        # an unknown topic id, and a stale broker epoch for the whole request
        unknown = zd.random_uuid()
        response = conn.request(ApiKey.ALTER_PARTITION, 2, AP(
            broker_id=KAFKA_BROKER, broker_epoch=epoch, topics=[AP.TopicData(
                topic_id=unknown, partitions=[AP.PartitionData(partition_index=0)])]))
        assert response.topics[0].topic_id == unknown
        assert response.topics[0].partitions[0].error_code == UnknownTopicIdError.code
        response = conn.request(ApiKey.ALTER_PARTITION, 2, AP(
            broker_id=KAFKA_BROKER, broker_epoch=epoch - 1, topics=[]))
        assert response.error_code == StaleBrokerEpochError.code


def test_producer_id_blocks(broker: BrokerProcess, zk: KafkaZkClient) -> None:
    with connect(broker) as conn:
        def allocate(broker_id: int, epoch: int):  # type: ignore[no-untyped-def]
            return conn.request(ApiKey.ALLOCATE_PRODUCER_IDS, 0, AllocateProducerIdsRequest(
                broker_id=broker_id, broker_epoch=epoch))

        first = allocate(KAFKA_BROKER, broker_epoch(zk))
        second = allocate(KAFKA_BROKER, broker_epoch(zk))
        assert (first.error_code, first.producer_id_len) == (0, 1000)
        assert second.producer_id_start == first.producer_id_start + 1000
        block = zk.get(zd.PRODUCER_ID_BLOCK_PATH)
        assert block is not None
        recorded = zd.ProducerIdBlock.decode(block[0])
        assert (recorded.broker_id, recorded.first) == (KAFKA_BROKER, second.producer_id_start)
        assert allocate(KAFKA_BROKER, broker_epoch(zk) + 1).error_code == (
            StaleBrokerEpochError.code)
        assert allocate(7, 1).error_code == BrokerIdNotRegisteredError.code
