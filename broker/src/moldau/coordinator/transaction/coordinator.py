"""The transaction coordinator (Kafka 3.9's TransactionCoordinator in ZooKeeper mode,
transaction version 0): InitProducerId with a transactional id, AddPartitionsToTxn (and
the partition leaders' verify-only form), AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions, and the timers that abort transactions past their timeout and expire
idle ids.

This is the façade the broker and the handlers call. The transactions live in the state
manager (`state_manager`), are written through `txn_log`, and once decided reach their
partitions through the marker channel (`completion`, `markers`). Errors are Kafka codes;
PRODUCER_FENCED (90) is answered as is, and the handlers of old request versions turn it
into INVALID_PRODUCER_EPOCH (47) as KafkaApis does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from moldau.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerIdMappingError,
    InvalidRequestError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    KafkaError,
    NotCoordinatorError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionalIdNotFoundError,
    UnknownServerError,
)

from .completion import TransactionCompletion
from .config import TransactionConfig, log, now_ms
from .markers import MarkerChannel, TransactionResult
from .metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    IllegalTransitionError,
    TopicPartition,
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from .state import TransactionState
from .state_manager import TransactionStateManager
from .txn_log import TransactionLog

_S = TransactionState
NONE = 0
CONCURRENT_TRANSACTIONS = ConcurrentTransactionsError.code
TRANSACTION_ABORTABLE = TransactionAbortableError.code  # verify-only: not in the transaction
PRODUCER_FENCED = ProducerFencedError.code


@dataclass(frozen=True)
class InitResult:
    error: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class ListResult:
    error: int
    unknown_state_filters: list[str] = field(default_factory=list)
    transactions: list[ListedTransaction] = field(default_factory=list)


@dataclass(frozen=True)
class DescribeResult:
    error: int
    metadata: TransactionMetadata | None = None


class _NeedsProducerId(Exception):
    """InitProducerId must rotate to a new producer id: allocate one, then prepare again."""


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig, txn_log: TransactionLog,
                 channel: MarkerChannel, next_producer_id: Callable[[], Awaitable[int]]
                 ) -> None:
        self.config = config
        self.state = TransactionStateManager(config, txn_log)
        self.channel = channel
        self.completion = TransactionCompletion(self.state, channel)
        self._next_producer_id = next_producer_id
        self.active = False
        self._timers: list[asyncio.Task[None]] = []

    def partition_for(self, transactional_id: str) -> int:
        return self.state.partition_for(transactional_id)

    # --- lifecycle and leadership -----------------------------------------------------

    def start(self) -> None:
        """Serve, and run the timers (Kafka's startup)."""
        self.active = True
        self._timers = [
            asyncio.ensure_future(self._every(self.config.abort_timed_out_interval_ms,
                                              self._abort_timed_out)),
            asyncio.ensure_future(self._every(self.config.remove_expired_interval_ms,
                                              self._remove_expired)),
        ]

    def shutdown(self) -> None:
        self.active = False
        for timer in self._timers:
            timer.cancel()
        ids = [m.transactional_id for m in self.state.all_transactions()]
        self.state.shutdown()
        self.completion.shutdown()
        self.channel.remove_transactions(ids)

    def on_elected(self, partition: int, coordinator_epoch: int) -> None:
        """This broker leads __transaction_state-<partition> at this leader epoch."""
        log.info("Elected as the txn coordinator for partition %d at epoch %d", partition,
                 coordinator_epoch)
        if self.state.loading.get(partition) == coordinator_epoch:
            return  # the same election announced again
        entry = self.state.partitions.get(partition)
        if entry is not None and entry.coordinator_epoch == coordinator_epoch:
            return
        self.channel.remove_transactions(self.state.unload(partition, None))
        self.state.load(partition, coordinator_epoch, self.completion.send)

    def on_resigned(self, partition: int, coordinator_epoch: int | None) -> None:
        """Leadership moved away (None: the replica was stopped)."""
        if partition not in self.state.partitions and partition not in self.state.loading:
            return
        log.info("Resigned as the txn coordinator for partition %d at epoch %s", partition,
                 coordinator_epoch)
        self.channel.remove_transactions(self.state.unload(partition, coordinator_epoch))

    # --- InitProducerId ---------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> InitResult:
        """expected: the client's (producer id, epoch) of KIP-360, None when it gave none."""
        if transactional_id == "":
            return InitResult(InvalidRequestError.code)
        if not self.config.valid_timeout(timeout_ms):
            return InitResult(InvalidTransactionTimeoutError.code)
        try:
            coordinator_epoch, metadata = self.state.get(transactional_id)
            if metadata is None:
                producer_id = await self._next_producer_id()
                coordinator_epoch, metadata = self.state.put_if_absent(TransactionMetadata(
                    transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms, _S.EMPTY,
                    set(), -1, now_ms()))
            try:
                transit = self._prepare_init(metadata, timeout_ms, expected, None)
            except _NeedsProducerId:
                new_id = await self._next_producer_id()
                coordinator_epoch, metadata = self.state.get(transactional_id)
                if metadata is None:
                    raise CoordinatorNotAvailableError("the id was removed meanwhile") from None
                transit = self._prepare_init(metadata, timeout_ms, expected, new_id)
        except KafkaError as exc:
            return InitResult(exc.code)
        except IllegalTransitionError as exc:
            log.error("InitProducerId of %s: %s", transactional_id, exc)
            return InitResult(UnknownServerError.code)
        if transit.state == _S.PREPARE_EPOCH_FENCE:
            # abort the ongoing transaction with the bumped epoch; the client retries
            error = await self._end_transaction(transactional_id, transit.producer_id,
                                                transit.producer_epoch, TransactionResult.ABORT,
                                                from_client=False)
            return InitResult(error or CONCURRENT_TRANSACTIONS)
        error = await self.state.append(transactional_id, coordinator_epoch, transit)
        if error:
            log.info("Returning error %d to client for %s's InitProducerId request", error,
                     transactional_id)
            return InitResult(error)
        log.info("Initialized transactionalId %s with producerId %d and producer epoch %d on "
                 "partition __transaction_state-%d", transactional_id, transit.producer_id,
                 transit.producer_epoch, self.partition_for(transactional_id))
        return InitResult(NONE, transit.producer_id, transit.producer_epoch)

    def _prepare_init(self, metadata: TransactionMetadata, timeout_ms: int,
                      expected: tuple[int, int] | None,
                      new_producer_id: int | None) -> TxnTransitMetadata:
        if metadata.pending_transition_in_progress:
            raise ConcurrentTransactionsError()
        if expected is not None and not (
                metadata.producer_epoch == NO_PRODUCER_EPOCH
                or expected[0] == metadata.producer_id
                or (expected[0] == metadata.last_producer_id
                    and is_epoch_exhausted(expected[1]))):
            raise ProducerFencedError()
        state = metadata.state
        if state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            raise ConcurrentTransactionsError()
        if state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):
            if metadata.is_producer_epoch_exhausted and (
                    expected is None or expected[1] == metadata.producer_epoch):
                if new_producer_id is None:
                    raise _NeedsProducerId()
                return metadata.prepare_producer_id_rotation(new_producer_id, timeout_ms,
                                                             now_ms(), expected is not None)
            return metadata.prepare_increment_producer_epoch(
                timeout_ms, None if expected is None else expected[1], now_ms())
        if state == _S.ONGOING:
            # the fenced epoch is never returned: the abort runs and the client retries
            return metadata.prepare_fence_producer_epoch()
        raise IllegalTransitionError(
            f"Found transactionalId {metadata.transactional_id} with state "
            f"{state.display_name}. This is illegal as we should never have transitioned "
            "to this state.")

    # --- AddPartitionsToTxn, AddOffsetsToTxn --------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: Iterable[TopicPartition]) -> int:
        if not transactional_id:
            return InvalidRequestError.code
        wanted = set(partitions)
        try:
            coordinator_epoch, metadata = self.state.get(transactional_id)
            metadata = self._producer(metadata, producer_id, producer_epoch)
            if metadata.pending_transition_in_progress or metadata.state in (
                    _S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                raise ConcurrentTransactionsError()
            if metadata.state == _S.ONGOING and wanted <= metadata.topic_partitions:
                return NONE  # already there: nothing to write
            transit = metadata.prepare_add_partitions(wanted, now_ms())
        except KafkaError as exc:
            return exc.code
        except IllegalTransitionError as exc:
            log.error("AddPartitionsToTxn of %s: %s", transactional_id, exc)
            return UnknownServerError.code
        return await self.state.append(transactional_id, coordinator_epoch, transit)

    def verify_partitions(self, transactional_id: str, producer_id: int,
                          producer_epoch: int, partitions: Iterable[TopicPartition]
                          ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ with VerifyOnly (KIP-890 part 1): is each partition in
        the producer's ongoing transaction? Writes nothing, ignores a pending transition
        (the leader's append checks again)."""
        asked = list(partitions)
        if not transactional_id:
            return dict.fromkeys(asked, InvalidRequestError.code)
        try:
            _, metadata = self.state.get(transactional_id)
            metadata = self._producer(metadata, producer_id, producer_epoch)
            if metadata.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                raise ConcurrentTransactionsError()
        except KafkaError as exc:
            return dict.fromkeys(asked, exc.code)
        return {tp: NONE if tp in metadata.topic_partitions else TRANSACTION_ABORTABLE
                for tp in asked}

    @staticmethod
    def _producer(metadata: TransactionMetadata | None, producer_id: int,
                  producer_epoch: int) -> TransactionMetadata:
        """The metadata if the request's producer id and epoch are its current ones."""
        if metadata is None or metadata.producer_id != producer_id:
            raise InvalidProducerIdMappingError()
        if metadata.producer_epoch != producer_epoch:
            raise ProducerFencedError()
        return metadata

    # --- EndTxn -----------------------------------------------------------------------

    async def end_transaction(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, commit: bool) -> int:
        """EndTxn: NONE once the Prepare record is replicated (the markers follow)."""
        result = TransactionResult.COMMIT if commit else TransactionResult.ABORT
        return await self._end_transaction(transactional_id, producer_id, producer_epoch,
                                           result, from_client=True)

    async def _end_transaction(self, transactional_id: str, producer_id: int,
                               producer_epoch: int, result: TransactionResult,
                               from_client: bool) -> int:
        if not transactional_id:
            return InvalidRequestError.code
        is_fence = False
        try:
            coordinator_epoch, metadata = self.state.get(transactional_id)
            if metadata is None or metadata.producer_id != producer_id:
                raise InvalidProducerIdMappingError()
            # a client must name the current epoch; the coordinator's abort, at least it
            if ((from_client and producer_epoch != metadata.producer_epoch)
                    or producer_epoch < metadata.producer_epoch):
                raise ProducerFencedError()
            if (metadata.pending_state is not None
                    and metadata.pending_state != _S.PREPARE_EPOCH_FENCE):
                raise ConcurrentTransactionsError()
            is_fence = metadata.pending_state == _S.PREPARE_EPOCH_FENCE
            transit = self._prepare_end(metadata, result, producer_epoch)
            if transit is None:
                return NONE  # a retry of a completed commit or abort
        except KafkaError as exc:
            return exc.code
        except IllegalTransitionError as exc:
            log.error("EndTxn of %s: %s", transactional_id, exc)
            return UnknownServerError.code
        error = await self.state.append(transactional_id, coordinator_epoch, transit)
        if error:
            log.info("Aborting sending of transaction markers and returning error %d for "
                     "%s's EndTransaction request of %s", error, transactional_id,
                     result.name)
            if is_fence:
                self._mark_failed_fence(transactional_id, coordinator_epoch)
            return error
        return self._after_prepare(transactional_id, coordinator_epoch, producer_id,
                                   producer_epoch, result)

    def _prepare_end(self, metadata: TransactionMetadata, result: TransactionResult,
                     producer_epoch: int) -> TxnTransitMetadata | None:
        """The Prepare transition of an EndTxn; None for a retry that is already done."""
        commit = result == TransactionResult.COMMIT
        state = metadata.state
        if state == _S.ONGOING:
            if not commit and metadata.pending_state == _S.PREPARE_EPOCH_FENCE:
                metadata.apply_epoch_fence(producer_epoch)
            return metadata.prepare_abort_or_commit(
                _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, now_ms())
        if state == (_S.COMPLETE_COMMIT if commit else _S.COMPLETE_ABORT):
            return None
        if state == (_S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT):
            raise ConcurrentTransactionsError()
        if state in (_S.DEAD, _S.PREPARE_EPOCH_FENCE):
            raise IllegalTransitionError(
                f"Found transactionalId {metadata.transactional_id} with state "
                f"{state.display_name}. This is illegal as we should never have "
                "transitioned to this state.")
        log.warning("TransactionalId: %s's state is %s, but received transaction marker "
                    "result to send: %s", metadata.transactional_id, state.display_name,
                    result.name)
        raise InvalidTxnStateError()

    def _after_prepare(self, transactional_id: str, coordinator_epoch: int, producer_id: int,
                       producer_epoch: int, result: TransactionResult) -> int:
        """The Prepare record is written: check the id is still ours and unchanged, prepare
        its completion and hand its markers to the channel."""
        try:
            epoch, metadata = self.state.get(transactional_id)
            if metadata is None:
                raise UnknownServerError("the coordinator owns the partition, not the id")
            if epoch != coordinator_epoch:
                return NotCoordinatorError.code
            if metadata.producer_id != producer_id:
                raise InvalidProducerIdMappingError()
            if metadata.producer_epoch != producer_epoch:
                raise ProducerFencedError()
            if metadata.pending_transition_in_progress:
                raise ConcurrentTransactionsError()
            expected = (_S.PREPARE_COMMIT if result == TransactionResult.COMMIT
                        else _S.PREPARE_ABORT)
            if metadata.state != expected:
                raise InvalidTxnStateError()
            complete = metadata.prepare_complete(now_ms())
        except KafkaError as exc:
            return exc.code
        self.completion.send((coordinator_epoch, result, metadata, complete))
        return NONE

    def _mark_failed_fence(self, transactional_id: str, coordinator_epoch: int) -> None:
        """The abort of a fence was not written: the bumped epoch never reached a client,
        so the next fence must not bump it again."""
        try:
            epoch, metadata = self.state.get(transactional_id)
        except KafkaError:
            return
        if metadata is not None and epoch == coordinator_epoch:
            metadata.has_failed_epoch_fence = True
            log.warning("The coordinator failed to write an epoch fence transition for "
                        "producer %s; the epoch was increased to %d but not returned to the "
                        "client", transactional_id, metadata.producer_epoch)

    # --- DescribeTransactions, ListTransactions -----------------------------------------

    def describe(self, transactional_id: str) -> DescribeResult:
        if not self.active:
            return DescribeResult(CoordinatorNotAvailableError.code)
        if transactional_id == "":
            return DescribeResult(InvalidRequestError.code)
        try:
            _, metadata = self.state.get(transactional_id)
        except KafkaError as exc:
            return DescribeResult(exc.code)
        if metadata is None or metadata.state == _S.DEAD:
            return DescribeResult(TransactionalIdNotFoundError.code)
        return DescribeResult(NONE, metadata)

    def list_transactions(self, producer_ids: Iterable[int], state_names: Iterable[str],
                          duration_ms: int = -1) -> ListResult:
        """ListTransactions' filters: producer ids, state names (unknown ones are
        answered back), and (v1) only transactions running longer than duration_ms."""
        if not self.active:
            return ListResult(CoordinatorNotAvailableError.code)
        if self.state.loading:
            return ListResult(CoordinatorLoadInProgressError.code)
        pids = set(producer_ids)
        names = list(state_names)
        states = {s for s in (TransactionState.from_name(n) for n in names) if s is not None}
        unknown = [n for n in names if TransactionState.from_name(n) is None]
        now = now_ms()
        listed = [
            ListedTransaction(m.transactional_id, m.producer_id, m.state.display_name)
            for m in self.state.all_transactions()
            if m.state != _S.DEAD
            and (not pids or m.producer_id in pids)
            and (not names or m.state in states)
            and (duration_ms < 0 or now - m.txn_start_timestamp > duration_ms)]
        return ListResult(NONE, unknown, listed)

    # --- timers -----------------------------------------------------------------------

    @staticmethod
    async def _every(interval_ms: int, work: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await work()
            except Exception:
                log.exception("Transaction coordinator timer failed")

    async def _abort_timed_out(self) -> None:
        """Fence and abort every Ongoing transaction past its timeout, as InitProducerId
        does for an ongoing one: the producer's next request is fenced."""
        for tid, producer_id, _epoch in self.state.timed_out(now_ms()):
            try:
                _, metadata = self.state.get(tid)
            except KafkaError:
                continue
            if (metadata is None or metadata.producer_id != producer_id
                    or metadata.pending_transition_in_progress):
                continue
            fence = metadata.prepare_fence_producer_epoch()
            error = await self._end_transaction(tid, fence.producer_id, fence.producer_epoch,
                                                TransactionResult.ABORT, from_client=False)
            if error == NONE:
                log.info("Completed rollback of ongoing transaction for transactionalId %s "
                         "due to timeout", tid)
            elif error in (InvalidProducerIdMappingError.code, PRODUCER_FENCED,
                           CONCURRENT_TRANSACTIONS):
                log.debug("Rollback of ongoing transaction for transactionalId %s has been "
                          "cancelled due to error %d", tid, error)
            else:
                log.warning("Rollback of ongoing transaction for transactionalId %s failed "
                            "due to error %d", tid, error)

    async def _remove_expired(self) -> None:
        removed = await self.state.remove_expired(now_ms())
        if removed:
            log.info("Removed %d expired transactional ids", removed)
