"""PartitionLog remembers where its recent appends start (`_recent`), so a caught-up
follower's fetch needs no index lookup: every read served from it must be the read the
segment lookup gives, before and after rolls, truncation and retention."""

from __future__ import annotations

import os

import pytest
from storage_helpers import batch

from moldau.storage.config import LogConfig
from moldau.storage.log import RECENT_APPENDS, PartitionLog
from moldau.storage.recent_appends import RecentAppends


def open_log(tmp_path, **config) -> PartitionLog:
    config.setdefault("file_delete_delay_ms", 0)
    return PartitionLog(str(tmp_path / "t-0"), LogConfig(**config), sync=False)


def two_batches(seed: int) -> bytes:
    return batch(3, value_size=200, seed=seed) + batch(2, value_size=900, seed=seed + 1)


def read_both(log: PartitionLog, offset: int, max_bytes: int, min_one: bool,
              max_offset: int | None = None):
    """(read served from _recent or the lookup, read by the segment lookup alone)."""
    fast = log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
    saved, log._recent = log._recent, RecentAppends()
    try:
        slow = log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one)
    finally:
        log._recent = saved
    assert slow.memory is None
    return fast, slow


def same(a, b) -> bool:
    """The same read, and bytes held in memory (if any) are the file's."""
    if a.memory is not None and bytes(a.memory) != os.pread(a.slice.fd, a.slice.size,
                                                            a.slice.position):
        return False
    return a.start == b.start and a.slice == b.slice


@pytest.mark.parametrize("max_bytes,min_one", [(1 << 20, True), (100, True), (100, False),
                                               (1500, False), (0, True)])
def test_reads_from_recent_appends_match_the_segment_lookup(tmp_path, max_bytes, min_one):
    log = open_log(tmp_path)
    infos = [log.append_as_leader(two_batches(i), 0) for i in range(6)]
    starts = [info.first_offset for info in infos]
    assert all(offset in log._recent for offset in starts)
    for offset in starts:
        fast, slow = read_both(log, offset, max_bytes, min_one)
        assert same(fast, slow), offset
        # bounded by an offset inside the log (a consumer's high watermark) too
        fast, slow = read_both(log, offset, max_bytes, min_one, max_offset=starts[-1])
        assert same(fast, slow), offset


def test_high_watermark_at_a_recent_append_is_located_without_a_lookup(tmp_path):
    log = open_log(tmp_path)
    infos = [log.append_as_leader(two_batches(i), 0) for i in range(4)]
    log.update_high_watermark(infos[2].first_offset)
    fast, slow = read_both(log, infos[0].first_offset, 1 << 20, True,
                           max_offset=log.high_watermark)
    assert same(fast, slow)
    assert (fast.slice.position + fast.slice.size
            == log._recent.positions[infos[2].first_offset][1])


def test_only_the_latest_appends_are_remembered(tmp_path):
    log = open_log(tmp_path)
    infos = [log.append_as_leader(batch(1, seed=i), 0) for i in range(RECENT_APPENDS + 5)]
    assert list(log._recent.positions) == [info.first_offset
                                           for info in infos[-RECENT_APPENDS:]]


def test_a_roll_truncation_or_retention_forgets_them(tmp_path):
    log = open_log(tmp_path)
    for i in range(3):
        log.append_as_leader(two_batches(i), 0)
    log.roll()
    assert not log._recent
    info = log.append_as_leader(two_batches(10), 0)
    assert list(log._recent.positions) == [info.first_offset]

    log.truncate_to(info.first_offset + 1)  # inside the append: cut at its first batch's end
    assert not log._recent
    # the same offsets again, at other positions: reads must find the new bytes
    again = log.append_as_leader(batch(4, value_size=50, seed=99), 0)
    fast, slow = read_both(log, again.first_offset, 1 << 20, True)
    assert same(fast, slow)

    log.update_high_watermark(log.log_end_offset)
    log.delete_records(again.first_offset)
    assert not log._recent


def test_follower_appends_are_remembered_too(tmp_path):
    leader = open_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    for i in range(3):
        info = leader.append_as_leader(two_batches(i), 0)
        data = leader.read_bytes(leader.read(info.first_offset, 1 << 20))
        follower.append_as_follower(data)
        assert info.first_offset in follower._recent
        fast, slow = read_both(follower, info.first_offset, 1 << 20, True)
        assert same(fast, slow)
