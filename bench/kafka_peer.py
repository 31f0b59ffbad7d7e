"""Apache Kafka 3.9.1 and Moldau side by side on one machine (issues 39 and 42): one
broker of each, then three of each with topics of replication factor 3 and
min.insync.replicas 2, on one ZooKeeper (a chroot per system), the same drivers.

- Fairness: Kafka runs from the Maven jars (compat/pom.xml, `make compat-deps`) with
  kafka-server-start.sh's heap (-Xmx1G -Xms1G) and kafka-run-class.sh's G1 flags
  (compat/launcher.py); both systems get the same server.properties, Kafka's defaults
  except the internal topics' replication factor (the broker count) and
  group.initial.rebalance.delay.ms 0. A warm-up round (every workload once, on both) is
  run first and thrown away, so Kafka's JIT has compiled its hot paths before anything
  counts. Within a round every workload runs on both systems back to back, the order
  alternating (Kafka then Moldau, then Moldau then Kafka), and the ratios are the
  medians of the per-round ratios: a busy spell slows both sides of a pair alike.
- Drivers: bench/drivers/rdkperf (C, librdkafka; acks=all, linger.ms 5, 1 MiB batches,
  one record per partition delivered before the clock starts; `-consume` reads without
  a group, large fetches) and Kafka's own Java perf tools as kafka-producer-perf-test.sh
  and kafka-consumer-perf-test.sh run them (512 MiB heap, kafka-run-class.sh's flags):
  ProducerPerformance with `--producer-props acks=all` and the producer's other
  defaults, ConsumerPerformance in a fresh group (its fetch time, which leaves out
  joining the group, as its fetch.MB.sec does).
- Topics: 6 partitions (1 KiB and 100 B records), and one of 1000 partitions filled
  once before the rounds for the many-partitions consume; a round's topics are deleted
  at its end.
- Figures: MB/s (10^6 bytes of record values per second, by the driver's clock); broker
  CPU s/GB: the user+system CPU time of the system's broker processes (all three at RF
  3; not ZooKeeper) over the run, per GB of record values moved by the client
  (replication traffic is the brokers' cost, not bytes moved); RSS: the brokers'
  resident memory summed, right after the run. The brokers' CPU when idle (no client)
  is given too: a JVM's background threads cost CPU whether or not records move.
- Latency knee: Kafka's ProducerPerformance with linger.ms 0 (one record per request
  while the producer keeps up) and acks=all, 1 KiB records into a topic of 1 partition,
  RF 3, at offered rates stepping up; a system's search stops at the first rate whose
  p99 passes 100 ms (in a second run too), and its knee is the highest rate below that.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from statistics import median

import _kafka_peer_clusters as kc
import _kafka_peer_tools as kt
import _support as s
from _kafka_peer_clusters import KAFKA, MOLDAU

SUITE = "kafka"  # `make bench ONLY=kafka`
ORDER = 114  # after the other peers sections
SYSTEMS = (KAFKA, MOLDAU)
KIB = 1024
PARTITIONS = 6
MANY_PARTITIONS = 1000
ROUNDS = 3
# Records per run: enough that a run lasts seconds at either system's pace (200,000 of
# 1 KiB took 0.3 s on one Kafka broker). Kafka's Java tools are slower at RF 3 (about
# 20 MB/s), hence fewer records for them.
RECORDS = int(os.environ.get("MOLDAU_BENCH_KAFKA_RECORDS", 1_000_000))  # 1 KiB, rdkperf
SMALL_RECORDS = int(os.environ.get("MOLDAU_BENCH_KAFKA_SMALL_RECORDS", 2_000_000))  # 100 B
JAVA_RECORDS = int(os.environ.get("MOLDAU_BENCH_KAFKA_JAVA_RECORDS", 200_000))  # 1 KiB
MANY_RECORDS = 500_000  # 1 KiB over the 1000 partitions
KNEE_RATES = (100, 200, 400, 700, 1000, 1500, 2000, 3000, 5000, 7000, 10_000)
QUICK_KNEE_RATES = (200, 1000, 5000)
KNEE_SECONDS = 10.0
KNEE_LIMIT_MS = 100.0
# Issue 42's goals: Moldau at least Kafka's MB/s at no more CPU per GB, and 1.5x on the
# produce rows of one broker.
PRODUCE_RF1_GOAL = 1.5


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    brokers: int
    goal_mb_s: float = 1.0


ROWS = (
    Row("produce_1k", "1 broker, produce 1 KiB (librdkafka)", 1, PRODUCE_RF1_GOAL),
    Row("produce_100", "1 broker, produce 100 B (librdkafka)", 1, PRODUCE_RF1_GOAL),
    Row("consume_1k", "1 broker, consume 1 KiB (librdkafka)", 1),
    Row("consume_1000p", f"1 broker, consume 1 KiB over {MANY_PARTITIONS} partitions "
        "(librdkafka)", 1),
    Row("pp_1k", "1 broker, Kafka's ProducerPerformance 1 KiB", 1, PRODUCE_RF1_GOAL),
    Row("cp_1k", "1 broker, Kafka's ConsumerPerformance 1 KiB", 1),
    Row("produce_1k", "3 brokers RF 3 min ISR 2, produce 1 KiB (librdkafka)", 3),
    Row("produce_100", "3 brokers RF 3, produce 100 B (librdkafka)", 3),
    Row("consume_1k", "3 brokers RF 3, consume 1 KiB (librdkafka)", 3),
    Row("pp_1k", "3 brokers RF 3, Kafka's ProducerPerformance 1 KiB", 3),
)


@dataclass(frozen=True)
class Sample:
    mb_s: float
    cpu_s_per_gb: float
    rss_mb: float


@dataclass
class Results:
    samples: dict[tuple[int, str, str], list[Sample]] = field(default_factory=dict)
    knee: dict[str, list[tuple[int, float, float]]] = field(default_factory=dict)
    knee_first_p99: dict[tuple[str, int], float] = field(default_factory=dict)  # retried
    idle_cores: dict[tuple[int, str], float] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Sizes:
    records: int
    small_records: int
    java_records: int
    many_records: int
    rounds: int
    warmup: bool
    knee_rates: Sequence[int]
    knee_seconds: float


def sizes(quick: bool) -> Sizes:
    if quick:
        return Sizes(20_000, 50_000, 20_000, 20_000, 1, False, QUICK_KNEE_RATES, 3.0)
    return Sizes(RECORDS, SMALL_RECORDS, JAVA_RECORDS, MANY_RECORDS, ROUNDS, True, KNEE_RATES,
                 KNEE_SECONDS)


def _measure(cluster: kc.Cluster, fn: Callable[[], kt.Moved]) -> tuple[Sample, kt.Moved]:
    cpu0 = cluster.cpu_seconds()
    moved = fn()
    cpu = cluster.cpu_seconds() - cpu0
    return Sample(moved.mb_s, cpu / (moved.bytes / 1e9), cluster.rss_bytes() / 1e6), moved


@dataclass(frozen=True)
class Job:
    """One workload: `prepare` (creating its topic) is not measured, `run` is."""

    key: str
    run: Callable[[kc.Cluster], kt.Moved]
    prepare: Callable[[kc.Cluster], None] | None = None


@dataclass
class Phase:
    """The workloads of one cluster shape: which run, with what, in which order."""

    pair: kc.Pair
    brokers: int
    size: Sizes
    rdkperf: Path
    logs: Path

    def jobs(self, r: int) -> list[Job]:
        rf, n = self.brokers, self.size
        big, small, pp = f"r{r}-1k", f"r{r}-100b", f"r{r}-pp"

        def topic(name: str) -> Callable[[kc.Cluster], None]:
            return lambda c: kc.create_topic(c.bootstrap, name, PARTITIONS, rf)

        jobs = [
            Job("produce_1k", lambda c: kt.rdkperf_produce(
                self.rdkperf, c.bootstrap, big, n.records, KIB, PARTITIONS), topic(big)),
            Job("consume_1k", lambda c: kt.rdkperf_consume(
                self.rdkperf, c.bootstrap, big, PARTITIONS, n.records)),
            Job("produce_100", lambda c: kt.rdkperf_produce(
                self.rdkperf, c.bootstrap, small, n.small_records, 100, PARTITIONS),
                topic(small)),
            Job("pp_1k", lambda c: kt.producer_performance(
                c.bootstrap, pp, n.java_records, KIB, self.logs), topic(pp)),
        ]
        if self.brokers == 1:
            jobs += [
                Job("cp_1k", lambda c: kt.consumer_performance(
                    c.bootstrap, big, n.java_records, f"cp-{r}-{time.monotonic_ns()}",
                    self.logs)),
                Job("consume_1000p", lambda c: kt.rdkperf_consume(
                    self.rdkperf, c.bootstrap, "many", MANY_PARTITIONS, n.many_records)),
            ]
        return jobs

    def fill_many_partitions(self) -> None:
        """The 1000-partition topic, written once (not measured) and read every round."""
        for system in SYSTEMS:
            cluster = self.pair[system]
            kc.create_topic(cluster.bootstrap, "many", MANY_PARTITIONS, 1)
            kt.rdkperf_produce(self.rdkperf, cluster.bootstrap, "many", self.size.many_records,
                               KIB, MANY_PARTITIONS)

    def round(self, r: int, out: Results | None) -> None:
        """Every workload on both systems, the order alternating; `out` None: warm-up."""
        for i, job in enumerate(self.jobs(r)):
            order = SYSTEMS if (r + i) % 2 == 0 else SYSTEMS[::-1]
            for system in order:
                cluster = self.pair[system]
                if job.prepare is not None:
                    job.prepare(cluster)
                sample, moved = _measure(cluster, partial(job.run, cluster))
                _progress(f"{self.brokers} broker(s), round {r}{'' if out else ' (warm-up)'}, "
                          f"{job.key}, {system}: {sample.mb_s:.1f} MB/s, "
                          f"{sample.cpu_s_per_gb:.2f} CPU s/GB")
                if out is not None:
                    out.samples.setdefault((self.brokers, job.key, system), []).append(sample)
                    out.commands[f"{self.brokers} broker(s), {job.key}, {system}"] = moved.command
        for system in SYSTEMS:
            cluster = self.pair[system]
            kc.delete_topics(cluster.bootstrap, [f"r{r}-1k", f"r{r}-100b", f"r{r}-pp"])
        os.sync()  # the deleted topics' dirty pages are not the next round's cost


def _progress(line: str) -> None:
    print(f"kafka: {line}", file=sys.stderr, flush=True)


def knee_search(pair: kc.Pair, size: Sizes, logs: Path, out: Results) -> None:
    """Unbatched acks=all at RF 3: rates stepping up, both systems at each rate (the order
    alternating), until each one's p99 passes the limit."""
    for system in SYSTEMS:
        kc.create_topic(pair[system].bootstrap, "knee", 1, 3)
    if size.warmup:  # one short run each at the first rate, thrown away
        for system in SYSTEMS:
            rate = size.knee_rates[0]
            kt.producer_performance(pair[system].bootstrap, "knee", rate * 2, KIB, logs,
                                    throughput=rate, props=("linger.ms=0",))
    running = set(SYSTEMS)
    for i, rate in enumerate(size.knee_rates):
        for system in SYSTEMS if i % 2 == 0 else SYSTEMS[::-1]:
            if system not in running:
                continue
            p50, p99 = _knee_run(pair[system], system, rate, size, logs, out)
            if kt.saturated(p99, KNEE_LIMIT_MS):
                # Once more before the search stops: on a shared machine one busy spell
                # can push a p99 over the limit; the rate counts by its lower p99.
                out.knee_first_p99[(system, rate)] = p99
                p50, p99 = min((p50, p99), _knee_run(pair[system], system, rate, size, logs,
                                                     out), key=lambda x: _nan_last(x[1]))
            out.knee.setdefault(system, []).append((rate, p50, p99))
            if kt.saturated(p99, KNEE_LIMIT_MS):
                running.discard(system)
        if not running:
            return


