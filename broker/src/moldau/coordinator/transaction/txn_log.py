"""The transaction coordinator's access to `__transaction_state`: append records to a
partition this broker leads and wait until the ISR has them (acks=-1), and read a
partition back when its leadership arrives (Kafka's TransactionStateManager
appendTransactionToLog and loadTransactionMetadata, the log side)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from moldau.errors import (
    KafkaError,
    KafkaStorageError,
    NotCoordinatorError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnknownServerError,
)
from moldau.protocol.records import build_batch

from ..internal_log import (
    COORDINATOR_APPEND_ERRORS,
    append_replicated,
    read_batches,
)
from ..internal_log import coordinator_error as _coordinator_error
from .config import log
from .loading import KeyValue, key_values
from .partitioning import TRANSACTION_STATE_TOPIC

if TYPE_CHECKING:
    from moldau.replication.replica_manager import Partition, ReplicaManager

# What a failed append answers (Kafka's mapping in appendTransactionToLog); any other
# error keeps its code
_COORDINATOR_ERRORS: dict[type[KafkaError], type[KafkaError]] = {
    **COORDINATOR_APPEND_ERRORS,
    KafkaStorageError: NotCoordinatorError,
    RecordTooLargeError: UnknownServerError,
    RecordBatchTooLargeError: UnknownServerError,
}

Record = tuple[bytes, bytes | None]  # key, value (None: a tombstone)


def coordinator_error(exc: KafkaError) -> int:
    """The code a coordinator's caller answers for a failed append."""
    return _coordinator_error(exc, _COORDINATOR_ERRORS)


class TransactionLog:
    def __init__(self, replica_manager: Callable[[], ReplicaManager]) -> None:
        self._replica_manager = replica_manager

    def _partition(self, index: int) -> Partition:
        return self._replica_manager().leader_partition(TRANSACTION_STATE_TOPIC, index, True)

    def max_batch_bytes(self, index: int) -> int:
        """The largest batch the partition takes (its max.message.bytes)."""
        try:
            return self._partition(index).log.config.max_message_bytes
        except KafkaError:
            return 1024 * 1024

    async def append(self, index: int, records: Sequence[Record], timeout_ms: int) -> int:
        """Append one plain, uncompressed batch (as Kafka's coordinator writes) and wait
        for the high watermark to pass it; 0 or the coordinator's error code."""
        try:
            await append_replicated(self._replica_manager, TRANSACTION_STATE_TOPIC, index,
                                    build_batch(records), timeout_ms)
            return 0
        except KafkaError as exc:
            log.warning("Appending to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, index, exc)
            return coordinator_error(exc)

    async def read(self, index: int, buffer_size: int) -> list[KeyValue]:
        """The (key, value) of every record of the partition up to its log end, in log
        order: as Kafka, beyond the high watermark too (what a new leader holds there is
        the latest state). Yields to the event loop between reads."""
        found: list[KeyValue] = []
        async for batches in read_batches(self._partition(index).log, buffer_size):
            found.extend(key_values(batches))
        return found
