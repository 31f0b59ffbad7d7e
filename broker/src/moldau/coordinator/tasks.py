"""A coordinator's background work (partition loads, writes after a rebalance or a
transaction's end, offset expiry): each task is kept referenced until it ends (the loop
holds tasks only weakly), its failure is logged, and shutdown cancels what is left."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable


class BackgroundTasks:
    def __init__(self, log: logging.Logger, what: str) -> None:
        self._tasks: set[asyncio.Future[None]] = set()
        self._log = log
        self._what = what  # the failure's log line: "<what> failed"

    def spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    def _done(self, task: asyncio.Future[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            self._log.error("%s failed", self._what, exc_info=task.exception())
