"""The cost of the broker's metrics on the produce path (issue 10): the same produce
workload against two brokers, one with metrics (MOLDAU_METRICS_PORT set, as deployed)
and one with MOLDAU_METRICS_ENABLED=false (no RequestMetrics, BrokerTopicMetrics or flush
timer), in interleaved runs (ABBA order, so a drift of the machine's load falls on both).

Each run: librdkafka produces MOLDAU_BENCH_METRICS_BYTES (default 64 MiB) of 1 KiB
records, acks=1, batch.size 1 MiB, linger.ms 5, to a 6-partition topic. The figures: the
median over pairs of the on/off throughput ratio, with its spread, and the broker's CPU
time per GB of each side, read from its CPU-time clock (nanoseconds, all threads): CPU
time is what the metrics add, and unlike wall time it hardly swings with the machine's
other load.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import _support as s

ORDER = 45
MIB = 1 << 20
PARTITIONS = 6
RUN_BYTES = int(os.environ.get("MOLDAU_BENCH_METRICS_BYTES", 64 * MIB))
PAIRS = 21  # short runs, many pairs: a busy neighbour hits few of them
GOAL_COST = 0.03  # metrics cost under 3% of produce throughput
_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)


def run() -> str:
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from broker import (
        produce_python as produce,  # the broker suite's producer loop (bench/broker.py)
    )
    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess, free_port

    clock = s.Stopwatch()
    quick = s.RUNS < 10
    pairs, run_bytes = (2, 16 * MIB) if quick else (PAIRS, RUN_BYTES)
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-metrics-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()
    properties = {"num.partitions": str(PARTITIONS), "log.segment.bytes": str(1 << 30),
                  "log.retention.bytes": str(2 * run_bytes)}
    sides = {
        "on": BrokerProcess(str(workdir / "on"), 1, ensemble.connect_string + "/on",
                            properties=properties,
                            env={"MOLDAU_METRICS_PORT": str(free_port())}),
        "off": BrokerProcess(str(workdir / "off"), 1, ensemble.connect_string + "/off",
                             properties=properties, env={"MOLDAU_METRICS_ENABLED": "false"}),
    }
    results: dict[str, list] = {"on": [], "off": []}
    try:
        for broker in sides.values():
            broker.start()
        for broker in sides.values():  # warm-up: topic creation, first segments
            produce(broker.bootstrap, "bench", 1024, 8 * MIB, broker.pid())
        for i in range(pairs):
            order = ("on", "off") if i % 2 == 0 else ("off", "on")
            for name in order:
                broker = sides[name]
                cpu0 = _cpu_ns(broker.pid())
                t = produce(broker.bootstrap, "bench", 1024, run_bytes, broker.pid())
                results[name].append((t, (_cpu_ns(broker.pid()) - cpu0) / (t.bytes / 1e9)))
        counts = _produce_counts(sides["on"].env["MOLDAU_METRICS_PORT"])
    finally:
        for broker in sides.values():
            broker.stop()
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    total_bytes = run_bytes * pairs + 8 * MIB
    per_request = _metric_work_per_request(counts["partitions"] / counts["requests"])
    return _report(clock, pairs, run_bytes, results,
                   (per_request, counts["requests"] / (total_bytes / 1e9)))


def _produce_counts(port: str) -> dict[str, int]:
    """Produce requests and the partitions they carried, as the broker counted them."""
    beans = {b["name"]: b for b in s.jmx_beans(port)}
    return {"requests": sum(b["Count"] for n, b in beans.items() if n.startswith(
                "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,")),
            "partitions": beans["kafka.server:type=BrokerTopicMetrics,"
                                "name=TotalProduceRequestsPerSec"]["Count"]}


def _metric_work_per_request(partitions: float) -> float:
    """Seconds of the metrics' own work for one produce request: RequestMetrics (record
    when handled, the send times when sent) and BrokerTopicMetrics' three marks per
    partition, timed in this process (median of interleaved runs)."""
    from moldau.metrics.registry import MetricsRegistry
    from moldau.protocol.generated.produce_request import ProduceRequest
    from moldau.protocol.generated.produce_response import ProduceResponse
    from moldau.server.broker_metrics import BrokerTopicStats
    from moldau.server.request_metrics import RequestMetrics

    n = max(round(partitions), 1)
    registry = MetricsRegistry()
    requests, stats = RequestMetrics(registry), BrokerTopicStats(registry)
    response = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="bench", partition_responses=[ProduceResponse.PartitionProduceResponse(index=i)
                                           for i in range(n)])])
    body = ProduceRequest()

    def one_request() -> None:
        for _ in range(n):
            stats.mark("MessagesInPerSec", "bench", 1000)
            stats.mark("BytesInPerSec", "bench", 1 << 20)
            stats.mark("TotalProduceRequestsPerSec", "bench")
        started = time.monotonic_ns()
        meta = requests.record(0, 9, body, started, started, 1000, 0, response)
        requests.sent(meta, time.monotonic_ns(), time.monotonic_ns())

    return s.measure({"metrics of one produce request": one_request})[
        "metrics of one produce request"].median


def _cpu_ns(pid: int | None) -> int:
    """Nanoseconds the process (all its threads) spent on a CPU: its CPU-time clock
    (clock_getcpuclockid), exact where /proc's ticks are 10 ms."""
    clock = ctypes.c_int()
    if pid is None or _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
        raise OSError(f"no CPU clock for process {pid}")
    return time.clock_gettime_ns(clock.value)


