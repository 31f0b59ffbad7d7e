"""AsyncZk: KafkaZkClient for the asyncio broker (ARCHITECTURE §4).

Blocking ZooKeeper calls run in one dedicated thread, in submission order, so ZooKeeper
never stalls the event loop and the broker's ZooKeeper writes keep Kafka's ordering.
kazoo's watch callbacks and state changes hop onto the loop with call_soon_threadsafe;
a callback may be a plain function or a coroutine function (run as a task, one at a time
per watch, in delivery order).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, ParamSpec, TypeVar, TypeVarTuple

from moldau.cluster.zk_client import KafkaZkClient, WatchHandle

if TYPE_CHECKING:
    from kazoo.protocol.states import ZnodeStat

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
Ts = TypeVarTuple("Ts")  # a callback's arguments, delivered as they came


class AsyncZk:
    """`await azk.call(azk.client.get_broker_ids)`: a bound KafkaZkClient method (or any
    blocking callable) and its arguments, which mypy checks against the method."""

    def __init__(self, client: KafkaZkClient, loop: asyncio.AbstractEventLoop | None = None):
        self.client = client
        self._loop = loop
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="moldau-zk")
        self.on_latency: Callable[[float], None] | None = None  # ms of each call

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    async def call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run fn(*args, **kwargs) on the ZooKeeper thread and return its result."""
        started = time.monotonic()
        try:
            return await self.loop.run_in_executor(
                self._executor, functools.partial(fn, *args, **kwargs))
        finally:
            if self.on_latency is not None:  # ZooKeeperRequestLatencyMs
                self.on_latency((time.monotonic() - started) * 1000)

    async def start(self) -> None:
        self.loop  # noqa: B018 - bind the loop now, callbacks need it from other threads
        await self.call(self.client.start)

    async def close(self) -> None:
        try:
            await self.call(self.client.close)
        finally:
            self._executor.shutdown(wait=False)

    def _on_loop(self, callback: Callable[[*Ts], object]) -> Callable[[*Ts], None]:
        """A thread-safe wrapper delivering callback(*args) on the loop, in order."""
        loop = self.loop
        lock = asyncio.Lock()

        async def run_async(args: tuple[*Ts]) -> None:
            async with lock:  # tasks are created in order and the lock is FIFO
                try:
                    pending = callback(*args)  # a coroutine function's coroutine
                    if inspect.isawaitable(pending):
                        await pending
                except Exception:
                    log.exception("ZooKeeper callback %r failed", callback)

        def run(args: tuple[*Ts]) -> None:
            if inspect.iscoroutinefunction(callback):
                loop.create_task(run_async(args))
                return
            try:
                callback(*args)
            except Exception:
                log.exception("ZooKeeper callback %r failed", callback)

        def deliver(*args: *Ts) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(run, args)

        return deliver

    async def watch_children(self, path: str,
                             callback: Callable[[list[str]], object]) -> WatchHandle:
        """callback(children) on the loop, now and after every change."""
        return await self.call(self.client.watch_children, path, self._on_loop(callback))

    async def watch_data(self, path: str,
                         callback: Callable[[bytes | None, ZnodeStat | None], object]
                         ) -> WatchHandle:
        """callback(data, stat) on the loop, now and after every change."""
        return await self.call(self.client.watch_data, path, self._on_loop(callback))

    def add_state_listener(self, callback: Callable[[str], object]) -> None:
        """callback(state) on the loop for every connection state change."""
        self.client.add_state_listener(self._on_loop(callback))

    def add_session_listener(self, callback: Callable[[int], object]) -> None:
        """callback(session_id) on the loop after a new session replaced an expired one."""
        self.client.add_session_listener(self._on_loop(callback))

    def set_registration_listener(self, callback: Callable[[int], object]) -> None:
        """callback(broker_epoch) on the loop after an automatic re-registration."""
        self.client.set_registration_listener(self._on_loop(callback))
