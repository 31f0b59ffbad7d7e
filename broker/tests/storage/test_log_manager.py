"""LogManager: log dirs, meta.properties, checkpoints, clean shutdown, offline dirs."""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest

from moldau.errors import KafkaStorageError
from moldau.protocol.records import build_batch, iter_batches
from moldau.storage import checkpoints
from moldau.storage.config import LogConfig
from moldau.storage.log import now_ms
from moldau.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager, ManagerConfig

CLUSTER = "mOldauClusterId000000A"


def manager(dirs, **kwargs) -> LogManager:
    cfg = ManagerConfig(log_dirs=[str(d) for d in dirs], broker_id=1, cluster_id=CLUSTER,
                        sync=False)
    return LogManager(cfg, LogConfig(**kwargs))


def batch(i: int, size: int = 100) -> bytes:
    return build_batch([(b"key-%d" % i, bytes([i % 256]) * size, (), 1_700_000_000_000 + i)])


def read_all(partition_log) -> list[bytes]:
    values = []
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        data = partition_log.read_bytes(partition_log.read(offset, 1 << 20))
        for b in iter_batches(data, allow_partial=True):
            values += [r.value for r in b.records()]
            offset = b.last_offset + 1
    return values


def test_first_start_writes_meta_properties_and_refuses_another_broker(tmp_path):
    m = manager([tmp_path / "a"])
    meta = checkpoints.read_meta_properties(tmp_path / "a")
    assert (meta.broker_id, meta.cluster_id, meta.version) == (1, CLUSTER, 0)
    m.shutdown()
    other = ManagerConfig(log_dirs=[str(tmp_path / "a")], broker_id=2, cluster_id=CLUSTER)
    with pytest.raises(checkpoints.InconsistentBrokerIdError):
        LogManager(other, LogConfig())


def test_a_locked_dir_cannot_be_opened_twice(tmp_path):
    m = manager([tmp_path / "a"])
    with pytest.raises(KafkaStorageError, match="locked"):
        manager([tmp_path / "a"])
    m.shutdown()


def test_new_partitions_go_to_the_dir_with_fewest_partitions(tmp_path):
    m = manager([tmp_path / "a", tmp_path / "b"])
    m.get_or_create_log("t", 0)
    m.get_or_create_log("t", 1)
    m.get_or_create_log("t", 2)
    assert sorted(os.listdir(tmp_path / "a")) == [".lock", "meta.properties", "t-0", "t-2"]
    assert "t-1" in os.listdir(tmp_path / "b")
    assert m.dir_of("t", 1) == str(tmp_path / "b")
    m.shutdown()


def test_clean_restart_keeps_offsets_and_checkpoints(tmp_path):
    m = manager([tmp_path / "a"], segment_bytes=2000, retention_ms=-1)
    lg = m.get_or_create_log("orders", 0, topic_id=uuid.uuid4())
    for i in range(50):
        lg.append_as_leader(batch(i), leader_epoch=0)
    lg.update_high_watermark(40)
    lg.delete_records(10)
    m.shutdown()
    assert os.path.exists(tmp_path / "a" / CLEAN_SHUTDOWN_FILE)
    hw = checkpoints.read_offset_checkpoint(tmp_path / "a" / "replication-offset-checkpoint")
    assert hw == {("orders", 0): 40}
    start = checkpoints.read_offset_checkpoint(tmp_path / "a" / "log-start-offset-checkpoint")
    assert start[("orders", 0)] == 10

    m = manager([tmp_path / "a"], segment_bytes=2000, retention_ms=-1)
    lg = m.get_log("orders", 0)
    assert (lg.log_start_offset, lg.high_watermark, lg.log_end_offset) == (10, 40, 50)
    assert not os.path.exists(tmp_path / "a" / CLEAN_SHUTDOWN_FILE)  # a crash would show
    assert read_all(lg) == [bytes([i]) * 100 for i in range(10, 50)]
    m.shutdown()


