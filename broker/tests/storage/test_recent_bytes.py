"""PartitionLog keeps the bytes of its last small appends (recent_appends.py) and serves a
read that starts at one of them from memory: such a read must hold exactly the file's
bytes of the same slice (batch boundaries, max_bytes, min-one-batch, the high watermark
or LSO as bound), and rolls, truncation, retention, cleaning and the caps must drop
what no longer matches or no longer fits."""

from __future__ import annotations

import os

import pytest
from storage_helpers import batch

from moldau.errors import OffsetOutOfRangeError
from moldau.protocol.records import build_batch, iter_batches
from moldau.storage import cleaner
from moldau.storage.config import LogConfig
from moldau.storage.log import READ_COMMITTED, FetchData, PartitionLog, now_ms
from moldau.storage.recent_appends import (
    PARTITION_BYTES,
    PIECE_OVERHEAD,
    RecentAppends,
    RecentBytesBudget,
)

KIB = 1024


def open_log(tmp_path, name: str = "t-0", **config) -> PartitionLog:
    config.setdefault("file_delete_delay_ms", 0)
    return PartitionLog(str(tmp_path / name), LogConfig(**config), sync=False)


def on_file(data: FetchData) -> bytes:
    assert data.slice is not None
    return os.pread(data.slice.fd, data.slice.size, data.slice.position)


def from_memory(log: PartitionLog, offset: int, max_bytes: int = 1 << 20, *,
                max_offset: int | None = None, min_one: bool = True) -> bytes | None:
    """The read's bytes if it was served from memory (checked against the file and the
    read a log with nothing remembered makes), else None."""
    data = log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
    saved, log._recent = log._recent, RecentAppends()
    try:
        lookup = log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
    finally:
        log._recent = saved
    assert (data.start, data.slice) == (lookup.start, lookup.slice)
    if data.memory is None:
        return None
    held = bytes(data.memory)
    assert held == on_file(data)
    return held


def sized(size: int, seed: int) -> bytes:
    """One batch of about `size` bytes."""
    return batch(1, value_size=size - 80, seed=seed)


@pytest.mark.parametrize("max_bytes,min_one", [(1 << 20, True), (100, True), (100, False),
                                               (1500, False), (3000, True), (0, True)])
def test_reads_at_recent_appends_come_from_memory_with_the_files_bytes(tmp_path, max_bytes,
                                                                       min_one):
    log = open_log(tmp_path)
    infos = [log.append_as_leader(batch(3, value_size=200, seed=i)
                                  + batch(2, value_size=900, seed=i + 1), 0)
             for i in range(5)]
    for info in infos:
        held = from_memory(log, info.first_offset, max_bytes, min_one=min_one)
        if max_bytes or min_one:
            assert held is not None  # spanning the later appends too, up to the log end
    # bounded by an offset inside the log (a consumer's high watermark)
    log.update_high_watermark(infos[3].first_offset)
    held = from_memory(log, infos[1].first_offset, max_offset=log.high_watermark)
    assert held is not None
    assert [b.base_offset for b in iter_batches(held)][-1] < log.high_watermark
    assert log.read(infos[3].first_offset, 1 << 20,
                    max_offset=log.high_watermark).slice is None  # nothing past it


