"""When the log manager first checks retention: `log.initial.task.delay.ms` after startup,
then every `log.retention.check.interval.ms`, as Kafka's LogManager schedules it (the
reference lab saw Kafka delete records of a 2023 timestamp 30 s after it started, and
Moldau, which checked at startup and then five minutes later, keep them)."""

from __future__ import annotations

from moldau.protocol.records import build_batch
from moldau.storage.config import LogConfig
from moldau.storage.log import now_ms
from moldau.storage.log_manager import LogManager, ManagerConfig

CLUSTER = "mOldauClusterId000000A"
HOUR = 3_600_000
OLD = 1_700_000_000_000  # a CreateTime far older than an hour's retention


def manager(directory: str, delay_ms: int) -> LogManager:
    config = ManagerConfig(log_dirs=[directory], broker_id=1, cluster_id=CLUSTER, sync=False,
                           retention_check_interval_ms=300_000, initial_task_delay_ms=delay_ms)
    return LogManager(config, LogConfig(retention_ms=HOUR))


def old_records(m: LogManager) -> None:
    log = m.get_or_create_log("old", 0)
    for i in range(3):
        log.append_as_leader(build_batch([(b"k", b"v%d" % i, (), OLD)]), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)


def test_the_first_retention_check_waits_for_the_initial_delay(tmp_path) -> None:
    before = now_ms()
    m = manager(str(tmp_path), delay_ms=30_000)
    after = now_ms()  # the manager started in between
    old_records(m)
    log = m.get_log("old", 0)
    assert log is not None
    m.run_maintenance(now=before + 29_000)
    assert log.log_start_offset == 0
    m.run_maintenance(now=after + 30_000)
    assert log.log_start_offset == 3
    m.shutdown()


def test_then_every_interval(tmp_path) -> None:
    m = manager(str(tmp_path), delay_ms=30_000)
    first = now_ms() + 30_000
    m.run_maintenance(now=first)  # the first check, with nothing to delete
    old_records(m)
    log = m.get_log("old", 0)
    assert log is not None
    m.run_maintenance(now=first + 299_000)
    assert log.log_start_offset == 0
    m.run_maintenance(now=first + 300_000)
    assert log.log_start_offset == 3
    m.shutdown()


def test_without_a_delay_the_first_round_checks(tmp_path) -> None:
    m = manager(str(tmp_path), delay_ms=0)
    old_records(m)
    log = m.get_log("old", 0)
    assert log is not None
    m.run_maintenance(now=now_ms())
    assert log.log_start_offset == 3
    m.shutdown()
