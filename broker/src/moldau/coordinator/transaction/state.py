"""The states of a transactional id, with Kafka 3.9's ids, names and allowed previous
states (kafka.coordinator.transaction.TransactionState)."""

from __future__ import annotations

from enum import Enum


class TransactionState(Enum):
    """value: the status id written in `__transaction_state` (TransactionStatus, int8).

    Only Empty to CompleteAbort are ever written: Dead is written as a tombstone, and
    PrepareEpochFence is an in-memory pending state that is never completed."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """Kafka's name (DescribeTransactions, ListTransactions, kafka-transactions.sh)."""
        return _NAMES[self]

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _PREVIOUS[self]

    @property
    def expiration_allowed(self) -> bool:
        """transactional.id.expiration.ms applies only in these states."""
        return self in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                        TransactionState.COMPLETE_ABORT)

    @classmethod
    def from_id(cls, status: int) -> TransactionState:
        try:
            return cls(status)
        except ValueError:
            raise ValueError(
                f"Unknown transaction state id {status} from the transaction status message"
            ) from None

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        """The state of a wire name (ListTransactions' StateFilters); None if unknown."""
        return _BY_NAME.get(name)


_S = TransactionState
_NAMES = {
    _S.EMPTY: "Empty",
    _S.ONGOING: "Ongoing",
    _S.PREPARE_COMMIT: "PrepareCommit",
    _S.PREPARE_ABORT: "PrepareAbort",
    _S.COMPLETE_COMMIT: "CompleteCommit",
    _S.COMPLETE_ABORT: "CompleteAbort",
    _S.DEAD: "Dead",
    _S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}
_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    # InitProducerId
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # AddPartitionsToTxn, AddOffsetsToTxn
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # EndTxn; an abort also follows the fencing of an ongoing transaction
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    # every marker written
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    # transactional.id.expiration.ms
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    # InitProducerId or the timeout of an ongoing transaction
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
