"""Log compaction: the latest value per key survives, offsets are kept, tombstones go
after delete.retention.ms, the dirty ratio gates a pass, and a crash mid-swap is safe.
The worked examples of the seeds are golden tests."""

from __future__ import annotations

import os
import threading
import time

import pytest

from moldau.protocol.records import build_batch, iter_batches
from moldau.storage import cleaner
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog
from moldau.storage.log_manager import LogManager, ManagerConfig

DAY = 24 * 3600 * 1000
NOW = 1_800_000_000_000


def compacted_config(**kwargs) -> LogConfig:
    kwargs.setdefault("min_cleanable_dirty_ratio", 0.0)
    return LogConfig(cleanup_policy=("compact",), retention_ms=-1, **kwargs)


def write(log: PartitionLog, offset: int, key: bytes, value: bytes | None,
          compression: int = 0) -> None:
    """One record at an explicit offset (gaps allowed), as a follower would append it."""
    log.append_as_follower(build_batch([(key, value, (), NOW)], base_offset=offset,
                                       compression=compression))


def contents(log: PartitionLog) -> list[tuple[int, bytes, bytes | None]]:
    out = []
    for segment in log.segments:
        data = segment.read_bytes(0, segment.size)
        for batch in iter_batches(data):
            out += [(r.offset, r.key, r.value) for r in batch.records()]
    return out


def make_log(tmp_path, entries, rolls, **config) -> PartitionLog:
    log = PartitionLog(str(tmp_path / "members-0"), compacted_config(**config), sync=False)
    pending = sorted(rolls)
    for offset, key, value in entries:
        while pending and offset >= pending[0]:
            log.roll(pending.pop(0))  # a segment's base offset may precede its first record
        write(log, offset, key, value)
    log.update_high_watermark(log.log_end_offset)
    return log


# Kafka in Action, §9.3 (Fig 7.9/7.11): membership levels per customer.
MEMBERS = [
    (0, b"Customer 0", b"Basic"),
    (1, b"Customer 1", b"Gold"),
    (2, b"Customer 0", b"Gold"),
    (3, b"Customer 2", b"Basic"),
    (100, b"Customer 1", b"Basic"),
    (101, b"Customer 0", None),
]


def test_kafka_in_action_membership_example(tmp_path):
    log = make_log(tmp_path, [*MEMBERS, (102, b"Customer 3", b"Gold")], rolls={100, 102})
    found = cleaner.needs_cleaning(log, 0, NOW)
    assert found is not None and found.first_uncleanable == 102  # the active segment waits
    cleaner.clean(log, found, NOW)
    assert contents(log) == [
        (3, b"Customer 2", b"Basic"),
        (100, b"Customer 1", b"Basic"),
        (101, b"Customer 0", None),  # the tombstone stays for delete.retention.ms
        (102, b"Customer 3", b"Gold"),
    ]
    # Offsets are kept: reading from offset 0 starts at the first surviving record.
    assert log.read_bytes(log.read(0, 1 << 20))[:8] == (3).to_bytes(8, "big")


def test_tombstones_go_after_delete_retention(tmp_path):
    log = make_log(tmp_path, [*MEMBERS, (102, b"Customer 3", b"Gold")], rolls={100, 102})
    cleaner.clean(log, cleaner.needs_cleaning(log, 0, NOW), NOW)
    write(log, 103, b"Customer 4", b"Basic")
    log.roll(104)
    write(log, 104, b"Customer 5", b"Basic")
    log.update_high_watermark(log.log_end_offset)
    later = NOW + DAY + 1  # delete.retention.ms (1 day) after the first pass
    cleaner.clean(log, cleaner.needs_cleaning(log, 102, later), later)
    assert [(o, k) for o, k, _ in contents(log)] == [
        (3, b"Customer 2"), (100, b"Customer 1"), (102, b"Customer 3"), (103, b"Customer 4"),
        (104, b"Customer 5"),
    ]


# The course's Problems C and E (seed-inventory-ops-and-admin §22): one log, two clean
# segments, one dirty segment and the active segment.
PROBLEM_LOG = list(zip(
    [3, 6, 8, 9, 17, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35],
    [2, 1, 12, 11, 10, 7, 9, 1, 7, 15, 7, 15, 7, 12, 6],
    strict=True,
))


def problem_log(tmp_path, **config) -> PartitionLog:
    entries = [(o, b"k%d" % k, b"value of k%d at %d" % (k, o)) for o, k in PROBLEM_LOG]
    return make_log(tmp_path, entries, rolls={10, 20, 35}, **config)