def test_a_single_produced_batch_is_kept_as_written_with_its_patched_offsets(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(batch(2, seed=1), 0)
    info = log.append_as_leader(batch(1, seed=2), 7)  # read-only: its front goes to head
    held = from_memory(log, info.first_offset)
    assert held is not None
    (kept,) = iter_batches(held)
    assert (kept.base_offset, kept.partition_leader_epoch) == (2, 7)


def test_the_last_stable_offset_bounds_a_read_committed_read(tmp_path):
    log = open_log(tmp_path)
    plain = log.append_as_leader(batch(2, seed=1), 0)
    open_txn = build_batch([(b"k", b"v", (), 1000)], producer_id=5, producer_epoch=0,
                           base_sequence=0, is_transactional=True)
    log.append_as_leader(open_txn, 0)
    after = log.append_as_leader(batch(2, seed=2), 0)
    log.update_high_watermark(log.log_end_offset)
    lso = log.fetch_upper_bound(READ_COMMITTED)
    assert lso == after.first_offset - 1  # the open transaction's first offset
    held = from_memory(log, plain.first_offset, max_offset=lso)
    assert held is not None
    assert [b.last_offset for b in iter_batches(held)] == [plain.last_offset]


def test_a_follower_fetch_at_past_and_before_the_kept_window(tmp_path):
    log = open_log(tmp_path)
    size = 6 * KIB
    infos = [log.append_as_leader(sized(size, i), 0) for i in range(10)]
    kept = [info for info in infos if from_memory(log, info.first_offset) is not None]
    # the newest appends, as many as PARTITION_BYTES holds; the position of older ones
    # is still known, their bytes come from the file
    assert kept == infos[-len(kept):]
    assert len(kept) == PARTITION_BYTES // (len(sized(size, 0)) + PIECE_OVERHEAD)
    oldest = kept[0]
    assert from_memory(log, oldest.first_offset) is not None  # exactly at the window
    before = infos[-len(kept) - 1]
    assert before.first_offset in log._recent
    assert from_memory(log, before.first_offset) is None  # just before it: the file
    assert log.read(log.log_end_offset, 1 << 20).slice is None  # at the end: nothing yet
    with pytest.raises(OffsetOutOfRangeError):  # past it: out of range, as from the file
        log.read(log.log_end_offset + 1, 1 << 20)
    # inside an append (not a batch start that a fetch would use): looked up in the file
    multi = log.append_as_leader(batch(1, seed=50) + batch(1, seed=51), 0)
    assert from_memory(log, multi.first_offset + 1) is None


def test_a_large_append_is_not_kept_and_cuts_the_window(tmp_path):
    log = open_log(tmp_path)
    small = log.append_as_leader(sized(2 * KIB, 1), 0)
    large = log.append_as_leader(sized(PARTITION_BYTES + KIB, 2), 0)
    assert from_memory(log, large.first_offset) is None
    assert from_memory(log, small.first_offset) is None  # it would run into the large one
    assert log._recent.bytes_held == 0
    later = log.append_as_leader(sized(2 * KIB, 3), 0)
    assert from_memory(log, later.first_offset) is not None


def test_a_roll_a_truncation_retention_and_cleaning_drop_the_bytes(tmp_path):
    log = open_log(tmp_path, retention_ms=60_000)  # the records' time is long past
    first = log.append_as_leader(sized(KIB, 1), 0)
    log.roll()
    assert log._recent.bytes_held == 0
    assert from_memory(log, first.first_offset) is None
    again = log.append_as_leader(sized(KIB, 2), 0)
    assert from_memory(log, again.first_offset) is not None

    # a follower's truncation: the same offsets come back with other bytes
    log.truncate_to(again.first_offset)
    assert log._recent.bytes_held == 0
    other = log.append_as_leader(sized(2 * KIB, 3), 1)
    assert other.first_offset == again.first_offset
    held = from_memory(log, other.first_offset)
    assert held is not None and len(held) == len(sized(2 * KIB, 3))

    log.update_high_watermark(log.log_end_offset)
    log.delete_records(other.first_offset)  # a log start inside the active segment
    assert from_memory(log, other.first_offset) is not None
    assert log.delete_old_segments(now_ms()) == 1  # retention.ms: the active one rolls
    assert log._recent.bytes_held == 0 and not log._recent

    compacted = open_log(tmp_path, "c-0", cleanup_policy=("compact",), retention_ms=-1,
                         min_cleanable_dirty_ratio=0.0)
    for i in range(4):
        compacted.append_as_leader(build_batch([(b"k", b"v%d" % i, (), 1000)]), 0)
        compacted.roll()
    tail = compacted.append_as_leader(build_batch([(b"k", b"last", (), 1000)]), 0)
    compacted.update_high_watermark(compacted.log_end_offset)
    assert compacted._recent.bytes_held
    cleaner.clean(compacted, cleaner.needs_cleaning(compacted, 0, 2000), 2000)
    assert compacted._recent.bytes_held == 0
    assert from_memory(compacted, tail.first_offset) is None


def test_followers_keep_the_leaders_bytes_too(tmp_path):
    leader = open_log(tmp_path, "leader-0")
    follower = open_log(tmp_path, "follower-0")
    for i in range(3):
        info = leader.append_as_leader(sized(KIB, i), 0)
        data = leader.read_bytes(leader.read(info.first_offset, 1 << 20))
        frame = bytearray(b"header" + data)  # a fetch response holding the records
        follower.append_as_follower(memoryview(frame)[6:])
        assert from_memory(follower, info.first_offset) == data


def test_a_view_into_a_much_larger_request_is_copied_not_held(tmp_path):
    log = open_log(tmp_path)
    records = sized(KIB, 1)
    small_frame = bytearray(b"h" * 40 + records)
    log.append_as_leader(memoryview(small_frame)[40:], 0)
    # held by reference: the whole frame counts
    assert log._recent.bytes_held == len(small_frame) + PIECE_OVERHEAD
    large_frame = bytearray(b"h" * 20 * KIB + records)
    info = log.append_as_leader(memoryview(large_frame)[20 * KIB:], 0)
    assert log._recent.bytes_held == len(small_frame) + len(records) + 2 * PIECE_OVERHEAD
    large_frame[20 * KIB + 100] ^= 0xFF  # the request's buffer is not the log's
    assert from_memory(log, info.first_offset) is not None


def test_the_broker_wide_cap_evicts_the_partition_that_appended_least_recently(tmp_path):
    budget = RecentBytesBudget(cap=5 * KIB)
    logs = [open_log(tmp_path, f"t-{i}") for i in range(3)]
    for log in logs:
        log._recent.budget = budget
    infos = [log.append_as_leader(sized(2 * KIB, i), 0) for i, log in enumerate(logs)]
    assert budget.held <= budget.cap
    assert from_memory(logs[0], infos[0].first_offset) is None  # the oldest went
    assert from_memory(logs[1], infos[1].first_offset) is not None
    assert from_memory(logs[2], infos[2].first_offset) is not None
    infos[0] = logs[0].append_as_leader(sized(2 * KIB, 9), 0)
    assert from_memory(logs[1], infos[1].first_offset) is None  # now the oldest
    assert from_memory(logs[0], infos[0].first_offset) is not None
    assert budget.held == logs[0]._recent.bytes_held + logs[2]._recent.bytes_held
    for log in logs:
        log.close()  # a closed log gives its bytes back
    assert budget.held == 0
