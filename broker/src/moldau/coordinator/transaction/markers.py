"""The seam between the transaction coordinator and the channel that writes its markers
(Kafka's TransactionMarkerChannelManager): the coordinator hands over one decided
transaction, the channel writes a COMMIT or ABORT marker into each of its partitions
through WriteTxnMarkers to the partition's leader, retrying until each is written or
can never be, and reports every partition back."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol


class TransactionResult(enum.IntEnum):
    """WriteTxnMarkers' TransactionResult: the marker's control type."""

    ABORT = 0
    COMMIT = 1


@dataclass(frozen=True)
class MarkerOutcome:
    """How one partition's marker ended: written (error 0), or given up for good with
    Kafka's reason (the topic or partition is gone: 3; the coordinator was fenced by a
    newer one: 52, which stops the whole transaction's completion here)."""

    topic: str
    partition: int
    error_code: int


@dataclass(frozen=True)
class MarkerJob:
    """One decided transaction's markers."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int  # the __transaction_state partition's leader epoch
    result: TransactionResult
    partitions: frozenset[tuple[str, int]]
    # called once per partition, on the event loop, when its marker is done for good
    on_partition_done: Callable[[MarkerOutcome], None]


class MarkerChannel(Protocol):
    def send(self, job: MarkerJob) -> None:
        """Queue the job's markers; never blocks, never raises for a busy channel."""

    def remove_transactions(self, transactional_ids: Iterable[str]) -> None:
        """Stop sending for these ids: their __transaction_state partition moved away
        (the new coordinator sends them again after loading)."""
