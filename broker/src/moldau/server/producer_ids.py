"""Producer ids for idempotent producers, handed out from blocks that each broker claims
in ZooKeeper (/latest_producer_id_block), so ids are unique across the cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class ProducerIdManager:
    def __init__(self, allocate_block: Callable[[], Awaitable[tuple[int, int]]]) -> None:
        self._allocate_block = allocate_block
        self._next = 0
        self._end = -1  # inclusive; below _next means no block yet
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next > self._end:
                self._next, self._end = await self._allocate_block()
            producer_id = self._next
            self._next += 1
            return producer_id
