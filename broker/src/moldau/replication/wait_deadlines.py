"""The timeouts of long-polled fetches and acks=all produces, kept by one timer.

Nearly every such wait ends early (an append, the high watermark moving), so a timer
per wait (asyncio's call_later: a handle object, a heap push, a cancel; four per acks=all
record on an RF 3 leader) is spent on waits that never time out. Here a wait is a
(deadline, number) pair on a heap of our own and an entry in a dict, and one asyncio
timer is armed at the earliest deadline known when it was armed; when it fires it
completes the waits that are due, drops the entries of waits that ended, and re-arms at
the earliest left. A wait with a later deadline than the armed one (the usual case: the
next fetch of a connection) costs a heap push and a comparison; one that ends leaves its
entry on the heap until its deadline comes up, or the heap is compacted when such
entries are most of it (as asyncio does with cancelled timers).
"""

from __future__ import annotations

import asyncio
import heapq

# asyncio may run a timer up to its clock resolution early: a deadline this close counts
# as due (the waiter checks its own clock and waits on for what is left, if anything)
EARLY_S = 0.001
# compact the heap when it holds more than this many entries, most of them ended waits
COMPACT_MIN = 100


class WaitDeadlines:
    def __init__(self) -> None:
        self._waiting: dict[int, asyncio.Future[None]] = {}  # by wait number
        self._heap: list[tuple[float, int]] = []  # (deadline on the loop's clock, number)
        self._next = 0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    def add(self, future: asyncio.Future[None], timeout_s: float) -> int:
        """Complete `future` (with None) after timeout_s unless it is done or removed
        first; the wait's number, for remove()."""
        loop = future.get_loop()
        deadline = loop.time() + timeout_s
        self._next += 1
        number = self._next
        self._waiting[number] = future
        heapq.heappush(self._heap, (deadline, number))
        timer = self._timer
        # a timer of another loop (a manager that outlived its loop, in tests) is dead
        if timer is None or deadline < timer.when() or self._timer_loop is not loop:
            self._arm(loop, deadline)
        return number

    def remove(self, number: int) -> None:
        """The wait is over (woken, timed out or cancelled)."""
        self._waiting.pop(number, None)
        heap = self._heap
        if len(heap) > COMPACT_MIN and len(heap) > 2 * len(self._waiting):
            waiting = self._waiting
            self._heap = [entry for entry in heap if entry[1] in waiting]
            heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._waiting)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._expire)
        self._timer_loop = loop

    def _expire(self) -> None:
        self._timer = None
        loop = self._timer_loop
        assert loop is not None
        now = loop.time() + EARLY_S
        heap, waiting = self._heap, self._waiting
        while heap and (heap[0][0] <= now or heap[0][1] not in waiting):
            future = waiting.pop(heapq.heappop(heap)[1], None)
            # (a wait of an earlier loop is dropped: nothing runs that loop any more)
            if future is not None and not future.done() and future.get_loop() is loop:
                future.set_result(None)
        if heap:
            self._arm(loop, heap[0][0])
