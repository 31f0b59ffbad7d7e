"""The log manager's slow file work, off the event loop (Kafka's scheduler thread).

Periodic checkpoints are a small file, an fsync, a rename and an fsync of the directory:
with a producer writing to the same disk those fsyncs wait for the filesystem's journal,
3 to 12 ms on these machines, every replica.high.watermark.checkpoint.interval.ms.
Removing a deleted partition or a retention's `.deleted` segment frees its page cache:
40 to 220 ms for a 1 GiB segment. On the event loop every request waits behind them.

Here the caller decides what to do on its own thread (takes the offsets, renames the
directory, takes the segments out of the log) and queues the file work on one worker
thread, which runs it in submission order: a later checkpoint of a file never lands
before an earlier one. Failures come back to the caller's thread (`collect`), tagged with
the log dir they concern, and it decides what they mean for that dir.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import NamedTuple, ParamSpec

from moldau.errors import KafkaStorageError

__all__ = ["FileWorkFailure", "FileWorker"]


_P = ParamSpec("_P")


class FileWorkFailure(NamedTuple):
    dir_path: str  # the log dir the work concerned
    what: str  # what was being done, for the log line ("writing replication-offset-checkpoint")
    error: OSError | KafkaStorageError


class _Pending(NamedTuple):
    dir_path: str
    what: str
    future: Future[object]


class FileWorker:
    """One worker thread running file work in the order it was submitted."""

    def __init__(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="log-file-worker")
        self._pending: list[_Pending] = []

    def submit(self, dir_path: str, what: str, work: Callable[_P, object],
               *args: _P.args, **kwargs: _P.kwargs) -> None:
        """Queue work(*args, **kwargs). Its arguments must not change after this: pass
        copies of the caller's state."""
        self._pending.append(_Pending(dir_path, what,
                                      self._executor.submit(work, *args, **kwargs)))

    def collect(self, wait: bool = False) -> list[FileWorkFailure]:
        """The failures of the work that has finished (with wait: of everything submitted
        so far, once done), each reported once. Any other exception is a bug, not a disk:
        it is raised here, on the caller's thread, as synchronous work would raise it."""
        failures: list[FileWorkFailure] = []
        bugs: list[BaseException] = []
        still: list[_Pending] = []
        for pending in self._pending:
            if not wait and not pending.future.done():
                still.append(pending)
                continue
            error = pending.future.exception()
            if isinstance(error, OSError | KafkaStorageError):
                failures.append(FileWorkFailure(pending.dir_path, pending.what, error))
            elif error is not None:
                bugs.append(error)
        self._pending = still
        if bugs:
            raise bugs[0]
        return failures

    def close(self) -> list[FileWorkFailure]:
        """Wait for everything queued, stop the thread, and return the failures."""
        try:
            return self.collect(wait=True)
        finally:
            self._executor.shutdown(wait=True)
