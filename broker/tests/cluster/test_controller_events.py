"""The controller's events and requests against a real ZooKeeper ensemble (zk_fixtures.py):
the brokers are only registrations, and what the controller tells them is recorded."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from moldau.cluster import zk_data as zd
from moldau.cluster.controller import Controller
from moldau.cluster.controller_events import OfflineReplicas
from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_data import BrokerRegistration
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.errors import ElectionNotNeededError, NotControllerError

from .recording_channel import RecordingChannel, until


def register(zk_client: KafkaZkClient, *broker_ids: int) -> None:
    for broker_id in broker_ids:
        zk_client.register_broker(BrokerRegistration(
            broker_id, [("PLAINTEXT", "localhost", 9090 + broker_id, "PLAINTEXT")]))


def run_controller(zk_client: KafkaZkClient,
                   scenario: Callable[[Controller, RecordingChannel], Awaitable[None]]) -> None:
    async def main() -> None:
        channel = RecordingChannel()
        controller = Controller(1, AsyncZk(zk_client), channel)
        await controller.start()
        try:
            await scenario(controller, channel)
        finally:
            await controller.stop()

    asyncio.run(main())


def leader_and_isr(zk_client: KafkaZkClient, topic: str) -> tuple[int, list[int]] | None:
    found = zk_client.get_partition_state(topic, 0)
    return None if found is None else (found[0].leader, found[0].isr)


def test_a_topic_znode_without_an_id_gets_one(zk_client: KafkaZkClient) -> None:
    register(zk_client, 1)
    zk_client.create_topic("legacy", None, {0: [1]}, {})  # as tools before Kafka 2.8 wrote it

    async def scenario(controller: Controller, channel: RecordingChannel) -> None:
        await until(lambda: leader_and_isr(zk_client, "legacy") == (1, [1]))
        await until(lambda: channel.leader_and_isr_sent)
        assignment = zk_client.get_topic_assignment("legacy")
        assert assignment is not None and assignment.topic_id is not None
        assert assignment.partitions == {0: [1]}
        assert controller.topics["legacy"].topic_id == assignment.topic_id
        assert channel.leader_and_isr_sent[0][1][0].topic_id == assignment.topic_id

    run_controller(zk_client, scenario)


def test_requests_fail_with_not_controller_on_a_broker_that_lost_the_election(
        zk_ensemble: ZooKeeperEnsemble, zk_client: KafkaZkClient, zk_chroot: str) -> None:
    register(zk_client, 1, 2)
    rival = KafkaZkClient(zk_ensemble.connect_string, zk_chroot, 6000, 15000)
    rival.start()

    async def scenario(controller: Controller, channel: RecordingChannel) -> None:
        await until(lambda: channel.moved_to == [2])
        assert not controller.active
        with pytest.raises(NotControllerError):
            await controller.elect_leaders(None, preferred=True)
        with pytest.raises(NotControllerError):
            await controller.controlled_shutdown(1, -1)

    try:
        assert rival.try_elect_controller(2) is not None
        run_controller(zk_client, scenario)
    finally:
        rival.close()


def test_controlled_shutdown_and_a_preferred_election_move_leadership_back_and_forth(
        zk_client: KafkaZkClient) -> None:
    register(zk_client, 1, 2)
    zk_client.create_topic("t", zd.random_uuid(), {0: [1, 2]}, {})

    async def scenario(controller: Controller, channel: RecordingChannel) -> None:
        await until(lambda: leader_and_isr(zk_client, "t") == (1, [1, 2]))
        await until(lambda: "t" in controller.topics and controller.topics["t"].partitions)
        assert await controller.controlled_shutdown(1, -1) == []
        assert leader_and_isr(zk_client, "t") == (2, [2])
        # broker 1 is back in sync (as its fetcher would make it) and no longer stopping
        state, version = zk_client.get_partition_state("t", 0)
        zk_client.update_partition_state("t", 0, zd.PartitionState(
            state.leader, state.leader_epoch, [2, 1], state.controller_epoch), version)
        controller.shutting_down.discard(1)
        assert await controller.elect_leaders([("t", 0)], preferred=True) == {("t", 0): None}
        assert leader_and_isr(zk_client, "t") == (1, [2, 1])
        again = await controller.elect_leaders([("t", 0)], preferred=True)
        assert isinstance(again[("t", 0)], ElectionNotNeededError)

    run_controller(zk_client, scenario)


def test_replicas_reported_offline_hand_leadership_over(zk_client: KafkaZkClient) -> None:
    register(zk_client, 1, 2)
    zk_client.create_topic("t", zd.random_uuid(), {0: [1, 2]}, {})

    async def scenario(controller: Controller, channel: RecordingChannel) -> None:
        await until(lambda: leader_and_isr(zk_client, "t") == (1, [1, 2]))
        await until(lambda: "t" in controller.topics and controller.topics["t"].partitions)
        # what server/controller_channel.py posts for a KAFKA_STORAGE_ERROR answer
        controller.post(OfflineReplicas(1, (("t", 0),)))
        await until(lambda: leader_and_isr(zk_client, "t") == (2, [2]))
        assert controller.offline_replicas == {1: {("t", 0)}}

    run_controller(zk_client, scenario)
