"""Waiting in an asyncio test for a cache to follow a ZooKeeper change notification."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def settled(check: Callable[[], bool], what: str) -> None:
    """Return once `check()` holds; fail naming `what` after 2 s."""
    for _ in range(200):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{what} did not follow the notification in 2 s")
