"""`__transaction_state` records and partitioning: Kafka's bytes, built here with struct
(independently of the generated codecs), and Java's String.hashCode rule."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.coordinator.transaction.log_records import (
    TransactionLogFormatError,
    read_key,
    read_value,
    transaction_log_key,
    transaction_log_value,
)
from moldau.coordinator.transaction.metadata import TxnTransitMetadata
from moldau.coordinator.transaction.partitioning import transaction_partition_for
from moldau.coordinator.transaction.state import TransactionState

S = TransactionState


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _transit(state: TransactionState, partitions: frozenset[tuple[str, int]] = frozenset(),
             start: int = 1000) -> TxnTransitMetadata:
    return TxnTransitMetadata(4711, -1, 3, -1, 60000, state, partitions, start, 2000)


# --- partitioning ---------------------------------------------------------------------

def _java_hash(text: str) -> int:
    """String.hashCode by its definition, s[0]*31^(n-1) + ... + s[n-1], over UTF-16 code
    units, as a signed 32-bit int (a second implementation, for the test)."""
    units = struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be"))
    n = len(units)
    total = sum(u * 31 ** (n - 1 - i) for i, u in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@pytest.mark.parametrize(("transactional_id", "java_hash", "partition"), [
    ("hello", 99162322, 22),                    # "hello".hashCode() in Java
    ("polygenelubricants", -(2**31), 0),        # hashes to Integer.MIN_VALUE: Utils.abs -> 0
    ("", 0, 0),
    ("Aa", 2112, 12), ("BB", 2112, 12),         # Java's classic collision
    ("my-txn", -1061187895, 45),                # negative: abs, then modulo
    ("\N{GRINNING FACE}", 0xD83D * 31 + 0xDE00, 49),  # a surrogate pair: two code units
])
def test_partition_of_a_transactional_id_follows_java(transactional_id, java_hash, partition):
    assert _java_hash(transactional_id) == java_hash
    assert transaction_partition_for(transactional_id) == partition
    assert transaction_partition_for(transactional_id, 50) == partition


@given(st.text(max_size=40), st.integers(1, 200))
def test_partition_matches_the_definition(transactional_id, partitions):
    h = _java_hash(transactional_id)
    expected = (0 if h == -(2**31) else abs(h)) % partitions
    assert transaction_partition_for(transactional_id, partitions) == expected


# --- keys -----------------------------------------------------------------------------

def test_key_is_version_0_and_the_transactional_id():
    assert transaction_log_key("txn-1") == struct.pack(">h", 0) + _string("txn-1")
    assert read_key(struct.pack(">h", 0) + _string("txn-1")) == "txn-1"


def test_unknown_key_versions_are_skipped_and_bad_keys_refused():
    assert read_key(struct.pack(">h", 1) + _string("x")) is None
    with pytest.raises(TransactionLogFormatError, match="null"):
        read_key(None)
    with pytest.raises(TransactionLogFormatError, match="no version"):
        read_key(b"\x00")
    with pytest.raises(TransactionLogFormatError, match="does not decode"):
        read_key(struct.pack(">hh", 0, 10) + b"abc")


# --- values ---------------------------------------------------------------------------

def test_ongoing_value_v0_bytes():
    transit = _transit(S.ONGOING, frozenset({("b", 1), ("a", 2), ("a", 0)}))
    expected = (
        struct.pack(">hqhib", 0, 4711, 3, 60000, 1)
        + struct.pack(">i", 2)  # two topics, sorted
        + _string("a") + struct.pack(">iii", 2, 0, 2)
        + _string("b") + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 2000, 1000)  # last update, then start
    )
    assert transaction_log_value(transit) == expected


def test_empty_value_has_null_partitions():
    value = transaction_log_value(_transit(S.EMPTY, start=-1))
    assert value == struct.pack(">hqhib", 0, 4711, 3, 60000, 0) + struct.pack(">iqq", -1, 2000,
                                                                                -1)
    meta = read_value("t", value)
    assert meta is not None and meta.state == S.EMPTY and meta.topic_partitions == set()


def test_empty_with_partitions_and_dead_are_refused():
    with pytest.raises(ValueError, match="not expected to have any partitions"):
        transaction_log_value(_transit(S.EMPTY, frozenset({("a", 0)})))
    with pytest.raises(ValueError, match="tombstone"):
        transaction_log_value(_transit(S.DEAD))


def test_reading_a_value_gives_metadata_without_last_producer():
    value = (struct.pack(">hqhib", 0, 9, 7, 30000, 2) + struct.pack(">i", 1) + _string("t")
             + struct.pack(">ii", 1, 5) + struct.pack(">qq", 50, 40))
    meta = read_value("txn", value)
    assert meta is not None
    assert (meta.transactional_id, meta.producer_id, meta.producer_epoch, meta.txn_timeout_ms,
            meta.state, meta.topic_partitions, meta.txn_last_update_timestamp,
            meta.txn_start_timestamp) == ("txn", 9, 7, 30000, S.PREPARE_COMMIT, {("t", 5)}, 50,
                                          40)
    assert (meta.last_producer_id, meta.last_producer_epoch, meta.pending_state) == (-1, -1,
                                                                                      None)
    assert read_value("txn", None) is None  # tombstone


def test_value_v1_flexible_is_read():
    value = (struct.pack(">hqhib", 1, 9, 7, 30000, 1)
             + bytes([2]) + bytes([2]) + b"t" + bytes([2]) + struct.pack(">i", 3) + b"\x00"
             + struct.pack(">qq", 50, 40) + b"\x00")
    meta = read_value("x", value)
    assert meta is not None and meta.state == S.ONGOING and meta.topic_partitions == {("t", 3)}
    assert transaction_log_value(_transit(S.ONGOING, frozenset({("t", 3)})), version=1)[:2] == (
        b"\x00\x01")


@pytest.mark.parametrize(("value", "message"), [
    (struct.pack(">h", 2) + bytes(40), "Unknown version 2"),
    (struct.pack(">hqhib", 0, 1, 0, 1, 9) + struct.pack(">iqq", -1, 0, 0),
     "Unknown transaction state id 9"),
    (struct.pack(">hqh", 0, 1, 0), "does not decode"),
    (b"\x00", "no version"),
])
def test_bad_values_are_refused(value, message):
    with pytest.raises(TransactionLogFormatError, match=message):
        read_value("x", value)


_states = st.sampled_from([S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT,
                           S.COMPLETE_ABORT])
_partitions = st.frozensets(st.tuples(st.text(min_size=1, max_size=8), st.integers(0, 1000)),
                            max_size=6)


@given(_states, _partitions, st.integers(0, 2**63 - 1), st.integers(0, 32767),
       st.integers(1, 2**31 - 1), st.integers(-1, 2**40), st.sampled_from([0, 1]))
def test_value_round_trip(state, partitions, producer_id, epoch, timeout, start, version):
    transit = TxnTransitMetadata(producer_id, -1, epoch, -1, timeout, state, partitions, start,
                                 start + 1)
    meta = read_value("id", transaction_log_value(transit, version))
    assert meta is not None
    assert meta.prepare_no_transit() == TxnTransitMetadata(
        producer_id, -1, epoch, -1, timeout, state, partitions, start, start + 1)
