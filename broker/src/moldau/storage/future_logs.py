"""Moving a replica to another log dir of the same broker (Kafka's future logs, KIP-113).

AlterReplicaLogDirs asks for a partition's replica in a given dir. If the partition is
not hosted yet, the dir is remembered and its log is created there later (Kafka's
preferred log dirs). Otherwise a *future log* is created in the destination dir, as
`<topic>-<n>.<hex>-future`; the copier (replication/alter_log_dirs.py) appends the
current log's batches to it, and once it has caught up `replace_current` swaps it in:
the current dir is renamed `<topic>-<n>.<hex>-delete` and removed in the background, the
future dir renamed `<topic>-<n>`, and the checkpoints of both dirs rewritten.

Crash safety: the current dir is renamed away before the future dir takes its name, so
no restart ever finds the partition twice. A future dir found at startup resumes its
copy; one left without a current log (a crash between the two renames: the copy was
complete) becomes the partition's log, unless a log dir is offline (the current log may
be there).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, Protocol
from uuid import UUID

from moldau.errors import KafkaStorageError, LogDirNotFoundError

from . import checkpoints
from .config import LogConfig
from .dir_names import FUTURE_DIR_SUFFIX, delete_dir_name, future_dir_name
from .files import fsync_dir
from .log import PartitionLog

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class OpenSettings(Protocol):
    """The log manager's settings a reopened log needs."""

    @property
    def sync(self) -> bool: ...

    @property
    def producer_id_expiration_ms(self) -> int: ...


class LogDirs(Protocol):
    """The log manager, as far as replica moves use it (typed here rather than imported:
    the log manager owns a FutureLogs, so importing it back would be a cycle)."""

    @property
    def config(self) -> OpenSettings: ...

    @property
    def dirs(self) -> Mapping[str, Any]: ...  # Any: LogDir, of the log manager's module

    @property
    def offline_dirs(self) -> Mapping[str, str]: ...

    @property
    def logs(self) -> Mapping[TopicPartition, PartitionLog]: ...

    def pause_cleaning(self, tp: TopicPartition) -> None: ...

    def forget_log(self, tp: TopicPartition) -> None: ...

    def adopt_log(self, tp: TopicPartition, dir_path: str,
                  partition_log: PartitionLog) -> None: ...

    def remove_dir_later(self, dir_path: str, doomed: str) -> None: ...

    def handle_storage_error_in(self, dir_path: str, why: str) -> None: ...

    def write_checkpoints(self, name: str, value: Callable[[PartitionLog], int],
                          only: Callable[[PartitionLog], bool] = ..., *,
                          background: bool = False) -> None: ...


