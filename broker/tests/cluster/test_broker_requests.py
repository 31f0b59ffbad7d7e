"""The controller's AlterPartition and AllocateProducerIds (cluster/broker_requests.py) with
Kafka's KafkaController rules, on a real ZooKeeper ensemble (zk_fixtures.py): the brokers
are only registrations, and what the controller tells them is recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from moldau.cluster import zk_data as zd
from moldau.cluster.broker_requests import IsrChange
from moldau.cluster.controller import Controller, PartitionDecision
from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_data import BrokerRegistration
from moldau.errors import (
    BrokerIdNotRegisteredError,
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidRequestError,
    InvalidUpdateVersionError,
    KafkaError,
    NotControllerError,
    NotLeaderOrFollowerError,
    OperationNotAttemptedError,
    StaleBrokerEpochError,
    UnknownTopicOrPartitionError,
)

from .recording_channel import RecordingChannel, until

Scenario = Callable[[Controller, RecordingChannel, KafkaZkClient], Awaitable[None]]


def run_with_controller(zk_client: KafkaZkClient, scenario: Scenario) -> None:
    """Brokers 1, 2 and 3 registered, topic t with partition 0 on [2, 1, 3] (broker 2
    leads, every replica in the ISR); broker 1 is the controller."""
    for broker_id in (1, 2, 3):
        zk_client.register_broker(BrokerRegistration(
            broker_id, [("PLAINTEXT", "localhost", 9090 + broker_id, "PLAINTEXT")]))
    zk_client.create_topic("t", zd.random_uuid(), {0: [2, 1, 3]}, {})

    async def main() -> None:
        channel = RecordingChannel()
        controller = Controller(1, AsyncZk(zk_client), channel)
        await controller.start()
        try:
            await until(lambda: zk_client.get_partition_state("t", 0) is not None
                        and "t" in controller.topics)
            await scenario(controller, channel, zk_client)
        finally:
            await controller.stop()

    asyncio.run(main())


def epoch(zk_client: KafkaZkClient, broker_id: int) -> int:
    registration = zk_client.get_broker(broker_id)
    assert registration is not None
    return registration.epoch


def change(zk_client: KafkaZkClient, isr: list[int], **fields: object) -> IsrChange:
    """An ISR change for t-0 at the epochs ZooKeeper holds (unless `fields` say else)."""
    found = zk_client.get_partition_state("t", 0)
    assert found is not None
    state, version = found
    values: dict[str, object] = {"leader_epoch": state.leader_epoch, "partition_epoch": version}
    values.update(fields)
    return IsrChange("t", 0, isr=isr, **values)  # type: ignore[arg-type]


async def alter(controller: Controller, zk_client: KafkaZkClient, isr_change: IsrChange,
                broker_id: int = 2, version: int = 3) -> PartitionDecision | KafkaError:
    results = await controller.alter_partition(broker_id, epoch(zk_client, broker_id),
                                               [isr_change], version)
    return results[("t", 0)]


def test_an_isr_change_is_written_conditionally_and_announced(
        zk_client: KafkaZkClient) -> None:
    async def scenario(controller: Controller, channel: RecordingChannel,
                       zk: KafkaZkClient) -> None:
        before, version = zk.get_partition_state("t", 0)  # type: ignore[misc]
        assert (before.leader, before.isr) == (2, [2, 1, 3])
        sent = len(channel.update_metadata_sent)
        result = await alter(controller, zk, change(zk, [2, 1]))
        assert isinstance(result, PartitionDecision)
        after, new_version = zk.get_partition_state("t", 0)  # type: ignore[misc]
        # an ISR change keeps the leader epoch; the partition epoch is the znode version
        assert (after.leader, after.leader_epoch, after.isr) == (2, before.leader_epoch, [2, 1])
        assert after.controller_epoch == controller.epoch
        assert (result.leader, result.leader_epoch, result.isr, result.zk_version) == (
            2, before.leader_epoch, [2, 1], new_version)
        assert new_version == version + 1
        assert controller.topics["t"].partitions[0] == result
        await until(lambda: len(channel.update_metadata_sent) > sent)
        assert result in channel.update_metadata_sent[-1]
        # the same request again (its answer lost): the state as it is, nothing written
        again = await alter(controller, zk, change(zk, [2, 1], partition_epoch=version))
        assert isinstance(again, PartitionDecision) and again.zk_version == new_version
        assert zk.get_partition_state("t", 0) == (after, new_version)
        # the next change from the new partition epoch; v3 names the members' epochs
        grown = await alter(controller, zk, change(
            zk, [2, 1, 3], broker_epochs={1: epoch(zk, 1), 3: epoch(zk, 3), 2: -1}))
        assert isinstance(grown, PartitionDecision) and grown.isr == [2, 1, 3]

    run_with_controller(zk_client, scenario)


def test_refusals_per_partition(zk_client: KafkaZkClient) -> None:
    async def scenario(controller: Controller, channel: RecordingChannel,
                       zk: KafkaZkClient) -> None:
        state, version = zk.get_partition_state("t", 0)  # type: ignore[misc]
        cases: list[tuple[IsrChange, int, int, type[KafkaError]]] = [
            # (change, requester, request version, error)
            (change(zk, [2, 1], partition_epoch=version - 1), 2, 3, InvalidUpdateVersionError),
            (change(zk, [2, 1], leader_epoch=state.leader_epoch - 1), 2, 3,
             FencedLeaderEpochError),
            (change(zk, [2, 1], leader_epoch=state.leader_epoch + 1), 2, 3, NotControllerError),
            (change(zk, [2, 1], partition_epoch=version + 1), 2, 3, NotControllerError),
            (change(zk, [2, 1]), 1, 3, NotLeaderOrFollowerError),  # broker 1 does not lead
            (change(zk, [2, 1, 4]), 2, 3, IneligibleReplicaError),  # 4 is not registered
            (change(zk, [2, 1, 4]), 2, 1, OperationNotAttemptedError),  # the same before v2
            # v3: a member known at another registration than its live one (KIP-903)
            (change(zk, [2, 1], broker_epochs={1: epoch(zk, 1) + 1}), 2, 3,
             IneligibleReplicaError),
            (change(zk, [2, 1], leader_recovery_state=1), 2, 3, InvalidRequestError),
            (IsrChange("t", 7, 0, [2], 0), 2, 3, UnknownTopicOrPartitionError),
            (IsrChange("nope", 0, 0, [2], 0), 2, 3, UnknownTopicOrPartitionError),
        ]
        for isr_change, requester, version_asked, error in cases:
            results = await controller.alter_partition(
                requester, epoch(zk, requester), [isr_change], version_asked)
            found = results[(isr_change.topic, isr_change.partition)]
            assert isinstance(found, error), (isr_change, found)
        assert zk.get_partition_state("t", 0) == (state, version)  # nothing written
        # a broker shutting down may not join an ISR either
        assert isinstance(await alter(controller, zk, change(zk, [2, 1])), PartitionDecision)
        controller.shutting_down.add(3)
        found = await alter(controller, zk, change(zk, [2, 1, 3]))
        assert isinstance(found, IneligibleReplicaError)

    run_with_controller(zk_client, scenario)


def test_the_whole_request_refused(zk_client: KafkaZkClient) -> None:
    async def scenario(controller: Controller, channel: RecordingChannel,
                       zk: KafkaZkClient) -> None:
        with pytest.raises(StaleBrokerEpochError):
            await controller.alter_partition(2, epoch(zk, 2) - 1, [change(zk, [2])], 3)
        with pytest.raises(StaleBrokerEpochError):  # not registered: stale too, as Kafka
            await controller.alter_partition(9, 1, [change(zk, [2])], 3)
        controller.active = False  # another broker won the election
        with pytest.raises(NotControllerError):
            await controller.alter_partition(2, epoch(zk, 2), [change(zk, [2])], 3)
        with pytest.raises(NotControllerError):
            await controller.allocate_producer_ids(2, epoch(zk, 2))
        controller.active = True

    run_with_controller(zk_client, scenario)


def test_producer_id_blocks_come_from_the_shared_znode(zk_client: KafkaZkClient) -> None:
    async def scenario(controller: Controller, channel: RecordingChannel,
                       zk: KafkaZkClient) -> None:
        first = await controller.allocate_producer_ids(2, epoch(zk, 2))
        second = await controller.allocate_producer_ids(3, epoch(zk, 3))
        assert first == (0, 1000) and second == (1000, 1000)
        # a Moldau broker taking a block itself continues the same sequence
        assert zk.allocate_producer_id_block(1) == (2000, 2999)
        assert await controller.allocate_producer_ids(2, epoch(zk, 2)) == (3000, 1000)
        with pytest.raises(StaleBrokerEpochError):
            await controller.allocate_producer_ids(2, epoch(zk, 2) + 1)
        with pytest.raises(BrokerIdNotRegisteredError):
            await controller.allocate_producer_ids(9, 1)
        data = zk.get(zd.PRODUCER_ID_BLOCK_PATH)
        assert data is not None
        assert zd.ProducerIdBlock.decode(data[0]).first == 3000

    run_with_controller(zk_client, scenario)
