"""Python's counterparts of the JVM figures Kafka operators watch for GC trouble:

- `moldau:type=EventLoop,name=LagMs`: a histogram of how late a timer that should fire
  every PROBE_S seconds fires. Anything that holds the event loop (a long handler, a GC
  pause, a blocking call) shows here, as GC pauses show in a JVM's safepoint times;
- `moldau:type=GarbageCollector,name=gen<N>`: CollectionCount and CollectionTime (ms)
  per generation, the attributes of the JVM's `java.lang:type=GarbageCollector` MBeans,
  timed with `gc.callbacks`;
- `moldau:type=GarbageCollector,name=permanent`: ObjectCount, the objects frozen out of
  collection (`gc.freeze()` after startup: the server's long-lived heap).
"""

from __future__ import annotations

import asyncio
import gc
import time

from .registry import Attributes, MetricsRegistry

PROBE_S = 0.25


class GcStats:
    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.time_ms = [0.0, 0.0, 0.0]
        self._started = 0.0

    def callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        generation = min(int(info.get("generation", 0)), 2)
        self.counts[generation] += 1
        self.time_ms[generation] += (time.perf_counter() - self._started) * 1000

    def beans(self) -> dict[str, Attributes]:
        beans: dict[str, Attributes] = {
            f"moldau:type=GarbageCollector,name=gen{g}": {
                "CollectionCount": self.counts[g], "CollectionTime": self.time_ms[g]}
            for g in range(3)}
        beans["moldau:type=GarbageCollector,name=permanent"] = {
            "ObjectCount": gc.get_freeze_count()}
        return beans


def watch_runtime(registry: MetricsRegistry) -> tuple[asyncio.Task[None], GcStats]:
    """Start the loop-lag probe (a task on the running loop) and the GC timing."""
    lag = registry.histogram("moldau", "EventLoop", "LagMs")

    async def probe() -> None:
        while True:
            due = time.perf_counter() + PROBE_S
            await asyncio.sleep(PROBE_S)
            lag.update(max(time.perf_counter() - due, 0.0) * 1000)

    stats = GcStats()
    gc.callbacks.append(stats.callback)
    registry.add_provider(stats.beans)
    return asyncio.ensure_future(probe()), stats


def stop_runtime(task: asyncio.Task[None], stats: GcStats) -> None:
    task.cancel()
    if stats.callback in gc.callbacks:
        gc.callbacks.remove(stats.callback)
