"""The aborted transactions a read_committed read answers with (storage/log_aborted.py)
on a real PartitionLog: found in the txn indexes of the read's segment and the later
ones, bounded by where the returned data ends."""

from __future__ import annotations

from pathlib import Path

from moldau.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_batch, build_control_batch
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog
from moldau.storage.log_aborted import aborted_transactions


def produce(log: PartitionLog, pid: int, seq: int, transactional: bool = True) -> int:
    batch = build_batch([(b"k", b"v" * 100), (b"k", b"w" * 100)], producer_id=pid,
                        producer_epoch=0, base_sequence=seq, is_transactional=transactional)
    return log.append_as_leader(batch, 0).first_offset


def marker(log: PartitionLog, pid: int, control: int) -> int:
    batch = build_control_batch(control, producer_id=pid, producer_epoch=0,
                                coordinator_epoch=0)
    return log.append_as_leader(batch, 0, from_client=False).first_offset


def aborted(log: PartitionLog, offset: int, max_bytes: int = 1 << 20) -> list[tuple[int, int]]:
    data = log.read(offset, max_bytes, max_offset=log.log_end_offset)
    return [(t.producer_id, t.first_offset) for t in aborted_transactions(log, offset, data)]


def open_log(tmp_path: Path, **config: int) -> PartitionLog:
    return PartitionLog(str(tmp_path / "t-0"), LogConfig(retention_ms=-1, **config), sync=False)


def test_an_abort_in_a_later_segment_is_found(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 1, 0)                   # 0-1, segment 0
    produce(log, 2, 0, transactional=False)  # 2-3
    log.roll()
    produce(log, 2, 2, transactional=False)  # 4-5, segment 4
    log.roll()
    abort_at = marker(log, 1, CONTROL_ABORT)  # 6, segment 6
    assert abort_at == 6
    # a read of segment 0 only still names pid 1: its marker is two segments on
    assert aborted(log, 0) == [(1, 0)]
    assert aborted(log, 2) == [(1, 0)]
    assert aborted(log, 7) == []  # at the log end: nothing read, nothing listed


def test_the_bound_is_where_the_returned_data_ends(tmp_path: Path) -> None:
    # an index entry per batch, so the bound is the batch after the data returned
    log = open_log(tmp_path, index_interval_bytes=1)
    produce(log, 1, 0, transactional=False)   # 0-1
    produce(log, 1, 2, transactional=False)   # 2-3
    produce(log, 2, 0)                        # 4-5
    marker(log, 2, CONTROL_ABORT)             # 6
    produce(log, 3, 0)                        # 7-8
    marker(log, 3, CONTROL_COMMIT)            # 9
    one_batch = log.read(0, 1).size
    # only batch 0-1 returned: the next index entry (2) bounds it, before pid 2's data
    assert aborted(log, 0, max_bytes=one_batch) == []
    assert aborted(log, 0) == [(2, 4)]
    assert aborted(log, 4, max_bytes=1) == [(2, 4)]
    assert aborted(log, 7) == []  # past the abort: a commit is never listed


def test_several_aborts_in_order(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 1, 0)              # 0-1
    produce(log, 2, 0)              # 2-3
    marker(log, 2, CONTROL_ABORT)   # 4
    marker(log, 1, CONTROL_ABORT)   # 5
    produce(log, 3, 0)              # 6-7
    marker(log, 3, CONTROL_ABORT)   # 8
    assert aborted(log, 0) == [(2, 2), (1, 0), (3, 6)]
    assert aborted(log, 5) == [(1, 0), (3, 6)]


def test_an_index_seen_without_a_file_still_sees_a_later_abort(tmp_path: Path) -> None:
    """A read remembers that a segment has no .txnindex (no system call per fetch); the
    ABORT appended later is found all the same."""
    log = open_log(tmp_path)
    produce(log, 1, 0)                        # 0-1
    assert aborted(log, 0) == []
    assert not log.active_segment.txn_index.may_hold_entries()
    marker(log, 1, CONTROL_ABORT)             # 2
    assert aborted(log, 0) == [(1, 0)]
    log.roll()
    produce(log, 2, 0)                        # 3-4, a new segment
    assert aborted(log, 3) == []
    marker(log, 2, CONTROL_ABORT)             # 5
    assert aborted(log, 3) == [(2, 3)]
    assert aborted(log, 0) == [(1, 0)]  # a read stays in its segment: bounded at 3
