"""The drivers of the Kafka-peer suite (bench/kafka_peer.py), and its pure arithmetic.

- rdkperf (bench/drivers/rdkperf, librdkafka): produce and `-consume`, JSON out.
- Kafka's own perf tools from the compat lab's cached jars, run as kafka-run-class.sh
  would (compat/launcher.py's java_command) with the 512 MiB heap that Kafka's
  kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh give them:
  org.apache.kafka.tools.ProducerPerformance and ConsumerPerformance; their last line
  of output is parsed.
- median ratios of rounds and the latency knee: plain functions, so that they read (and
  could be tested) apart from the processes.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median

PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERFORMANCE = "org.apache.kafka.tools.ConsumerPerformance"
# kafka-producer-perf-test.sh and kafka-consumer-perf-test.sh set KAFKA_HEAP_OPTS to
# -Xmx512M; given after the launcher's tool heap, the JVM takes the last -Xmx.
PERF_TOOL_HEAP = ("-Xmx512M",)
MIB = 1024 * 1024
# librdkafka producer settings of the throughput rows, as the peers sections use them
# (bench/peers.py RDKPERF_CONF) with acks=all; warmup=1 (the driver's own) delivers one
# record per partition before the clock starts.
RDKPERF_PRODUCE = ("acks=all", "linger.ms=5", "batch.size=1048576",
                   "queue.buffering.max.kbytes=1048576", "queue.buffering.max.messages=1000000",
                   "warmup=1")
# rdkperf -consume: large fetches, as bench/broker.py's CONSUMER_SETTINGS.
RDKPERF_CONSUME = ("fetch.max.bytes=52428800", "max.partition.fetch.bytes=10485760",
                   "queued.max.messages.kbytes=1048576")


@dataclass(frozen=True)
class Moved:
    """What one driver run moved, by the driver's own clock."""

    bytes: int
    seconds: float
    command: str
    p50_ms: float = math.nan  # ProducerPerformance only
    p99_ms: float = math.nan

    @property
    def mb_s(self) -> float:
        return self.bytes / self.seconds / 1e6 if self.seconds > 0 else 0.0


def _run(args: Sequence[str], timeout: float) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"{shown(args)} failed ({done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout


def shown(args: Sequence[str]) -> str:
    """A command as the report quotes it: the binary by name, the classpath elided."""
    first = Path(args[0]).name
    out = ["rdkperf" if first.startswith("rdkperf-") else first]
    for before, arg in itertools.pairwise(args):
        out.append("<kafka jars>" if before == "-cp" else arg)
    return " ".join(out)


def rdkperf_produce(rdkperf: Path, bootstrap: str, topic: str, count: int, size: int,
                    partitions: int, extra: Sequence[str] = ()) -> Moved:
    args = [str(rdkperf), bootstrap, topic, str(count), str(size), str(partitions),
            *RDKPERF_PRODUCE, *extra]
    result = json.loads(_run(args, 900))
    if result.get("failed"):
        raise RuntimeError(f"rdkperf: {result['failed']} records not delivered to {topic}")
    return Moved(int(result["bytes"]), float(result["seconds"]), shown(args))


def rdkperf_consume(rdkperf: Path, bootstrap: str, topic: str, partitions: int,
                    count: int) -> Moved:
    args = [str(rdkperf), "-consume", bootstrap, topic, str(partitions), str(count),
            *RDKPERF_CONSUME]
    result = json.loads(_run(args, 900))
    return Moved(int(result["bytes"]), float(result["seconds"]), shown(args))


def _java(main_class: str, args: Sequence[str], log_dir: Path) -> list[str]:
    from compat import launcher

    return launcher.java_command(main_class, args, log_dir=log_dir,
                                 jvm_options=PERF_TOOL_HEAP)


# ProducerPerformance's summary: "N records sent, R records/sec (M MB/sec), A ms avg
# latency, X ms max latency, P50 ms 50th, P95 ms 95th, P99 ms 99th, P999 ms 99.9th."
_PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec .*?"
    r"(?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th")


def parse_producer_performance(stdout: str, size: int) -> tuple[int, float, float, float]:
    """(records, seconds, p50 ms, p99 ms) from ProducerPerformance's last summary line."""
    for line in reversed(stdout.splitlines()):
        match = _PRODUCER_SUMMARY.search(line)
        if match:
            records, rate = int(match["records"]), float(match["rate"])
            seconds = records / rate if rate > 0 else math.inf
            return records, seconds, float(match["p50"]), float(match["p99"])
    raise RuntimeError(f"no ProducerPerformance summary in: {stdout[-1000:]}")


def producer_performance(bootstrap: str, topic: str, count: int, size: int, log_dir: Path,
                         throughput: int = -1, props: Sequence[str] = (),
                         timeout: float = 900) -> Moved:
    """Kafka's Java producer; acks=all, the rest of the producer at its defaults."""
    args = ["--topic", topic, "--num-records", str(count), "--record-size", str(size),
            "--throughput", str(throughput), "--producer-props",
            f"bootstrap.servers={bootstrap}", "acks=all", *props]
    command = _java(PRODUCER_PERFORMANCE, args, log_dir)
    records, seconds, p50, p99 = parse_producer_performance(_run(command, timeout), size)
    if records != count:
        raise RuntimeError(f"ProducerPerformance sent {records} of {count} records")
    return Moved(records * size, seconds, shown(command), p50, p99)


def parse_consumer_performance(stdout: str) -> tuple[int, int, float]:
    """(bytes, records, fetch seconds) from ConsumerPerformance's result line (with
    --hide-header: start, end, MB, MB/s, records, records/s, rebalance ms, fetch ms,
    ...). Fetch time leaves out joining the group, as Kafka's fetch.MB.sec does."""
    for line in reversed(stdout.splitlines()):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) >= 10:
            return (round(float(fields[2]) * MIB), int(fields[4]), int(fields[7]) / 1000)
    raise RuntimeError(f"no ConsumerPerformance result in: {stdout[-1000:]}")


def consumer_performance(bootstrap: str, topic: str, count: int, group: str,
                         log_dir: Path) -> Moved:
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(count),
            "--group", group, "--timeout", "60000", "--hide-header"]
    command = _java(CONSUMER_PERFORMANCE, args, log_dir)
    size, records, seconds = parse_consumer_performance(_run(command, 900))
    if records < count:
        raise RuntimeError(f"ConsumerPerformance read {records} of {count} records")
    return Moved(size, seconds, shown(command))


# --- the arithmetic of the report ------------------------------------------------------


def ratios(moldau: Sequence[float], kafka: Sequence[float]) -> list[float]:
    """Moldau/Kafka round by round (the rounds ran side by side: a busy spell slows both)."""
    return [m / k if k > 0 else math.inf for m, k in zip(moldau, kafka, strict=True)]


def median_or_nan(values: Sequence[float]) -> float:
    return median(values) if values else math.nan


def knee(points: Sequence[tuple[float, float]], limit_ms: float) -> float | None:
    """The highest offered rate whose p99 stays under `limit_ms`, from (rate, p99 ms)
    points in the order they were offered; rates after the first one over the limit do
    not count (the search stops there). None when even the first rate is over."""
    best: float | None = None
    for rate, p99 in points:
        if not p99 < limit_ms:  # NaN (a failed run) counts as over
            break
        best = rate if best is None else max(best, rate)
    return best


def saturated(p99_ms: float, limit_ms: float) -> bool:
    """Whether the knee search stops stepping up this system's rate."""
    return not p99_ms < limit_ms
