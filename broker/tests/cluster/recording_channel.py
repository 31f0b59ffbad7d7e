"""A ControllerChannel that writes down what the controller tells brokers, and a wait
helper, for the controller tests (the brokers are only registrations in ZooKeeper)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

from moldau.cluster.controller import PartitionDecision
from moldau.cluster.zk_data import BrokerRegistration


class RecordingChannel:
    """The ControllerChannel protocol, writing down what the controller tells brokers."""

    def __init__(self) -> None:
        self.leader_and_isr_sent: list[tuple[int, list[PartitionDecision]]] = []
        self.stop_replica_sent: list[tuple[int, list[tuple[str, int]], bool]] = []
        self.moved_to: list[int] = []
        self.update_metadata_sent: list[list[PartitionDecision]] = []

    async def leader_and_isr(self, broker_id: int, decisions: list[PartitionDecision]) -> None:
        self.leader_and_isr_sent.append((broker_id, decisions))

    async def update_metadata(self, broker_ids: Iterable[int],
                              live_brokers: list[BrokerRegistration],
                              decisions: list[PartitionDecision],
                              deleted_topics: list[str]) -> None:
        self.update_metadata_sent.append(decisions)

    async def stop_replica(self, broker_id: int, partitions: list[tuple[str, int]],
                           delete: bool) -> None:
        self.stop_replica_sent.append((broker_id, partitions, delete))

    def set_live_brokers(self, live: list[BrokerRegistration]) -> list[BrokerRegistration]:
        return live

    def controller_moved(self, controller_id: int) -> None:
        self.moved_to.append(controller_id)


async def until(condition: Callable[[], object], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
