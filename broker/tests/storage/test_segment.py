"""LogSegment against real files: appends, sparse indexes, reads, roll rules, recovery,
truncation and write faults. Expectations are computed from the batches the test wrote and
checked against the bytes on disk (storage_helpers parses the files independently)."""

from __future__ import annotations

import errno
import os

import pytest
from storage_helpers import (
    T0,
    as_stored,
    batch,
    check_segment_indexes,
    parse_log_file,
    read_offset_index,
    read_time_index,
)

from moldau.errors import CorruptRecordError, KafkaStorageError
from moldau.protocol.records import RecordBatch, iter_batches
from moldau.storage import segment as segment_module
from moldau.storage.index import OffsetIndex, TimeIndex
from moldau.storage.segment import BatchHeader, LogSegment


def with_offsets(raw_batches: list[bytes], base_offset: int) -> tuple[bytes, list[BatchHeader]]:
    """Assign offsets from base_offset (as the leader would) and describe the batches."""
    data = bytearray()
    headers = []
    offset = base_offset
    for raw in raw_batches:
        stored = as_stored(raw, offset, 0)
        b = RecordBatch(stored)
        headers.append(BatchHeader(len(data), b.base_offset, b.last_offset, b.size_in_bytes,
                                   b.max_timestamp, b.partition_leader_epoch))
        data += stored
        offset = b.last_offset + 1
    return bytes(data), headers


def open_segment(path, base=0, **kw) -> LogSegment:
    kw.setdefault("index_interval_bytes", 4096)
    return LogSegment(str(path), base, **kw)


def fill(seg: LogSegment, raws: list[bytes], base: int) -> list[BatchHeader]:
    out = []
    for raw in raws:
        data, headers = with_offsets([raw], base)
        start = seg.size
        seg.append(data, headers)
        out += [h._replace(position=start + h.position) for h in headers]
        base = headers[-1].last_offset + 1
    return out


# --- appends and the sparse indexes --------------------------------------------------------------


def test_appended_bytes_are_stored_verbatim_and_indexed_every_interval(tmp_path):
    seg = open_segment(tmp_path, 100, index_interval_bytes=300)
    raws = [batch(i % 4 + 1, value_size=40 + 30 * (i % 3), timestamp=T0 + 10 * i, seed=i)
            for i in range(25)]
    headers = fill(seg, raws, 100)
    on_disk = parse_log_file(seg.log_path)
    assert [(b.base_offset, b.last_offset) for b in on_disk] == [
        (h.base_offset, h.last_offset) for h in headers
    ]
    assert os.path.getsize(seg.log_path) == seg.size == sum(h.size for h in headers)
    # Kafka's rule: an entry for a batch when more than index.interval.bytes were written
    # since the last entry (counted up to the start of this batch).
    expected, since = [], 0
    for b in on_disk:
        if since > 300:
            expected.append((b.last_offset, b.position))
            since = 0
        since += len(b.data)
    assert expected, "the test must produce index entries"
    assert seg.offset_index.entries == len(expected)
    assert read_offset_index(seg.offset_index.path, 100, len(expected)) == expected
    check_segment_indexes(seg, on_disk)
    seg.close()
    # close() trims the preallocated index files to their entries
    assert os.path.getsize(seg.offset_index.path) == 8 * len(expected)
    assert read_time_index(seg.time_index.path, 100)[-1] == (on_disk[-1].max_timestamp,
                                                             on_disk[-1].last_offset)


def test_translate_and_read_positions(tmp_path):
    seg = open_segment(tmp_path, 0, index_interval_bytes=0)
    headers = fill(seg, [batch(5, seed=i) for i in range(6)], 0)  # offsets 0..29
    assert seg.translate_offset(0).position == 0
    assert seg.translate_offset(12) == headers[2]
    assert seg.translate_offset(14) == headers[2]
    assert seg.translate_offset(15) == headers[3]
    assert seg.translate_offset(30) is None
    meta, fs = seg.read(12, max_size=1, max_position=seg.size, min_one_batch=True)
    assert (meta.offset, meta.segment_base_offset, meta.position) == (12, 0, headers[2].position)
    assert (fs.position, fs.size) == (headers[2].position, headers[2].size)  # one whole batch
    _, fs = seg.read(12, max_size=1, max_position=seg.size, min_one_batch=False)
    assert fs.size == 1  # Kafka returns a partial batch: clients expect that
    _, fs = seg.read(0, max_size=10**6, max_position=headers[3].position, min_one_batch=True)
    assert fs.size == headers[3].position  # bounded by max_position (the high watermark)
    assert seg.read(30, 100, seg.size, True) is None


