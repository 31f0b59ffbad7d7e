"""Transactions in the producer state: open on the first transactional batch, closed by a
marker (CompletedTxn and the LSO Kafka indexes with it), the first unstable offset, the
marker checks, and open transactions kept across a snapshot."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from moldau.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from moldau.storage.producer_state import ProducerStateManager, decode_snapshot, encode_snapshot
from moldau.storage.producer_txns import CompletedTxn, last_stable_offset


def txn_batch(state: ProducerStateManager, pid: int, first: int, count: int = 2,
              seq: int = 0, epoch: int = 0, transactional: bool = True) -> None:
    state.update(pid, epoch, seq, seq + count - 1, first + count - 1, 1000 + first,
                 first_offset=first, is_transactional=transactional)


def close(state: ProducerStateManager, pid: int, offset: int, *, abort: bool = False,
          epoch: int = 0, coordinator_epoch: int = 0) -> CompletedTxn | None:
    state.check_marker(pid, epoch, coordinator_epoch, offset)
    completed = state.apply_marker(pid, epoch, coordinator_epoch, abort, offset, 5000 + offset)
    if completed is not None:
        state.txns.complete(completed)
    return completed


def test_a_transaction_opens_with_its_first_batch_and_closes_with_its_marker(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    txn_batch(state, 1, first=10)
    txn_batch(state, 1, first=12, seq=2)  # same transaction: still from 10
    assert state.producers[1].current_txn_first_offset == 10
    assert state.first_unstable_offset() == 10
    completed = state.apply_marker(1, 0, 3, False, 14, 99)
    assert completed == CompletedTxn(1, 10, 14, is_aborted=False)
    assert state.txns.last_stable_offset(completed) == 15  # nothing else open: marker + 1
    state.txns.complete(completed)
    entry = state.producers[1]
    assert (entry.current_txn_first_offset, entry.coordinator_epoch, entry.last_timestamp) == (
        -1, 3, 99)
    assert entry.last_seq == 3  # the same epoch keeps the sequence
    # decided, but its marker is not below the high watermark yet
    assert state.first_unstable_offset() == 10
    state.txns.on_high_watermark_updated(14)
    assert state.first_unstable_offset() == 10
    state.txns.on_high_watermark_updated(15)
    assert state.first_unstable_offset() is None


def test_lso_of_an_aborted_txn_is_another_producers_open_txn(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    txn_batch(state, 1, first=0)
    txn_batch(state, 2, first=2)
    txn_batch(state, 3, first=4)
    completed = state.apply_marker(2, 0, 0, True, 6, 1)
    assert completed is not None and completed.is_aborted
    assert state.txns.last_stable_offset(completed) == 0  # producer 1's, the earliest
    state.txns.complete(completed)
    first = state.apply_marker(1, 0, 0, True, 7, 1)
    assert first is not None and state.txns.last_stable_offset(first) == 4  # producer 3's
    state.txns.complete(first)
    # the unreplicated transactions (first offsets 0 and 2) and the open one at 4
    assert state.first_unstable_offset() == 0
    state.txns.on_high_watermark_updated(8)
    assert state.first_unstable_offset() == 4


def test_a_marker_without_an_open_transaction_completes_nothing(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    assert close(state, 9, 0, abort=True, epoch=2, coordinator_epoch=4) is None
    entry = state.producers[9]  # but the producer is known now, with the marker's epochs
    assert (entry.epoch, entry.coordinator_epoch, list(entry.batches)) == (2, 4, [])
    assert state.first_unstable_offset() is None


def test_marker_epoch_checks(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    txn_batch(state, 1, first=0, epoch=5)
    close(state, 1, 2, coordinator_epoch=7, epoch=5)
    with pytest.raises(InvalidProducerEpochError, match="4, which is smaller than the last "
                                                        "seen epoch 5"):
        state.check_marker(1, 4, 7, 3)
    with pytest.raises(TransactionCoordinatorFencedError, match=r"6 \(zombie\), 7 \(current\)"):
        state.check_marker(1, 5, 6, 3)
    state.check_marker(1, 6, 7, 3)  # a bumped epoch (a fenced producer's abort) is fine
    state.check_marker(2, 0, 0, 3)  # an unknown producer too


def test_a_fencing_marker_with_a_new_epoch_clears_the_sequences(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    txn_batch(state, 1, first=0, epoch=5)
    assert close(state, 1, 2, abort=True, epoch=6) == CompletedTxn(1, 0, 2, True)
    assert state.producers[1].epoch == 6 and not state.producers[1].batches


def test_non_transactional_batch_during_a_transaction_is_invalid_txn_state(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    txn_batch(state, 1, first=0)
    with pytest.raises(InvalidTxnStateError, match="Expected transactional write from "
                                                   "producer 1 at offset 2"):
        state.check(1, 0, 2, 2, is_transactional=False)
    state.check(1, 0, 2, 2, is_transactional=True)
    state.check(1, 0, 2, 2)  # not said: not checked (the old callers)


def test_idempotent_producers_open_nothing(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    txn_batch(state, 1, first=0, transactional=False)
    state.check(1, 0, 2, 2, is_transactional=False)
    assert state.first_unstable_offset() is None and not state.txns
    assert state.producers[1].current_txn_first_offset == -1


def test_open_transactions_survive_a_snapshot(tmp_path):
    state = ProducerStateManager(str(tmp_path), expiration_ms=1000)
    txn_batch(state, 2, first=7)
    txn_batch(state, 1, first=3)
    close(state, 3, 9, coordinator_epoch=2)  # a producer known only from a marker
    state.take_snapshot(10, sync=False)
    reloaded = ProducerStateManager(str(tmp_path), expiration_ms=1000)
    # long after producer.id.expiration.ms: producers with an open transaction stay
    assert reloaded.load(0, 10, now_ms=10**9) == 10
    assert sorted(reloaded.producers) == [1, 2]
    assert list(reloaded.txns.ongoing) == [3, 7]  # sorted by first offset
    assert reloaded.first_unstable_offset() == 3
    reloaded.truncate()
    assert reloaded.first_unstable_offset() is None


def test_snapshot_entry_of_a_marker_only_producer_is_kafkas(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    close(state, 3, 9, epoch=1, coordinator_epoch=2)
    data = encode_snapshot(state.producers.values())
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 3, 1, -1, -1, 0, 5009, 2, -1)
    assert data == struct.pack(">hI", 1, crc32c(body)) + body
    (entry,) = decode_snapshot(data)
    assert (entry.epoch, entry.coordinator_epoch, list(entry.batches), entry.last_timestamp) == (
        1, 2, [], 5009)


@pytest.mark.parametrize(("first_unstable", "hw", "log_start", "lso"), [
    (None, 50, 0, 50),   # nothing unstable: the high watermark
    (10, 50, 0, 10),
    (60, 50, 0, 50),     # never above the high watermark
    (10, 50, 20, 20),    # never below the log start
])
def test_last_stable_offset(first_unstable, hw, log_start, lso):
    assert last_stable_offset(first_unstable, hw, log_start) == lso


def test_a_late_transaction_is_the_oldest_ones_producer_silent_past_the_max_timeout(tmp_path):
    # Kafka's hasLateTransaction: transaction.max.timeout.ms + 5 minutes after the last
    # write of the producer whose open transaction starts first
    from moldau.storage.producer_state import LATE_TRANSACTION_BUFFER_MS

    state = ProducerStateManager(str(tmp_path))
    limit = 60_000 + LATE_TRANSACTION_BUFFER_MS
    assert not state.has_late_transaction(10**12, 60_000)  # nothing open
    txn_batch(state, 1, first=0)  # written at 1000
    txn_batch(state, 2, first=2)  # written at 1002
    assert not state.has_late_transaction(1000 + limit, 60_000)
    assert state.has_late_transaction(1001 + limit, 60_000)
    # producer 1 writes again: its transaction is no longer silent
    txn_batch(state, 1, first=4, seq=2)  # at 1004
    assert not state.has_late_transaction(1001 + limit, 60_000)
    # producer 1 commits: producer 2's transaction is the oldest now
    close(state, 1, 6)
    assert state.has_late_transaction(1003 + limit, 60_000)
    close(state, 2, 7, abort=True)
    assert not state.has_late_transaction(10**12, 60_000)
