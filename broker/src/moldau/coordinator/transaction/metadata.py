"""One transactional id's metadata and its two-phase transitions (Kafka 3.9's
TransactionMetadata and TxnTransitMetadata).

Every change is prepared first: a `prepare_*` method checks the transition against the
current state, marks it pending and returns the target (`TxnTransitMetadata`) without
changing anything else. The caller appends the target to `__transaction_state`
(`log_records.transaction_log_value`) and, once the append is replicated, applies it with
`complete_transition_to`; if the append fails it calls `cancel_pending_transition`.
While a transition is pending, requests other than the fencing abort are answered
CONCURRENT_TRANSACTIONS (the handlers check `pending_transition_in_progress`).

Misuse (preparing over a pending transition, a transition from a state that does not
allow it, completing something else than what was prepared) raises
`IllegalTransitionError`: in Kafka it is an IllegalStateException, a coordinator bug, never
an answer to a client.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from moldau.errors import ProducerFencedError

from .state import TransactionState

TopicPartition = tuple[str, int]  # (topic, partition) of a transaction

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
_SHORT_MAX = 0x7FFF

_S = TransactionState


class IllegalTransitionError(RuntimeError):
    """A transition the state machine does not allow (Kafka's IllegalStateException)."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Clients never get Short.MAX_VALUE, so the coordinator can always fence once more:
    from 32766 on, InitProducerId rotates to a new producer id."""
    return epoch >= _SHORT_MAX - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The target of a prepared transition: what is written to `__transaction_state` and
    applied once that write is replicated."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int


@dataclass(eq=False, slots=True)
class TransactionMetadata:
    """The coordinator's view of one transactional id; see the module docstring.

    `last_producer_id` and `last_producer_epoch` are not persisted by 3.9 (a loaded id has
    -1 for both), so an InitProducerId retry that straddles a coordinator move may be
    fenced, as in Kafka."""

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    txn_timeout_ms: int = 60000
    state: TransactionState = _S.EMPTY
    topic_partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1  # when the first partition was added; -1: no transaction
    txn_last_update_timestamp: int = -1  # drives transactional.id.expiration.ms
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending_state: TransactionState | None = None
    # A fence whose write failed: the epoch was bumped in memory but never returned to a
    # client, so the next fence does not bump it again.
    has_failed_epoch_fence: bool = False

    # --- queries ----------------------------------------------------------------------

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (_S.ONGOING, _S.PREPARE_ABORT, _S.PREPARE_COMMIT)

    # --- partitions, as markers are acknowledged --------------------------------------

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        self.topic_partitions.update(partitions)

    def remove_partition(self, partition: TopicPartition) -> None:
        """A partition whose marker was written (or that is gone) leaves the set; only
        while the markers are being sent."""
        if self.state not in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            raise IllegalTransitionError(
                f"Transaction metadata's current state is {self.state.display_name}, and its "
                f"pending state is {self._pending_name()} while trying to remove partitions "
                "whose txn marker has been sent, this is not expected")
        self.topic_partitions.discard(partition)

    # --- preparing transitions --------------------------------------------------------

    def prepare_no_transit(self) -> TxnTransitMetadata:
        """The current metadata as a transit, with nothing marked pending."""
        return TxnTransitMetadata(
            self.producer_id, self.last_producer_id, self.producer_epoch,
            self.last_producer_epoch, self.txn_timeout_ms, self.state,
            frozenset(self.topic_partitions), self.txn_start_timestamp,
            self.txn_last_update_timestamp)

    def prepare_fence_producer_epoch(self) -> TxnTransitMetadata:
        """InitProducerId (or the timeout) found an ongoing transaction: bump the epoch
        (not again after a failed fence) into PrepareEpochFence. The caller then aborts
        with the bumped epoch (`apply_epoch_fence`, `prepare_abort_or_commit`)."""
        if self.producer_epoch == _SHORT_MAX:
            raise IllegalTransitionError(
                "Cannot fence producer with epoch equal to Short.MaxValue since this would "
                "overflow")
        bumped = self.producer_epoch if self.has_failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(_S.PREPARE_EPOCH_FENCE, self.producer_id, bumped,
                             NO_PRODUCER_EPOCH, self.txn_timeout_ms,
                             frozenset(self.topic_partitions), self.txn_start_timestamp,
                             self.txn_last_update_timestamp)

    def prepare_increment_producer_epoch(self, new_txn_timeout_ms: int,
                                         expected_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata:
        """InitProducerId from Empty/CompleteCommit/CompleteAbort, epoch not exhausted.
        expected_epoch is the client's (KIP-360, InitProducerId v3+), None if it gave
        none. Raises ProducerFencedError when that epoch is neither the current one nor
        the last one (nothing is marked pending then)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(
                f"Cannot allocate any more producer epochs for producerId {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            # a new producer instance: bump, and forget the last epoch
            next_epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            # the producer resumes after an error (or is new): bump, remember the old one
            next_epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            # a retry of a bump that succeeded: answer the current epoch again
            next_epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            raise ProducerFencedError(
                f"Expected producer epoch {expected_epoch} does not match current producer "
                f"epoch {self.producer_epoch} or previous producer epoch "
                f"{self.last_producer_epoch}")
        return self._prepare(_S.EMPTY, self.producer_id, next_epoch, last_epoch,
                             new_txn_timeout_ms, frozenset(), -1, now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, new_txn_timeout_ms: int,
                                     now_ms: int, record_last_epoch: bool) -> TxnTransitMetadata:
        """InitProducerId with the epoch exhausted: a new producer id at epoch 0; the old
        epoch is kept as the last one when the client named it (its retry is then
        recognised)."""
        if self.has_pending_transaction:
            raise IllegalTransitionError(
                "Cannot rotate producer ids while a transaction is still pending")
        last_epoch = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(_S.EMPTY, new_producer_id, 0, last_epoch, new_txn_timeout_ms,
                             frozenset(), -1, now_ms)

    def prepare_add_partitions(self, partitions: Iterable[TopicPartition],
                               now_ms: int) -> TxnTransitMetadata:
        """AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with the union of partitions; a
        transaction starting now (from Empty or Complete*) is stamped with now_ms."""
        if self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):
            start = now_ms
        else:
            start = self.txn_start_timestamp
        return self._prepare(_S.ONGOING, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.txn_timeout_ms,
                             frozenset(self.topic_partitions) | frozenset(partitions), start,
                             now_ms)

    def prepare_abort_or_commit(self, new_state: TransactionState,
                                now_ms: int) -> TxnTransitMetadata:
        """EndTxn (or the abort of a fenced transaction): PrepareCommit or PrepareAbort
        with the current partitions."""
        return self._prepare(new_state, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.txn_timeout_ms,
                             frozenset(self.topic_partitions), self.txn_start_timestamp,
                             now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """Every marker written: CompleteCommit or CompleteAbort, partitions cleared. The
        prepare record was written, so a failed fence before it no longer matters."""
        new_state = (_S.COMPLETE_COMMIT if self.state == _S.PREPARE_COMMIT
                     else _S.COMPLETE_ABORT)
        self.has_failed_epoch_fence = False
        return self._prepare(new_state, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.txn_timeout_ms, frozenset(),
                             self.txn_start_timestamp, now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        """transactional.id.expiration.ms passed: written as a tombstone; completing it
        means removing the id from the table (never complete_transition_to)."""
        return self._prepare(_S.DEAD, self.producer_id, self.producer_epoch,
                             self.last_producer_epoch, self.txn_timeout_ms, frozenset(),
                             self.txn_start_timestamp, self.txn_last_update_timestamp)

    def apply_epoch_fence(self, fenced_epoch: int) -> None:
        """The abort that follows prepare_fence_producer_epoch: drop the pending fence and
        take the bumped epoch, with no last epoch, so the aborted producer cannot resume
        (TransactionCoordinator.endTransaction's epoch-fence branch)."""
        if self.pending_state != _S.PREPARE_EPOCH_FENCE:
            raise IllegalTransitionError(
                f"TransactionalId {self.transactional_id} has no pending epoch fence "
                f"(pending: {self._pending_name()})")
        self.pending_state = None
        self.producer_epoch = fenced_epoch
        self.last_producer_epoch = NO_PRODUCER_EPOCH

    def cancel_pending_transition(self) -> None:
        """The append of a prepared transition failed: nothing changes."""
        self.pending_state = None

    def _prepare(self, new_state: TransactionState, producer_id: int, epoch: int,
                 last_epoch: int, timeout_ms: int, partitions: frozenset[TopicPartition],
                 start: int, update: int) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(
                f"Preparing transaction state transition to {new_state.display_name} while "
                f"it already a pending state {self.pending_state.display_name}")
        if producer_id < 0:
            raise IllegalTransitionError(f"Illegal new producer id {producer_id}")
        # A new id's epoch is -1 until InitProducerId's bump; only Dead may keep it.
        if new_state != _S.DEAD and epoch < 0:
            raise IllegalTransitionError(f"Illegal new producer epoch {epoch}")
        if self.state not in new_state.valid_previous_states:
            raise IllegalTransitionError(
                f"Preparing transaction state transition to {new_state.display_name} failed "
                f"since the target state {new_state.display_name} is not a valid previous "
                f"state of the current state {self.state.display_name}")
        self.pending_state = new_state
        return TxnTransitMetadata(producer_id, self.producer_id, epoch, last_epoch,
                                  timeout_ms, new_state, partitions, start, update)

    # --- completing -------------------------------------------------------------------

    def complete_transition_to(self, transit: TxnTransitMetadata) -> None:
        """Apply a prepared transition once its record is replicated. Checks, as Kafka:
        the target is the pending state; the epoch stays, or (to Empty) goes up by one
        or to 0 with a new producer id; partitions only grow while Ongoing; Prepare*
        carries exactly the current partitions, timeout and start time."""
        to_state = self.pending_state
        if to_state is None:
            raise IllegalTransitionError(
                f"TransactionalId {self.transactional_id} completing transaction state "
                "transition while it does not have a pending state")
        if to_state != transit.state:
            self._fail(transit)
        if to_state == _S.EMPTY:
            if ((self.producer_epoch != transit.producer_epoch
                 and not self._valid_epoch_bump(transit))
                    or transit.topic_partitions or transit.txn_start_timestamp != -1):
                self._fail(transit)
            self.txn_timeout_ms = transit.txn_timeout_ms
            self.producer_epoch = transit.producer_epoch
            self.last_producer_epoch = transit.last_producer_epoch
            self.producer_id = transit.producer_id
            self.last_producer_id = transit.last_producer_id
        elif to_state == _S.ONGOING:
            if (not self._same_producer(transit)
                    or not self.topic_partitions <= transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.add_partitions(transit.topic_partitions)
        elif to_state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            if (not self._same_producer(transit)
                    or self.topic_partitions != transit.topic_partitions
                    or self.txn_timeout_ms != transit.txn_timeout_ms
                    or self.txn_start_timestamp != transit.txn_start_timestamp):
                self._fail(transit)
        elif to_state in (_S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):
            if (not self._same_producer(transit)
                    or self.txn_timeout_ms != transit.txn_timeout_ms
                    or transit.txn_start_timestamp == -1):
                self._fail(transit)
            self.txn_start_timestamp = transit.txn_start_timestamp
            self.topic_partitions.clear()
        elif to_state == _S.PREPARE_EPOCH_FENCE:
            # never completed: the fence is always followed by PrepareAbort
            self._fail(transit)
        else:  # Dead: completing an expiration removes the id, it is never applied
            raise IllegalTransitionError(
                f"TransactionalId {self.transactional_id} is trying to complete a transition "
                "to Dead. This means that the transactionalId was being expired, and the only "
                "acceptable completion of this operation is to remove the transaction "
                "metadata from the cache, not to persist the Dead in the log.")
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.pending_state = None
        self.state = to_state

    def _same_producer(self, transit: TxnTransitMetadata) -> bool:
        return (transit.producer_epoch == self.producer_epoch
                and transit.producer_id == self.producer_id)

    def _valid_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return (transit.producer_epoch == self.producer_epoch + 1
                or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id))

    def _fail(self, transit: TxnTransitMetadata) -> NoReturn:
        raise IllegalTransitionError(
            f"TransactionalId {self.transactional_id} failed transition to state {transit} "
            "due to unexpected metadata")

    def _pending_name(self) -> str:
        return self.pending_state.display_name if self.pending_state else "None"