def _nan_last(value: float) -> float:
    return math.inf if math.isnan(value) else value


def _knee_run(cluster: kc.Cluster, system: str, rate: int, size: Sizes, logs: Path,
              out: Results) -> tuple[float, float]:
    """(p50, p99) ms of one ProducerPerformance run at `rate`; NaN when it failed."""
    count = max(1, round(rate * size.knee_seconds))
    try:
        moved = kt.producer_performance(
            cluster.bootstrap, "knee", count, KIB, logs, throughput=rate,
            props=("linger.ms=0",), timeout=size.knee_seconds * 10 + 120)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        _progress(f"knee, {system} at {rate}/s failed (counts as saturated): {exc}")
        return math.nan, math.nan
    out.commands[f"knee {system}"] = moved.command
    _progress(f"knee, {system} at {rate}/s: p50 {moved.p50_ms} ms, p99 {moved.p99_ms} ms")
    return moved.p50_ms, moved.p99_ms


def idle_cpu(cluster: kc.Cluster, seconds: float = 5.0) -> float:
    """The brokers' CPU with no client at all, in cores: the background every run pays."""
    cpu0, t0 = cluster.cpu_seconds(), time.monotonic()
    time.sleep(seconds)
    return (cluster.cpu_seconds() - cpu0) / (time.monotonic() - t0)


