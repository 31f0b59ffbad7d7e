"""From a written PrepareCommit/PrepareAbort to CompleteCommit/CompleteAbort (the
coordinator's half of Kafka's TransactionMarkerChannelManager and
TransactionMarkerRequestCompletionHandler): hand the transaction's markers to the
channel, take each partition out of the transaction as its marker is done, and write the
Complete record once none is left.

A marker answered INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED stops the
completion (a newer producer epoch or coordinator owns the transaction now), as does a
coordinator that lost the partition or reloaded it (another epoch): the coordinator that
loads it next sends the markers again.
"""

from __future__ import annotations

import asyncio

from moldau.errors import (
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    KafkaError,
    TransactionCoordinatorFencedError,
)

from ..tasks import BackgroundTasks
from .config import log
from .markers import MarkerChannel, MarkerJob, MarkerOutcome, TransactionResult
from .metadata import TransactionMetadata, TxnTransitMetadata
from .state_manager import PendingCompletion, TransactionStateManager

# a marker's end that stops the transaction's completion here
_STOPS = frozenset({InvalidProducerEpochError.code, TransactionCoordinatorFencedError.code})
COORDINATOR_NOT_AVAILABLE = CoordinatorNotAvailableError.code
RETRY_BACKOFF_S = 0.1


class TransactionCompletion:
    def __init__(self, manager: TransactionStateManager, channel: MarkerChannel) -> None:
        self.manager = manager
        self.channel = channel
        self._tasks = BackgroundTasks(log, "Writing a transaction's completion")
        # Complete records waiting to be written again after COORDINATOR_NOT_AVAILABLE
        # (Kafka's TransactionMarkerChannelManager LogAppendRetryQueueSize)
        self.retrying = 0

    def send(self, pending: PendingCompletion) -> None:
        """The Prepare record of the transaction is written and its completion prepared:
        write its markers, then the completion."""
        coordinator_epoch, result, metadata, complete = pending
        tid = metadata.transactional_id
        partitions = frozenset(metadata.topic_partitions)
        if not partitions:  # nothing to mark (an empty transaction)
            self._tasks.spawn(self._write_completion(tid, coordinator_epoch, complete))
            return
        self.channel.send(MarkerJob(
            transactional_id=tid, producer_id=metadata.producer_id,
            producer_epoch=metadata.producer_epoch, coordinator_epoch=coordinator_epoch,
            result=result, partitions=partitions,
            on_partition_done=lambda outcome: self._on_done(tid, coordinator_epoch, complete,
                                                            outcome)))

    def _current(self, tid: str, coordinator_epoch: int) -> TransactionMetadata | None:
        """The id's metadata while this coordinator epoch still serves it."""
        try:
            epoch, metadata = self.manager.get(tid)
        except KafkaError:
            return None
        return metadata if epoch == coordinator_epoch else None

    def _on_done(self, tid: str, coordinator_epoch: int, complete: TxnTransitMetadata,
                 outcome: MarkerOutcome) -> None:
        metadata = self._current(tid, coordinator_epoch)
        if metadata is None:
            log.info("No longer the coordinator of %s at epoch %d; cancel sending its "
                     "transaction markers", tid, coordinator_epoch)
            self.channel.remove_transactions([tid])
            return
        if outcome.error_code in _STOPS:
            log.info("Sending %s's transaction marker for partition %s-%d has permanently "
                     "failed with error %d; cancel sending any more of its markers", tid,
                     outcome.topic, outcome.partition, outcome.error_code)
            self.channel.remove_transactions([tid])
            return
        # written, or a partition that can never take one (a deleted topic, an old format)
        metadata.remove_partition((outcome.topic, outcome.partition))
        if not metadata.topic_partitions:
            self._tasks.spawn(self._write_completion(tid, coordinator_epoch, complete))

    async def _write_completion(self, tid: str, coordinator_epoch: int,
                                complete: TxnTransitMetadata) -> None:
        """Write CompleteCommit/CompleteAbort, again while the ISR is short (15)."""
        while True:
            error = await self.manager.append(tid, coordinator_epoch, complete,
                                              retry_on=(COORDINATOR_NOT_AVAILABLE,))
            if error != COORDINATOR_NOT_AVAILABLE or self.manager.shutting_down:
                break
            self.retrying += 1
            try:
                await asyncio.sleep(RETRY_BACKOFF_S)
            finally:
                self.retrying -= 1
        if error:
            log.info("Writing %s for %s failed with error %d", complete.state.display_name,
                     tid, error)
        else:
            log.debug("Completed transaction of %s: %s", tid, complete.state.display_name)

    def shutdown(self) -> None:
        self._tasks.cancel_all()


__all__ = ["TransactionCompletion", "TransactionResult"]
