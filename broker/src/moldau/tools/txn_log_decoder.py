"""kafka-dump-log's `--transaction-log-decoder`: the records of `__transaction_state` as
Kafka 3.9 prints them (TransactionLog.formatRecordKeyAndValue):

    key: transaction_metadata::transactionalId=<id>
    payload: producerId:<id>,producerEpoch:<epoch>,state=<state>,partitions=[<t-p>,...],
             txnLastUpdateTimestamp=<ms>,txnTimeoutMs=<ms>

a tombstone's payload as `<DELETE>`, and a key of a version Kafka does not know as
`unknown::version=<n>` without a payload. A record that does not decode gets one error
line instead of ending the dump."""

from __future__ import annotations

import struct

from moldau.coordinator.transaction.log_records import KEY_VERSION, read_key, read_value

_VERSION = struct.Struct(">h")


def parse(offset: int, key: bytes | None,
          value: bytes | None) -> tuple[str | None, str | None]:
    """(key text, payload text) of one record; None where Kafka prints nothing."""
    try:
        transactional_id = read_key(key)
        if transactional_id is None:
            assert key is not None  # read_key refuses a null key
            version = _VERSION.unpack_from(key)[0] if len(key) >= 2 else KEY_VERSION
            return f"unknown::version={version}", None
        key_text = f"transaction_metadata::transactionalId={transactional_id}"
        metadata = read_value(transactional_id, value)
        if metadata is None:
            return key_text, "<DELETE>"
        partitions = ",".join(f"{t}-{p}" for t, p in sorted(metadata.topic_partitions))
        return key_text, (f"producerId:{metadata.producer_id},"
                          f"producerEpoch:{metadata.producer_epoch},"
                          f"state={metadata.state.display_name},"
                          f"partitions=[{partitions}],"
                          f"txnLastUpdateTimestamp={metadata.txn_last_update_timestamp},"
                          f"txnTimeoutMs={metadata.txn_timeout_ms}")
    except Exception as exc:  # one bad record must not end the dump
        return f"Error at offset {offset}, skipping. {exc}", None