def run() -> str:
    import _peer_servers as ps

    clock = s.Stopwatch()
    quick = s.RUNS < 10 or os.environ.get("MOLDAU_BENCH_QUICK") == "1"
    size = sizes(quick)
    kc.import_paths()
    from compat import launcher
    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble

    launcher.kafka_classpath()  # fail early: `make compat-deps` fetches the jars
    ps.install_packages()
    rdkperf = ps.build_rdkperf()
    workdir = Path(tempfile.mkdtemp(prefix="moldau-kafka-peer-"))
    logs = workdir / "tool-logs"
    logs.mkdir()
    out = Results()
    zookeeper = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()
    try:
        for brokers in (1, 3):
            pair = kc.start_pair(workdir, zookeeper.connect_string, brokers)
            try:
                phase = Phase(pair, brokers, size, rdkperf, logs)
                for system in SYSTEMS:
                    out.idle_cores[(brokers, system)] = idle_cpu(pair[system])
                if brokers == 1:
                    phase.fill_many_partitions()
                if size.warmup:
                    phase.round(0, None)
                for r in range(1, size.rounds + 1):
                    out.loads.append(os.getloadavg()[0])
                    phase.round(r, out)
                if brokers == 3:
                    knee_search(pair, size, logs, out)
            finally:
                pair.stop()
    finally:
        zookeeper.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return report(clock, out, size)


