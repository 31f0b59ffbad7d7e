"""After a clean shutdown the inactive segments' indexes are mapped on first use, so a log
holds one file descriptor per segment instead of three; a corrupt one is still rebuilt."""

from __future__ import annotations

import os

from moldau.protocol.records import build_batch, iter_batches
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog

CONFIG = LogConfig(segment_bytes=300, retention_ms=-1, segment_index_bytes=4096)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def build_log(path) -> PartitionLog:
    log = PartitionLog(str(path / "t-0"), CONFIG, sync=False)
    for i in range(40):
        log.append_as_leader(build_batch([(b"k", b"v%d" % i * 20, (), None)]), leader_epoch=0)
    log.close()
    return log


def test_a_clean_reopen_maps_inactive_indexes_only_when_used(tmp_path):
    segments = len(build_log(tmp_path).segments)
    assert segments > 10
    before = open_fds()
    log = PartitionLog(str(tmp_path / "t-0"), CONFIG, sync=False)
    # one fd per segment file, two for the active segment's index mappings
    assert open_fds() - before <= segments + 2
    data = log.read_bytes(log.read(0, 1 << 20))
    assert next(iter(iter_batches(data, allow_partial=True))).base_offset == 0
    assert log.segments[0]._offset_index is not None  # mapped by the read
    assert log.segments[5]._offset_index is None
    log.close()


def test_a_corrupt_lazy_index_is_rebuilt_when_first_used(tmp_path):
    log = build_log(tmp_path)
    path = os.path.join(log.directory, f"{log.segments[2].base_offset:020d}.index")
    with open(path, "ab") as f:
        f.write(b"\x00\x01\x02")  # no longer a whole number of 8-byte entries
    log = PartitionLog(str(tmp_path / "t-0"), CONFIG, sync=False)
    target = log.segments[2]
    assert os.path.getsize(path) % 8 == 3  # not looked at yet
    found = log.read(target.base_offset, 1 << 20)
    assert found.start.segment_base_offset == target.base_offset
    assert os.path.getsize(path) % 8 == 0  # rebuilt from the log when first mapped
    target.offset_index.sanity_check(full=True)
    log.close()


def test_a_roll_unmaps_the_old_segments_indexes(tmp_path):
    before = open_fds()
    log = PartitionLog(str(tmp_path / "t-0"), CONFIG, sync=False)
    for i in range(40):
        log.append_as_leader(build_batch([(b"k", b"v%d" % i * 20, (), None)]), leader_epoch=0)
    segments = len(log.segments)
    assert segments > 10
    assert open_fds() - before <= segments + 2  # only the active segment keeps mappings
    assert all(s._offset_index is None for s in log.segments[:-1])
    data = log.read_bytes(log.read(3, 1 << 20))
    assert next(iter(iter_batches(data, allow_partial=True))).base_offset <= 3
    log.flush()  # fsyncs the unmapped index files too
    log.close()
    reopened = PartitionLog(str(tmp_path / "t-0"), CONFIG, sync=False)
    for offset in (0, 7, 21, 39):  # every index still finds its offsets
        data = reopened.read_bytes(reopened.read(offset, 1 << 20))
        batch = next(iter(iter_batches(data, allow_partial=True)))
        assert batch.base_offset <= offset <= batch.last_offset
    reopened.close()


def test_mapped_indexes_of_old_segments_stay_bounded(tmp_path, monkeypatch):
    from moldau.storage import segment as segment_module

    monkeypatch.setattr(segment_module.MAPPED_INDEXES, "cap", 4)
    build_log(tmp_path)
    reopened = PartitionLog(str(tmp_path / "t-0"), CONFIG, sync=False, clean_shutdown=False,
                            recovery_point=0)  # a crash: every segment checked, then unmapped
    assert all(s._offset_index is None for s in reopened.segments[:-1])
    before = open_fds()
    for offset in range(40):  # a consumer reading everything from the start
        data = reopened.read_bytes(reopened.read(offset, 1 << 20))
        assert next(iter(iter_batches(data, allow_partial=True))).base_offset <= offset
    mapped = [s for s in reopened.segments[:-1] if s._offset_index is not None]
    assert len(mapped) <= 4 and mapped == reopened.segments[-1 - len(mapped):-1]
    assert open_fds() - before <= 2 * 4
    reopened.close()
    assert len(segment_module.MAPPED_INDEXES) == 0