def test_problem_c_segment_file_names(tmp_path):
    log = problem_log(tmp_path)
    names = sorted(n for n in os.listdir(log.directory) if n[0].isdigit())
    assert [n for n in names if n.endswith(".log")] == [
        "00000000000000000000.log", "00000000000000000010.log",
        "00000000000000000020.log", "00000000000000000035.log",
    ]
    assert len([n for n in names if n.endswith((".log", ".index", ".timeindex"))]) == 12


def test_problem_e_dirty_ratio_below_the_default_means_no_compaction():
    # Segment sizes 10, 10 (clean) and 15 (dirty): 15 / 35 = 0.43 < 0.5.
    assert round(cleaner.cleanable_ratio(clean_bytes=20, dirty_bytes=15), 2) == 0.43
    assert cleaner.cleanable_ratio(20, 15) < LogConfig().min_cleanable_dirty_ratio


def test_problem_e_the_default_ratio_holds_the_cleaner_back(tmp_path):
    # Values padded so the segments' bytes stand about 10 : 10 : 15 as in the problem.
    pad = {0: 250, 10: 1000, 20: 166}
    entries = [
        (o, b"k%d" % k, b"x" * pad[max(b for b in pad if b <= o)]) for o, k in PROBLEM_LOG
    ]
    log = make_log(tmp_path, entries, rolls={10, 20, 35}, min_cleanable_dirty_ratio=0.5)
    sizes = {s.base_offset: os.path.getsize(s.log_path) for s in log.segments}
    found = cleaner.dirty_range(log, 20, NOW)  # first dirty offset 20: 0 and 10 are clean
    assert (found.clean_bytes, found.dirty_bytes) == (sizes[0] + sizes[10], sizes[20])
    assert 0.4 < found.ratio < 0.5
    assert cleaner.needs_cleaning(log, 20, NOW) is None  # no compaction yet
    eager = LogConfig.from_properties({"min.cleanable.dirty.ratio": "0.4"}, log.config)
    log.config = eager
    assert cleaner.needs_cleaning(log, 20, NOW) is not None


def test_problem_e_resulting_log(tmp_path):
    log = problem_log(tmp_path)
    cleaner.clean(log, cleaner.needs_cleaning(log, 20, NOW), NOW)
    assert [(o, k.decode()) for o, k, _ in contents(log)] == [
        (3, "k2"), (9, "k11"), (17, "k10"), (27, "k9"), (28, "k1"), (32, "k15"), (33, "k7"),
        (34, "k12"), (35, "k6"),
    ]


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_are_rewritten_with_their_codec(tmp_path, codec):
    log = PartitionLog(str(tmp_path / "c-0"), compacted_config(), sync=False)
    log.append_as_follower(build_batch(
        [(b"a", b"1", (), NOW), (b"b", b"2", (), NOW), (b"a", b"3", (), NOW)],
        compression=codec))
    log.roll()
    write(log, 3, b"z", b"9")
    log.update_high_watermark(log.log_end_offset)
    cleaner.clean(log, cleaner.needs_cleaning(log, 0, NOW), NOW)
    (batch, *_) = list(iter_batches(log.segments[0].read_bytes(0, log.segments[0].size)))
    assert batch.compression == codec and batch.verify_crc()
    assert [(r.offset, r.value) for r in batch.records()] == [(1, b"2"), (2, b"3")]
    assert batch.last_offset == 2  # the batch keeps its offset span


def test_a_crash_during_the_swap_leaves_a_consistent_log(tmp_path, monkeypatch):
    log = problem_log(tmp_path)
    before = {k: (o, v) for o, k, v in contents(log)}  # the latest value per key
    monkeypatch.setattr(PartitionLog, "replace_segments",
                        lambda self, old, new: (_ for _ in ()).throw(OSError("power cut")))
    with pytest.raises(OSError, match="power cut"):
        cleaner.clean(log, cleaner.needs_cleaning(log, 20, NOW), NOW)
    monkeypatch.undo()
    assert any(n.endswith(".log.swap") for n in os.listdir(log.directory))
    for segment in log.segments:
        os.close(segment.fd)
        segment.fd = -1
    reopened = PartitionLog(log.directory, compacted_config(), clean_shutdown=False,
                            sync=False)
    after = contents(reopened)
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)  # no duplicates
    assert {k: (o, v) for o, k, v in after} == before
    assert not [n for n in os.listdir(log.directory) if n.endswith((".swap", ".cleaned"))]


def test_a_crash_before_the_swap_discards_the_half_cleaned_files(tmp_path):
    log = problem_log(tmp_path)
    original = contents(log)
    (tmp_path / "members-0" / "00000000000000000000.log.cleaned").write_bytes(b"partial")
    for segment in log.segments:
        os.close(segment.fd)
        segment.fd = -1
    reopened = PartitionLog(log.directory, compacted_config(), clean_shutdown=False, sync=False)
    assert contents(reopened) == original


