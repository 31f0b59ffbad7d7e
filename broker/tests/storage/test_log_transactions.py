"""Transactions through the partition log: transactional batches open transactions,
markers close them (an abort lands in the txn index of the marker's segment), the last
stable offset, the marker checks, and what restarts, crashes, truncation and followers
keep. Non-transactional logs are unchanged: their LSO is the high watermark."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import crash

from moldau.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from moldau.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_batch, build_control_batch
from moldau.storage.config import LogConfig
from moldau.storage.log import READ_COMMITTED, READ_UNCOMMITTED, PartitionLog
from moldau.storage.txn_index import AbortedTxn


def produce(pid: int, seq: int, *, count: int = 2, epoch: int = 0,
            transactional: bool = True) -> bytes:
    return build_batch([(b"k", b"v%d" % (seq + i), (), 1000) for i in range(count)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       is_transactional=transactional)


def marker(pid: int, control: int, *, epoch: int = 0, coordinator_epoch: int = 0) -> bytes:
    return build_control_batch(control, producer_id=pid, producer_epoch=epoch,
                               coordinator_epoch=coordinator_epoch, timestamp=2000)


def open_log(path: Path, **kwargs) -> PartitionLog:
    config = LogConfig(segment_bytes=kwargs.pop("segment_bytes", 1 << 20), retention_ms=-1)
    return PartitionLog(str(path / "t-0"), config, sync=False, **kwargs)


def write_marker(log: PartitionLog, pid: int, control: int, **kwargs) -> int:
    return log.append_as_leader(marker(pid, control, **kwargs), 0, from_client=False).first_offset


def txnindex_entries(log: PartitionLog, base: int) -> list[tuple]:
    path = os.path.join(log.directory, f"{base:020d}.txnindex")
    if not os.path.exists(path):
        return []
    data = Path(path).read_bytes()
    return [struct.unpack_from(">hqqqq", data, i) for i in range(0, len(data), 34)]


def test_lso_stops_at_an_open_transaction_until_its_marker_is_replicated(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(produce(1, 0, transactional=False), 0)   # 0-1, idempotent
    log.append_as_leader(produce(2, 0), 0)                         # 2-3, transaction
    log.append_as_leader(produce(1, 2, transactional=False), 0)   # 4-5
    log.update_high_watermark(log.log_end_offset)
    assert (log.high_watermark, log.last_stable_offset) == (6, 2)
    assert log.fetch_upper_bound(READ_COMMITTED) == 2
    assert log.fetch_upper_bound(READ_UNCOMMITTED) == 6
    at = write_marker(log, 2, CONTROL_ABORT, coordinator_epoch=3)  # offset 6
    assert at == 6
    assert txnindex_entries(log, 0) == [(0, 2, 2, 6, 7)]
    assert log.last_stable_offset == 2  # the marker is not below the high watermark yet
    log.update_high_watermark(6)
    assert log.last_stable_offset == 2
    log.update_high_watermark(7)
    assert log.last_stable_offset == 7 == log.high_watermark
    assert log.active_segment.txn_index.collect_aborted(0, 7).aborted == [
        AbortedTxn(2, 2, 6, 7)]


def test_a_commit_is_not_indexed_and_the_lso_sees_the_other_open_transaction(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(produce(1, 0), 0)   # 0-1
    log.append_as_leader(produce(2, 0), 0)   # 2-3
    write_marker(log, 2, CONTROL_COMMIT)     # 4
    write_marker(log, 1, CONTROL_ABORT)      # 5: nothing else open, LSO 6
    assert txnindex_entries(log, 0) == [(0, 1, 0, 5, 6)]
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.high_watermark == 6


def test_another_producers_open_transaction_is_the_indexed_lso(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(produce(1, 0), 0)   # 0-1
    log.append_as_leader(produce(2, 0), 0)   # 2-3
    write_marker(log, 2, CONTROL_ABORT)      # 4
    assert txnindex_entries(log, 0) == [(0, 2, 2, 4, 0)]


def test_bad_markers_and_a_non_transactional_write_in_a_transaction_write_nothing(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(produce(1, 0, epoch=3), 0)
    write_marker(log, 1, CONTROL_COMMIT, epoch=3, coordinator_epoch=5)
    log.append_as_leader(produce(1, 2, epoch=3), 0)  # the next transaction
    end = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        write_marker(log, 1, CONTROL_ABORT, epoch=2, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        write_marker(log, 1, CONTROL_ABORT, epoch=3, coordinator_epoch=4)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(produce(1, 4, epoch=3, transactional=False), 0)
    assert log.log_end_offset == end and txnindex_entries(log, 0) == []
    # a producer without an open transaction may get a marker: nothing is indexed
    write_marker(log, 99, CONTROL_ABORT)
    assert txnindex_entries(log, 0) == [] and log.log_end_offset == end + 1


def test_clients_cannot_write_markers(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(InvalidRecordError, match="control batches"):
        log.append_as_leader(marker(1, CONTROL_ABORT), 0)


def test_the_abort_goes_to_the_markers_segment_and_truncation_reopens_it(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(produce(7, 0), 0)   # 0-1 in segment 0
    log.roll()
    log.append_as_leader(produce(7, 2), 0)   # 2-3 in segment 2
    at = write_marker(log, 7, CONTROL_ABORT)
    assert txnindex_entries(log, 0) == [] and txnindex_entries(log, 2) == [(0, 7, 0, 4, 5)]
    log.truncate_to(at)  # a follower cut back to its leader: the marker goes
    assert txnindex_entries(log, 2) == []
    assert os.path.exists(os.path.join(log.directory, f"{2:020d}.txnindex"))  # emptied
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0  # the transaction is open again


def test_open_transactions_survive_a_clean_restart_and_a_crash(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(produce(1, 0), 0)   # 0-1
    log.append_as_leader(produce(2, 0), 0)   # 2-3
    write_marker(log, 1, CONTROL_ABORT)      # 4
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 2
    log.close()
    log = open_log(tmp_path, high_watermark=5)
    assert log.last_stable_offset == 2
    assert log.producer_state.producers[2].current_txn_first_offset == 2
    log.roll()  # snapshot at 5 with producer 2's open transaction
    log.append_as_leader(produce(3, 0), 0)   # 5-6
    write_marker(log, 2, CONTROL_COMMIT)     # 7
    crash(log)
    log = open_log(tmp_path, clean_shutdown=False, high_watermark=8)
    assert log.last_stable_offset == 5  # producer 3's transaction
    assert txnindex_entries(log, 0) == [(0, 1, 0, 4, 2)]  # kept on disk
    write_marker(log, 3, CONTROL_ABORT)      # 8
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 9


def test_a_follower_builds_the_same_index(tmp_path):
    leader = open_log(tmp_path / "leader")
    leader.append_as_leader(produce(1, 0), 0)
    leader.append_as_leader(produce(2, 0), 0)
    write_marker(leader, 1, CONTROL_ABORT)
    write_marker(leader, 2, CONTROL_ABORT)
    data = leader.read_bytes(leader.read(0, 1 << 20))
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(data)
    assert txnindex_entries(follower, 0) == txnindex_entries(leader, 0) == [
        (0, 1, 0, 4, 2), (0, 2, 2, 5, 6)]


def test_a_log_without_transactions_has_lso_hw_and_no_txn_index(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    for seq in range(0, 40, 2):
        log.append_as_leader(produce(5, seq, transactional=False), 0)
        log.append_as_leader(build_batch([(None, b"x", (), 1000)]), 0)
        log.update_high_watermark(log.log_end_offset - 1)
        assert log.last_stable_offset == log.high_watermark
    assert len(log.segments) > 1
    log.truncate_to(10)
    assert log.last_stable_offset == log.high_watermark
    assert not [n for n in os.listdir(log.directory) if n.endswith(".txnindex")]


def test_unclean_recovery_rebuilds_the_txn_index(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(produce(1, 0), 0)   # 0-1 in segment 0
    log.append_as_leader(produce(2, 0), 0)   # 2-3
    log.roll()                               # snapshot at 4: both open
    write_marker(log, 1, CONTROL_ABORT)      # 4, LSO at the time: 2 (producer 2)
    log.append_as_leader(produce(3, 0), 0)   # 5-6
    write_marker(log, 2, CONTROL_ABORT)      # 7, LSO: 5 (producer 3)
    expected = [(0, 1, 0, 4, 2), (0, 2, 2, 7, 5)]
    assert txnindex_entries(log, 4) == expected
    directory = log.directory
    crash(log)
    # the index was lost (written but never flushed)
    os.remove(os.path.join(directory, f"{4:020d}.txnindex"))
    log = open_log(tmp_path, clean_shutdown=False, recovery_point=4, high_watermark=8)
    assert txnindex_entries(log, 4) == expected
    assert log.last_stable_offset == 5


def test_recovery_drops_the_entry_of_a_marker_lost_in_the_crash(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(produce(1, 0), 0)   # 0-1
    write_marker(log, 1, CONTROL_ABORT)      # 2
    assert txnindex_entries(log, 0) == [(0, 1, 0, 2, 3)]
    path = log.active_segment.log_path
    size = os.path.getsize(path)
    crash(log)
    os.truncate(path, size - 5)  # the marker batch is torn
    log = open_log(tmp_path, clean_shutdown=False, high_watermark=2)
    assert log.log_end_offset == 2
    assert txnindex_entries(log, 0) == []
    assert log.last_stable_offset == 0  # the transaction is open again


def test_recovery_without_transactions_writes_no_txn_index(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    for seq in range(0, 20, 2):
        log.append_as_leader(produce(5, seq, transactional=False), 0)
    crash(log)
    log = open_log(tmp_path, clean_shutdown=False, segment_bytes=300)
    assert log.log_end_offset == 20
    assert not [n for n in os.listdir(log.directory) if n.endswith(".txnindex")]


_steps = st.lists(st.tuples(st.sampled_from(["data", "commit", "abort", "hw", "reopen"]),
                            st.integers(1, 3)), max_size=25)


@settings(deadline=None)
@given(_steps)
def test_lso_and_index_match_a_model(tmp_path_factory, steps):
    """Any interleaving of three transactional producers, markers, high watermark moves and
    clean restarts: the LSO and the txn index are what Kafka's rules give."""
    path = tmp_path_factory.mktemp("log")
    log = open_log(path)
    seqs = {1: 0, 2: 0, 3: 0}
    open_txns: dict[int, int] = {}  # producer -> first offset
    decided: list[tuple[int, int]] = []  # (first offset, marker offset) not yet stable
    index: list[tuple] = []
    for step, pid in steps:
        end = log.log_end_offset
        if step == "data":
            log.append_as_leader(produce(pid, seqs[pid], count=1), 0)
            seqs[pid] += 1
            open_txns.setdefault(pid, end)
        elif step in ("commit", "abort"):
            write_marker(log, pid, CONTROL_ABORT if step == "abort" else CONTROL_COMMIT)
            if pid in open_txns:
                first = open_txns.pop(pid)
                if step == "abort":
                    others = [f for p, f in open_txns.items() if p != pid]
                    index.append((0, pid, first, end, min(others) if others else end + 1))
                decided.append((first, end))
        elif step == "hw":
            log.update_high_watermark(end)
        else:
            hw = log.high_watermark
            log.close()
            log = open_log(path, high_watermark=hw)
            decided = []  # as Kafka: a reload keeps open transactions, not unreplicated ones
        decided = [(f, m) for f, m in decided if m >= log.high_watermark]
        unstable = [*open_txns.values(), *(f for f, _ in decided)]
        expected = min([*unstable, log.high_watermark])
        assert log.last_stable_offset == expected
        assert txnindex_entries(log, 0) == index
    log.close()
