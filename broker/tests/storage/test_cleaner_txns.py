"""Log compaction of transactional data (Kafka 3.9's cleaner rules): nothing at or past the
last stable offset is touched, aborted batches go, committed records are compacted by key,
markers stay while their transaction has data and go delete.retention.ms after that, the
cleaned segment's .txnindex holds the aborts whose markers it keeps, a live producer's
last batch stays (emptied), and a restart finds the same log."""

from __future__ import annotations

import os
import struct
import time
from pathlib import Path

import pytest
from storage_helpers import crash

from moldau.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    RecordBatch,
    build_batch,
    build_control_batch,
    iter_batches,
)
from moldau.storage import cleaner
from moldau.storage.config import LogConfig
from moldau.storage.log import READ_COMMITTED, PartitionLog
from moldau.storage.log_aborted import aborted_transactions
from moldau.tools.read_committed import AbortedFilter

DAY = 24 * 3600 * 1000
T = int(time.time() * 1000)  # record times: appends check them against the clock
NOW = T + 1000  # the cleaner's clock

P1, P2, P4, P5, P6 = 1001, 1002, 1004, 1005, 1006  # producer ids


def config() -> LogConfig:
    return LogConfig(cleanup_policy=("compact",), retention_ms=-1,
                     min_cleanable_dirty_ratio=0.0)


def open_log(path: Path) -> PartitionLog:
    return PartitionLog(str(path / "t-0"), config(), sync=False)


class Producers:
    """Appends as a leader would, tracking each producer's next sequence."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.seq: dict[int, int] = {}

    def txn(self, pid: int, *records: tuple[bytes, bytes | None]) -> int:
        return self._send(pid, records, transactional=True)

    def idempotent(self, pid: int, *records: tuple[bytes, bytes | None]) -> int:
        return self._send(pid, records, transactional=False)

    def _send(self, pid: int, records: tuple[tuple[bytes, bytes | None], ...],
              transactional: bool) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + len(records)
        return self.log.append_as_leader(build_batch(
            [(k, v, (), T) for k, v in records], producer_id=pid, producer_epoch=0,
            base_sequence=seq, is_transactional=transactional), 0).first_offset

    def plain(self, key: bytes, value: bytes | None) -> int:
        return self.log.append_as_leader(build_batch([(key, value, (), T)]), 0).first_offset

    def end(self, pid: int, control: int) -> int:
        return self.log.append_as_leader(build_control_batch(
            control, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=T),
            0, from_client=False).first_offset

    def replicate(self) -> None:
        self.log.update_high_watermark(self.log.log_end_offset)


def batches(log: PartitionLog) -> list[RecordBatch]:
    out: list[RecordBatch] = []
    for segment in log.segments:
        out += iter_batches(segment.read_bytes(0, segment.size))
    return out


def records(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in batches(log) if not b.is_control
            for r in b.records()]


def markers(log: PartitionLog) -> list[tuple[int, int, int | None]]:
    """(offset, producer id, delete horizon) of every marker still holding its record."""
    return [(b.base_offset, b.producer_id, b.delete_horizon_ms) for b in batches(log)
            if b.is_control and b.records_count]


def txnindex(log: PartitionLog) -> dict[int, list[tuple[int, int, int]]]:
    """Per segment base, the (producer id, first, last offset) entries on disk."""
    out = {}
    for segment in log.segments:
        path = os.path.join(log.directory, f"{segment.base_offset:020d}.txnindex")
        if os.path.exists(path):
            data = Path(path).read_bytes()
            out[segment.base_offset] = [struct.unpack_from(">hqqqq", data, i)[1:4]
                                        for i in range(0, len(data), 34)]
    return out


def read_committed(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """What a read_committed consumer gets from the log start, as Kafka's consumer drops
    aborted batches with the fetch's aborted transactions."""
    bound = log.fetch_upper_bound(READ_COMMITTED)
    offset, out = log.log_start_offset, []
    while offset < bound:  # one fetch per segment
        data = log.read(offset, 1 << 20, max_offset=bound)
        keep = AbortedFilter(aborted_transactions(log, offset, data))
        for batch in iter_batches(log.read_bytes(data)):
            if keep.keep(batch):
                out += [(r.offset, r.key, r.value) for r in batch.records()]
            offset = batch.next_offset
    return out


def clean(log: PartitionLog, first_dirty: int, now: int) -> cleaner.CleanResult:
    found = cleaner.needs_cleaning(log, first_dirty, now)
    assert found is not None
    return cleaner.clean(log, found, now)