def test_the_log_manager_cleans_due_logs_and_checkpoints_the_dirty_offset(tmp_path):
    manager, log = cleaning_manager(tmp_path)
    assert manager.clean_logs(NOW) == [("offsets", 0)]
    assert [(o, k) for o, k, _ in contents(log)] == [(4, b"k0"), (5, b"k1"), (6, b"x")]
    checkpoint = tmp_path / "d" / "cleaner-offset-checkpoint"
    assert checkpoint.read_text().splitlines()[2] == "offsets 0 6"
    assert manager.clean_logs(NOW) == []  # nothing dirty any more
    manager.shutdown()


def cleaning_manager(tmp_path, **config) -> tuple[LogManager, PartitionLog]:
    """A manager with one due compacted log of two segments (keys k0 and k1 rewritten)."""
    cfg = ManagerConfig(log_dirs=[str(tmp_path / "d")], broker_id=0, cluster_id="c",
                        sync=False, **config)
    manager = LogManager(cfg, LogConfig(), topic_configs=lambda topic: compacted_config())
    log = manager.get_or_create_log("offsets", 0)
    for i in range(6):
        log.append_as_leader(build_batch([(b"k%d" % (i % 2), b"v%d" % i, (), NOW)]),
                             leader_epoch=0)
    log.roll()
    log.append_as_leader(build_batch([(b"x", b"y", (), NOW)]), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    return manager, log


def finish(manager: LogManager, timeout: float = 30.0) -> list:
    deadline = time.monotonic() + timeout
    while manager.cleaning_in_progress():
        assert time.monotonic() < deadline, "the cleaner thread did not finish"
        done = manager.finish_cleaning()
        if done:
            return done
        time.sleep(0.01)
    return []


def test_passes_build_on_a_cleaner_thread_while_the_log_takes_appends(tmp_path):
    manager, log = cleaning_manager(tmp_path)
    threads: list[str] = []
    real_build = cleaner.build

    def build(pass_):
        threads.append(threading.current_thread().name)
        real_build(pass_)

    cleaner_build, cleaner.build = cleaner.build, build
    try:
        assert manager.start_cleaning(NOW) == 1
        assert manager.start_cleaning(NOW) == 0  # one pass per log at a time
        log.append_as_leader(build_batch([(b"k0", b"late", (), NOW)]), leader_epoch=0)
        assert finish(manager) == [("offsets", 0)]
    finally:
        cleaner.build = cleaner_build
    assert threads and threads[0].startswith("kafka-log-cleaner-thread")
    assert [(o, k, v) for o, k, v in contents(log)] == [
        (4, b"k0", b"v4"), (5, b"k1", b"v5"), (6, b"x", b"y"), (7, b"k0", b"late")]
    checkpoint = tmp_path / "d" / "cleaner-offset-checkpoint"
    assert checkpoint.read_text().splitlines()[2] == "offsets 0 6"
    assert not [n for n in os.listdir(log.directory) if n.endswith((".swap", ".cleaned"))]
    manager.shutdown()


@pytest.mark.parametrize("change", ["truncate", "delete_log"])
def test_a_log_changed_during_the_pass_discards_the_output(tmp_path, change):
    manager, log = cleaning_manager(tmp_path)
    release = threading.Event()
    real_build = cleaner.build

    def build(pass_):
        release.wait(30)
        real_build(pass_)

    cleaner_build, cleaner.build = cleaner.build, build
    try:
        assert manager.start_cleaning(NOW) == 1
        if change == "truncate":  # a follower diverged: offsets 3.. go
            log.truncate_to(3)
            expected = [(o, f"k{o % 2}".encode(), f"v{o}".encode()) for o in range(3)]
        else:
            directory = log.directory
            manager.delete_log("offsets", 0)
        release.set()
        assert finish(manager) == []
    finally:
        cleaner.build = cleaner_build
    assert manager.cleaning_in_progress() == 0
    if change == "truncate":
        assert contents(log) == expected  # untouched by the pass, nothing resurrected
        assert not [n for n in os.listdir(log.directory) if n.endswith((".swap", ".cleaned"))]
        log.roll()
        log.append_as_leader(build_batch([(b"z", b"z", (), NOW)]), leader_epoch=0)
        log.update_high_watermark(log.log_end_offset)
        assert manager.start_cleaning(NOW) == 1  # the next pass starts over
        assert finish(manager) == [("offsets", 0)]
        assert [(o, k) for o, k, _ in contents(log)] == [(1, b"k1"), (2, b"k0"), (3, b"z")]
    else:
        assert not os.path.exists(directory)
    manager.shutdown()


def test_shutdown_cancels_a_pass_in_progress(tmp_path):
    manager, log = cleaning_manager(tmp_path, log_cleaner_io_max_bytes_per_second=50.0)
    original = contents(log)
    assert manager.start_cleaning(NOW) == 1  # 50 B/s: the pass would take many seconds
    time.sleep(0.2)
    started = time.monotonic()
    manager.shutdown()
    assert time.monotonic() - started < 10
    reopened = PartitionLog(log.directory, compacted_config(), sync=False)
    assert contents(reopened) == original
    assert not [n for n in os.listdir(log.directory) if n.endswith((".swap", ".cleaned"))]


def test_the_io_limit_paces_the_cleaner_thread(tmp_path):
    manager, log = cleaning_manager(tmp_path, log_cleaner_io_max_bytes_per_second=2000.0)
    size = sum(s.size for s in log.segments[:-1])  # read twice, written once, at most
    started = time.monotonic()
    assert manager.start_cleaning(NOW) == 1
    assert finish(manager) == [("offsets", 0)]
    assert time.monotonic() - started >= size / 2000.0 * 0.9
    manager.shutdown()


def test_zero_cleaner_threads_compact_nothing(tmp_path):
    manager, log = cleaning_manager(tmp_path, log_cleaner_threads=0)
    before = contents(log)
    manager.run_maintenance(NOW + 60_000)
    assert manager.cleaning_in_progress() == 0
    assert contents(log) == before
    manager.shutdown()


def test_a_full_offset_map_ends_the_pass_early_and_the_next_continues(tmp_path):
    # Kafka's sizing: 128 MiB / 24-byte slots at load factor 0.9 for one thread.
    assert cleaner.offset_map_capacity(128 * 1024 * 1024, 1, 0.9) == 5_033_164
    assert cleaner.offset_map_capacity(128 * 1024 * 1024, 2, 0.9) == 2_516_581
    # 48 bytes over two threads at 0.9: room for 1 key per pass.
    manager, log = cleaning_manager(tmp_path, log_cleaner_threads=2,
                                    log_cleaner_dedupe_buffer_size=48 * 2,
                                    log_cleaner_io_buffer_load_factor=0.9)
    assert manager.config.cleaner_max_keys == 1
    # Offsets 0-5 alternate k0/k1; only k0 fits, so the pass stops at offset 1 (k1).
    assert manager.start_cleaning(NOW) == 1
    assert finish(manager) == [("offsets", 0)]
    assert manager.cleaner_offsets[("offsets", 0)] == 1
    assert [(o, k) for o, k, _ in contents(log)] == [
        (0, b"k0"), (1, b"k1"), (2, b"k0"), (3, b"k1"), (4, b"k0"), (5, b"k1"), (6, b"x")]
    passes = 1
    while manager.start_cleaning(NOW):  # every later pass moves the checkpoint on
        finish(manager)
        passes += 1
        assert passes < 10
    assert manager.cleaner_offsets[("offsets", 0)] == 6
    assert [(o, k) for o, k, _ in contents(log)] == [(4, b"k0"), (5, b"k1"), (6, b"x")]
    manager.shutdown()


def test_segments_that_compact_to_nothing_become_one(tmp_path):
    # 30 rounds over 8 keys in 2 KiB segments: only the last round survives, so the
    # leading segments keep nothing. Consumers must not meet a run of empty segments
    # (librdkafka gives up after ten fetches in a row that return no record).
    log = PartitionLog(str(tmp_path / "t-0"), compacted_config(segment_bytes=2048),
                       sync=False)
    for round_ in range(30):
        for key in range(8):
            log.append_as_leader(build_batch([(b"key-%d" % key, b"r%d" % round_ + b"." * 50,
                                               (), NOW)]), leader_epoch=0, now=NOW)
    log.update_high_watermark(log.log_end_offset)
    segments_before = len(log.segments)
    result = cleaner.clean(log, cleaner.needs_cleaning(log, 0, NOW), NOW)
    assert result.bytes_written < result.bytes_read
    empty = [s.base_offset for s in log.segments if not any(
        b.records_count for b in iter_batches(s.read_bytes(0, s.size)))]
    assert len(empty) <= 1 and len(log.segments) < segments_before / 2
    latest = {k: (o, v) for o, k, v in contents(log)}
    assert {k: v for k, (_, v) in latest.items()} == {
        b"key-%d" % k: b"r29" + b"." * 50 for k in range(8)}
    offset, reads = 0, 0
    while offset < log.high_watermark:  # a consumer's walk: every read makes progress
        data = log.read_bytes(log.read(offset, 1 << 20, max_offset=log.high_watermark))
        batches = list(iter_batches(data, allow_partial=True))
        assert batches and batches[-1].last_offset >= offset
        offset = batches[-1].last_offset + 1
        reads += 1
    assert reads <= len(log.segments)
