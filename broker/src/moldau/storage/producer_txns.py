"""The open and recently decided transactions of one partition (the transaction half of
Kafka's ProducerStateManager: ongoingTxns, unreplicatedTxns, lastStableOffset,
completeTxn, firstUnstableOffset).

A transaction opens with its producer's first transactional batch and is decided by its
marker (`CompletedTxn`). A decided transaction stays *unreplicated* until the high
watermark passes its marker, so a read_committed consumer never sees data whose marker
could still be lost: the first unstable offset is the first offset of the earliest open or
unreplicated transaction, and the log's last stable offset is that, capped at the high
watermark (`last_stable_offset`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class TxnMetadata:
    """One transaction of one producer in this partition (Kafka's TxnMetadata)."""

    producer_id: int
    first_offset: int
    last_offset: int = -1  # the marker's offset, once decided


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction its marker decided: offsets first_offset..last_offset (the marker)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class PartitionTransactions:
    """Open (undecided) and decided-but-unreplicated transactions, by first offset."""

    def __init__(self) -> None:
        # First offset -> transaction. Transactions open in log order, so this dict's
        # order is first-offset order (load() sorts what a snapshot gives).
        self.ongoing: dict[int, TxnMetadata] = {}
        # Decided in marker order, which is not first-offset order: looked up with min().
        self.unreplicated: dict[int, TxnMetadata] = {}

    def __bool__(self) -> bool:
        return bool(self.ongoing or self.unreplicated)

    def start(self, producer_id: int, first_offset: int) -> None:
        self.ongoing[first_offset] = TxnMetadata(producer_id, first_offset)

    def load(self, open_txns: list[tuple[int, int]]) -> None:
        """Replace the state with the open transactions (producer id, first offset) of a
        snapshot; nothing is unreplicated after a load (the log end is <= the HW then)."""
        self.clear()
        for producer_id, first_offset in sorted(open_txns, key=lambda t: t[1]):
            self.start(producer_id, first_offset)

    def clear(self) -> None:
        self.ongoing.clear()
        self.unreplicated.clear()

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO written with an aborted transaction in the txn index, before the
        transaction is completed: the first offset of another producer's open
        transaction, else the offset after the marker."""
        for txn in self.ongoing.values():
            if txn.producer_id != completed.producer_id:
                return txn.first_offset
        return completed.last_offset + 1

    def complete(self, completed: CompletedTxn) -> None:
        """The marker is written: the transaction waits for the high watermark."""
        txn = self.ongoing.pop(completed.first_offset, None)
        if txn is None:
            raise ValueError(f"Attempted to complete transaction {completed} which was not "
                             "started")
        txn.last_offset = completed.last_offset
        self.unreplicated[completed.first_offset] = txn

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Decided transactions whose marker is below the HW are stable now (also called
        with a new log start offset: what is gone is no longer unstable)."""
        if self.unreplicated:
            for first in [f for f, t in self.unreplicated.items()
                          if 0 <= t.last_offset < high_watermark]:
                del self.unreplicated[first]

    def first_undecided_offset(self) -> int | None:
        return next(iter(self.ongoing), None)

    def first_unstable_offset(self) -> int | None:
        """The earliest first offset of an open or unreplicated transaction."""
        undecided = next(iter(self.ongoing), None)
        if not self.unreplicated:
            return undecided
        unreplicated = min(self.unreplicated)
        return unreplicated if undecided is None else min(undecided, unreplicated)


def last_stable_offset(first_unstable: int | None, high_watermark: int,
                       log_start_offset: int) -> int:
    """The log's LSO (UnifiedLog.lastStableOffset): the first unstable offset (never below
    the log start) when it is below the high watermark, else the high watermark; read
    committed fetches and ListOffsets stop there."""
    if first_unstable is None:
        return high_watermark
    first_unstable = max(first_unstable, log_start_offset)
    return first_unstable if first_unstable < high_watermark else high_watermark
