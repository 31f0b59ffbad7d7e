"""The leader epoch cache against the behaviour of Kafka's LeaderEpochFileCache, and the
leader-epoch-checkpoint file it keeps (version 0, entry count, `epoch start_offset`)."""

from __future__ import annotations

import os
import shutil

import pytest
from storage_helpers import as_stored, batch, crash

from moldau.storage.checkpoints import read_leader_epoch_checkpoint
from moldau.storage.config import LogConfig
from moldau.storage.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache
from moldau.storage.log import PartitionLog

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)
LEO = 100


@pytest.fixture
def cache(tmp_path):
    return LeaderEpochCache(str(tmp_path), sync=False)


def entries(cache):
    return [tuple(e) for e in cache.entries]


def file_text(cache):
    with open(cache.path) as f:
        return f.read()


def test_assign_records_the_first_offset_of_each_epoch(cache):
    cache.assign(2, 6)
    cache.assign(2, 10)  # once assigned, a later offset does not move it
    cache.assign(3, 12)
    assert entries(cache) == [(2, 6), (3, 12)]
    assert cache.latest_epoch == 3
    assert file_text(cache) == "0\n2\n2 6\n3 12\n"


def test_negative_epochs_are_not_recorded(cache):
    cache.assign(-1, 0)
    assert entries(cache) == [] and file_text(cache) == ""  # the file as created


def test_same_epoch_with_an_earlier_offset_replaces_the_entry(cache):
    for epoch, start in ((5, 11), (6, 12), (7, 13)):
        cache.assign(epoch, start)
    cache.assign(7, 12)  # epoch 6 started at 12 too: it goes
    assert entries(cache) == [(5, 11), (7, 12)]


def test_start_offsets_stay_monotonic(cache):
    cache.assign(2, 6)
    cache.assign(3, 5)
    assert entries(cache) == [(3, 5)]


def test_an_older_epoch_truncates_the_newer_entries(cache):
    # Kafka keeps the cache monotonic by dropping the conflicting later epochs
    cache.assign(2, 6)
    cache.assign(1, 7)
    assert entries(cache) == [(1, 7)]
    assert cache.end_offset_for(1, LEO) == (1, LEO)
    assert cache.end_offset_for(2, LEO) == UNDEFINED
    assert file_text(cache) == "0\n1\n1 7\n"




@pytest.mark.parametrize(
    "assigned, requested, expected",
    [
        ([], 0, UNDEFINED),
        ([(2, 5)], UNDEFINED_EPOCH, UNDEFINED),
        ([(2, 5)], 2, (2, LEO)),  # the latest epoch ends at the log end
        ([(2, 5)], 3, UNDEFINED),  # above every known epoch
        ([(5, 11), (6, 12), (7, 13)], 4, (4, 11)),  # below every epoch: the asked one
        ([(1, 5), (2, 7)], 1, (1, 7)),
        ([(0, 10), (2, 13), (4, 17)], 1, (0, 13)),  # no exact epoch: the floor's
        ([(0, 10), (2, 13), (4, 17)], 2, (2, 17)),
        ([(0, 10), (2, 13), (4, 17)], 3, (2, 17)),
        ([(0, 10), (2, 13), (4, 17)], 4, (4, LEO)),
        ([(0, 10), (2, 13), (4, 17)], 5, UNDEFINED),
    ],
)
def test_end_offset_for_follows_kafka(cache, assigned, requested, expected):
    for epoch, start in assigned:
        cache.assign(epoch, start)
    assert cache.end_offset_for(requested, LEO) == expected


@pytest.mark.parametrize(
    "start, expected",
    [
        (6, [(0, 6), (1, 8), (2, 10)]),  # exclusive: nothing changes at the first offset
        (7, [(0, 7), (1, 8), (2, 10)]),
        (8, [(1, 8), (2, 10)]),
        (9, [(1, 9), (2, 10)]),
        (11, [(2, 11)]),
        (5, [(0, 6), (1, 8), (2, 10)]),
    ],
)
def test_truncate_from_start(cache, start, expected):
    for epoch, offset in ((0, 6), (1, 8), (2, 10)):
        cache.assign(epoch, offset)
    cache.truncate_from_start(start)
    assert entries(cache) == expected
    assert LeaderEpochCache(os.path.dirname(cache.path)).entries == cache.entries


@pytest.mark.parametrize(
    "end, expected",
    [
        (11, [(0, 6), (1, 8), (2, 10)]),
        (10, [(0, 6), (1, 8)]),
        (9, [(0, 6), (1, 8)]),
        (8, [(0, 6)]),
        (6, []),
    ],
)
def test_truncate_from_end(cache, end, expected):
    for epoch, offset in ((0, 6), (1, 8), (2, 10)):
        cache.assign(epoch, offset)
    cache.truncate_from_end(end)
    assert entries(cache) == expected
    assert [tuple(e) for e in LeaderEpochCache(os.path.dirname(cache.path)).entries] == expected


