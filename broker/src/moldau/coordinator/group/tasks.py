"""The coordinator's background work (partition loads, writes after a rebalance, offset
expiry): each task is kept referenced until it ends (the loop holds tasks only weakly),
its failure is logged, and shutdown cancels what is left."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from .config import log


class BackgroundTasks:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[None]] = set()

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
            log.error("Group coordinator task failed", exc_info=task.exception())