class FutureLogs:
    def __init__(self, manager: LogDirs) -> None:
        self.manager = manager
        self.logs: dict[TopicPartition, PartitionLog] = {}
        # dirs asked for partitions this broker does not host yet (Kafka's preferredLogDirs)
        self.preferred: dict[TopicPartition, str] = {}

    # --- lookups --------------------------------------------------------------------------

    def dir_of(self, tp: TopicPartition) -> str | None:
        future = self.logs.get(tp)
        return os.path.dirname(future.directory) if future is not None else None

    def in_dir(self, path: str) -> dict[TopicPartition, PartitionLog]:
        return {tp: lg for tp, lg in self.logs.items() if os.path.dirname(lg.directory) == path}

    def check_dir(self, path: str) -> str:
        """The absolute path of an online log dir of this broker: LogDirNotFoundError if it
        is none of them, KafkaStorageError if it is offline (Kafka's isLogDirOnline)."""
        manager = self.manager
        if path in manager.dirs:
            return path
        if path in manager.offline_dirs:
            raise KafkaStorageError(f"Log directory {path} is offline")
        raise LogDirNotFoundError(f"Failed to find the log directory for {path}")

    # --- startup ----------------------------------------------------------------------------

    def load(self, directory: str, tp: TopicPartition, log_config: LogConfig,
             recovery_point: int, clean: bool) -> None:
        """A `-future` dir found at startup: loaded as the partition's future log."""
        if tp in self.logs:
            raise KafkaStorageError(f"duplicate future logs of {tp[0]}-{tp[1]}: "
                                    f"{self.logs[tp].directory} and {directory}")
        self.logs[tp] = self._open(directory, log_config, recovery_point=recovery_point,
                                   clean_shutdown=clean)
        log.info("loaded the future log %s of %s-%d: its copy resumes", directory, *tp)

    def promote_orphans(self) -> None:
        """After loading every dir: a future log whose partition has no current log was
        complete when a crash came between the swap's two renames; it becomes the log."""
        manager = self.manager
        if manager.offline_dirs:
            return  # the current log may be on the offline dir
        for tp in [tp for tp in self.logs if tp not in manager.logs]:
            future = self.logs.pop(tp)
            log.warning("the future log %s has no current log: it becomes the log of %s-%d",
                        future.directory, *tp)
            self._install(tp, future, future.log_start_offset, future.high_watermark)

    # --- AlterReplicaLogDirs ----------------------------------------------------------------

    def remember_preferred(self, tp: TopicPartition, path: str) -> None:
        """Kafka's maybeUpdatePreferredLogDir: not when the log or its future is there."""
        current = self.manager.logs.get(tp)
        if current is not None and os.path.dirname(current.directory) == path:
            return
        if self.dir_of(tp) == path:
            return
        self.preferred[tp] = path

    def preferred_dir(self, tp: TopicPartition) -> str | None:
        path = self.preferred.get(tp)
        return path if path in self.manager.dirs else None

    def create(self, tp: TopicPartition, path: str, topic_id: UUID | None) -> bool:
        """Start moving the partition's log to `path` (Kafka's maybeCreateFutureReplica):
        True when a new future log was created, False when there is nothing to do (the
        log is there already, or a future log is being built there). A future log in
        another dir is abandoned first."""
        manager = self.manager
        current = manager.logs[tp]
        if self.dir_of(tp) not in (None, path):
            self.abandon(tp)
        if os.path.dirname(current.directory) == path or tp in self.logs:
            return False
        directory = os.path.join(path, future_dir_name(*tp))
        try:
            future = self._open(directory, current.config, topic_id=topic_id)
        except KafkaStorageError as exc:
            manager.handle_storage_error_in(path, str(exc))
            raise
        self.logs[tp] = future
        manager.pause_cleaning(tp)  # Kafka's abortAndPauseCleaning, until the swap
        log.info("created the future log %s to move %s-%d from %s", directory, tp[0], tp[1],
                 os.path.dirname(current.directory))
        return True

    def abandon(self, tp: TopicPartition) -> None:
        """Drop a partition's future log (a move to another dir, or back; its deletion)."""
        future = self.logs.pop(tp, None)
        if future is not None:
            log.info("abandoning the future log %s", future.directory)
            self._remove(future)

    def replace_current(self, tp: TopicPartition) -> PartitionLog:
        """Swap the caught-up future log in for the current one (Kafka's
        replaceCurrentWithFutureLog); returns the partition's new log. The caller makes
        sure nothing was appended to the current log that the future log lacks."""
        manager = self.manager
        future = self.logs.pop(tp)
        current = manager.logs[tp]
        old_dir, new_dir = os.path.dirname(current.directory), os.path.dirname(future.directory)
        final = os.path.join(new_dir, os.path.basename(current.directory))
        start, high_watermark = current.log_start_offset, current.high_watermark
        try:
            future.flush()
        except KafkaStorageError as exc:
            future.close()
            manager.handle_storage_error_in(new_dir, str(exc))
            raise
        future.close()  # snapshots the producer state at its end: reloaded below
        manager.forget_log(tp)
        current.close()
        doomed = os.path.join(old_dir, delete_dir_name(*tp))
        try:
            os.rename(current.directory, doomed)
        except OSError as exc:
            manager.handle_storage_error_in(old_dir, f"renaming {current.directory}: {exc}")
            raise KafkaStorageError(str(exc)) from exc
        try:
            os.rename(future.directory, final)
            fsync_dir(new_dir)
        except OSError as exc:
            manager.handle_storage_error_in(new_dir, f"renaming {future.directory}: {exc}")
            raise KafkaStorageError(str(exc)) from exc
        with contextlib.suppress(OSError):
            fsync_dir(old_dir)  # the rename only hastens the removal below
        new_log = self._install(tp, self._open(
            final, current.config, topic_id=current.topic_id,
            recovery_point=future.log_end_offset, log_start_offset=start,
            high_watermark=high_watermark), start, high_watermark)
        manager.remove_dir_later(old_dir, doomed)
        log.info("moved the log of %s-%d from %s to %s", tp[0], tp[1], old_dir, new_dir)
        return new_log

    def _open(self, directory: str, config: LogConfig, *, topic_id: UUID | None = None,
              recovery_point: int = 0, log_start_offset: int = 0, high_watermark: int = 0,
              clean_shutdown: bool = True) -> PartitionLog:
        """A PartitionLog with the log manager's settings."""
        settings = self.manager.config
        return PartitionLog(directory, config, topic_id=topic_id, recovery_point=recovery_point,
                            log_start_offset=log_start_offset, high_watermark=high_watermark,
                            clean_shutdown=clean_shutdown, sync=settings.sync,
                            producer_id_expiration_ms=settings.producer_id_expiration_ms)

    def _install(self, tp: TopicPartition, new_log: PartitionLog, start: int,
                 high_watermark: int) -> PartitionLog:
        manager = self.manager
        new_dir = os.path.dirname(new_log.directory)
        if new_log.directory.endswith(FUTURE_DIR_SUFFIX):  # an orphan takes the log's name
            final = os.path.join(new_dir, f"{tp[0]}-{tp[1]}")
            new_log.close()
            os.rename(new_log.directory, final)
            fsync_dir(new_dir)
            new_log = self._open(final, new_log.config, recovery_point=new_log.log_end_offset,
                                 log_start_offset=start, high_watermark=high_watermark)
        manager.adopt_log(tp, new_dir, new_log)
        self.preferred.pop(tp, None)
        # both dirs' checkpoints now name the log where it is
        manager.write_checkpoints(checkpoints.RECOVERY_POINT_CHECKPOINT,
                                  lambda lg: lg.recovery_point, background=True)
        manager.write_checkpoints(checkpoints.LOG_START_OFFSET_CHECKPOINT,
                                  lambda lg: lg.log_start_offset, background=True)
        manager.write_checkpoints(checkpoints.REPLICATION_CHECKPOINT,
                                  lambda lg: lg.high_watermark, background=True)
        return new_log

    # --- removal ------------------------------------------------------------------------------

    def _remove(self, future: PartitionLog) -> None:
        future.close()
        parent = os.path.dirname(future.directory)
        doomed = os.path.join(parent, delete_dir_name(future.topic, future.partition))
        try:
            os.rename(future.directory, doomed)
        except OSError as exc:
            self.manager.handle_storage_error_in(parent, f"renaming {future.directory}: {exc}")
            return
        self.manager.remove_dir_later(parent, doomed)

    def drop_dir(self, path: str) -> None:
        """A dir went offline: its future logs are gone (closed, not deleted)."""
        for tp, future in self.in_dir(path).items():
            del self.logs[tp]
            with contextlib.suppress(Exception):
                future.close()

    def close_all(self) -> None:
        """Shutdown: flush and close every future log (its copy resumes at the next start)."""
        for future in self.logs.values():
            with contextlib.suppress(KafkaStorageError):
                future.flush()
            future.close()
        self.logs.clear()
