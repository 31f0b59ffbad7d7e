"""The controller's events, one frozen dataclass per kind (Kafka's ControllerEvent).

ZooKeeper watches, timers, brokers and API requests post them; the controller's event
manager runs them one at a time, so each sees the state the previous one left. The names
follow Kafka's ZooKeeper-mode controller where it has the same event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from moldau.cluster.controller_state import TopicPartition

T = TypeVar("T")


@dataclass(frozen=True)
class Elect:
    """Try to win /controller, or resign when another broker holds it: at start, when
    /controller changes, after this broker re-registered, and when a write found that the
    controller epoch moved."""


@dataclass(frozen=True)
class BrokerChange:
    """/brokers/ids changed: reload the live brokers and elect where leaders died."""


@dataclass(frozen=True)
class TopicChange:
    """/brokers/topics changed: load new topics, forget the ones gone."""

    topics: tuple[str, ...]


@dataclass(frozen=True)
class PartitionModifications:
    """A topic's assignment znode changed (partitions added, a reassignment written)."""

    topic: str


@dataclass(frozen=True)
class TopicDeletion:
    """/admin/delete_topics lists topics to delete."""

    topics: tuple[str, ...]


@dataclass(frozen=True)
class IsrChangeNotification:
    """Leaders wrote new ISRs (/isr_change_notification)."""


@dataclass(frozen=True)
class LogDirEventNotification:
    """A broker lost a log dir (/log_dir_event_notification)."""


@dataclass(frozen=True)
class OfflineReplicas:
    """A broker answered LeaderAndIsr with KAFKA_STORAGE_ERROR for these partitions."""

    broker_id: int
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ReplicaLeaderElectionZnode:
    """/admin/preferred_replica_election was written (None: it is gone)."""

    data: bytes | None


@dataclass(frozen=True)
class AutoLeaderRebalance:
    """The auto.leader.rebalance.enable timer fired."""

    imbalance_percentage: int


@dataclass(frozen=True)
class ReassignPartitionsZnode:
    """/admin/reassign_partitions was written (None: it is gone)."""

    data: bytes | None


@dataclass(frozen=True)
class Ask(Generic[T]):
    """A public method of the controller run as an event; the caller awaits the future."""

    run: Callable[[], Awaitable[T]]
    future: asyncio.Future[T]


# what the controller processes; the event manager answers Ask itself
ControllerEvent = (Elect | BrokerChange | TopicChange | PartitionModifications
                   | TopicDeletion | IsrChangeNotification | LogDirEventNotification
                   | OfflineReplicas | ReplicaLeaderElectionZnode | AutoLeaderRebalance
                   | ReassignPartitionsZnode)

# what the queue holds (an Ask's result type differs per request, hence Any)
QueuedEvent = ControllerEvent | Ask[Any]