def _quartiles(values: list[float]) -> str:
    ordered = sorted(values)
    n = len(ordered)
    return (f"{median(ordered):.3f} (quartiles {ordered[n // 4]:.3f} and "
            f"{ordered[(3 * n) // 4]:.3f}, all from {ordered[0]:.3f} to {ordered[-1]:.3f})")


def _report(clock: s.Stopwatch, pairs: int, run_bytes: int, results: dict[str, list],
            accounted: tuple[float, float]) -> str:
    on, off = results["on"], results["off"]
    speed = [a.mb_s / b.mb_s for (a, _), (b, _) in zip(on, off, strict=True)]
    cpu = [a / b for (_, a), (_, b) in zip(on, off, strict=True)]
    per_request, requests_per_gb = accounted
    cpu_off = median(c for _, c in off) / 1e9  # broker CPU seconds per GB without metrics
    share = per_request * requests_per_gb / cpu_off
    rows = [(name, f"{median(t.mb_s for t, _ in runs):.0f}",
             f"{min(t.mb_s for t, _ in runs):.0f}-{max(t.mb_s for t, _ in runs):.0f}",
             f"{median(c for _, c in runs) / 1e9:.3f}")
            for name, runs in (("metrics on", on), ("metrics off", off))]
    met = "met" if share < GOAL_COST else "NOT met"
    return "\n".join([
        "## Metrics overhead (issue 10)",
        "",
        f"Produce of {run_bytes / MIB:.0f} MiB of 1 KiB records per run (acks=1, librdkafka "
        f"batch.size 1 MiB, linger.ms 5, {PARTITIONS} partitions) to a broker with metrics "
        f"and to one with `MOLDAU_METRICS_ENABLED=false`, {pairs} interleaved pairs (ABBA); "
        "both brokers and the client share the machine.",
        "",
        s.table(["broker", "median MB/s", "range MB/s", "broker CPU s per GB"], rows),
        "",
        f"- Produce throughput, with / without, median of the pairs' ratios: "
        f"{_quartiles(speed)}.",
        f"- Broker CPU per GB (its CPU-time clock), with / without: {_quartiles(cpu)}.",
        f"- Accounted: the metrics' own work for one produce request takes "
        f"{per_request * 1e6:.2f} us (timed in this process: RequestMetrics and the "
        f"BrokerTopicMetrics marks of its partitions); the broker counted "
        f"{requests_per_gb:,.0f} produce requests per GB and spent {cpu_off:.3f} CPU s per "
        f"GB without metrics, so the metrics take {share * 100:.2f}% of its produce CPU.",
        "",
        "The end-to-end ratios carry the machine's noise (their quartiles say how much "
        "on this run); the accounted share hardly does, but it leaves out indirect costs "
        "(timeit runs with the garbage collector off, and the histograms' reservoirs keep "
        "floats alive). A broker whose produce throughput is bound by its one event "
        "loop's CPU loses about that share of throughput.",
        "",
        f"Goal (issue 10): metrics cost under {GOAL_COST * 100:.0f}% of produce throughput "
        f"(the accounted share): {met} on this run.",
        "",
        s.environment(clock, ["confluent-kafka"]),
    ])


if __name__ == "__main__":
    print(run())
