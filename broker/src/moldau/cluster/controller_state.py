"""What the controller knows and sends: each topic's assignment, partition decisions and
running moves, and the channel its decisions go out through. Plain data, shared by the
controller, the reassigner and the brokers' side of the channel."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol
from uuid import UUID

from moldau.cluster import zk_data

if TYPE_CHECKING:
    from moldau.cluster.zk_async import AsyncZk

NO_LEADER = zk_data.NO_LEADER

TopicPartition = tuple[str, int]


@dataclass
class PartitionDecision:
    """A partition's state as the controller decided it (what LeaderAndIsr carries)."""

    topic: str
    topic_id: UUID
    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    zk_version: int
    controller_epoch: int
    adding: list[int] = field(default_factory=list)  # replicas a reassignment adds
    leader_recovery_state: int = zk_data.LEADER_RECOVERY_RECOVERED  # KIP-704


@dataclass
class Reassignment:
    """A partition moving from its origin replicas (ORS) to target replicas (TRS)."""

    origin: list[int]  # ORS: the replicas before the move
    target: list[int]  # TRS
    from_znode: bool = False  # started through /admin/reassign_partitions

    @property
    def replicas(self) -> list[int]:
        """RS while the move runs: the target replicas, then the origin ones."""
        return list(dict.fromkeys(self.target + self.origin))

    @property
    def adding(self) -> list[int]:
        return [r for r in self.target if r not in self.origin]

    @property
    def removing(self) -> list[int]:
        return [r for r in self.origin if r not in self.target]


@dataclass
class TopicState:
    topic_id: UUID
    assignment: dict[int, list[int]]  # during a reassignment: the full replica set
    partitions: dict[int, PartitionDecision] = field(default_factory=dict)
    reassigning: dict[int, Reassignment] = field(default_factory=dict)


class ControllerChannel(Protocol):
    """How the controller reaches brokers (the requests Kafka's controller sends)."""

    async def leader_and_isr(self, broker_id: int, decisions: list[PartitionDecision]) -> None: ...

    async def update_metadata(self, broker_ids: Iterable[int],
                              live_brokers: list[zk_data.BrokerRegistration],
                              decisions: list[PartitionDecision],
                              deleted_topics: list[str]) -> None: ...

    async def stop_replica(self, broker_id: int, partitions: list[tuple[str, int]],
                           delete: bool) -> None: ...

    def set_live_brokers(self, live: list[zk_data.BrokerRegistration]
                         ) -> list[zk_data.BrokerRegistration]:
        """The brokers requests can go to (the registrations name their endpoints);
        returns those the channel can reach: the controller counts only them as live."""

    def controller_moved(self, controller_id: int) -> None:
        """This broker stopped being the controller; -1 while no one is known."""


class ControllerHost(Protocol):
    """What the controller's helpers (reassignment, leadership moves) use of the
    controller they run in."""

    @property
    def broker_id(self) -> int: ...

    @property
    def zk(self) -> AsyncZk: ...

    @property
    def channel(self) -> ControllerChannel: ...

    @property
    def topics(self) -> dict[str, TopicState]: ...

    @property
    def live_brokers(self) -> Mapping[int, zk_data.BrokerRegistration]: ...

    def eligible(self, broker_id: int, tp: TopicPartition | None = None) -> bool: ...

    async def write_state(self, name: str, topic: TopicState, index: int,
                          state: zk_data.PartitionState, version: int, leader: int,
                          isr: list[int], why: str) -> PartitionDecision: ...

    async def announce(self, decisions: list[PartitionDecision],
                       rejoined: Iterable[int] = ()) -> None: ...
