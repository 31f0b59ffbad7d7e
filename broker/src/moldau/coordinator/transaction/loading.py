"""Rebuilding the transactions of one `__transaction_state` partition from its records
(the replay in Kafka's TransactionStateManager.loadTransactionMetadata): the last value of
each key wins, a tombstone removes the id, unknown key versions are skipped. What a newly
elected coordinator does with the result (answer COORDINATOR_LOAD_IN_PROGRESS until it is
done, then send the markers of the transactions left in PrepareCommit/PrepareAbort) is the
state manager's; `transactions_awaiting_markers` names those transactions."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from moldau.protocol.records import RecordBatch

from .log_records import read_key, read_value
from .metadata import TransactionMetadata
from .state import TransactionState

log = logging.getLogger("kafka.coordinator.transaction.TransactionStateManager")

RecordBytes = bytes | memoryview | None
KeyValue = tuple[RecordBytes, RecordBytes]


def key_values(batches: Iterable[RecordBatch]) -> Iterator[KeyValue]:
    """The (key, value) of every record of the batches, in log order. Control batches
    carry no transaction state (the coordinator never writes any) and are skipped."""
    for batch in batches:
        if batch.is_control:
            continue
        for record in batch.records():
            yield record.key, record.value


def load_transactions(records: Iterable[KeyValue], partition: int = -1
                      ) -> dict[str, TransactionMetadata]:
    """The transactional ids of a partition's records, keyed by id. Raises
    TransactionLogFormatError on a value that does not decode."""
    loaded: dict[str, TransactionMetadata] = {}
    for key, value in records:
        transactional_id = read_key(key)
        if transactional_id is None:
            log.warning("Unknown message key while loading transaction state from "
                        "__transaction_state-%d. Ignoring it. It could be a left over from "
                        "an aborted upgrade.", partition)
            continue
        metadata = read_value(transactional_id, value)
        if metadata is None:
            loaded.pop(transactional_id, None)
        else:
            loaded[transactional_id] = metadata
    return loaded


def transactions_awaiting_markers(loaded: dict[str, TransactionMetadata]
                                  ) -> list[tuple[TransactionMetadata, bool]]:
    """(metadata, commit?) of every transaction whose Prepare record was written but not
    its Complete one: after loading, its markers are sent again, then it completes."""
    return [
        (metadata, metadata.state == TransactionState.PREPARE_COMMIT)
        for metadata in loaded.values()
        if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)
    ]
