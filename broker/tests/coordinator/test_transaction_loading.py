"""Rebuilding a `__transaction_state` partition's table from its records."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.coordinator.transaction.loading import (
    key_values,
    load_transactions,
    transactions_awaiting_markers,
)
from moldau.coordinator.transaction.log_records import (
    TransactionLogFormatError,
    transaction_log_key,
    transaction_log_value,
)
from moldau.coordinator.transaction.metadata import TxnTransitMetadata
from moldau.coordinator.transaction.state import TransactionState
from moldau.protocol.records import CONTROL_COMMIT, RecordBatch, build_batch, build_control_batch

S = TransactionState


def _value(state: TransactionState, epoch: int = 0, partitions=frozenset(),
           start: int = 1) -> bytes:
    return transaction_log_value(TxnTransitMetadata(
        7, -1, epoch, -1, 60000, state, frozenset(partitions),
        -1 if state == S.EMPTY else start, 2))


def test_last_value_wins_and_tombstones_remove():
    records = [
        (transaction_log_key("a"), _value(S.EMPTY)),
        (transaction_log_key("b"), _value(S.EMPTY)),
        (transaction_log_key("a"), _value(S.ONGOING, partitions={("t", 0)})),
        (transaction_log_key("b"), None),
        (transaction_log_key("c"), _value(S.PREPARE_ABORT, 3, {("t", 1)})),
        (struct.pack(">h", 5) + b"future", b"ignored"),  # unknown key version: skipped
    ]
    table = load_transactions(records)
    assert sorted(table) == ["a", "c"]
    assert table["a"].state == S.ONGOING and table["a"].topic_partitions == {("t", 0)}
    assert table["c"].producer_epoch == 3
    assert [(m.transactional_id, commit) for m, commit in
            transactions_awaiting_markers(table)] == [("c", False)]


def test_a_tombstone_before_any_value_and_a_revived_id():
    records = [(transaction_log_key("a"), None), (transaction_log_key("a"), _value(S.EMPTY, 4))]
    assert load_transactions(records)["a"].producer_epoch == 4


def test_a_bad_value_stops_the_load():
    with pytest.raises(TransactionLogFormatError):
        load_transactions([(transaction_log_key("a"), b"\x00\x07")])


def test_key_values_reads_batches_and_skips_control_batches():
    data = build_batch([(transaction_log_key("a"), _value(S.EMPTY)),
                        (transaction_log_key("b"), None)])
    marker = build_control_batch(CONTROL_COMMIT, producer_id=1, producer_epoch=0,
                                 coordinator_epoch=0, base_offset=2)
    pairs = list(key_values([RecordBatch(data), RecordBatch(marker)]))
    assert pairs == [(transaction_log_key("a"), _value(S.EMPTY)), (transaction_log_key("b"), None)]
    table = load_transactions(pairs)
    assert list(table) == ["a"]


_ids = st.sampled_from(["a", "b", "c"])
_values = st.one_of(st.none(), st.sampled_from([S.EMPTY, S.ONGOING, S.COMPLETE_COMMIT]))


@given(st.lists(st.tuples(_ids, _values, st.integers(0, 100)), max_size=30))
def test_the_table_is_the_last_record_of_each_id(writes):
    records = [(transaction_log_key(i), None if s is None else _value(s, epoch))
               for i, s, epoch in writes]
    expected: dict[str, tuple[TransactionState, int]] = {}
    for i, s, epoch in writes:
        if s is None:
            expected.pop(i, None)
        else:
            expected[i] = (s, epoch)
    table = load_transactions(records)
    assert {i: (m.state, m.producer_epoch) for i, m in table.items()} == expected
