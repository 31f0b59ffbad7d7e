"""How idle the event loop is: the share of time it waits in its selector for sockets
and timers. It stands for Kafka's NetworkProcessorAvgIdlePercent and
RequestHandlerAvgIdlePercent, since one loop does the work of both thread pools here;
both fall towards 0 as the broker gets busy.

It wraps the selector of asyncio's selector event loop; loops without one (uvloop) are
not measured (`supported` is False).
"""

from __future__ import annotations

import asyncio
import selectors
import time


class LoopIdle:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.idle_s = 0.0  # seconds spent waiting, in all
        self._last_idle = 0.0
        self._last_time = time.perf_counter()
        self.ratio = 1.0  # the idle share over the last sample window
        selector: selectors.BaseSelector | None = getattr(loop, "_selector", None)
        self.supported = selector is not None and hasattr(selector, "select")
        if selector is not None and self.supported:
            self._wrap(selector)

    def _wrap(self, selector: selectors.BaseSelector) -> None:
        select = selector.select

        def timed_select(timeout: float | None = None
                         ) -> list[tuple[selectors.SelectorKey, int]]:
            started = time.perf_counter()
            try:
                return select(timeout)
            finally:
                self.idle_s += time.perf_counter() - started

        selector.select = timed_select  # type: ignore[method-assign]  # on this instance only

    def sample(self) -> float:
        """The idle seconds since the previous sample (and update `ratio`)."""
        now = time.perf_counter()
        idle = self.idle_s - self._last_idle
        elapsed = now - self._last_time
        self._last_idle, self._last_time = self.idle_s, now
        if elapsed > 0:
            self.ratio = min(max(idle / elapsed, 0.0), 1.0)
        return idle
