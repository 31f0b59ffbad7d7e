"""PartitionLog on real files: roll and retention rules, reads, ListOffsets by time, crash
recovery, truncation, real client batches and disk faults."""

from __future__ import annotations

import errno
import itertools
import json
import os
import random
from pathlib import Path

import pytest
from storage_helpers import (
    T0,
    as_stored,
    batch,
    check_segment_indexes,
    crash,
    parse_log_file,
    read_all,
)

from moldau.errors import KafkaStorageError, OffsetOutOfRangeError
from moldau.protocol.records import RecordBatch, iter_batches
from moldau.storage import segment as segment_module
from moldau.storage.config import LogConfig
from moldau.storage.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    PartitionLog,
)

RECORDS = Path(__file__).resolve().parents[1] / "data" / "records"
HOUR = 3600 * 1000


def open_log(tmp_path, name="t-0", **config) -> PartitionLog:
    config.setdefault("file_delete_delay_ms", 0)
    return PartitionLog(str(tmp_path / name), LogConfig(**config), sync=False)


def reopen(log: PartitionLog, **kw) -> PartitionLog:
    kw.setdefault("log_start_offset", log.log_start_offset)
    return PartitionLog(log.directory, log.config, sync=False, **kw)


def append_n(log, n, *, count=2, value_size=100, timestamp=T0, step=10, epoch=0, now=None):
    infos = []
    for i in range(n):
        infos.append(log.append_as_leader(
            batch(count, value_size=value_size, timestamp=timestamp + step * i, seed=i),
            epoch, now=now))
    return infos


def segment_files(log):
    return sorted(n for n in os.listdir(log.directory) if n.endswith(".log"))


def check_log(log: PartitionLog) -> list:
    """Whole-log consistency from the files: contiguous offsets, segment boundaries and
    indexes; returns the batches."""
    out = []
    for i, seg in enumerate(log.segments):
        batches = parse_log_file(seg.log_path)
        assert os.path.getsize(seg.log_path) == seg.size
        check_segment_indexes(seg, batches)
        for b in batches:
            assert b.base_offset >= seg.base_offset
            if i + 1 < len(log.segments):
                assert b.last_offset < log.segments[i + 1].base_offset
        out += batches
    for a, b in itertools.pairwise(out):
        assert b.base_offset == a.last_offset + 1
    end = out[-1].last_offset + 1 if out else log.active_segment.base_offset
    assert log.log_end_offset == end
    return out


# --- rolling -------------------------------------------------------------------------------------


def test_roll_on_segment_bytes(tmp_path):
    log = open_log(tmp_path, segment_bytes=1000)
    infos = append_n(log, 12)
    sizes = [s.size for s in log.segments]
    batch_size = infos[0].valid_bytes
    assert all(size + batch_size > 1000 for size in sizes[:-1])  # each rolled when full
    assert all(size <= 1000 for size in sizes)
    assert [s.base_offset for s in log.segments] == [
        b.base_offset for b in check_log(log) if any(b.base_offset == s.base_offset
                                                     for s in log.segments)]
    assert segment_files(log) == [f"{s.base_offset:020d}.log" for s in log.segments]
    # rolled segments have trimmed indexes, the active one is preallocated
    for s in log.segments[:-1]:
        assert os.path.getsize(s.offset_index.path) == 8 * s.offset_index.entries
    assert os.path.getsize(log.active_segment.offset_index.path) == 10 * 1024 * 1024
    log.close()


def test_roll_on_segment_ms_uses_record_time(tmp_path):
    log = open_log(tmp_path, segment_ms=HOUR)
    log.append_as_leader(batch(1, timestamp=T0), 0)
    log.append_as_leader(batch(1, timestamp=T0 + HOUR), 0)  # exactly segment.ms: no roll
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, timestamp=T0 + HOUR + 1), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.close()