def build_log(tmp_path: Path) -> tuple[PartitionLog, Producers]:
    """Two segments of decided transactions and an open one (P4) inside the second."""
    log = open_log(tmp_path)
    p = Producers(log)
    assert p.plain(b"k1", b"a") == 0
    assert p.txn(P1, (b"k1", b"b"), (b"k2", b"b")) == 1       # 1-2, committed at 5
    assert p.txn(P2, (b"k1", b"x"), (b"k3", b"x")) == 3       # 3-4, aborted at 6
    assert p.end(P1, CONTROL_COMMIT) == 5
    assert p.end(P2, CONTROL_ABORT) == 6
    log.roll()
    assert p.txn(P1, (b"k2", b"c")) == 7                      # committed at 9
    assert p.txn(P2, (b"k1", b"y")) == 8                      # aborted at 11
    assert p.end(P1, CONTROL_COMMIT) == 9
    assert p.plain(b"k3", b"d") == 10
    assert p.end(P2, CONTROL_ABORT) == 11
    assert p.txn(P4, (b"k1", b"open")) == 12                  # open: the LSO
    assert p.plain(b"k2", b"e") == 13
    assert p.txn(P5, (b"k4", b"z")) == 14                     # aborted at 15, past the LSO
    assert p.end(P5, CONTROL_ABORT) == 15
    assert p.plain(b"k5", None) == 16                         # a tombstone past the LSO
    log.roll()
    assert p.plain(b"k6", b"f") == 17
    p.replicate()
    return log, p


def test_the_lso_ends_the_cleanable_range(tmp_path):
    log, _ = build_log(tmp_path)
    assert (log.high_watermark, log.last_stable_offset) == (18, 12)
    found = cleaner.needs_cleaning(log, 0, NOW)
    assert found is not None and found.first_uncleanable == 12  # not the active segment's 17


def test_aborted_batches_go_committed_records_are_compacted_and_the_rest_is_untouched(
        tmp_path):
    log, _ = build_log(tmp_path)
    second = log.segments[1]
    at_lso = next(b for b in batches(log) if b.base_offset == 12)
    past_lso = second.read_bytes(0, second.size)
    past_lso = past_lso[past_lso.index(bytes(at_lso.buffer)):]
    assert read_committed(log) == [
        (0, b"k1", b"a"), (1, b"k1", b"b"), (2, b"k2", b"b"), (7, b"k2", b"c"),
        (10, b"k3", b"d")]

    result = clean(log, 0, NOW)

    assert result.end_offset == 12
    assert records(log) == [
        (1, b"k1", b"b"),           # k1=a (0) lost to P1's committed k1; k1=x/y were aborted
        (7, b"k2", b"c"),           # k2=b (2) lost to k2=c
        (10, b"k3", b"d"),          # k3=x (4) was aborted
        (12, b"k1", b"open"),       # from the LSO on, everything as it was
        (13, b"k2", b"e"),
        (14, b"k4", b"z"),
        (16, b"k5", None),
        (17, b"k6", b"f"),
    ]
    kept = {b.base_offset: b for b in batches(log)}
    assert kept[1].is_transactional and kept[1].last_offset == 2  # re-encoded, span kept
    # P2's last data batch (8) stays, emptied: it holds P2's epoch and last sequence.
    assert kept[8].records_count == 0 and kept[8].is_transactional
    assert (kept[8].producer_id, kept[8].base_sequence) == (P2, 2)
    assert 3 not in kept and 0 not in kept
    # Every marker stays: each transaction still had data when this pass met it.
    assert markers(log) == [(5, P1, None), (6, P2, None), (9, P1, None), (11, P2, None),
                            (15, P5, None)]
    # The two segments became one whose index holds the aborts whose markers it keeps.
    assert [s.base_offset for s in log.segments] == [0, 17]
    assert txnindex(log) == {0: [(P2, 3, 6), (P2, 8, 11), (P5, 14, 15)]}
    # Bytes at and past the LSO are the original ones.
    first = log.segments[0]
    assert first.read_bytes(0, first.size).endswith(past_lso)
    # A read_committed consumer gets the latest committed value of each key.
    assert read_committed(log) == [(1, b"k1", b"b"), (7, b"k2", b"c"), (10, b"k3", b"d")]


