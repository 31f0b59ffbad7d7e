"""Descriptors: a segment keeps one open (its `.log`; the index mappings hold none), and
the log manager warns well before the open-files limit (issue 42)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from moldau.protocol.records import build_batch, iter_batches
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager, ManagerConfig

CLUSTER = "mOldauClusterId000000A"
PARTITIONS = 60
SEGMENT_BYTES = 300  # a batch or two a segment: every append past the first rolls


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_many_partitions_with_rolled_segments_keep_one_descriptor_a_segment(tmp_path):
    before = open_fds()
    cfg = ManagerConfig(log_dirs=[str(tmp_path)], broker_id=1, cluster_id=CLUSTER, sync=False)
    manager = LogManager(cfg, LogConfig(segment_bytes=SEGMENT_BYTES, retention_ms=-1,
                                        segment_index_bytes=4096))
    logs = [manager.get_or_create_log("t", p) for p in range(PARTITIONS)]
    for i in range(4):
        for lg in logs:
            lg.append_as_leader(build_batch([(b"k", b"v%d" % i * 40, (), None)]),
                                leader_epoch=0)
    segments = sum(len(lg.segments) for lg in logs)
    assert segments >= 3 * PARTITIONS  # rolled: inactive segments and an active one each
    # The log dir's lock and a handful of files beside the segments' .log files; the
    # active segments' mapped indexes hold no descriptor (three a segment before).
    assert open_fds() - before <= segments + 8
    # Reading old segments maps their indexes, still without descriptors.
    mid = open_fds()
    for lg in logs:
        data = lg.read_bytes(lg.read(0, 1 << 20))
        assert next(iter(iter_batches(data, allow_partial=True))).base_offset == 0
    assert open_fds() == mid
    manager.shutdown()
    assert open_fds() <= before + 1


WARNS_UNDER_A_LOW_LIMIT = """
import logging, os, resource, sys
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager, ManagerConfig

logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(message)s")
data = sys.argv[1]
limit = int(sys.argv[2])
partitions = int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
config = ManagerConfig(log_dirs=[data], broker_id=1, cluster_id="mOldauClusterId000000A",
                       sync=False)
manager = LogManager(config, LogConfig())
for p in range(partitions):
    manager.get_or_create_log("t", p)
manager.open_files.check()
manager.shutdown()
print("reopening", flush=True)
manager = LogManager(config, LogConfig())  # the startup check sees the loaded logs
print("loaded", len(manager.logs), flush=True)
manager.shutdown()
"""


def run_with_limit(tmp_path, limit: int, partitions: int) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(WARNS_UNDER_A_LOW_LIMIT), str(tmp_path),
         str(limit), str(partitions)],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_log_manager_warns_well_before_the_open_files_limit(tmp_path):
    # 170 partitions (a descriptor each) under a soft limit of 200: past 80%
    out = run_with_limit(tmp_path / "near", 200, 170)
    warnings = [line for line in out.splitlines() if line.startswith("WARNING")]
    assert len(warnings) >= 2, out  # when created, and at the next startup
    assert "of the limit of 200 (RLIMIT_NOFILE)" in warnings[0]
    assert "Raise LimitNOFILE" in warnings[0]
    startup = out.split("reopening", 1)[1]
    assert "WARNING" in startup and "segment files" in startup and "loaded 170" in startup


def test_no_warning_with_room_to_spare(tmp_path):
    out = run_with_limit(tmp_path / "far", 1000, 100)
    assert "WARNING" not in out, out
