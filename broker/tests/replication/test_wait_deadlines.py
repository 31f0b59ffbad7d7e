"""One timer for the timeouts of every long-polled wait (replication/wait_deadlines.py):
each wait still ends at its own deadline, whichever order the deadlines come in, and a
wait that ended early leaves nothing behind."""

from __future__ import annotations

import asyncio
import time

from moldau.replication.wait_deadlines import COMPACT_MIN, WaitDeadlines


def _wait(deadlines: WaitDeadlines, timeout_s: float) -> tuple[asyncio.Future[None], int]:
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    return future, deadlines.add(future, timeout_s)


def test_each_wait_ends_at_its_own_deadline_in_any_order() -> None:
    async def scenario() -> dict[float, float]:
        deadlines = WaitDeadlines()
        started = time.monotonic()
        # a late deadline first (the timer is armed for it), then an earlier one (the timer
        # is re-armed), then one between (the timer re-arms for it after the first fires)
        timeouts = (1.0, 0.05, 0.3)
        futures = {t: _wait(deadlines, t) for t in timeouts}
        ended: dict[float, float] = {}
        for timeout, (future, wait) in sorted(futures.items()):
            await future
            ended[timeout] = time.monotonic() - started
            deadlines.remove(wait)
        assert len(deadlines) == 0
        return ended

    ended = asyncio.run(scenario())
    assert 0.04 <= ended[0.05] < ended[0.3] < ended[1.0]
    assert ended[0.3] >= 0.29 and ended[1.0] >= 0.99  # never early (within the loop's slack)
    assert ended[1.0] < 3.0


def test_a_wait_ended_early_is_not_completed_later() -> None:
    async def scenario() -> None:
        deadlines = WaitDeadlines()
        early, early_wait = _wait(deadlines, 0.05)
        early.set_result(None)  # woken by an append
        deadlines.remove(early_wait)
        late, late_wait = _wait(deadlines, 0.1)
        await late  # the timer armed for `early` fires, finds nothing due, re-arms
        deadlines.remove(late_wait)
        assert len(deadlines) == 0

    asyncio.run(scenario())


def test_deadlines_outlive_their_event_loop() -> None:
    """A manager's deadlines serve the loop running now, not the one they first saw (tests
    run brokers on one loop after another)."""
    deadlines = WaitDeadlines()

    async def one_wait(timeout_s: float) -> None:
        future, wait = _wait(deadlines, timeout_s)
        await future
        deadlines.remove(wait)

    asyncio.run(one_wait(0.01))

    async def left_pending() -> None:
        _wait(deadlines, 60.0)  # armed on this loop, which closes with it pending

    asyncio.run(left_pending())
    started = time.monotonic()
    asyncio.run(one_wait(0.05))  # a later deadline than the dead timer's would not fire
    assert time.monotonic() - started < 5.0


def test_waits_that_end_early_do_not_pile_up() -> None:
    """Each wait leaves an entry on the heap until its deadline; when ended waits are most
    of the heap it is compacted, so a stream of short waits under a long timeout (acks=all
    produces, 30 s) holds memory for the waits in progress only."""
    async def scenario() -> None:
        deadlines = WaitDeadlines()
        loop = asyncio.get_running_loop()
        for _ in range(10_000):
            future = loop.create_future()
            wait = deadlines.add(future, 30.0)
            future.set_result(None)
            deadlines.remove(wait)
        assert len(deadlines) == 0
        assert len(deadlines._heap) <= 2 * COMPACT_MIN

    asyncio.run(scenario())