def test_markers_get_a_horizon_once_their_data_is_gone_and_go_after_it(tmp_path):
    log, p = build_log(tmp_path)
    dirty = clean(log, 0, NOW).end_offset
    assert p.end(P4, CONTROL_COMMIT) == 18                   # the open transaction commits
    assert p.plain(b"k1", b"g") == 19                         # hides P1's k1=b (1) and P4's
    assert p.plain(b"k4", b"h") == 20
    log.roll()
    assert p.plain(b"k7", b"i") == 21
    p.replicate()
    assert log.last_stable_offset == 22

    second = NOW + 1000
    dirty = clean(log, dirty, second).end_offset
    assert records(log) == [
        (10, b"k3", b"d"), (13, b"k2", b"e"), (16, b"k5", None), (17, b"k6", b"f"),
        (19, b"k1", b"g"), (20, b"k4", b"h"), (21, b"k7", b"i")]
    horizon = second + DAY  # delete.retention.ms
    # Each producer's last data batch stays, emptied if need be (P1's 7, P2's 8, P4's 12,
    # P5's 14), so their markers (9, 11, 18, 15) still have data.
    assert [b.base_offset for b in batches(log) if b.producer_id >= 0 and not b.is_control
            and not b.records_count] == [7, 8, 12, 14]
    # P2's first abort lost its data in the first pass: its marker gets a horizon now.
    # P1's first transaction (1-2) lost its data in this pass: its marker is still needed
    # by this pass's walk, and gets its horizon in the next one.
    assert markers(log) == [(5, P1, None), (6, P2, horizon), (9, P1, None),
                            (11, P2, None), (15, P5, None), (18, P4, None)]
    # The abort whose data is gone is no longer indexed.
    assert txnindex(log) == {0: [(P2, 8, 11), (P5, 14, 15)]}

    assert p.plain(b"k8", b"j") == 22
    log.roll()
    assert p.plain(b"k9", b"k") == 23
    p.replicate()
    dirty = clean(log, dirty, horizon - 1).end_offset         # not yet
    assert markers(log) == [(5, P1, horizon - 1 + DAY), (6, P2, horizon), (9, P1, None),
                            (11, P2, None), (15, P5, None), (18, P4, None)]
    assert (16, b"k5", None) in records(log)
    assert p.plain(b"k9", b"l") == 24
    log.roll()
    p.replicate()
    clean(log, dirty, horizon)                                # 6's horizon has passed
    assert markers(log) == [(5, P1, horizon - 1 + DAY), (9, P1, None), (11, P2, None),
                            (15, P5, None), (18, P4, None)]
    assert not any(b.base_offset == 6 for b in batches(log))  # not P2's last batch: gone
    assert txnindex(log) == {0: [(P2, 8, 11), (P5, 14, 15)]}
    # the tombstone (16) went by the same horizon
    assert read_committed(log) == [
        (10, b"k3", b"d"), (13, b"k2", b"e"), (17, b"k6", b"f"), (19, b"k1", b"g"),
        (20, b"k4", b"h"), (21, b"k7", b"i"), (22, b"k8", b"j"), (24, b"k9", b"l")]


def test_a_marker_that_is_a_producers_latest_state_stays_empty(tmp_path):
    """A producer whose latest epoch came from a marker keeps that marker, emptied, once
    its transaction has no data and the horizon has passed."""
    log = open_log(tmp_path)
    p = Producers(log)
    assert p.txn(P6, (b"k", b"1")) == 0
    assert log.append_as_leader(build_control_batch(
        CONTROL_ABORT, producer_id=P6, producer_epoch=1, coordinator_epoch=0, timestamp=T),
        0, from_client=False).first_offset == 1               # an abort that bumped the epoch
    log.roll()
    assert p.plain(b"x", b"1") == 2
    p.replicate()
    assert not log.producer_state.producers[P6].batches     # no data batch at epoch 1
    clean(log, 0, NOW)                                        # the aborted data goes
    clean(log, 0, NOW)                                        # the marker gets its horizon
    assert markers(log) == [(1, P6, NOW + DAY)]
    clean(log, 0, NOW + DAY)
    kept = [b for b in batches(log) if b.producer_id == P6]
    assert [(b.base_offset, b.is_control, b.records_count, b.producer_epoch)
            for b in kept] == [(1, True, 0, 1)]
    assert txnindex(log) == {}


def test_an_idempotent_producers_last_batch_stays_empty(tmp_path):
    log = open_log(tmp_path)
    p = Producers(log)
    assert p.idempotent(P6, (b"k", b"1")) == 0
    assert p.idempotent(P6, (b"k", b"2")) == 1
    assert p.plain(b"k", b"3") == 2
    log.roll()
    assert p.plain(b"y", b"1") == 3
    p.replicate()
    clean(log, 0, NOW)
    assert records(log) == [(2, b"k", b"3"), (3, b"y", b"1")]
    kept = [b for b in batches(log) if b.producer_id == P6]
    assert [(b.base_offset, b.records_count, b.base_sequence) for b in kept] == [(1, 0, 1)]
    # The producer goes on with its next sequence.
    assert p.idempotent(P6, (b"k", b"4")) == 4


@pytest.mark.parametrize("stop", ["clean", "crash"])
def test_a_restart_after_cleaning_finds_the_same_log(tmp_path, stop):
    log, p = build_log(tmp_path)
    clean(log, 0, NOW)
    p.end(P4, CONTROL_ABORT)                                  # 18: the open one aborts
    p.replicate()
    state = (records(log), markers(log), txnindex(log), read_committed(log),
             log.last_stable_offset, log.log_end_offset)
    assert state[3] == [(1, b"k1", b"b"), (7, b"k2", b"c"), (10, b"k3", b"d"),
                        (13, b"k2", b"e"), (16, b"k5", None), (17, b"k6", b"f")]
    if stop == "clean":
        log.close()
        again = PartitionLog(str(tmp_path / "t-0"), config(), sync=False, high_watermark=19)
    else:
        log.flush()
        crash(log)
        again = PartitionLog(str(tmp_path / "t-0"), config(), sync=False,
                             clean_shutdown=False, recovery_point=0, high_watermark=19)
        # Recovery rebuilds the index from the batches: the abort whose data this pass
        # removed (3-4) is not indexed again, which changes no read.
        state[2][0].remove((P2, 3, 6))
    assert (records(again), markers(again), txnindex(again), read_committed(again),
            again.last_stable_offset, again.log_end_offset) == state
    assert again.producer_state.first_unstable_offset() is None
