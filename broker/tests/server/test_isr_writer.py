"""The ISR writer (server/partition_states.py) against a real ZooKeeper: a leader's ISR
change is a conditional write of the partition's state znode, announced to the
controller; after a conflict it adopts what the znode holds only when that is its own
earlier write (this broker, the leader epoch the write started from), never the state a
successor wrote after a LeaderAndIsr deposed it mid-write."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import KafkaZkClient, ZkBadVersionError
from moldau.replication.replica_manager import LeaderAndIsr, RecordedIsr
from moldau.server.partition_states import IsrWriter

TOPIC = "orders"
ME, SUCCESSOR = 1, 2


@dataclass
class Partition:
    """What the writer reads of a partition: its name and the state it leads with."""

    state: LeaderAndIsr
    topic: str = TOPIC
    index: int = 0

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"


class DeposedMidWrite(AsyncZk):
    """ZooKeeper as a deposed leader sees it: while its ISR write is out, the controller
    elects the successor (a new leader epoch in the znode), the successor shrinks the ISR,
    and this broker applies the LeaderAndIsr that makes it a follower."""

    def __init__(self, client: KafkaZkClient, partition: Partition) -> None:
        super().__init__(client)
        self.client = client
        self.partition = partition

    async def call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if fn == self.client.update_partition_state:
            elected = zd.PartitionState(SUCCESSOR, 1, [SUCCESSOR, ME], 1)
            version = self.client.update_partition_state(TOPIC, 0, elected, 0)
            shrunk = zd.PartitionState(SUCCESSOR, 1, [SUCCESSOR], 1)
            version = self.client.update_partition_state(TOPIC, 0, shrunk, version)
            self.partition.state = LeaderAndIsr(SUCCESSOR, 1, [SUCCESSOR], [ME, SUCCESSOR],
                                                1, version - 1)
        return await super().call(fn, *args, **kwargs)


def _topic(zk_client: KafkaZkClient) -> Partition:
    zk_client.create_topic(TOPIC, zd.random_uuid(), {0: [ME, SUCCESSOR]}, {})
    zk_client.create_partition_states(TOPIC, {0: zd.PartitionState(ME, 0, [ME, SUCCESSOR], 1)})
    return Partition(LeaderAndIsr(ME, 0, [ME, SUCCESSOR], [ME, SUCCESSOR], 1, 0))


def _notifications(zk_client: KafkaZkClient) -> list[str]:
    return zk_client.get_children(zd.ISR_CHANGE_NOTIFICATION_PATH) or []


def test_an_isr_change_is_written_and_announced(zk_client: KafkaZkClient) -> None:
    partition = _topic(zk_client)
    recorded = asyncio.run(IsrWriter(ME, AsyncZk(zk_client))(partition, [ME]))
    assert recorded == RecordedIsr([ME], 1)
    state, version = zk_client.get_partition_state(TOPIC, 0)
    assert (state.leader, state.leader_epoch, state.isr, version) == (ME, 0, [ME], 1)
    assert len(_notifications(zk_client)) == 1


def test_its_own_earlier_write_whose_answer_was_lost_is_adopted(
        zk_client: KafkaZkClient) -> None:
    partition = _topic(zk_client)
    # the write landed, its answer did not (a session expiry while it was out)
    zk_client.update_partition_state(TOPIC, 0, zd.PartitionState(ME, 0, [ME], 1), 0)
    recorded = asyncio.run(IsrWriter(ME, AsyncZk(zk_client))(partition, [ME]))
    assert recorded == RecordedIsr([ME], 1)
    assert len(_notifications(zk_client)) == 1  # the lost write's announcement, made now


def test_a_deposed_leader_does_not_adopt_its_successors_isr(
        zk_client: KafkaZkClient) -> None:
    partition = _topic(zk_client)
    writer = IsrWriter(ME, DeposedMidWrite(zk_client, partition))
    with pytest.raises(ZkBadVersionError):
        asyncio.run(writer(partition, [ME]))
    state, version = zk_client.get_partition_state(TOPIC, 0)
    assert (state.leader, state.leader_epoch, state.isr, version) == (
        SUCCESSOR, 1, [SUCCESSOR], 2)  # the successor's, untouched
    assert _notifications(zk_client) == []
