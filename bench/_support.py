"""Shared machinery of the benchmark suites: timing, the environment block, Markdown.

A suite is a module `bench/<name>.py` (not starting with `_`) with `run() -> str`; see
bench/run.py. Suites import this module as `_support` because bench/ is the script
directory both when a suite runs standalone and when run.py imports it.
"""

from __future__ import annotations

import cProfile
import gc
import json
import math
import os
import platform
import pstats
import re
import shlex
import subprocess
import sys
import time
import timeit
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The throughput suites run brokers with the kernel's autotuned socket buffers, as
# high-throughput Kafka deployments are set up: Kafka's defaults (100 KiB for client
# sockets, 64 KiB for replica fetchers) cost the brokers 10-30% more CPU per GB on
# loopback: brokers' CPU s/GB on 3 brokers, 2026-11-26, two A/B pairs at load 11-14:
# RF 1 1.47 and 1.51 vs 1.12 and 1.23 autotuned, RF 3 9.85 and 9.20 vs 8.51 and 8.20.
AUTOTUNED_SOCKETS = {"socket.send.buffer.bytes": "-1", "socket.receive.buffer.bytes": "-1",
                     "replica.socket.receive.buffer.bytes": "-1"}

# Defaults: enough short runs that the median shrugs off a busy neighbour, short enough
# that one suite stays well inside its time budget. `--quick` (run.py) shrinks both.
RUNS = 41
TARGET_SECONDS = 0.01


@dataclass(frozen=True)
class Timing:
    """The median time of one call, from `runs` timed runs of a loop of `loop` calls."""

    median: float
    loop: int
    runs: int
    samples: tuple[float, ...]  # time of one call in each run, in the order of the runs

    def ratio_to(self, other: Timing) -> float:
        """other / self, as the median of the run-by-run ratios.

        Runs of one round of `measure` are close in time, so a busy spell slows both
        sides of a pair alike and cancels out of its ratio; the median of those ratios
        holds up on a loaded machine where the ratio of two medians can swing by 40%.
        """
        return median(b / a for a, b in zip(self.samples, other.samples, strict=True))


def configure(*, quick: bool) -> None:
    """Quick mode: a smoke test of the suites; its figures are not worth publishing."""
    global RUNS, TARGET_SECONDS
    if quick:
        RUNS, TARGET_SECONDS = 3, 0.002


def _loop_size(timer: timeit.Timer, target: float) -> int:
    # Like timeit.autorange, but aiming at `target` seconds per run.
    loop = 1
    while True:
        elapsed = timer.timeit(loop)
        if elapsed >= target:
            return loop
        # Grow towards the target from the measured rate, at least doubling.
        loop = max(loop * 2, int(loop * target * 1.1 / max(elapsed, 1e-9)))


def measure(
    fns: Mapping[str, Callable[[], object]], *, runs: int | None = None
) -> dict[str, Timing]:
    """Time every function of a group, interleaving their runs round-robin.

    Interleaving matters on a shared machine: a slow spell hits the functions of a round
    alike instead of skewing one of them (see Timing.ratio_to). Put functions whose
    ratio matters next to each other in `fns`.
    timeit switches the garbage collector off during each run, as it always does.
    """
    runs = runs or RUNS
    timers = {name: timeit.Timer(fn) for name, fn in fns.items()}
    for fn in fns.values():
        fn()  # warm-up: lazily compiled codecs, first-touch allocations
    loops = {name: _loop_size(timer, TARGET_SECONDS) for name, timer in timers.items()}
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(runs):
        for name, timer in timers.items():
            samples[name].append(timer.timeit(loops[name]) / loops[name])
    gc.collect()
    return {
        name: Timing(median(samples[name]), loops[name], runs, tuple(samples[name])) for name in fns
    }


def produce_all(producer: Any, topic: str, value: bytes, count: int, partitions: int) -> None:
    """Produce `count` copies of value round-robin over the partitions as fast as the
    confluent-kafka producer's queue takes them, then flush; raises if any record stays
    unacknowledged."""
    produce = producer.produce
    for i in range(count):
        while True:
            try:
                produce(topic, value, partition=i % partitions)
                break
            except BufferError:  # the client's queue is full: let it send
                producer.poll(0.005)
        if i % 10_000 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise RuntimeError("confluent-kafka: records left unacknowledged")


def jmx_beans(port: int | str, query: str = "*:*") -> list[dict[str, Any]]:
    """The beans a broker's metrics endpoint (MOLDAU_METRICS_PORT) answers a JMX query with."""
    url = f"http://127.0.0.1:{port}/jmx?qry={query}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)["beans"]