def test_an_idle_partition_does_not_roll(tmp_path):
    log = open_log(tmp_path, segment_ms=1)
    log.append_as_leader(batch(1, timestamp=T0), 0)
    # time passes, nothing is appended; retention checks and reads do not roll
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments(T0 + 10 * HOUR)
    log.read(0, 1000)
    assert len(log.segments) == 1 and log.active_segment.size > 0
    log.close()


def test_roll_on_full_index(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=0, segment_index_bytes=48)
    append_n(log, 20, count=1, value_size=10)
    assert len(log.segments) > 3
    for s in log.segments[:-1]:
        assert s.offset_index.entries <= 6 and s.time_index.entries <= 4
    check_log(log)
    log.close()


def test_roll_when_an_offset_does_not_fit_32_bits(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(as_stored(batch(2), 0, 1))
    far = 2**31 + 5
    log.append_as_follower(as_stored(batch(2), far, 1))
    assert [s.base_offset for s in log.segments] == [0, far]
    assert log.log_end_offset == far + 2
    assert segment_files(log)[-1] == f"{far:020d}.log"
    log.close()


def test_explicit_roll_of_an_empty_active_segment_is_a_no_op(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 2)
    log.roll()
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 4]
    log.close()


# --- retention -----------------------------------------------------------------------------------


BATCH_SIZE = len(batch(2, value_size=100))


def filled_log(tmp_path, **config):
    # 16 batches of 2 records, one an hour (records at T0 + i h and 1 ms later), 3 batches
    # a segment: segments [0,6) [6,12) [12,18) [18,24) [24,30) [30,32)
    config.setdefault("segment_bytes", 3 * BATCH_SIZE)
    log = open_log(tmp_path, **config)
    append_n(log, 16, timestamp=T0, step=HOUR)
    return log


def test_retention_ms_deletes_old_segments_below_the_high_watermark(tmp_path):
    log = filled_log(tmp_path, retention_ms=5 * HOUR, file_delete_delay_ms=60_000)
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18, 24, 30]
    now = T0 + 15 * HOUR
    # nothing replicated yet: nothing may go
    assert log.delete_old_segments(now) == 0
    log.update_high_watermark(12)
    assert log.delete_old_segments(now) == 2  # [0,6) and [6,12); the next ends above the hw
    assert log.log_start_offset == 12
    assert sorted(n for n in os.listdir(log.directory) if n.endswith(".deleted")) == sorted(
        f"{b:020d}{k}.deleted" for b in (0, 6) for k in (".log", ".index", ".timeindex"))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    log.update_high_watermark(log.log_end_offset)
    # [12,18) ends at T0+8h (7h old: goes); [18,24) ends at T0+11h (4h old: stays, and so
    # do all after it, even if older)
    assert log.delete_old_segments(now) == 1
    assert log.log_start_offset == 18
    log.delete_due_files(now + 59_999)
    assert any(n.endswith(".deleted") for n in os.listdir(log.directory))
    log.delete_due_files(now + 60_000)
    assert not any(n.endswith(".deleted") for n in os.listdir(log.directory))
    assert check_log(log)[0].base_offset == 18
    log.close()


def test_retention_rolls_a_non_empty_active_segment_and_deletes_it_too(tmp_path):
    log = filled_log(tmp_path, retention_ms=HOUR)
    log.update_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments(T0 + 100 * HOUR)
    assert deleted == 6
    assert [s.base_offset for s in log.segments] == [32]
    assert log.log_start_offset == log.log_end_offset == 32 and log.active_segment.size == 0
    assert log.read(32, 100).slice is None
    assert log.append_as_leader(batch(1), 0).first_offset == 32
    # an empty active segment is never deleted
    log.truncate_to(32)
    assert log.delete_old_segments(T0 + 1000 * HOUR) == 0
    log.close()


def test_active_segment_stays_when_not_wholly_below_the_high_watermark(tmp_path):
    log = filled_log(tmp_path, retention_ms=HOUR)
    log.update_high_watermark(log.log_end_offset - 1)
    assert log.delete_old_segments(T0 + 100 * HOUR) == 5
    assert [s.base_offset for s in log.segments] == [30]
    log.close()


