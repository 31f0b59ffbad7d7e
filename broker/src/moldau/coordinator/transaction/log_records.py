"""The records of `__transaction_state` in Kafka's schemas
(transaction-coordinator/TransactionLogKey.json and TransactionLogValue.json, generated
codecs), so Kafka's tools read what Moldau writes and Moldau loads what Kafka wrote.

A key is int16 version 0 and the transactional id. A value is an int16 version and the
TransactionLogValue of that version; a null value is a tombstone (the id expired, Dead).
Kafka 3.9 in ZooKeeper mode writes value version 0 (version 1, flexible, only with the
`transaction.version` feature, which ZooKeeper mode never enables) and reads both. The
partitions are null for Empty and grouped by topic otherwise. Unknown key versions are
skipped by the loader (`read_key` answers None), as Kafka does with records left by an
aborted upgrade; a value that does not decode is an error.
"""

from __future__ import annotations

import struct

from moldau.protocol.generated.transaction_log_key import TransactionLogKey
from moldau.protocol.generated.transaction_log_value import TransactionLogValue

from .metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionMetadata, TxnTransitMetadata
from .state import TransactionState

_VERSION = struct.Struct(">h")
KEY_VERSION = 0
VALUE_VERSION = 0  # what 3.9 writes without transaction.version
_VALUE_VERSIONS = (0, 1)  # what it reads


class TransactionLogFormatError(ValueError):
    """A record of `__transaction_state` that does not decode."""


# --- encoding -------------------------------------------------------------------------

def transaction_log_key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + TransactionLogKey(
        transactional_id=transactional_id).encode(KEY_VERSION)


def transaction_log_value(transit: TxnTransitMetadata, version: int = VALUE_VERSION) -> bytes:
    """The value of a prepared transition (never Dead: that is a tombstone, None). Topics
    and partitions are written sorted, so equal metadata gives equal bytes."""
    if transit.state == TransactionState.DEAD:
        raise ValueError("Dead is written as a tombstone (a null value), not as a value")
    if transit.state == TransactionState.EMPTY:
        if transit.topic_partitions:
            raise ValueError(
                "Transaction is not expected to have any partitions since its state is Empty: "
                f"{transit}")
        partitions = None
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(transit.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = [TransactionLogValue.PartitionsSchema(topic=topic, partition_ids=ids)
                      for topic, ids in by_topic.items()]
    value = TransactionLogValue(
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=transit.state.value,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp,
        transaction_start_timestamp_ms=transit.txn_start_timestamp,
    )
    return _VERSION.pack(version) + value.encode(version)


# --- decoding -------------------------------------------------------------------------

def _split(data: bytes | memoryview, what: str) -> tuple[int, memoryview]:
    if len(data) < _VERSION.size:
        raise TransactionLogFormatError(f"a {what} of {len(data)} bytes has no version")
    view = memoryview(data)
    return _VERSION.unpack_from(view)[0], view[_VERSION.size:]


def read_key(data: bytes | memoryview | None) -> str | None:
    """The transactional id of a key; None for a key version this broker does not know."""
    if data is None:
        raise TransactionLogFormatError("Transaction state log's key should not be null")
    version, body = _split(data, "key")
    if version != KEY_VERSION:
        return None
    try:
        return TransactionLogKey.decode(body, version).transactional_id
    except Exception as exc:
        raise TransactionLogFormatError(f"key v{version} does not decode: {exc}") from exc


def read_value(transactional_id: str,
               data: bytes | memoryview | None) -> TransactionMetadata | None:
    """The metadata a value describes (no pending state, no last producer id or epoch:
    3.9 does not store them); None for a tombstone."""
    if data is None:
        return None
    version, body = _split(data, "value")
    if version not in _VALUE_VERSIONS:
        raise TransactionLogFormatError(
            f"Unknown version {version} from the transaction log message value")
    try:
        value = TransactionLogValue.decode(body, version)
        state = TransactionState.from_id(value.transaction_status)
    except Exception as exc:
        raise TransactionLogFormatError(f"value v{version} does not decode: {exc}") from exc
    partitions: set[tuple[str, int]] = set()
    if state != TransactionState.EMPTY and value.transaction_partitions:
        for entry in value.transaction_partitions:
            partitions.update((entry.topic, p) for p in entry.partition_ids)
    return TransactionMetadata(
        transactional_id,
        value.producer_id,
        value.producer_epoch,
        value.transaction_timeout_ms,
        state,
        partitions,
        value.transaction_start_timestamp_ms,
        value.transaction_last_update_timestamp_ms,
        last_producer_id=NO_PRODUCER_ID,
        last_producer_epoch=NO_PRODUCER_EPOCH,
    )
