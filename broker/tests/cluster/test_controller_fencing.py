"""A controller that lost its office without noticing yet (its ZooKeeper session expired
and another broker was elected) must not write partition states: each write checks the
version of /controller_epoch that its election left. Real ensemble (zk_fixtures.py); the
brokers are only registrations, and the controller's requests are recorded."""

from __future__ import annotations

import asyncio

import pytest

from moldau.cluster import zk_data as zd
from moldau.cluster.controller import Controller
from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import ControllerMovedError, KafkaZkClient
from moldau.cluster.zk_data import BrokerRegistration
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble

from .recording_channel import RecordingChannel, until


def test_a_deposed_controller_cannot_write_partition_states(
        zk_ensemble: ZooKeeperEnsemble, zk_client: KafkaZkClient, zk_chroot: str) -> None:
    for broker_id in (1, 2):
        zk_client.register_broker(BrokerRegistration(
            broker_id, [("PLAINTEXT", "localhost", 9090 + broker_id, "PLAINTEXT")]))
    zk_client.create_topic("t", zd.random_uuid(), {0: [1, 2]}, {})
    rival = KafkaZkClient(zk_ensemble.connect_string, zk_chroot, 6000, 15000)
    rival.start()

    async def scenario() -> None:
        channel = RecordingChannel()
        controller = Controller(1, AsyncZk(zk_client), channel)
        await controller.start()
        try:
            await until(lambda: zk_client.get_partition_state("t", 0) is not None)
            state, version = zk_client.get_partition_state("t", 0)
            assert (state.leader, state.leader_epoch) == (1, 0)
            # broker 1's session "expired": /controller went with it, and broker 2 won
            zk_client.delete_recursive(zd.CONTROLLER_PATH)
            assert rival.try_elect_controller(2) == controller.epoch + 1
            # the old controller acts before it hears of it (no await in between)
            with pytest.raises(ControllerMovedError):
                await controller.write_state("t", controller.topics["t"], 0, state, version,
                                             2, [2], "election")
            assert zk_client.get_partition_state("t", 0) == (state, version)
            # then the /controller watch makes it resign
            await until(lambda: not controller.active)
            assert channel.moved_to[-1] == 2
        finally:
            await controller.stop()

    try:
        asyncio.run(scenario())
    finally:
        rival.close()
