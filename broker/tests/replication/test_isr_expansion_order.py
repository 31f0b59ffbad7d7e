"""A follower that catches up joins the end of the ISR, as on Kafka's leader: after a
reassignment of [2,3] to [3,1] Kafka's tools showed `Isr: 3,1` (2 leaves [2,3,1]) where
Moldau's sorted ISR gave `Isr: 1,3` (compat scenario cluster.kafka-tool)."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from moldau.replication.replica_manager import (
    LeaderAndIsr,
    Partition,
    RecordedIsr,
    ReplicaManager,
)
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager, ManagerConfig

LEADER_ID = 2


def test_a_caught_up_follower_is_appended_to_the_isr(tmp_path: Path) -> None:
    manager = LogManager(ManagerConfig([str(tmp_path)], LEADER_ID, "cluster"), LogConfig())
    written: list[list[int]] = []

    async def isr_writer(partition: Partition, isr: list[int]) -> RecordedIsr:
        written.append(list(isr))
        return RecordedIsr(list(isr), 1)

    async def scenario() -> None:
        replicas = ReplicaManager(LEADER_ID, manager, isr_writer=isr_writer)
        # a reassignment's replicas: the target's 1 added behind the current 2 and 3
        partition = replicas.become_leader_or_follower(
            "moves", 0, uuid.uuid4(), LeaderAndIsr(LEADER_ID, 0, [2, 3], [2, 3, 1]))
        replicas.follower_fetched(partition, 1, partition.log.log_end_offset,
                                  time.time() * 1000)
        for _ in range(5):  # the write runs in a task
            await asyncio.sleep(0)

    try:
        asyncio.run(scenario())
    finally:
        manager.shutdown()
    assert written == [[2, 3, 1]]
