"""Give the C heap's free pages back after many connections closed (a reconnect storm).

glibc's malloc keeps the pages of freed memory in its heap (a connection's request queue
and buffers while it was busy, the tables that grew with the connections) until it is
trimmed. After CLOSES_BEFORE_RECLAIM closes, once SETTLE_S has passed with no close (or
MIN_INTERVAL_S since the count was reached, on endless churn), and at most once every
MIN_INTERVAL_S, malloc_trim(3) returns them.

No garbage collection is forced: a closed connection's asyncio transport is a reference
cycle, but Python's own collector frees those, and a full collection with thousands of
connections open stops the event loop for a tenth of a second or more.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import time
from collections.abc import Callable

log = logging.getLogger("kafka.network.SocketServer")

CLOSES_BEFORE_RECLAIM = 1000
MIN_INTERVAL_S = 30.0
SETTLE_S = 2.0  # a storm's closes arrive over a moment: reclaim once after them


def _malloc_trim() -> Callable[[], object] | None:
    """glibc's malloc_trim(0), or None where the C library has none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


class MemoryReclaimer:
    """Counts closed connections and trims the C heap after a storm of them."""

    def __init__(self, closes_before_reclaim: int = CLOSES_BEFORE_RECLAIM,
                 min_interval_s: float = MIN_INTERVAL_S, settle_s: float = SETTLE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.closes_before_reclaim = closes_before_reclaim
        self.min_interval_s = min_interval_s
        self.settle_s = settle_s
        self._clock = clock
        self._trim = _malloc_trim()
        self.closes = 0  # since the last reclaim
        self.reclaims = 0
        self._last = -min_interval_s  # so that the first storm is reclaimed at once
        self._last_close = 0.0
        self._due_since = 0.0  # when the count reached closes_before_reclaim
        self._scheduled: asyncio.TimerHandle | None = None

    def closed(self) -> None:
        """A connection closed (the socket server calls this for each)."""
        self.closes += 1
        self._last_close = now = self._clock()
        if self.closes < self.closes_before_reclaim or self._scheduled is not None:
            return
        self._due_since = now
        wait = max(self.settle_s, self._last + self.min_interval_s - now)
        self._scheduled = asyncio.get_running_loop().call_later(wait, self._when_settled)

    def _when_settled(self) -> None:
        now = self._clock()
        still_closing = now - self._last_close < self.settle_s
        if still_closing and now - self._due_since < self.min_interval_s:
            self._scheduled = asyncio.get_running_loop().call_later(self.settle_s,
                                                                    self._when_settled)
            return
        self.reclaim()

    def reclaim(self) -> None:
        """Trim the C heap now."""
        self.stop()
        closes, self.closes = self.closes, 0
        self._last = self._clock()
        self.reclaims += 1
        if self._trim is not None:
            self._trim()
        log.debug("Trimmed the C heap after %d connections closed (%.1f ms)", closes,
                  (self._clock() - self._last) * 1000)

    def stop(self) -> None:
        """Cancel a reclaim that is waiting (the server stops)."""
        if self._scheduled is not None:
            self._scheduled.cancel()
            self._scheduled = None