def test_find_offset_by_timestamp_with_out_of_order_timestamps(tmp_path):
    seg = open_segment(tmp_path, 0, index_interval_bytes=0)
    stamps = [[T0 + 50, T0 + 10], [T0 + 5], [T0 + 100, T0 + 70, T0 + 100], [T0 + 80]]
    fill(seg, [batch(len(s), timestamps=s, seed=i) for i, s in enumerate(stamps)], 0)
    flat = [(ts, off) for off, ts in enumerate(t for s in stamps for t in s)]

    def expected(target, start=0):
        return next(((ts, off) for ts, off in flat if ts >= target and off >= start), None)

    for target in (T0, T0 + 6, T0 + 10, T0 + 51, T0 + 70, T0 + 71, T0 + 100, T0 + 101):
        got = seg.find_offset_by_timestamp(target, 0)
        assert (got[:2] if got else None) == expected(target), target
    assert seg.find_offset_by_timestamp(T0 + 60, 5)[:2] == expected(T0 + 60, 5)
    assert seg.max_timestamp == T0 + 100 and seg.offset_of_max_timestamp == 5


def test_a_multi_batch_append_that_fills_the_index_completes(tmp_path):
    # 2 offset-index slots, 2 time-index slots (1 usable): one append of many batches
    # overflows them; the append must neither fail half-way nor corrupt the indexes.
    seg = open_segment(tmp_path, 0, index_interval_bytes=0, max_index_size=24)
    data, headers = with_offsets([batch(2, seed=i) for i in range(8)], 0)
    seg.append(data, headers)
    on_disk = parse_log_file(seg.log_path)
    assert len(on_disk) == 8
    check_segment_indexes(seg, on_disk)
    assert seg.should_roll(incoming_bytes=1, max_offset=16, max_timestamp=T0, segment_bytes=10**6,
                           segment_ms=10**9, now_ms=T0)
    seg.close()


# --- roll rules ----------------------------------------------------------------------------------


def roll_args(**kw):
    args = dict(incoming_bytes=100, max_offset=10, max_timestamp=T0, segment_bytes=10**6,
                segment_ms=10**9, now_ms=T0)
    args.update(kw)
    return args


def test_roll_rules(tmp_path):
    seg = open_segment(tmp_path, 0, now_ms=T0)
    # an empty segment never rolls on time, whatever the clock says
    idle = roll_args(segment_ms=1, now_ms=T0 + 10**9, max_timestamp=T0 + 10**9)
    assert not seg.should_roll(**idle)
    raw = batch(1, timestamp=T0)
    fill(seg, [raw], 0)
    size = seg.size
    # size: roll when size > segment.bytes - incoming
    assert not seg.should_roll(**roll_args(segment_bytes=size + 100, incoming_bytes=100))
    assert seg.should_roll(**roll_args(segment_bytes=size + 99, incoming_bytes=100))
    # time: measured from the first batch's max timestamp to the incoming batch's timestamp,
    # not by the wall clock
    assert not seg.should_roll(**roll_args(segment_ms=1000, max_timestamp=T0 + 1000, now_ms=10**15))
    assert seg.should_roll(**roll_args(segment_ms=1000, max_timestamp=T0 + 1001, now_ms=0))
    # offset that does not fit 32 bits relative to the base offset
    assert not seg.should_roll(**roll_args(max_offset=2**31 - 1))
    assert seg.should_roll(**roll_args(max_offset=2**31))


def test_jitter_shortens_the_time_rule(tmp_path):
    seg = open_segment(tmp_path, 0, roll_jitter_ms=400)
    fill(seg, [batch(1, timestamp=T0)], 0)
    assert not seg.should_roll(**roll_args(segment_ms=1000, max_timestamp=T0 + 600))
    assert seg.should_roll(**roll_args(segment_ms=1000, max_timestamp=T0 + 601))


