"""All partition logs of a broker across its `log.dirs` (Kafka's LogManager).

Startup: every log dir is locked, its meta.properties checked (or written), and its
partition directories loaded with the recovery points, log start offsets and high
watermarks from its checkpoint files; without the clean-shutdown marker the logs are
recovered from their recovery points. A new partition goes to the online dir holding
the fewest partitions. A dir that fails with an I/O error goes offline until restart:
its logs are closed and forgotten, the others keep serving, and the broker is told
through `on_dir_failure` (to notify the controller).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import logging
import os
import shutil
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from uuid import UUID

from moldau.errors import KafkaStorageError, LogDirNotFoundError

from . import checkpoints, cleaner
from .config import LogConfig
from .dir_names import (
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    delete_dir_name,
    parse_partition_dir,
    topic_partition_of,
)
from .file_worker import FileWorker
from .future_logs import FutureLogs
from .index_mappings import MAPPED_INDEXES
from .log import PartitionLog, now_ms
from .open_files import CHECK_INTERVAL_MS, OpenFilesWatch

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
# Kafka 3.9 writes the broker epoch here (for KRaft's unclean-shutdown detection); ZooKeeper
# mode has no use for it, so -1.
CLEAN_SHUTDOWN_CONTENT = b'{"version":0,"brokerEpoch":-1}'
LOCK_FILE = ".lock"

TopicPartition = tuple[str, int]


@dataclass
class ManagerConfig:
    """The broker-level keys the log manager obeys (Kafka's names, defaults)."""

    log_dirs: list[str]
    broker_id: int
    cluster_id: str
    retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    # log.initial.task.delay.ms: the first retention check waits this long after startup
    # (the broker passes Kafka's 30 s); 0 checks at the first maintenance round
    initial_task_delay_ms: int = 0
    flush_offset_checkpoint_interval_ms: int = 60_000  # log.flush.offset.checkpoint.interval.ms
    flush_start_offset_checkpoint_interval_ms: int = 60_000
    # replica.high.watermark.checkpoint.interval.ms: replication-offset-checkpoint
    high_watermark_checkpoint_interval_ms: int = 5_000
    flush_scheduler_interval_ms: int = 0x7FFFFFFFFFFFFFFF  # log.flush.scheduler.interval.ms
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms
    producer_id_expiration_check_interval_ms: int = 600_000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15_000  # how often compacted logs are checked
    log_cleaner_threads: int = 1  # 0: no compaction at all, as in Kafka
    log_cleaner_io_max_bytes_per_second: float = float("inf")
    log_cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024
    log_cleaner_io_buffer_load_factor: float = 0.9

    @property
    def cleaner_max_keys(self) -> int:
        return cleaner.offset_map_capacity(self.log_cleaner_dedupe_buffer_size,
                                           self.log_cleaner_threads,
                                           self.log_cleaner_io_buffer_load_factor)
    sync: bool = True  # fsync checkpoints (tests may turn it off for speed)
    # Periodic checkpoints and file deletions on a worker thread (the broker: their fsyncs
    # and page cache frees stall its event loop); without it they are done in the call.
    file_worker_thread: bool = False


@dataclass
class _Timers:
    retention: int = 0
    recovery_checkpoint: int = 0
    start_checkpoint: int = 0
    high_watermark_checkpoint: int = 0
    flush: int = 0
    cleaner: int = 0
    producer_expiration: int = 0
    open_files: int = 0


@dataclass
class LogDir:
    path: str
    lock_fd: int
    logs: dict[TopicPartition, PartitionLog] = field(default_factory=dict)


class LogManager:
    def __init__(
        self,
        config: ManagerConfig,
        default_log_config: LogConfig,
        *,
        topic_configs: Callable[[str], LogConfig] | None = None,
        on_dir_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.default_log_config = default_log_config
        self.topic_configs = topic_configs or (lambda _topic: default_log_config)
        self.on_dir_failure = on_dir_failure or (lambda _dir: None)
        self.dirs: dict[str, LogDir] = {}
        self.offline_dirs: dict[str, str] = {}  # path -> why
        self.logs: dict[TopicPartition, PartitionLog] = {}
        self.cleaner_offsets: dict[TopicPartition, int] = {}  # first dirty offset per log
        # Logs whose compaction failed with an unexpected error: skipped until a restart
        # (Kafka's uncleanable partitions), so one bad log does not fail every pass.
        self.uncleanable: set[TopicPartition] = set()
        self._cleaning: dict[TopicPartition, tuple[cleaner.CleanPlan, Future[None]]] = {}
        self._cleaner_pool: ThreadPoolExecutor | None = None
        self._timers = _Timers()
        if config.initial_task_delay_ms > 0:  # Kafka's scheduler: first run after the delay
            self._timers.retention = (now_ms() + config.initial_task_delay_ms
                                      - config.retention_check_interval_ms)
        self._file_worker = FileWorker() if config.file_worker_thread else None
        self.futures = FutureLogs(self)  # replica moves between this broker's dirs
        for path in config.log_dirs:
            self._open_dir(os.path.abspath(path))
        self.futures.promote_orphans()
        if not self.dirs:
            raise KafkaStorageError("no log dir could be opened: " + str(self.offline_dirs))
        self.open_files = OpenFilesWatch()
        self.open_files.check(MAPPED_INDEXES.open_segments)  # the logs just loaded

    # --- startup ----------------------------------------------------------------------

    def _open_dir(self, path: str) -> None:
        try:
            os.makedirs(path, exist_ok=True)
            lock_fd = self._lock(path)
        except OSError as exc:
            self.offline_dirs[path] = str(exc)
            log.error("log dir %s is offline: %s", path, exc)
            return
        # A mismatched meta.properties is fatal, as in Kafka: wrong disk, wrong cluster.
        stored = checkpoints.check_meta_properties(
            path, self.config.broker_id, self.config.cluster_id
        )
        if stored is None:
            checkpoints.write_meta_properties(
                path,
                checkpoints.MetaProperties(
                    broker_id=self.config.broker_id, cluster_id=self.config.cluster_id
                ),
                sync=self.config.sync,
            )
        log_dir = LogDir(path, lock_fd)
        self.dirs[path] = log_dir
        try:
            self._load_dir(log_dir)
        except (OSError, KafkaStorageError) as exc:
            self._take_offline(path, f"loading failed: {exc}")

    def _lock(self, path: str) -> int:
        fd = os.open(os.path.join(path, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise KafkaStorageError(
                f"log dir {path} is locked by another process (is a broker already running?)"
            ) from None
        return fd

    def _load_dir(self, log_dir: LogDir) -> None:
        path = log_dir.path
        marker = os.path.join(path, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        recovery = self._read_checkpoint(path, checkpoints.RECOVERY_POINT_CHECKPOINT)
        starts = self._read_checkpoint(path, checkpoints.LOG_START_OFFSET_CHECKPOINT)
        watermarks = self._read_checkpoint(path, checkpoints.REPLICATION_CHECKPOINT)
        self.cleaner_offsets.update(
            self._read_checkpoint(path, checkpoints.CLEANER_OFFSET_CHECKPOINT)
        )
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if not os.path.isdir(full):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(full, ignore_errors=True)  # a deletion a restart interrupted
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):  # a replica move: its copy resumes
                future_tp = topic_partition_of(name)
                self.futures.load(full, future_tp, self.topic_configs(future_tp[0]),
                                  recovery.get(future_tp, 0), clean)
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            if not clean:
                log.info("recovering %s from offset %d", name, recovery.get(tp, 0))
            partition_log = PartitionLog(
                full,
                self.topic_configs(tp[0]),
                recovery_point=recovery.get(tp, 0),
                log_start_offset=starts.get(tp, 0),
                high_watermark=watermarks.get(tp, 0),
                clean_shutdown=clean,
                sync=self.config.sync,
                producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            )
            log_dir.logs[tp] = partition_log
            self.logs[tp] = partition_log
        # From now on a crash must be noticed at the next start.
        with contextlib.suppress(FileNotFoundError):
            os.remove(marker)

    @staticmethod
    def _read_checkpoint(path: str, name: str) -> dict[TopicPartition, int]:
        file = os.path.join(path, name)
        try:
            return checkpoints.read_offset_checkpoint(file)
        except checkpoints.CheckpointError as exc:
            # Kafka fails the dir here; losing a checkpoint only costs a longer recovery,
            # so recover everything instead of refusing to start.
            log.warning("ignoring unreadable checkpoint %s: %s", file, exc)
            return {}

    # --- partitions -------------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get((topic, partition))

    def get_or_create_log(
        self, topic: str, partition: int, *, topic_id: UUID | None = None,
        config: LogConfig | None = None,
    ) -> PartitionLog:
        existing = self.logs.get((topic, partition))
        if existing is not None:
            return existing
        preferred = self.futures.preferred_dir((topic, partition))  # AlterReplicaLogDirs
        log_dir = self.dirs[preferred] if preferred else self._choose_dir()
        path = os.path.join(log_dir.path, f"{topic}-{partition}")
        try:
            partition_log = PartitionLog(
                path, config or self.topic_configs(topic), topic_id=topic_id,
                sync=self.config.sync,
                producer_id_expiration_ms=self.config.producer_id_expiration_ms,
            )
        except KafkaStorageError as exc:
            self._take_offline(log_dir.path, str(exc))
            raise
        log_dir.logs[(topic, partition)] = partition_log
        self.logs[(topic, partition)] = partition_log
        return partition_log

    def _choose_dir(self) -> LogDir:
        if not self.dirs:
            raise KafkaStorageError("every log dir is offline")
        # Kafka's rule: the online dir holding the fewest partitions (ties: listed first).
        return min(self.dirs.values(), key=lambda d: len(d.logs))

    def dir_of(self, topic: str, partition: int) -> str:
        for log_dir in self.dirs.values():
            if (topic, partition) in log_dir.logs:
                return log_dir.path
        raise LogDirNotFoundError(f"no log dir holds {topic}-{partition}")

    def delete_log(self, topic: str, partition: int) -> None:
        """Remove a partition (topic deletion, StopReplica with delete): rename its dir to
        `<name>.<id>-delete` first, so a crash midway is finished at the next start."""
        tp = (topic, partition)
        self.futures.abandon(tp)
        self.futures.preferred.pop(tp, None)
        partition_log = self.logs.pop(tp, None)
        if partition_log is None:
            return
        self._stop_cleaning(tp)
        self.cleaner_offsets.pop(tp, None)
        for log_dir in self.dirs.values():
            log_dir.logs.pop(tp, None)
        partition_log.close()
        dir_path = os.path.dirname(partition_log.directory)
        doomed = os.path.join(dir_path, delete_dir_name(topic, partition))
        try:
            os.rename(partition_log.directory, doomed)
        except OSError as exc:
            self._take_offline(dir_path, str(exc))
            return
        # Renamed, the deletion survives a crash (the next start finishes it); removing
        # the files frees their page cache, which takes long enough to stall the loop.
        self._file_work(dir_path, f"deleting {doomed}", lambda: shutil.rmtree(doomed))

    # --- replica moves between dirs (future_logs.py) -----------------------------------

    def pause_cleaning(self, tp: TopicPartition) -> None:
        self._stop_cleaning(tp)

    def forget_log(self, tp: TopicPartition) -> None:
        """Drop a log from the maps, without closing or deleting it."""
        self._stop_cleaning(tp)
        self.logs.pop(tp, None)
        for log_dir in self.dirs.values():
            log_dir.logs.pop(tp, None)

    def adopt_log(self, tp: TopicPartition, dir_path: str, partition_log: PartitionLog) -> None:
        self.dirs[dir_path].logs[tp] = partition_log
        self.logs[tp] = partition_log

    def remove_dir_later(self, dir_path: str, doomed: str) -> None:
        """Remove a directory already renamed `-delete` (a restart finishes the job)."""
        self._file_work(dir_path, f"deleting {doomed}", lambda: shutil.rmtree(doomed))

    def handle_storage_error_in(self, dir_path: str, why: str) -> None:
        self._take_offline(dir_path, why)

    # --- failures ---------------------------------------------------------------------

    def handle_storage_error(self, partition_log: PartitionLog, exc: Exception) -> None:
        """An I/O error on a log: take its dir offline (Kafka's LogDirFailureChannel)."""
        if _out_of_resources(exc):
            log.error("%s: the process is out of resources, not the disk; %s stays online",
                      exc, os.path.dirname(partition_log.directory))
            return
        self._take_offline(os.path.dirname(partition_log.directory), str(exc))

    def _take_offline(self, path: str, why: str) -> None:
        log_dir = self.dirs.pop(path, None)
        if log_dir is None:
            return
        log.error("log dir %s goes offline: %s", path, why)
        self.offline_dirs[path] = why
        self.futures.drop_dir(path)
        for tp, partition_log in log_dir.logs.items():
            self.futures.abandon(tp)  # a move of a log that went offline
            self._stop_cleaning(tp)
            self.logs.pop(tp, None)
            with contextlib.suppress(Exception):
                partition_log.close()
        with contextlib.suppress(OSError):
            os.close(log_dir.lock_fd)
        self.on_dir_failure(path)

    # --- periodic work ----------------------------------------------------------------

    def run_maintenance(self, now: int | None = None) -> None:
        """Retention, scheduled flushes, due file deletions and checkpoints; the broker
        calls this from its event loop every second or so."""
        now = now_ms() if now is None else now
        timers, cfg = self._timers, self.config
        self._collect_file_work()
        if now - timers.retention >= cfg.retention_check_interval_ms:
            timers.retention = now
            self._each_log(lambda lg: lg.delete_old_segments(now))
        if now - timers.flush >= cfg.flush_scheduler_interval_ms:
            timers.flush = now
            self._each_log(lambda lg: lg.flush_if_due(now))
        self.finish_cleaning()
        if (cfg.log_cleaner_enable and cfg.log_cleaner_threads > 0
                and now - timers.cleaner >= cfg.log_cleaner_backoff_ms):
            timers.cleaner = now
            self.start_cleaning(now)
        self._delete_due_files(now)
        if now - timers.open_files >= CHECK_INTERVAL_MS:
            timers.open_files = now
            self.open_files.check(MAPPED_INDEXES.open_segments)
        if now - timers.recovery_checkpoint >= cfg.flush_offset_checkpoint_interval_ms:
            timers.recovery_checkpoint = now
            self.write_checkpoints(
                checkpoints.RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point,
                background=True,
            )
        if now - timers.high_watermark_checkpoint >= cfg.high_watermark_checkpoint_interval_ms:
            timers.high_watermark_checkpoint = now
            self.write_checkpoints(checkpoints.REPLICATION_CHECKPOINT, lambda lg: lg.high_watermark,
                                   background=True)
        if (now - timers.producer_expiration
                >= cfg.producer_id_expiration_check_interval_ms):
            # Kafka drops idle producers' state so it cannot grow without bound
            timers.producer_expiration = now
            expiration = cfg.producer_id_expiration_ms  # dynamic: the broker may change it
            self._each_log(lambda lg: lg.producer_state.remove_expired(now, expiration))
        if now - timers.start_checkpoint >= cfg.flush_start_offset_checkpoint_interval_ms:
            timers.start_checkpoint = now
            self.write_checkpoints(
                checkpoints.LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset,
                background=True,
            )

    def clean_logs(self, now: int | None = None) -> list[TopicPartition]:
        """Compact every log that is due (cleaner.needs_cleaning) on the caller's thread;
        returns the ones cleaned. The broker uses start/finish_cleaning instead."""
        now = now_ms() if now is None else now
        cleaned = []
        for tp, partition_log, found in self._due_for_cleaning(now):
            try:
                result = cleaner.clean(partition_log, found, now, self.config.cleaner_max_keys)
            except KafkaStorageError as exc:
                self.handle_storage_error(partition_log, exc)
                continue
            self._cleaned(tp, result)
            cleaned.append(tp)
        if cleaned:
            self._write_cleaner_checkpoints()
        return cleaned

    def start_cleaning(self, now: int | None = None) -> int:
        """Plan a pass for every due log not already being compacted and hand it to the
        cleaner threads; finish_cleaning installs what they built. Returns the number of
        passes started."""
        now = now_ms() if now is None else now
        started = 0
        for tp, partition_log, found in self._due_for_cleaning(now):
            try:
                pass_ = cleaner.plan(partition_log, found, now,
                                     self.config.log_cleaner_io_max_bytes_per_second,
                                     self.config.cleaner_max_keys)
            except OSError as exc:
                self.handle_storage_error(partition_log, KafkaStorageError(
                    f"planning the compaction of {partition_log.directory} failed: {exc}"))
                continue
            if self._cleaner_pool is None:
                self._cleaner_pool = ThreadPoolExecutor(
                    max(1, self.config.log_cleaner_threads), "kafka-log-cleaner-thread")
            self._cleaning[tp] = (pass_, self._cleaner_pool.submit(cleaner.build, pass_))
            started += 1
        return started

    def finish_cleaning(self) -> list[TopicPartition]:
        """Install every pass the cleaner threads have finished building (on the thread
        that owns the logs); returns the logs compacted."""
        cleaned = []
        for tp, (pass_, built) in list(self._cleaning.items()):
            if not built.done():
                continue
            del self._cleaning[tp]
            partition_log = pass_.partition_log
            try:
                built.result()
                result = cleaner.install(pass_)
            except cleaner.CleanCancelled:
                continue
            except KafkaStorageError as exc:
                cleaner.discard(pass_)
                self.handle_storage_error(partition_log, exc)
                continue
            except Exception:
                log.exception("compaction of %s failed; it is skipped until a restart",
                              partition_log.directory)
                cleaner.discard(pass_)
                self.uncleanable.add(tp)
                continue
            if result is not None:
                self._cleaned(tp, result)
                cleaned.append(tp)
        if cleaned:
            self._write_cleaner_checkpoints()
        return cleaned

    def cleaning_in_progress(self) -> int:
        return len(self._cleaning)

    def _due_for_cleaning(
        self, now: int
    ) -> list[tuple[TopicPartition, PartitionLog, cleaner.DirtyRange]]:
        due = []
        for tp, partition_log in list(self.logs.items()):
            if tp in self._cleaning or tp in self.uncleanable or tp in self.futures.logs:
                continue  # (a log being moved: Kafka pauses its cleaning until the swap)
            found = cleaner.needs_cleaning(partition_log, self.cleaner_offsets.get(tp, 0), now)
            if found is not None:
                due.append((tp, partition_log, found))
        return due

    def _cleaned(self, tp: TopicPartition, result: cleaner.CleanResult) -> None:
        log.info("cleaned %s-%d: %d records removed, %d -> %d bytes", tp[0], tp[1],
                 result.records_removed, result.bytes_read, result.bytes_written)
        self.cleaner_offsets[tp] = result.end_offset

    def _write_cleaner_checkpoints(self) -> None:
        self.write_checkpoints(
            checkpoints.CLEANER_OFFSET_CHECKPOINT,
            lambda lg: self.cleaner_offsets.get((lg.topic, lg.partition), 0),
            only=lambda lg: lg.config.compact,
        )

    def _stop_cleaning(self, tp: TopicPartition | None = None) -> None:
        """Cancel the passes in progress (of one log, or all), discarding their output."""
        for key, (pass_, built) in list(self._cleaning.items()):
            if tp is not None and key != tp:
                continue
            pass_.cancelled = True
            del self._cleaning[key]
            built.add_done_callback(functools.partial(_discard_when_built, pass_))
        if tp is None and self._cleaner_pool is not None:
            self._cleaner_pool.shutdown(wait=True, cancel_futures=True)
            self._cleaner_pool = None

    def _each_log(self, action: Callable[[PartitionLog], object]) -> None:
        for partition_log in list(self.logs.values()):
            try:
                action(partition_log)
            except KafkaStorageError as exc:
                self.handle_storage_error(partition_log, exc)

    def write_checkpoints(
        self, name: str, value: Callable[[PartitionLog], int],
        only: Callable[[PartitionLog], bool] = lambda _lg: True, *, background: bool = False,
    ) -> None:
        """Write checkpoint `name` in every online dir: `value` of each log (`only` those).
        With background (and a file worker thread), the offsets are taken now and the
        files written on that thread; otherwise the queued file work is waited for
        first, so no older checkpoint lands after this one."""
        if not background:
            self._collect_file_work(wait=True)
        for log_dir in list(self.dirs.values()):
            logs = {**self.futures.in_dir(log_dir.path), **log_dir.logs}  # moves included
            offsets = {tp: value(lg) for tp, lg in logs.items() if only(lg)}
            write = functools.partial(checkpoints.write_offset_checkpoint,
                                      os.path.join(log_dir.path, name), offsets,
                                      sync=self.config.sync)
            self._file_work(log_dir.path, f"writing {name}", write, background=background)

    def _delete_due_files(self, now: int) -> None:
        """Remove the `.deleted` segments whose file.delete.delay.ms has passed."""
        for log_dir in list(self.dirs.values()):
            for partition_log in list(log_dir.logs.values()):
                for segment in partition_log.take_due_deletes(now):
                    self._file_work(log_dir.path, f"deleting {segment.log_path}", segment.delete)

    def _file_work(self, dir_path: str, what: str, work: Callable[[], object], *,
                   background: bool = True) -> None:
        """Run work on the file worker thread if there is one (and background), else now."""
        if background and self._file_worker is not None:
            self._file_worker.submit(dir_path, what, work)
            return
        try:
            work()
        except (OSError, KafkaStorageError) as exc:
            self._file_work_failed(dir_path, what, exc)

    def _collect_file_work(self, wait: bool = False) -> None:
        """Act on the background file work that failed (with wait: on all of it, once
        done)."""
        if self._file_worker is not None:
            for failure in self._file_worker.collect(wait):
                self._file_work_failed(failure.dir_path, failure.what, failure.error)

    def _file_work_failed(self, dir_path: str, what: str,
                          exc: OSError | KafkaStorageError) -> None:
        if _out_of_resources(exc):  # retried: the next checkpoint, a restart's cleanup
            log.error("%s in %s failed: %s", what, dir_path, exc)
            return
        self._take_offline(dir_path, f"{what} failed: {exc}")

    # --- shutdown ---------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop the cleaner threads, flush every log, write every checkpoint, then the
        clean-shutdown marker."""
        self._stop_cleaning()
        if self._file_worker is not None:
            for failure in self._file_worker.close():
                self._file_work_failed(failure.dir_path, failure.what, failure.error)
            self._file_worker = None
        self._each_log(lambda lg: lg.flush())
        self.futures.close_all()
        self.write_checkpoints(checkpoints.RECOVERY_POINT_CHECKPOINT, lambda lg: lg.recovery_point)
        self.write_checkpoints(checkpoints.REPLICATION_CHECKPOINT, lambda lg: lg.high_watermark)
        self.write_checkpoints(
            checkpoints.LOG_START_OFFSET_CHECKPOINT, lambda lg: lg.log_start_offset
        )
        for log_dir in list(self.dirs.values()):
            for partition_log in log_dir.logs.values():
                partition_log.close()
            try:
                with open(os.path.join(log_dir.path, CLEAN_SHUTDOWN_FILE), "wb") as marker:
                    marker.write(CLEAN_SHUTDOWN_CONTENT)
                    marker.flush()
                    os.fsync(marker.fileno())
            except OSError as exc:
                log.error("cannot write the clean-shutdown marker in %s: %s", log_dir.path, exc)
            os.close(log_dir.lock_fd)
        self.dirs.clear()
        self.logs.clear()


# Running out of file descriptors or memory is the process's trouble, not the disk's:
# such errors must not take a log dir (and its partitions) offline.
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


def _out_of_resources(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS:
            return True
        exc = exc.__cause__
    return False


def _discard_when_built(pass_: cleaner.CleanPlan, _built: Future[None]) -> None:
    """The done callback of a cancelled pass: discard what it wrote."""
    cleaner.discard(pass_)