def test_retention_bytes(tmp_path):
    log = filled_log(tmp_path, retention_bytes=1500)
    log.update_high_watermark(log.log_end_offset)
    sizes = [s.size for s in log.segments]
    excess, expected = sum(sizes) - 1500, 0
    for size in sizes:
        if excess < size:
            break
        excess -= size
        expected += 1
    assert log.delete_old_segments(T0) == expected > 0
    assert log.size_in_bytes() >= 1500
    assert log.size_in_bytes() - log.segments[0].size < 1500
    log.close()


def test_retention_ms_minus_one_keeps_everything(tmp_path):
    log = filled_log(tmp_path, retention_ms=-1)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(T0 + 10**6 * HOUR) == 0
    log.close()


def test_compact_only_topics_are_not_deleted_by_time_or_size(tmp_path):
    log = filled_log(tmp_path, retention_ms=HOUR, retention_bytes=10,
                     cleanup_policy=("compact",))
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(T0 + 100 * HOUR) == 0
    log.close()


def test_delete_records_advances_the_log_start(tmp_path):
    log = filled_log(tmp_path, retention_ms=-1)
    log.update_high_watermark(20)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records(21)
    assert log.delete_records(8) == 8
    assert [s.base_offset for s in log.segments][:2] == [6, 12]  # [0,6) went
    assert log.read(8, 1).start.offset == 8
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP)[1] == 8
    assert log.delete_records(5) == 8  # never backwards
    # time retention is not applied by DeleteRecords (it has its own schedule)
    assert log.delete_records(20) == 20
    assert [s.base_offset for s in log.segments] == [18, 24, 30]
    log.close()


def test_log_start_survives_reopen(tmp_path):
    log = filled_log(tmp_path, retention_ms=-1)
    log.update_high_watermark(20)
    log.delete_records(8)
    log.close()
    log = reopen(log)
    assert log.log_start_offset == 8
    log.close()


# --- reads ---------------------------------------------------------------------------------------


def test_reads_are_bounded_by_max_offset_max_bytes_and_min_one_batch(tmp_path):
    log = open_log(tmp_path, segment_bytes=100_000)
    infos = append_n(log, 10, count=3)
    size = infos[0].valid_bytes
    log.update_high_watermark(12)  # batch [12,15) is not replicated
    fetched = log.read(0, 10**6, max_offset=log.high_watermark)
    data = log.read_bytes(fetched)
    assert [b.base_offset for b in iter_batches(data)] == [0, 3, 6, 9]
    assert fetched.start.offset == 0 and fetched.start.position == 0
    # max bytes: a partial batch at the end, as Kafka
    data = log.read_bytes(log.read(3, size + 10))
    assert len(data) == size + 10
    it = iter_batches(data, allow_partial=True)
    assert [b.base_offset for b in it] == [3] and it.truncated
    # min_one_batch returns a first batch larger than max bytes whole; without it, a slice
    assert len(log.read_bytes(log.read(4, 1))) == size
    assert len(log.read_bytes(log.read(4, 1, min_one_batch=False))) == 1
    assert log.read(4, 0, min_one_batch=False).size == 0
    # the high watermark inside a batch: that batch is not served
    log.update_high_watermark(13)
    assert log.read(12, 10**6, max_offset=13).size == 0
    assert log.read(13, 10**6, max_offset=13).slice is None
    # without a bound (a follower's read) everything to the log end
    assert len(log.read_bytes(log.read(0, 10**6))) == 10 * size
    log.close()