def test_epoch_for_offset(cache):
    for epoch, offset in ((1, 5), (3, 10), (4, 15)):
        cache.assign(epoch, offset)
    got = {o: cache.epoch_for_offset(o) for o in (0, 4, 5, 9, 10, 14, 15, 1000)}
    assert got == {0: -1, 4: -1, 5: 1, 9: 1, 10: 3, 14: 3, 15: 4, 1000: 4}


def test_checkpoint_is_reloaded_and_cleaned(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text("0\n4\n1 0\n3 20\n2 30\n5 40\n")  # epoch 2 after 3: not monotonic
    cache = LeaderEpochCache(str(tmp_path))
    assert entries(cache) == [(1, 0), (2, 30), (5, 40)]
    cache.clear()
    cache.flush()  # durable writes happen in the background; flush waits for them
    assert path.read_text() == "0\n0\n"


def test_background_writes_land_in_order_and_flush_waits_for_them(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))  # sync: fsynced writes off the caller's thread
    for epoch in range(1, 41):
        cache.assign(epoch, epoch * 10)
    cache.truncate_from_end(300)
    cache.flush()
    reloaded = LeaderEpochCache(str(tmp_path))
    assert entries(reloaded) == [(e, e * 10) for e in range(1, 30)]


def test_a_failed_background_write_surfaces_at_flush(tmp_path):
    directory = tmp_path / "gone"
    directory.mkdir()
    cache = LeaderEpochCache(str(directory))
    shutil.rmtree(directory)  # the write cannot create its temp file
    cache.assign(1, 0)
    with pytest.raises(OSError):
        cache.flush()
    cache.flush()  # reported once: the next flush has nothing left to wait for


def test_a_log_flush_puts_the_epochs_on_disk_before_its_recovery_point_moves(tmp_path):
    d = str(tmp_path / "t-0")
    log = PartitionLog(d, LogConfig(), sync=True)
    log.append_as_leader(batch(3), 7)
    log.flush()
    assert log.recovery_point == 3
    assert read_leader_epoch_checkpoint(os.path.join(d, "leader-epoch-checkpoint")) == [(7, 0)]
    log.close()


# --- the cache inside a partition log ------------------------------------------------------------


def test_log_keeps_the_cache_through_appends_truncation_and_recovery(tmp_path):
    config = LogConfig(segment_bytes=1000, file_delete_delay_ms=0)
    d = str(tmp_path / "t-0")
    log = PartitionLog(d, config, sync=False)
    for i in range(12):
        log.append_as_leader(batch(2, value_size=60, seed=i), 1 + i // 4)  # epochs 1,2,3
    assert entries(log.epochs) == [(1, 0), (2, 8), (3, 16)]
    assert log.epochs.end_offset_for(2, log.log_end_offset) == (2, 16)
    log.truncate_to(14)  # inside epoch 2
    assert entries(log.epochs) == [(1, 0), (2, 8)]
    log.append_as_follower(as_stored(batch(2, seed=30), 14, 4))
    assert entries(log.epochs) == [(1, 0), (2, 8), (4, 14)]
    log.update_high_watermark(log.log_end_offset)
    log.delete_records(9)
    assert entries(log.epochs) == [(2, 9), (4, 14)]
    # a crash that loses the checkpoint: recovery rebuilds the epochs it can see
    crash(log)
    os.remove(os.path.join(d, "leader-epoch-checkpoint"))
    log = PartitionLog(d, config, clean_shutdown=False, recovery_point=0, log_start_offset=9,
                       sync=False)
    assert entries(log.epochs)[-1] == (4, 14)
    assert log.epochs.epoch_for_offset(9) == 2
    log.close()


def test_log_drops_checkpoint_entries_past_its_end_on_load(tmp_path):
    d = tmp_path / "t-0"
    log = PartitionLog(str(d), LogConfig(), sync=False)
    log.append_as_leader(batch(3), 1)
    log.close()
    (d / "leader-epoch-checkpoint").write_text("0\n2\n1 0\n2 3\n")  # epoch 2 never wrote
    log = PartitionLog(str(d), LogConfig(), sync=False)
    assert entries(log.epochs) == [(1, 0)]
    log.epochs.assign(2, 3)
    log.truncate_to(3)  # a no-op truncation still drops epochs at or past the log end
    assert entries(log.epochs) == [(1, 0)]
    log.close()


def test_a_new_log_has_an_empty_checkpoint_file_from_the_start(tmp_path):
    # Kafka's CheckpointFile creates the file when the log is created, so a follower that
    # has fetched nothing yet has one too (issue 41, item 9); it stays when reopened
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig())
    path = tmp_path / "t-0" / "leader-epoch-checkpoint"
    assert path.exists() and path.read_bytes() == b""
    log.close()
    reopened = PartitionLog(str(tmp_path / "t-0"), LogConfig())
    assert reopened.epochs.entries == [] and path.read_bytes() == b""
    reopened.close()
