"""Long synchronous work on the broker's one event loop, in slices.

A LeaderAndIsr for fifty partitions creates logs and writes (and fsyncs) leader-epoch
checkpoints for each: tens of milliseconds per partition on a slow disk. Done in one go
it stops every produce and fetch on the broker meanwhile, and an acks=all produce then
waits on every broker that is busy this way. Kafka runs such requests on one of several
handler threads; here the work gives the loop back between partitions once a slice has
used its time.
"""

from __future__ import annotations

import asyncio
import time

SLICE_S = 0.005  # the longest a slice runs before other requests get their turn


class CooperativePause:
    """`await pause.maybe()` between units of work: yields to the event loop when the
    current slice has run for SLICE_S or longer."""

    def __init__(self, slice_s: float = SLICE_S) -> None:
        self.slice_s = slice_s
        self._since = time.monotonic()

    async def maybe(self) -> None:
        if time.monotonic() - self._since >= self.slice_s:
            await asyncio.sleep(0)
            self._since = time.monotonic()