def test_reads_outside_the_log_are_out_of_range(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 3)
    assert log.read(6, 100).slice is None  # the log end: nothing yet, not an error
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)
    log.update_high_watermark(6)
    log.delete_records(2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    assert [b.base_offset for b in read_all(log, 2)] == [2, 4]
    log.close()


def test_reads_do_not_cross_segments_but_continue_past_empty_ranges(tmp_path):
    log = open_log(tmp_path, segment_bytes=700)
    append_n(log, 8)
    first = log.segments[0]
    data = log.read_bytes(log.read(0, 10**6))
    assert len(data) == first.size  # one segment per read, like Kafka
    got = read_all(log, 0)
    assert [b.base_offset for b in got] == list(range(0, 16, 2))
    log.close()


# --- ListOffsets by time -------------------------------------------------------------------------


def test_offset_for_timestamp_against_a_model(tmp_path):
    log = open_log(tmp_path, segment_bytes=600, index_interval_bytes=150)
    stamps, epochs = [], []
    rnd = random.Random(7)
    for i in range(30):
        ts = [T0 + rnd.randrange(0, 5000) for _ in range(rnd.randrange(1, 4))]
        log.append_as_leader(batch(len(ts), timestamps=ts, value_size=40, seed=i), i // 10)
        stamps += ts
        epochs += [i // 10] * len(ts)
    offsets = list(enumerate(stamps))
    assert len(log.segments) > 3

    def model(target, start):
        return next(((ts, off) for off, ts in offsets if ts >= target and off >= start), None)

    for start in (0, 17):
        if start:
            log.update_high_watermark(log.log_end_offset)
            log.delete_records(start)
        for target in [T0 - 1, *sorted(set(stamps))[::7], T0 + 4999, T0 + 5000, T0 + 10**6]:
            got = log.offset_for_timestamp(target)
            want = model(target, start)
            assert (got[:2] if got else None) == want, target
            if got:
                assert got[2] == log.epochs.epoch_for_offset(got[1])
        ts_max = max(stamps[start:])
        first_max = next(off for off, ts in offsets if ts == ts_max and off >= start)
        assert log.offset_for_timestamp(MAX_TIMESTAMP)[:2] == (ts_max, first_max)
        assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (-1, start, epochs[start])
        assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (-1, len(stamps), 2)
    log.close()
    # the answers survive a restart (time indexes and max timestamps reloaded)
    log = reopen(log)
    assert log.offset_for_timestamp(T0 + 2500)[:2] == model(T0 + 2500, 17)
    log.close()


def test_offset_for_timestamp_on_an_empty_log(tmp_path):
    log = open_log(tmp_path)
    assert log.offset_for_timestamp(T0) is None
    assert log.offset_for_timestamp(MAX_TIMESTAMP) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP)[:2] == (-1, 0)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP)[:2] == (-1, 0)
    log.close()


# --- crash recovery ------------------------------------------------------------------------------


def crashed_log(tmp_path, n=20, flush_at=None, **config):
    config.setdefault("segment_bytes", 1200)
    config.setdefault("index_interval_bytes", 200)
    log = open_log(tmp_path, **config)
    infos = append_n(log, n, count=3, value_size=60)
    if flush_at is not None:
        log.flush(flush_at)
    return log, infos


def test_recovery_cuts_a_torn_final_batch(tmp_path):
    log, infos = crashed_log(tmp_path)
    before = check_log(log)
    active = log.active_segment
    torn = as_stored(batch(3, value_size=60, seed=99), log.log_end_offset, 0)
    crash(log)
    with open(active.log_path, "ab") as f:
        f.write(torn[: len(torn) // 2])  # the writer died inside its write
    log = reopen(log, clean_shutdown=False, recovery_point=0)
    assert check_log(log) == before
    assert log.log_end_offset == infos[-1].last_offset + 1
    assert log.append_as_leader(batch(1), 0).first_offset == infos[-1].last_offset + 1
    log.close()


def test_recovery_cuts_inside_the_last_batch(tmp_path):
    log, infos = crashed_log(tmp_path)
    before = check_log(log)
    active = log.active_segment
    crash(log)
    os.truncate(active.log_path, active.size - 7)
    log = reopen(log, clean_shutdown=False, recovery_point=0)
    assert check_log(log) == before[:-1]
    assert log.log_end_offset == infos[-1].first_offset
    log.close()


def test_recovery_truncates_at_a_flipped_byte_and_drops_later_segments(tmp_path):
    log, _ = crashed_log(tmp_path, n=30)
    before = check_log(log)
    assert len(log.segments) >= 4
    victim_segment = log.segments[1]
    victim = parse_log_file(victim_segment.log_path)[1]
    later = [s.log_path for s in log.segments[2:]]
    crash(log)
    with open(victim_segment.log_path, "r+b") as f:
        f.seek(victim.position + len(victim.data) // 2)
        byte = f.read(1)[0]
        f.seek(victim.position + len(victim.data) // 2)
        f.write(bytes([byte ^ 0xFF]))
    log = reopen(log, clean_shutdown=False, recovery_point=0)
    kept = check_log(log)
    assert kept == [b for b in before if b.last_offset < victim.base_offset]
    assert log.log_end_offset == victim.base_offset
    assert not any(os.path.exists(p) for p in later)
    assert len(log.segments) == 2
    assert log.append_as_leader(batch(1), 0).first_offset == victim.base_offset
    log.close()


def test_recovery_starts_at_the_recovery_point(tmp_path):
    # damage before the recovery point is not looked at: that data was flushed and checked
    log, infos = crashed_log(tmp_path, n=30)
    log.flush()
    point = log.recovery_point
    early = log.segments[0]
    victim = parse_log_file(early.log_path)[1]
    crash(log)
    with open(early.log_path, "r+b") as f:
        f.seek(victim.position + 40)
        f.write(b"\xff")
    log = reopen(log, clean_shutdown=False, recovery_point=point)
    assert log.log_end_offset == infos[-1].last_offset + 1
    assert log.segments[0].size == early.size
    log.close()


def test_recovery_keeps_every_flushed_batch_and_rebuilds_preallocated_indexes(tmp_path):
    log, _ = crashed_log(tmp_path, n=25)
    log.flush()
    flushed = check_log(log)
    point = log.recovery_point
    append_n(log, 3, count=2)
    active = log.active_segment
    crash(log)
    # the active segment's indexes are still preallocated, as a crash leaves them
    assert os.path.getsize(active.offset_index.path) == 10 * 1024 * 1024
    os.truncate(active.log_path, active.size - 1)
    log = reopen(log, clean_shutdown=False, recovery_point=point)
    got = check_log(log)
    assert got[: len(flushed)] == flushed
    assert log.recovery_point == point
    assert [b.data for b in read_all(log, 0)] == [b.data for b in got]
    log.close()  # trims every index; used to raise IndexFullError after recovery
    log = reopen(log)
    assert check_log(log) == got
    log.close()


@pytest.mark.parametrize("kind", [".index", ".timeindex"])
def test_a_missing_index_is_rebuilt(tmp_path, kind):
    log, _ = crashed_log(tmp_path, n=30, retention_ms=-1)
    before = check_log(log)
    target = log.segments[1]
    expected_max = (target.max_timestamp, target.offset_of_max_timestamp)
    log.close()
    os.remove(target.log_path[: -len(".log")] + kind)
    log = reopen(log)
    seg = log.segments[1]
    assert (seg.max_timestamp, seg.offset_of_max_timestamp) == expected_max
    assert check_log(log) == before
    assert seg.offset_index.entries > 0 and seg.time_index.entries > 0
    target_ts = before[7].max_timestamp
    assert log.offset_for_timestamp(target_ts)[1] <= before[7].last_offset
    log.close()


def test_a_corrupt_index_is_rebuilt(tmp_path):
    log, _ = crashed_log(tmp_path, n=30)
    before = check_log(log)
    path = log.segments[0].offset_index.path
    log.close()
    with open(path, "r+b") as f:
        f.write(b"\x7f\xff\xff\xff\x00\x00\x00\x00")  # first entry beyond the last one
    log = reopen(log)
    assert check_log(log) == before
    log.close()


def test_recovery_below_the_log_start_starts_empty_at_the_log_start(tmp_path):
    log, _ = crashed_log(tmp_path, n=6, segment_bytes=10**6)
    log.update_high_watermark(log.log_end_offset)
    log.delete_records(15)
    active = log.active_segment
    crash(log)
    os.truncate(active.log_path, 300)  # the unflushed tail, log start included, is gone
    log = reopen(log, clean_shutdown=False, recovery_point=0, log_start_offset=15)
    assert (log.log_start_offset, log.log_end_offset) == (15, 15)
    assert [s.base_offset for s in log.segments] == [15]
    assert log.epochs.entries == []
    assert log.append_as_leader(batch(1), 3).first_offset == 15
    log.close()


def test_a_new_log_starts_at_its_log_start_offset(tmp_path):
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(), log_start_offset=500, sync=False)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert segment_files(log) == [f"{500:020d}.log"]
    assert log.append_as_leader(batch(1), 0).first_offset == 500
    log.close()


def test_leftover_deleted_files_are_removed_on_load(tmp_path):
    log = filled_log(tmp_path, retention_ms=HOUR, file_delete_delay_ms=10**9)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments(T0 + 100 * HOUR)
    assert any(n.endswith(".deleted") for n in os.listdir(log.directory))
    crash(log)
    log = reopen(log, clean_shutdown=False, recovery_point=0)
    assert not any(n.endswith(".deleted") for n in os.listdir(log.directory))
    log.close()


# --- truncation ----------------------------------------------------------------------------------


def test_truncate_inside_a_batch_ends_the_log_at_that_batch(tmp_path):
    log = open_log(tmp_path)
    infos = append_n(log, 5, count=4)
    log.update_high_watermark(log.log_end_offset)
    assert log.truncate_to(9)  # inside [8, 11]
    assert log.log_end_offset == 8 and log.high_watermark == 8
    assert log.append_as_leader(batch(1), 0).first_offset == 8
    check_log(log)
    log.close()
    log = reopen(log)
    assert log.log_end_offset == 9
    assert infos[-1].last_offset == 19
    log.close()


def test_truncate_into_a_rolled_segment_makes_it_active_again(tmp_path):
    log = open_log(tmp_path, segment_bytes=1000, index_interval_bytes=100)
    append_n(log, 12)
    assert len(log.segments) >= 3
    second = log.segments[1]
    target = parse_log_file(second.log_path)[1].base_offset
    log.truncate_to(target)
    assert log.active_segment is second and log.log_end_offset == target
    # its trimmed indexes were regrown: the next append does not roll at once
    log.append_as_leader(batch(1, value_size=10), 0)
    assert log.active_segment is second
    check_log(log)
    log.close()


def test_truncate_below_the_log_start_lowers_it(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 10)
    log.update_high_watermark(log.log_end_offset)
    log.delete_records(12)
    log.truncate_to(8)
    assert (log.log_start_offset, log.log_end_offset) == (8, 8)
    log.close()


def test_truncate_before_the_first_segment_empties_the_log(tmp_path):
    log = filled_log(tmp_path, retention_ms=-1)
    log.update_high_watermark(20)
    log.delete_records(12)
    assert log.truncate_to(5)
    assert [s.base_offset for s in log.segments] == [5]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (5, 5, 5)
    assert log.epochs.entries == []
    assert segment_files(log) == [f"{5:020d}.log"]
    log.close()


def test_truncate_fully_and_start_at_a_later_offset(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 3)
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert log.append_as_follower(as_stored(batch(2), 1000, 4)).last_offset == 1001
    log.close()


# --- batches from real clients -------------------------------------------------------------------


CAPTURED = sorted(p.stem for p in RECORDS.glob("*.bin") if "magic" not in p.stem)


@pytest.mark.parametrize("name", CAPTURED)
def test_client_batches_are_stored_byte_for_byte(tmp_path, name):
    raw = (RECORDS / f"{name}.bin").read_bytes()
    meta = json.loads((RECORDS / f"{name}.json").read_text())
    log = open_log(tmp_path)
    log.append_as_leader(batch(2), 0)
    info = log.append_as_leader(raw, 5)
    assert info.record_count == meta["count"]
    originals = [bytes(b.buffer) for b in iter_batches(raw)]
    offset = 2
    expected = []
    for data in originals:
        expected.append(as_stored(data, offset, 5))
        offset += RecordBatch(data).last_offset_delta + 1
    log.update_high_watermark(log.log_end_offset)
    got = [b.data for b in read_all(log, 2, max_offset=log.high_watermark)]
    assert got == expected
    assert [b.data for b in parse_log_file(log.active_segment.log_path)][1:] == expected
    records = [r for data in got for r in RecordBatch(data).records()]
    assert [r.offset for r in records] == list(range(2, 2 + meta["count"]))
    log.close()
    log = reopen(log, clean_shutdown=False, recovery_point=0)  # recovery accepts them too
    assert log.log_end_offset == 2 + meta["count"]
    log.close()


# --- disk faults ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [bytes, bytearray])
def test_eio_on_append_changes_nothing_and_reads_continue(tmp_path, monkeypatch, kind):
    # bytes: the batch is written uncopied, its patched front from AppendInfo.head
    # (pwritev); bytearray: patched in place (pwrite). A short write then EIO either way.
    log = open_log(tmp_path, segment_bytes=1000)
    append_n(log, 6)
    before = check_log(log)
    end = log.log_end_offset
    real_pwrite = os.pwrite

    def partial_then_eio(fd, data, offset):
        if len(data) > 20:
            return real_pwrite(fd, bytes(data[:20]), offset)
        raise OSError(errno.EIO, "Input/output error")

    def partial_then_eio_v(fd, buffers, offset):
        return partial_then_eio(fd, b"".join(buffers), offset)

    monkeypatch.setattr(segment_module.os, "pwrite", partial_then_eio)
    monkeypatch.setattr(segment_module.os, "pwritev", partial_then_eio_v)
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(kind(batch(2, value_size=100, seed=50)), 0)
    monkeypatch.undo()
    assert log.log_end_offset == end
    assert check_log(log) == before
    assert [b.data for b in read_all(log, 0)] == [b.data for b in before]
    assert log.epochs.latest_epoch == 0


def test_eio_on_flush_is_a_storage_error(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    append_n(log, 2)

    def eio(_fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(segment_module.os, "fsync", eio)
    with pytest.raises(KafkaStorageError):
        log.flush()
    monkeypatch.undo()
    assert log.recovery_point == 0
    log.close()


# --- clean restart -------------------------------------------------------------------------------


def test_clean_reopen_restores_offsets_and_recovery_point(tmp_path):
    log = open_log(tmp_path, segment_bytes=800)
    append_n(log, 10)
    before = check_log(log)
    log.flush()
    log.close()
    log = reopen(log, recovery_point=3)
    assert log.log_end_offset == 20 and log.recovery_point == 20
    assert check_log(log) == before
    assert log.append_as_leader(batch(1), 0).first_offset == 20
    log.close()


def test_flush_makes_new_segment_files_durable(tmp_path, monkeypatch):
    from moldau.storage import log as log_module

    synced = []
    monkeypatch.setattr(log_module, "fsync_dir", synced.append)
    log = open_log(tmp_path, segment_bytes=3 * BATCH_SIZE)
    append_n(log, 2)
    log.flush()
    assert synced == [log.directory]  # the first segment is new since the last flush
    append_n(log, 1)
    log.flush()
    assert synced == [log.directory]  # same segment: its directory entry is durable already
    append_n(log, 6)
    log.flush()
    assert synced == [log.directory] * 2  # rolled: new files
    log.close()