# --- the report ------------------------------------------------------------------------


def _fmt(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def _rounds(values: Sequence[float]) -> str:
    return ", ".join(_fmt(v, 2) for v in values)


def row_cells(row: Row, out: Results) -> list[str]:
    kafka = out.samples.get((row.brokers, row.key, KAFKA), [])
    moldau = out.samples.get((row.brokers, row.key, MOLDAU), [])
    if not kafka or not moldau:
        return [row.label, *["-"] * 8]
    mb = kt.ratios([x.mb_s for x in moldau], [x.mb_s for x in kafka])
    cpu = kt.ratios([x.cpu_s_per_gb for x in moldau], [x.cpu_s_per_gb for x in kafka])
    mb_ratio, cpu_ratio = median(mb), median(cpu)
    met = mb_ratio >= row.goal_mb_s and cpu_ratio <= 1.0
    return [
        row.label,
        f"{_fmt(median(x.mb_s for x in kafka))} / {_fmt(median(x.mb_s for x in moldau))}",
        f"**{mb_ratio:.2f}** ({_rounds(mb)})",
        f"{_fmt(median(x.cpu_s_per_gb for x in kafka), 2)} / "
        f"{_fmt(median(x.cpu_s_per_gb for x in moldau), 2)}",
        f"**{cpu_ratio:.2f}** ({_rounds(cpu)})",
        f"{median(x.rss_mb for x in kafka):.0f} / {median(x.rss_mb for x in moldau):.0f}",
        f">= {row.goal_mb_s:g}x MB/s, <= 1x CPU: {'met' if met else 'missed'}",
    ]


def knee_rows(out: Results) -> list[list[str]]:
    rates = sorted({rate for points in out.knee.values() for rate, _, _ in points})
    by = {system: {rate: (p50, p99) for rate, p50, p99 in out.knee.get(system, [])}
          for system in SYSTEMS}
    rows = []
    for rate in rates:
        cells = [f"{rate:,}"]
        for system in SYSTEMS:
            p50, p99 = by[system].get(rate, (math.nan, math.nan))
            ran = rate in by[system]
            p99_text = _fmt(p99, 0) if not math.isnan(p99) else "failed"
            first = out.knee_first_p99.get((system, rate))
            if first is not None:
                p99_text += f" (first run {_fmt(first, 0) if not math.isnan(first) else 'failed'})"
            cells += [_fmt(p50, 0) if ran else "", p99_text if ran else ""]
        rows.append(cells)
    return rows


def knees(out: Results) -> dict[str, float | None]:
    return {system: kt.knee([(rate, p99) for rate, _, p99 in out.knee.get(system, [])],
                            KNEE_LIMIT_MS) for system in SYSTEMS}


def report(clock: s.Stopwatch, out: Results, size: Sizes) -> str:
    header = ["workload", "MB/s Kafka / Moldau", "Moldau/Kafka MB/s (rounds)",
              "broker CPU s/GB Kafka / Moldau", "Moldau/Kafka CPU per GB (rounds)",
              "brokers' RSS MB Kafka / Moldau", "goal (issue 42)"]
    found = knees(out)
    knee_text = ", ".join(
        f"{system} {found[system]:,.0f} records/s" if found[system] is not None
        else f"{system} below the first rate" for system in SYSTEMS)
    k, m = found[KAFKA], found[MOLDAU]
    knee_goal = ("met" if m is not None and (k is None or m >= k) else "missed")
    commands = [f"- {name}: `{command}`" for name, command in sorted(out.commands.items())]
    intro = __doc__.split("\n\n", 1)[1].strip()
    warmup = ("after a warm-up round that is thrown away" if size.warmup else
              "and no warm-up round (quick mode: Kafka's JIT is cold and the runs are short,"
              " so these figures only show that the harness works)")
    return "\n".join([
        "## Kafka as the performance peer: Apache Kafka 3.9.1 vs Moldau (issues 39, 42)",
        "",
        intro,
        "",
        f"Records per run: librdkafka {size.records:,} of 1 KiB and {size.small_records:,} "
        f"of 100 B, {size.many_records:,} of 1 KiB over the {MANY_PARTITIONS} partitions; "
        f"Kafka's Java tools {size.java_records:,} of 1 KiB (ConsumerPerformance reads that "
        "many from the start of the librdkafka 1 KiB topic); "
        f"{size.rounds} measured round(s) {warmup}; acks=all throughout. Each cell: median "
        "of the rounds; ratios: median of the per-round ratios, the rounds' own in "
        "brackets. Load average (1 min) at the start of each round: "
        f"{', '.join(f'{x:.1f}' for x in out.loads)} (2 cores shared with other work: "
        "the absolute figures travel badly, the ratios better).",
        "",
        s.table(header, [row_cells(row, out) for row in ROWS]),
        "",
        "Idle brokers (no client, 5 s after the start and the warm-up of the group "
        "coordinator), CPU in cores, which every run above pays for its whole duration: "
        + ", ".join(f"{brokers} broker(s) {system} {cores:.3f}"
                    for (brokers, system), cores in sorted(out.idle_cores.items())) + ".",
        "",
        "### Latency knee: unbatched acks=all, RF 3, 1 KiB",
        "",
        f"ProducerPerformance `--throughput RATE --producer-props acks=all linger.ms=0`, "
        f"{size.knee_seconds:.0f} s of records per rate into a topic of 1 partition (RF 3, "
        "min.insync.replicas 2); p50 and p99 in ms as the tool prints them (whole ms, "
        "send to acknowledgement); the search stops a system at the first rate whose p99 "
        f"passes {KNEE_LIMIT_MS:.0f} ms in two runs at that rate (a rate over the limit is "
        "run once more, as one busy spell on a shared machine can push a p99 over; the rate "
        "counts by the lower p99, the first shown in brackets; failed: the run did not "
        "finish).",
        "",
        s.table(["records/s", "Kafka p50", "Kafka p99", "Moldau p50", "Moldau p99"],
                knee_rows(out)),
        "",
        f"Knee (highest rate with p99 under {KNEE_LIMIT_MS:.0f} ms): {knee_text}; "
        f"goal (issue 42, Moldau's knee at or above Kafka's): {knee_goal}.",
        "",
        "Commands (topic names and addresses as in the last round):",
        "",
        *commands,
        "",
        s.environment(clock, ["confluent-kafka"]),
    ])


if __name__ == "__main__":
    print(run())