def _three_digits(value: float) -> str:
    # 3 significant digits without a dangling point: 187, 18.7, 1.87, 0.187.
    decimals = max(0, 2 - math.floor(math.log10(value))) if value > 0 else 0
    return f"{value:.{decimals}f}"


def fmt_time(seconds: float) -> str:
    """A duration with three significant digits in a readable unit."""
    seconds = float(f"{seconds:.3g}")  # round first, so 999.9 µs becomes 1.00 ms
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{_three_digits(seconds / scale)} {unit}"
    return f"{_three_digits(seconds / 1e-9)} ns"


def fmt_ratio(ratio: float) -> str:
    ratio = float(f"{ratio:.3g}")
    return f"{_three_digits(ratio) if ratio < 100 else f'{ratio:.0f}'}x"


def fmt_loop(timing: Timing) -> str:
    return f"{timing.runs} x {timing.loop}"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _git_head() -> str:
    # Read-only: which commit the figures belong to (the working tree may differ).
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def command_line() -> str:
    """The command that produced the figures, as it could be typed again from the repo."""
    exe = Path(sys.executable)
    try:
        shown = str(exe.relative_to(Path.cwd()))
    except ValueError:
        shown = "python"
    via_make = " (via `make bench`)" if os.environ.get("MOLDAU_BENCH_VIA_MAKE") else ""
    return f"`{shlex.join([shown, *sys.argv])}`{via_make}"


def _load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


class Stopwatch:
    """Started when a suite starts: its wall time, and how busy the machine was then."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.load = _load_average()

    def elapsed(self) -> str:
        return f"{time.perf_counter() - self.start:.1f} s"


def environment(clock: Stopwatch, packages: Sequence[str]) -> str:
    """The Markdown block that says where and how a suite's figures were measured."""
    logical = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    versions = ", ".join(f"{name} {_version(name)}" for name in packages)
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return "\n".join(
        [
            f"- Command: {command_line()}, at {when}, git HEAD {_git_head()}",
            f"- Machine: {_cpu_model()}, {logical} logical CPUs ({usable} usable), "
            f"load average at the start {clock.load} (1, 5, 15 min)",
            f"- OS: {platform.platform()}",
            f"- Python: {platform.python_implementation()} {platform.python_version()}",
            f"- Packages: {versions}",
            f"- Suite wall time: {clock.elapsed()}",
        ]
    )


def profile_top(fn: Callable[[], object], calls: int, limit: int = 6) -> str:
    """Where one call's time goes: a Markdown table of the functions with the most own time.

    cProfile inflates the cost of each Python call, so the shares (not the absolute
    times) are what to read; they point at the function to fix when a goal is missed.
    """
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values()) or 1.0
    top = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:limit]
    rows = []
    for (filename, line, name), (_, ncalls, tottime, _, _) in top:
        where = Path(filename)
        name = re.sub(r" at 0x[0-9a-f]+", "", name)  # builtins: no address, stable diffs
        shown = (
            f"`{where.relative_to(REPO)}:{line}` {name}"
            if where.is_relative_to(REPO)
            else f"{where.name}:{line} {name}"
            if line
            else name
        )
        rows.append([shown, f"{ncalls / calls:g}", f"{100 * tottime / total:.0f}%"])
    return table(["function", "calls per operation", "share of own time"], rows)


def delete_topics(bootstrap: str, topics: list[str]) -> None:
    """Delete topics through the admin API and wait for the controller to accept."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the futures are done
    for future in admin.delete_topics(topics).values():
        future.result(60)


def settle(data_dirs: Sequence[str]) -> None:
    """After delete_topics: let the deleted topics' files go and the page cache write back
    the rest, so the next run measures the brokers, not the writeback of the last run's
    gigabytes throttling their writes (on these machines a broker's write path took
    three times the CPU per GB once a few GB were dirty), nor the kernel freeing their
    page cache (the broker removes a deleted partition's `-delete` directory on a thread
    of its own)."""
    time.sleep(2.0)  # past a file.delete.delay.ms of 1 s
    deadline = time.monotonic() + 120
    while any(name.endswith("-delete") for d in data_dirs for name in os.listdir(d)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"deleted partitions still in {data_dirs} after 120 s")
        time.sleep(0.1)
    os.sync()


def wait_until(condition: Callable[[], Any], timeout: float, what: str = "condition") -> None:
    """Poll until condition() is true; its exceptions count as not yet, until the timeout
    (then the last one is raised)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout:.0f} s")
        time.sleep(0.1)