def test_reopened_segment_times_rolls_from_its_first_batch(tmp_path):
    seg = open_segment(tmp_path, 0)
    fill(seg, [batch(1, timestamp=T0), batch(1, timestamp=T0 + 500)], 0)
    seg.close()
    seg = open_segment(tmp_path, 0)
    assert seg.should_roll(**roll_args(segment_ms=1000, max_timestamp=T0 + 1001))
    seg.close()


def test_roll_on_full_offset_index(tmp_path):
    # 48 bytes: 6 offset index slots, 4 time index slots. Equal timestamps add no time
    # index entries, so the offset index fills first.
    seg = open_segment(tmp_path, 0, index_interval_bytes=0, max_index_size=48)
    fill(seg, [batch(1, timestamp=T0, seed=i) for i in range(6)], 0)
    assert seg.offset_index.entries == 5 and not seg.should_roll(**roll_args())
    fill(seg, [batch(1, timestamp=T0, seed=7)], 6)
    assert seg.offset_index.entries == 6 and seg.should_roll(**roll_args())
    seg.close()


def test_roll_on_full_time_index(tmp_path):
    # The time index keeps its last slot for the entry written on roll: 4 slots, 3 usable.
    seg = open_segment(tmp_path, 0, index_interval_bytes=0, max_index_size=48)
    fill(seg, [batch(1, timestamp=T0 + i, seed=i) for i in range(3)], 0)
    assert seg.time_index.entries == 2 and not seg.should_roll(**roll_args())
    fill(seg, [batch(1, timestamp=T0 + 3, seed=3)], 3)
    assert seg.time_index.entries == 3 and seg.should_roll(**roll_args())
    seg.on_become_inactive()  # the reserved slot takes the final entry
    assert read_time_index(seg.time_index.path, 0)[-1] == (T0 + 3, 3)
    seg.close()


# --- recovery ------------------------------------------------------------------------------------


def write_segment(tmp_path, n=12, base=0, interval=200):
    seg = open_segment(tmp_path, base, index_interval_bytes=interval)
    headers = fill(seg, [batch(3, value_size=80, timestamp=T0 + 10 * i, seed=i) for i in range(n)],
                   base)
    return seg, headers


def test_recover_keeps_a_sound_segment_and_rebuilds_identical_indexes(tmp_path):
    seg, _ = write_segment(tmp_path)
    before = (read_offset_index(seg.offset_index.path, 0, seg.offset_index.entries),
              read_time_index(seg.time_index.path, 0, seg.time_index.entries))
    assert seg.recover() == 0
    after = (read_offset_index(seg.offset_index.path, 0, seg.offset_index.entries),
             read_time_index(seg.time_index.path, 0, seg.time_index.entries))
    assert after[0] == before[0]
    assert after[1][: len(before[1])] == before[1]
    check_segment_indexes(seg, parse_log_file(seg.log_path))
    seg.close()


def test_close_after_recover_does_not_fail(tmp_path):
    # recover() used to trim the time index without its final entry; close() then found
    # no slot for that entry and raised IndexFullError.
    seg, headers = write_segment(tmp_path, interval=150)
    seg.recover()
    seg.close()
    entries = read_time_index(seg.time_index.path, 0)
    assert entries[-1] == (T0 + 10 * 11 + 2, headers[-1].last_offset)


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 61, -1])
def test_recover_cuts_a_torn_final_batch(tmp_path, cut):
    seg, headers = write_segment(tmp_path)
    last = headers[-1]
    keep = last.position + (cut if cut > 0 else last.size - 1)
    os.truncate(seg.log_path, keep)
    seg.close()
    seg = open_segment(tmp_path, 0, index_interval_bytes=200)
    assert seg.recover() == keep - last.position
    assert os.path.getsize(seg.log_path) == last.position
    assert [b.last_offset for b in parse_log_file(seg.log_path)] == [
        h.last_offset for h in headers[:-1]
    ]
    assert seg.last_batch().last_offset == headers[-2].last_offset
    check_segment_indexes(seg, parse_log_file(seg.log_path))
    seg.close()