def test_crash_recovery_cuts_a_torn_tail(tmp_path):
    m = manager([tmp_path / "a"])
    lg = m.get_or_create_log("t", 0)
    for i in range(10):
        lg.append_as_leader(batch(i), leader_epoch=0)
    path = lg.active_segment.log_path
    size = os.path.getsize(path)
    # Simulate a crash: no shutdown(); half of a new batch reaches the file.
    with open(path, "ab") as f:
        f.write(batch(10)[:40])
    for d in m.dirs.values():
        os.close(d.lock_fd)
    m2 = manager([tmp_path / "a"])
    lg2 = m2.get_log("t", 0)
    assert lg2.log_end_offset == 10
    assert os.path.getsize(path) == size
    assert read_all(lg2) == [bytes([i]) * 100 for i in range(10)]
    m2.shutdown()


def test_deleting_a_partition_removes_its_directory(tmp_path):
    m = manager([tmp_path / "a"])
    lg = m.get_or_create_log("gone", 0)
    lg.append_as_leader(batch(1), leader_epoch=0)
    m.delete_log("gone", 0)
    assert m.get_log("gone", 0) is None
    assert not [n for n in os.listdir(tmp_path / "a") if n.startswith("gone")]
    m.shutdown()


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs: a real filesystem that fills up (needs root, as in CI)."""
    mount = tmp_path / "small"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_full_disk_takes_only_that_dir_offline_and_loses_nothing(tmp_path, small_tmpfs):
    failed = []
    cfg = ManagerConfig(log_dirs=[str(small_tmpfs / "logs"), str(tmp_path / "big")],
                        broker_id=1, cluster_id=CLUSTER, sync=False)
    m = LogManager(cfg, LogConfig(segment_index_bytes=4096), on_dir_failure=failed.append)
    full = m.get_or_create_log("full", 0)  # fewest partitions: the first dir
    ok = m.get_or_create_log("ok", 0)
    assert m.dir_of("full", 0) == str(small_tmpfs / "logs")
    acknowledged = 0
    with pytest.raises(KafkaStorageError):
        for i in range(10_000):
            full.append_as_leader(batch(i, 10_000), leader_epoch=0)
            acknowledged += 1
    assert acknowledged > 0
    end_before = full.log_end_offset
    m.handle_storage_error(full, KafkaStorageError("No space left on device"))
    assert failed == [str(small_tmpfs / "logs")]
    assert m.get_log("full", 0) is None and str(small_tmpfs / "logs") in m.offline_dirs
    # The other dir keeps serving.
    ok.append_as_leader(batch(1), leader_epoch=0)
    assert read_all(ok) == [bytes([1]) * 100]
    m.shutdown()

    # Free space and restart: every acknowledged batch is there, nothing partial.
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_tmpfs)], check=True)
    m = LogManager(cfg, LogConfig(segment_index_bytes=4096))
    full = m.get_log("full", 0)
    assert full.log_end_offset == end_before == acknowledged
    assert read_all(full) == [bytes([i % 256]) * 10_000 for i in range(acknowledged)]
    full.append_as_leader(batch(7), leader_epoch=0)
    m.shutdown()


def test_maintenance_checkpoints_high_watermarks_and_expires_idle_producers(tmp_path):
    cfg = ManagerConfig(log_dirs=[str(tmp_path / "a")], broker_id=1, cluster_id=CLUSTER,
                        sync=False, high_watermark_checkpoint_interval_ms=5_000,
                        flush_offset_checkpoint_interval_ms=60_000,
                        producer_id_expiration_ms=1_000,
                        producer_id_expiration_check_interval_ms=10_000)
    m = LogManager(cfg, LogConfig(retention_ms=-1))
    lg = m.get_or_create_log("orders", 0, topic_id=uuid.uuid4())
    t0 = 1_700_000_000_000
    for i, pid in enumerate((7, 8)):  # producer 7 at t0, producer 8 five seconds later
        lg.append_as_leader(build_batch([(b"k", b"v", (), t0 + 5_000 * i)], producer_id=pid,
                                        producer_epoch=0, base_sequence=0), leader_epoch=0)
    lg.update_high_watermark(2)
    hw_file = tmp_path / "a" / "replication-offset-checkpoint"
    m.run_maintenance(now=t0 + 5_500)  # the first round writes every checkpoint
    assert checkpoints.read_offset_checkpoint(hw_file) == {("orders", 0): 2}
    # producer.id.expiration.ms 1 s: 7 is 5.5 s idle, 8 only 0.5 s
    assert sorted(lg.producer_state.producers) == [8]
    lg.append_as_leader(batch(3), leader_epoch=0)
    lg.update_high_watermark(3)
    m.run_maintenance(now=t0 + 5_500 + 4_999)  # before replica.high.watermark.checkpoint...
    assert checkpoints.read_offset_checkpoint(hw_file) == {("orders", 0): 2}
    m.run_maintenance(now=t0 + 5_500 + 5_000)  # ...interval.ms, not the 60 s recovery one
    assert checkpoints.read_offset_checkpoint(hw_file) == {("orders", 0): 3}
    assert sorted(lg.producer_state.producers) == [8]  # the next expiry check is not due
    m.shutdown()


def _threaded_manager(dirs, **kwargs) -> LogManager:
    cfg = ManagerConfig(log_dirs=[str(d) for d in dirs], broker_id=1, cluster_id=CLUSTER,
                        sync=True, file_worker_thread=True)
    return LogManager(cfg, LogConfig(retention_ms=-1), **kwargs)


def _eventually(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"not within {seconds} s"
        time.sleep(0.01)


def test_checkpoint_thread_writes_the_periodic_checkpoints_in_order(tmp_path):
    m = _threaded_manager([tmp_path / "a"])
    lg = m.get_or_create_log("orders", 0, topic_id=uuid.uuid4())
    hw_file = tmp_path / "a" / "replication-offset-checkpoint"
    t0 = 1_700_000_000_000
    for i in range(1, 4):  # three rounds 5 s apart, each with a higher high watermark
        lg.append_as_leader(batch(i), leader_epoch=0)
        lg.update_high_watermark(i)
        m.run_maintenance(now=t0 + 5_000 * i)
    _eventually(lambda: hw_file.exists()
                and checkpoints.read_offset_checkpoint(hw_file) == {("orders", 0): 3})
    assert not (tmp_path / "a" / "replication-offset-checkpoint.tmp").exists()
    # A synchronous write waits for the queued ones: the newest value is the one left.
    lg.append_as_leader(batch(4), leader_epoch=0)
    lg.update_high_watermark(4)
    m.run_maintenance(now=t0 + 20_000)  # queued...
    m.shutdown()  # ...then the final checkpoints, written after it
    assert checkpoints.read_offset_checkpoint(hw_file) == {("orders", 0): 4}
    assert (tmp_path / "a" / CLEAN_SHUTDOWN_FILE).exists()


def test_a_failed_background_checkpoint_takes_only_its_dir_offline(tmp_path):
    failed: list[str] = []
    m = _threaded_manager([tmp_path / "a", tmp_path / "b"], on_dir_failure=failed.append)
    bad = m.get_or_create_log("bad", 0)
    good = m.get_or_create_log("good", 0)
    bad_dir = m.dir_of("bad", 0)
    good_dir = m.dir_of("good", 0)
    assert bad_dir != good_dir
    # A non-empty directory where the checkpoint goes: the rename over it fails (EISDIR).
    os.makedirs(os.path.join(bad_dir, "replication-offset-checkpoint", "in-the-way"))
    for lg in (bad, good):
        lg.append_as_leader(batch(1), leader_epoch=0)
        lg.update_high_watermark(1)
    t0 = 1_700_000_000_000
    m.run_maintenance(now=t0)  # queues the writes; the failure is seen at a later round

    def seen() -> bool:
        m.run_maintenance(now=t0 + 1_000)  # no checkpoint due: only the failures are read
        return bad_dir in m.offline_dirs

    _eventually(seen)
    assert failed == [bad_dir]
    assert "writing replication-offset-checkpoint failed" in m.offline_dirs[bad_dir]
    assert m.get_log("bad", 0) is None
    good.append_as_leader(batch(2), leader_epoch=0)  # the other dir keeps serving
    assert read_all(good) == [bytes([1]) * 100, bytes([2]) * 100]
    m.shutdown()
    assert checkpoints.read_offset_checkpoint(
        os.path.join(good_dir, "replication-offset-checkpoint")) == {("good", 0): 1}


def test_file_worker_removes_deleted_partitions_and_segments(tmp_path):
    m = _threaded_manager([tmp_path / "a"])
    gone = m.get_or_create_log("gone", 0)
    gone.append_as_leader(batch(1), leader_epoch=0)
    kept = m.get_or_create_log("kept", 0, config=LogConfig(segment_bytes=2000, retention_ms=-1,
                                                            file_delete_delay_ms=1_000))
    for i in range(40):
        kept.append_as_leader(batch(i), leader_epoch=0)
    data_dir = tmp_path / "a"
    m.delete_log("gone", 0)
    assert not (data_dir / "gone-0").exists()  # renamed before delete_log returns
    _eventually(lambda: not [p for p in os.listdir(data_dir) if p.endswith("-delete")])

    kept.update_high_watermark(kept.log_end_offset)
    t0 = now_ms()
    kept.delete_records(kept.log_end_offset - 1)  # every segment but the active one
    doomed = [p for p in os.listdir(data_dir / "kept-0") if p.endswith(".deleted")]
    assert doomed
    m.run_maintenance(now=t0)  # file.delete.delay.ms not yet passed
    time.sleep(0.1)
    assert [p for p in os.listdir(data_dir / "kept-0") if p.endswith(".deleted")] == doomed
    m.run_maintenance(now=t0 + 10_000)
    _eventually(lambda: not [p for p in os.listdir(data_dir / "kept-0")
                             if p.endswith(".deleted")])
    assert read_all(kept) == [bytes([39]) * 100] and not m.offline_dirs
    m.shutdown()


def test_a_failed_background_delete_takes_its_dir_offline(tmp_path):
    failed: list[str] = []
    m = _threaded_manager([tmp_path / "a", tmp_path / "b"], on_dir_failure=failed.append)
    config = LogConfig(segment_bytes=2000, retention_ms=-1, file_delete_delay_ms=1_000)
    bad = m.get_or_create_log("bad", 0, config=config)
    good = m.get_or_create_log("good", 0, config=config)
    for lg in (bad, good):
        for i in range(20):
            lg.append_as_leader(batch(i), leader_epoch=0)
        lg.update_high_watermark(lg.log_end_offset)
        lg.delete_records(lg.log_end_offset - 1)  # its segments go after 1 s
    t0 = now_ms() + 10_000
    bad_dir = m.dir_of("bad", 0)
    doomed = sorted(p for p in os.listdir(os.path.join(bad_dir, "bad-0")) if p.endswith(".deleted"))
    # A non-empty directory where a segment file was: removing it fails (EISDIR).
    os.remove(os.path.join(bad_dir, "bad-0", doomed[0]))
    os.makedirs(os.path.join(bad_dir, "bad-0", doomed[0], "in-the-way"))
    m.run_maintenance(now=t0)

    def seen() -> bool:
        m.run_maintenance(now=t0 + 1)
        return bad_dir in m.offline_dirs

    _eventually(seen)
    assert failed == [bad_dir] and "deleting" in m.offline_dirs[bad_dir]
    assert m.get_log("bad", 0) is None
    good.append_as_leader(batch(99), leader_epoch=0)  # the other dir keeps serving
    assert read_all(good) == [bytes([19]) * 100, bytes([99]) * 100]
    m.shutdown()
