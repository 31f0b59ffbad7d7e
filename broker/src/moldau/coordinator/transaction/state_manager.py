"""The transactions this broker coordinates (Kafka's TransactionStateManager): per
`__transaction_state` partition it leads, the table of `TransactionMetadata` and the
coordinator epoch (the partition's leader epoch from LeaderAndIsr); the loading of a
partition on election (COORDINATOR_LOAD_IN_PROGRESS meanwhile) and its unloading on
resignation (NOT_COORDINATOR after); and the append of a prepared transition, which applies
it once replicated or cancels it, with Kafka's error mapping.

Everything runs on the broker's event loop; a transition's pending state, not a lock,
keeps two requests from changing one id at once (the callers check it before preparing).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from moldau.errors import (
    CoordinatorLoadInProgressError,
    KafkaError,
    NotCoordinatorError,
)

from ..tasks import BackgroundTasks
from .config import TransactionConfig, log, now_ms
from .loading import load_transactions, transactions_awaiting_markers
from .log_records import transaction_log_key, transaction_log_value
from .markers import TransactionResult
from .metadata import TransactionMetadata, TxnTransitMetadata
from .partitioning import TRANSACTION_STATE_TOPIC, transaction_partition_for
from .state import TransactionState
from .txn_log import TransactionLog

NOT_COORDINATOR = NotCoordinatorError.code

# a loaded transaction whose markers must be sent: (coordinator epoch, result, metadata,
# the prepared completion)
PendingCompletion = tuple[int, TransactionResult, TransactionMetadata, TxnTransitMetadata]
SendMarkers = Callable[[PendingCompletion], None]


@dataclass
class TxnPartition:
    """One loaded `__transaction_state` partition."""

    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)


class TransactionStateManager:
    def __init__(self, config: TransactionConfig, txn_log: TransactionLog) -> None:
        self.config = config
        self.txn_log = txn_log
        self.partitions: dict[int, TxnPartition] = {}
        self.loading: dict[int, int] = {}  # partition -> the coordinator epoch it loads at
        self._tasks = BackgroundTasks(log, "Transaction state task")
        self.shutting_down = False
        # each partition load's duration in ms, election to served or given up (Kafka's
        # transaction-coordinator-metrics partition-load-time sensor); set by the broker
        self.on_load_time: Callable[[float], None] | None = None

    def partition_for(self, transactional_id: str) -> int:
        return transaction_partition_for(transactional_id, self.config.num_partitions)

    # --- lookups ----------------------------------------------------------------------

    def get(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """(coordinator epoch, metadata or None); raises COORDINATOR_LOAD_IN_PROGRESS or
        NOT_COORDINATOR when the id's partition is not served here."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            raise CoordinatorLoadInProgressError(
                f"{TRANSACTION_STATE_TOPIC}-{partition} is being loaded")
        entry = self.partitions.get(partition)
        if entry is None:
            raise NotCoordinatorError(
                f"this broker is not the coordinator of transactional id {transactional_id}")
        return entry.coordinator_epoch, entry.transactions.get(transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata
                      ) -> tuple[int, TransactionMetadata]:
        """The id's metadata, this one if it had none (putTransactionStateIfNotExists)."""
        epoch, existing = self.get(metadata.transactional_id)
        if existing is not None:
            return epoch, existing
        entry = self.partitions[self.partition_for(metadata.transactional_id)]
        entry.transactions[metadata.transactional_id] = metadata
        return epoch, metadata

    def all_transactions(self) -> Iterable[TransactionMetadata]:
        for entry in self.partitions.values():
            yield from entry.transactions.values()

    # --- appending a transition -------------------------------------------------------

    async def append(self, transactional_id: str, coordinator_epoch: int,
                     transit: TxnTransitMetadata,
                     retry_on: Collection[int] = ()) -> int:
        """Write the prepared transition and, once replicated, apply it; 0 or the error.
        A failed write cancels the pending transition unless its error is in retry_on (the
        caller writes it again) or the partition moved meanwhile."""
        try:
            epoch, metadata = self.get(transactional_id)
        except KafkaError as exc:
            return exc.code
        if metadata is None or epoch != coordinator_epoch:
            return NOT_COORDINATOR
        record = (transaction_log_key(transactional_id), transaction_log_value(transit))
        error = await self.txn_log.append(self.partition_for(transactional_id), [record],
                                          transit.txn_timeout_ms)
        try:
            epoch, metadata = self.get(transactional_id)
        except KafkaError as exc:
            return error or exc.code
        if metadata is None or epoch != coordinator_epoch:
            # the partition moved (and perhaps came back) while writing
            log.info("The coordinator of %s changed while appending %s; answering "
                     "NOT_COORDINATOR", transactional_id, transit)
            return error or NOT_COORDINATOR
        if error == 0:
            metadata.complete_transition_to(transit)
        elif error not in retry_on:
            log.info("TransactionalId %s's append of %s failed with error %d; cancelling the "
                     "transition", transactional_id, transit.state.display_name, error)
            metadata.cancel_pending_transition()
        return error

    # --- leadership -------------------------------------------------------------------

    def load(self, partition: int, coordinator_epoch: int, send_markers: SendMarkers) -> None:
        """This broker leads the partition at coordinator_epoch: read it back, serve it,
        then hand over the transactions left in PrepareCommit/PrepareAbort."""
        self.loading[partition] = coordinator_epoch
        # timed from here, as Kafka times from scheduling the load
        self._tasks.spawn(self._load(partition, coordinator_epoch, send_markers, time.monotonic()))

    async def _load(self, partition: int, coordinator_epoch: int,
                    send_markers: SendMarkers, started: float) -> None:
        name = f"{TRANSACTION_STATE_TOPIC}-{partition}"
        log.info("Loading transaction metadata from %s at epoch %d", name, coordinator_epoch)
        try:
            records = await self.txn_log.read(partition, self.config.load_buffer_size)
            loaded = load_transactions(records, partition)
        except Exception as exc:
            log.error("Error loading transactions from transaction log %s: %s", name, exc)
            self._record_load_time(started)
            if self.loading.get(partition) == coordinator_epoch:
                del self.loading[partition]
            return
        self._record_load_time(started)  # Kafka records a load resigned meanwhile too
        if self.loading.get(partition) != coordinator_epoch or self.shutting_down:
            return  # resigned (or re-elected) while loading
        self.partitions[partition] = TxnPartition(coordinator_epoch, loaded)
        now = now_ms()
        pending = [
            (coordinator_epoch, TransactionResult.COMMIT if commit else TransactionResult.ABORT,
             metadata, metadata.prepare_complete(now))
            for metadata, commit in transactions_awaiting_markers(loaded)]
        # out of loading first: the completion these markers lead to must not meet it
        del self.loading[partition]
        log.info("Finished loading %d transaction metadata from %s in %d milliseconds",
                 len(loaded), name, (time.monotonic() - started) * 1000)
        for completion in pending:
            send_markers(completion)

    def _record_load_time(self, started: float) -> None:
        if self.on_load_time is not None:
            self.on_load_time((time.monotonic() - started) * 1000)

    def unload(self, partition: int, coordinator_epoch: int | None) -> list[str]:
        """Leadership moved away (coordinator_epoch None: the replica was stopped): forget
        the partition's transactions; their ids."""
        if coordinator_epoch is None or self.loading.get(partition) == coordinator_epoch:
            self.loading.pop(partition, None)
        entry = self.partitions.pop(partition, None)
        if entry is None:
            return []
        log.info("Unloaded transaction metadata of %s-%d (coordinator epoch %d)",
                 TRANSACTION_STATE_TOPIC, partition, entry.coordinator_epoch)
        return list(entry.transactions)

    # --- timers' queries --------------------------------------------------------------

    def timed_out(self, now: int) -> list[tuple[str, int, int]]:
        """(id, producer id, epoch) of the Ongoing transactions past their timeout, with no
        transition pending (Kafka's timedOutTransactions)."""
        return [(m.transactional_id, m.producer_id, m.producer_epoch)
                for m in self.all_transactions()
                if not m.pending_transition_in_progress
                and m.state == TransactionState.ONGOING
                and m.txn_start_timestamp + m.txn_timeout_ms < now]

    async def remove_expired(self, now: int) -> int:
        """Tombstone the ids idle longer than transactional.id.expiration.ms (only in
        Empty, CompleteCommit or CompleteAbort, nothing pending) and forget them once the
        tombstones are replicated; how many went. Batches stay under the partition's
        max.message.bytes."""
        horizon = now - self.config.transactional_id_expiration_ms
        removed = 0
        for partition, entry in list(self.partitions.items()):
            expired = [(m, m.prepare_dead()) for m in list(entry.transactions.values())
                       if m.pending_state is None and m.state.expiration_allowed
                       and m.txn_last_update_timestamp <= horizon]
            limit = self.txn_log.max_batch_bytes(partition) - 512
            while expired:
                chunk: list[tuple[TransactionMetadata, TxnTransitMetadata]] = []
                size = 0
                while expired and (not chunk or size + _tombstone_size(expired[0][0]) < limit):
                    size += _tombstone_size(expired[0][0])
                    chunk.append(expired.pop(0))
                removed += await self._write_tombstones(partition, entry.coordinator_epoch,
                                                        chunk)
        return removed

    async def _write_tombstones(self, partition: int, coordinator_epoch: int,
                                chunk: list[tuple[TransactionMetadata, TxnTransitMetadata]]
                                ) -> int:
        records = [(transaction_log_key(m.transactional_id), None) for m, _ in chunk]
        error = await self.txn_log.append(partition, records, self.config.request_timeout_ms)
        entry = self.partitions.get(partition)
        removed = 0
        for metadata, transit in chunk:
            if (error == 0 and entry is not None
                    and entry.coordinator_epoch == coordinator_epoch
                    and metadata.pending_state == TransactionState.DEAD
                    and metadata.producer_epoch == transit.producer_epoch):
                entry.transactions.pop(metadata.transactional_id, None)
                removed += 1
            else:
                log.warning("Failed to remove expired transactionalId %s from cache "
                            "(tombstone append error %d)", metadata.transactional_id, error)
                metadata.cancel_pending_transition()
        return removed

    # --- lifecycle --------------------------------------------------------------------

    def shutdown(self) -> None:
        self.shutting_down = True
        self._tasks.cancel_all()
        self.loading.clear()
        self.partitions.clear()


def _tombstone_size(metadata: TransactionMetadata) -> int:
    return len(metadata.transactional_id.encode()) + 32  # key and record overhead