@pytest.mark.parametrize("where", ["crc", "payload", "length-huge", "length-small", "magic"])
def test_recover_stops_at_a_damaged_batch_in_the_middle(tmp_path, where):
    seg, headers = write_segment(tmp_path)
    victim = headers[5]
    seg.close()
    with open(seg.log_path, "r+b") as f:
        at = {"crc": 18, "payload": victim.size - 3, "length-huge": 9, "length-small": 11,
              "magic": 16}[where]
        f.seek(victim.position + at)
        byte = f.read(1)[0]
        f.seek(victim.position + at)
        f.write(bytes([byte ^ (0x40 if where == "length-huge" else 0x7F)]))
    seg = open_segment(tmp_path, 0, index_interval_bytes=200)
    seg.recover()
    assert seg.size == victim.position == os.path.getsize(seg.log_path)
    on_disk = parse_log_file(seg.log_path)
    assert [b.last_offset for b in on_disk] == [h.last_offset for h in headers[:5]]
    check_segment_indexes(seg, on_disk)
    seg.close()


def test_recover_stops_at_non_increasing_offsets(tmp_path):
    seg = open_segment(tmp_path, 0, index_interval_bytes=0)
    fill(seg, [batch(2, seed=1), batch(2, seed=2)], 0)
    data, _ = with_offsets([batch(2, seed=3)], 1)  # overlaps offsets 1..2
    os.pwrite(seg.fd, data, seg.size)
    seg.size += len(data)
    seg.recover()
    assert [b.last_offset for b in parse_log_file(seg.log_path)] == [1, 3]
    seg.close()


def test_scan_of_an_unrecovered_bad_length_raises_instead_of_looping(tmp_path):
    seg, headers = write_segment(tmp_path, n=3)
    os.pwrite(seg.fd, (0).to_bytes(4, "big", signed=True), headers[1].position + 8)
    with pytest.raises(CorruptRecordError):
        list(seg.scan_headers(0))
    seg.close()


# --- truncation ----------------------------------------------------------------------------------


def test_truncate_to_regrows_trimmed_indexes_and_recomputes_max_timestamp(tmp_path):
    seg = open_segment(tmp_path, 0, index_interval_bytes=250, max_index_size=240)
    stamps = [T0 + 10 * i for i in range(12)]
    stamps[7] = T0 + 10_000  # the max lies after the last index entry kept by the truncation
    headers = fill(seg, [batch(2, value_size=80, timestamp=ts, seed=i)
                         for i, ts in enumerate(stamps)], 0)
    seg.on_become_inactive()  # rolled: indexes trimmed to their entries
    assert seg.offset_index.is_full()
    removed = seg.truncate_to(headers[9].base_offset + 1)  # inside batch 9: it goes whole
    assert removed == seg_size_after(headers, 12) - headers[9].position
    assert seg.size == headers[9].position
    assert not seg.offset_index.is_full() and not seg.time_index.is_full()
    assert seg.max_timestamp == T0 + 10_001
    assert seg.offset_of_max_timestamp == headers[7].last_offset
    check_segment_indexes(seg, parse_log_file(seg.log_path))
    # appends continue without a premature roll
    fill(seg, [batch(2, seed=50)], headers[9].base_offset)
    assert not seg.should_roll(**roll_args(max_offset=100))
    seg.close()


def seg_size_after(headers, n):
    return headers[n - 1].position + headers[n - 1].size


def test_truncate_to_everything_resets_the_roll_clock(tmp_path):
    seg, _ = write_segment(tmp_path, n=3)
    seg.truncate_to(0)
    assert seg.size == 0 and seg.max_timestamp == -1
    # empty again: no time-based roll; the next first batch restarts the clock
    assert not seg.should_roll(**roll_args(segment_ms=1, max_timestamp=T0 + 10**9))
    fill(seg, [batch(1, timestamp=T0 + 10**6)], 0)
    assert not seg.should_roll(**roll_args(segment_ms=1000, max_timestamp=T0 + 10**6 + 1000))
    seg.close()


# --- write faults --------------------------------------------------------------------------------


def _eio(*_args):
    raise OSError(errno.EIO, "Input/output error")


def test_eio_on_write_leaves_no_partial_batch(tmp_path, monkeypatch):
    seg, headers = write_segment(tmp_path, n=3)
    size = seg.size
    monkeypatch.setattr(segment_module.os, "pwrite", _eio)
    data, new = with_offsets([batch(3, seed=9)], headers[-1].last_offset + 1)
    with pytest.raises(KafkaStorageError):
        seg.append(data, new)
    monkeypatch.undo()
    assert seg.size == size == os.path.getsize(seg.log_path)
    assert len(parse_log_file(seg.log_path)) == 3
    seg.close()


def test_partial_write_then_eio_is_cut_back(tmp_path, monkeypatch):
    seg, headers = write_segment(tmp_path, n=3)
    size = seg.size
    real_pwrite = os.pwrite
    calls = []

    def half_then_eio(fd, data, offset):
        calls.append(len(data))
        if len(calls) == 1:
            return real_pwrite(fd, bytes(data[: len(data) // 2]), offset)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(segment_module.os, "pwrite", half_then_eio)
    data, new = with_offsets([batch(3, seed=9)], headers[-1].last_offset + 1)
    with pytest.raises(KafkaStorageError):
        seg.append(data, new)
    monkeypatch.undo()
    assert len(calls) == 2
    assert seg.size == size == os.path.getsize(seg.log_path)
    assert len(parse_log_file(seg.log_path)) == 3
    # the segment stays usable
    seg.append(data, new)
    assert [b.last_offset for b in parse_log_file(seg.log_path)][-1] == new[-1].last_offset
    seg.close()


def test_short_writes_are_completed(tmp_path, monkeypatch):
    seg = open_segment(tmp_path, 0)
    real_pwrite = os.pwrite
    monkeypatch.setattr(segment_module.os, "pwrite",
                        lambda fd, data, off: real_pwrite(fd, bytes(data[:7]), off))
    data, headers = with_offsets([batch(4, seed=1)], 0)
    seg.append(data, headers)
    monkeypatch.undo()
    assert parse_log_file(seg.log_path)[0].data == data
    seg.close()


# --- lifecycle -----------------------------------------------------------------------------------


def test_change_suffix_and_delete(tmp_path):
    seg, _ = write_segment(tmp_path, n=2, base=42)
    seg.change_suffix(".deleted")
    names = sorted(os.listdir(tmp_path))
    assert names == [
        "00000000000000000042.index.deleted",
        "00000000000000000042.log.deleted",
        "00000000000000000042.timeindex.deleted",
    ]
    assert seg.read_bytes(0, 8) == (42).to_bytes(8, "big")  # open handles stay valid
    seg.delete()
    assert os.listdir(tmp_path) == []


def test_indexes_are_preallocated_while_active(tmp_path):
    seg = open_segment(tmp_path, 0, max_index_size=1000)
    assert os.path.getsize(seg.offset_index.path) == 1000
    assert os.path.getsize(seg.time_index.path) == 996
    assert isinstance(seg.offset_index, OffsetIndex) and isinstance(seg.time_index, TimeIndex)
    seg.close()
    assert os.path.getsize(seg.offset_index.path) == 0


def test_read_slice_bytes_parse_as_the_stored_batches(tmp_path):
    seg, headers = write_segment(tmp_path, n=5)
    _, fs = seg.read(4, 10**6, seg.size, False)
    data = os.pread(fs.fd, fs.size, fs.position)
    assert [b.base_offset for b in iter_batches(data)] == [h.base_offset for h in headers[1:]]
    seg.close()


def test_roll_clock_starts_at_the_largest_timestamp_of_the_first_append(tmp_path):
    seg = open_segment(tmp_path, 0)
    data, headers = with_offsets([batch(1, timestamp=T0), batch(1, timestamp=T0 + 500)], 0)
    seg.append(data, headers)
    assert not seg.should_roll(**roll_args(segment_ms=1000, max_timestamp=T0 + 1500))
    assert seg.should_roll(**roll_args(segment_ms=1000, max_timestamp=T0 + 1501))
    seg.close()
