"""What transactions cost (issue 38, "Speed"): librdkafka's transactional producer against
its idempotent producer, and read_committed consumers against read_uncommitted ones, all
measured in the same run.

Produce: bench/drivers/rdkperf (a C loop over librdkafka; confluent-kafka's Python loop
would measure itself, not the broker) sends MOLDAU_BENCH_TXN_BYTES (default 512 MiB) of
1 KiB records round-robin over 6 partitions per run: idempotent (enable.idempotence,
acks=all), transactional (the same settings plus a transactional.id; a transaction is
committed once it is COMMIT_MS old, checked every 256 records as Kafka's
producer-perf-test checks at each send), and transactional with every ABORT_EVERY-th
transaction aborted (its records flushed to the log first). Both producers have a 32 MiB
queue (queue.buffering.max.kbytes, the Java producer's buffer.memory default): with
librdkafka's 1 GiB a whole run fits in the queue and "every 100 ms" would mean two
transactions. batch.size 1 MiB, linger.ms 5. The idempotent and transactional runs of a
round alternate their order (ABBA); the page cache is written back before each run. The
clock starts once a first record per partition is delivered (rdkperf's warmup=1, in a
committed transaction for the transactional producer): connections, metadata, the
producer id and InitProducerId are not timed.

Consume: `rdkperf -consume` (one process, the simple consumer on all partitions) reads a
transactional topic from its beginning with isolation.level read_uncommitted and then
read_committed, in alternating order, and the topic with aborted transactions the same
way: CONSUME_PAIRS pairs per round. The rate is the log range read from the first batch
to the last (the offsets crossed times 1 KiB: a read_committed consumer crosses aborted
records and markers without delivering them), so both isolation levels are timed over
the same bytes.

Each produce run has a fresh topic (created before the clock starts), read back by the
consume pairs when transactional, then deleted with the page cache written back
(s.settle) before the next produce. Figures are medians over the runs; a ratio is
the median of the ratios of runs made side by side (a round's produce runs, a consume
pair), with its quartiles and range. The brokers' CPU comes from their CPU-time clocks
(clock_getcpuclockid) over each run, per GB of records. The report says how busy the
machine was with other work meanwhile (/proc/stat's busy time less the suite's own).

A second setup repeats the produce and consume pairs on three brokers (replication
factor 3, min.insync.replicas 2, `__transaction_state` likewise) with
MOLDAU_BENCH_TXN_CLUSTER_BYTES (default 256 MiB) per run.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import _support as s

ORDER = 47  # after SASL: another cost of a broker feature
MIB = 1 << 20
PARTITIONS = 6
RECORD_SIZE = 1024
RUN_BYTES = int(os.environ.get("MOLDAU_BENCH_TXN_BYTES", 512 * MIB))
CLUSTER_RUN_BYTES = int(os.environ.get("MOLDAU_BENCH_TXN_CLUSTER_BYTES", 256 * MIB))
ROUNDS = int(os.environ.get("MOLDAU_BENCH_ROUNDS", 11))
CLUSTER_ROUNDS = int(os.environ.get("MOLDAU_BENCH_TXN_CLUSTER_ROUNDS", 7))
# Consume runs are short and bound by the consumer's own core (librdkafka spends about 4x
# the broker's CPU per GB): several pairs per round steady their ratio.
CONSUME_PAIRS = 3
COMMIT_MS = 100
ABORT_EVERY = 5  # every 5th transaction aborted: 20% of them, never the last
GOALS = {"produce": 0.80, "consume": 0.90}  # issue 38: of idempotent, of read_uncommitted
QUEUE_KB = 32 * 1024
PRODUCER_SETTINGS = ["acks=all", "linger.ms=5", "batch.size=1048576", "compression.type=none",
                     f"queue.buffering.max.kbytes={QUEUE_KB}", "enable.idempotence=true",
                     "warmup=1"]  # rdkperf's: one record per partition before the clock
CONSUMER_SETTINGS = ["fetch.max.bytes=52428800", "max.partition.fetch.bytes=10485760",
                     "queued.max.messages.kbytes=1048576"]
_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)

# the rows of a round: produce modes and consume pairs
IDEMPOTENT, TRANSACTIONAL, WITH_ABORTS = "idempotent", "transactional", "transactional, aborts"
UNCOMMITTED, COMMITTED = "read_uncommitted", "read_committed"


@dataclass(frozen=True)
class Plan:
    """How long the suite runs: the full figures, or a short smoke test (--quick)."""

    rounds: int
    run_bytes: int
    cluster_rounds: int
    cluster_run_bytes: int
    consume_pairs: int

    @classmethod
    def current(cls) -> Plan:
        if s.RUNS < 10:  # run.py --quick
            return cls(1, 32 * MIB, 1, 16 * MIB, 1)
        return cls(ROUNDS, RUN_BYTES, CLUSTER_ROUNDS, CLUSTER_RUN_BYTES, CONSUME_PAIRS)


@dataclass(frozen=True)
class Run:
    """One produce or consume run."""

    mb_s: float  # produce: records' bytes over the run; consume: the log range read
    cpu_s_per_gb: float  # the brokers' CPU seconds per GB of records
    client_cpu_s_per_gb: float  # the driver's (with librdkafka's threads)
    delivered_mb_s: float = 0.0  # consume: the records handed to the application
    transactions: int = 0  # produce: transactions begun, aborted ones included
    aborted_records: int = 0
    end_share: float = 0.0  # produce: share of the run spent ending transactions
    # produce, per transaction (ms): the flush that ends it, then commit_transaction (or
    # abort) once nothing is in flight, and from its begin_transaction to its first
    # delivery report (AddPartitionsToTxn, verification, the first produce round trip)
    flush_ms: float = 0.0
    commit_ms: float = 0.0
    first_ack_ms: float = 0.0


@dataclass
class Setup:
    """Running brokers: where clients connect and whose CPU clocks to read."""

    name: str
    bootstrap: str
    pids: list[int]
    data_dirs: list[str]
    replication: int

    def cpu_ns(self) -> int:
        return sum(_cpu_ns(pid) for pid in self.pids)


def _cpu_ns(pid: int) -> int:
    """Nanoseconds the process (all its threads) spent on a CPU (clock_getcpuclockid:
    exact, where /proc's ticks are 10 ms)."""
    clock = ctypes.c_int()
    if _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
        raise OSError(f"no CPU clock for process {pid}: has the broker exited?")
    return time.clock_gettime_ns(clock.value)


class OtherLoad:
    """How busy the machine was with work other than the suite's: the busy CPU time of
    /proc/stat over the suite less what this process and its children (ZooKeeper, the
    brokers, the drivers: all waited for by stop()) used."""

    def __init__(self) -> None:
        self._start = (time.monotonic(), _busy_seconds(), _own_cpu())
        self.cores = 0.0  # CPU seconds per second used by other processes
        self.suite_cores = 0.0

    def stop(self) -> None:
        wall0, busy0, own0 = self._start
        wall = max(time.monotonic() - wall0, 1e-9)
        own = _own_cpu() - own0
        self.suite_cores = own / wall
        self.cores = max(0.0, (_busy_seconds() - busy0) - own) / wall


def _busy_seconds() -> float:
    """user + nice + system + irq + softirq of all CPUs (steal and iowait left out)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:8]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / os.sysconf(
        "SC_CLK_TCK")


def _own_cpu() -> float:
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                 resource.RUSAGE_CHILDREN)]
    return sum(u.ru_utime + u.ru_stime for u in usage)


def _load_note(load: OtherLoad) -> str:
    cores = os.cpu_count() or 0
    measured = (f"other processes used {load.cores:.2f} of the machine's {cores} cores on "
                f"average while the suite ran (its own processes {load.suite_cores:.2f}; "
                "/proc/stat's busy time less the suite's)")
    if load.cores < 0.2:
        return f"The machine was otherwise quiet: {measured}."
    return (f"**This run was on a loaded machine**: {measured}, and ZooKeeper, the brokers "
            "and the clients share those cores too. Absolute MB/s are therefore low and "
            "noisy; the ratios of runs made side by side (the same load on both sides) are "
            "the figures to compare.")


# -- the runs -------------------------------------------------------------------------------


def _driver(setup: Setup, args: list[str]) -> tuple[dict[str, Any], float, float]:
    """Run rdkperf; its JSON, the brokers' CPU seconds over the run and the driver's."""
    cpu0, client0 = setup.cpu_ns(), _children_cpu()
    out = subprocess.run(args, capture_output=True, text=True, timeout=900)
    cpu, client = (setup.cpu_ns() - cpu0) / 1e9, _children_cpu() - client0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result, cpu, client


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def produce(rdkperf: Path, setup: Setup, topic: str, mode: str, total: int) -> Run:
    settings = list(PRODUCER_SETTINGS)
    if mode != IDEMPOTENT:
        settings += [f"transactional.id={topic}", f"txn.commit.ms={COMMIT_MS}"]
    if mode == WITH_ABORTS:
        settings.append(f"txn.abort.every={ABORT_EVERY}")
    os.sync()  # the last run's writes are not this one's writeback
    result, cpu, client = _driver(setup, [str(rdkperf), setup.bootstrap, topic,
                                          str(total // RECORD_SIZE), str(RECORD_SIZE),
                                          str(PARTITIONS), *settings])
    seconds = float(result["seconds"])
    gb = result["bytes"] / 1e9
    txns = int(result.get("transactions", 0))
    ends, flushes = float(result.get("end_seconds", 0)), float(result.get("flush_seconds", 0))
    per_txn = 1000 / max(txns, 1)
    return Run(result["bytes"] / seconds / 1e6, cpu / gb, client / gb,
               transactions=txns, aborted_records=int(result.get("aborted_records", 0)),
               end_share=ends / seconds, flush_ms=flushes * per_txn,
               commit_ms=(ends - flushes) * per_txn,
               first_ack_ms=float(result.get("first_ack_seconds", 0)) * per_txn)


def consume(rdkperf: Path, setup: Setup, topic: str, isolation: str, records: int) -> Run:
    """Read the topic from its beginning until `records` records have arrived."""
    result, cpu, client = _driver(setup, [str(rdkperf), "-consume", setup.bootstrap, topic,
                                          str(PARTITIONS), str(records), *CONSUMER_SETTINGS,
                                          f"isolation.level={isolation}"])
    seconds = max(result["last_at"] - result["first_at"], 1e-9)
    crossed = (result["last_offsets"] - result["first_offsets"]) * RECORD_SIZE
    delivered = result["bytes"] - result["first_bytes"]
    gb = result["last_offsets"] * RECORD_SIZE / 1e9
    return Run(crossed / seconds / 1e6, cpu / gb, client / gb,
               delivered_mb_s=delivered / seconds / 1e6)


def _create_topics(setup: Setup, topics: Sequence[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": setup.bootstrap})
    config = {"min.insync.replicas": "2"} if setup.replication == 3 else {}
    futures = admin.create_topics([NewTopic(t, PARTITIONS, setup.replication, config=config)
                                   for t in topics])
    for future in futures.values():
        future.result(60)
    deadline = time.monotonic() + 60
    while True:  # every partition led and its ISR full before the clock starts
        described = admin.list_topics(timeout=10).topics
        if all(t in described and len(described[t].partitions) == PARTITIONS
               and all(p.leader >= 0 and len(p.isrs) == setup.replication
                       for p in described[t].partitions.values()) for t in topics):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics {topics} not ready in 60 s")
        time.sleep(0.2)


def _pair(first: str, second: str, index: int) -> tuple[str, str]:
    return (first, second) if index % 2 == 0 else (second, first)


def rounds(rdkperf: Path, setup: Setup, count: int, total: int, pairs: int, aborts: bool,
           log: Callable[[str], None]) -> list[dict[str, Run]]:
    """Samples of runs made side by side, by row ("produce <mode>", "consume <mode>
    <isolation>"): per round one of the produce runs, then `pairs` of the consume runs."""
    # warm-up: __transaction_state's creation, first segments, the code paths
    warm = f"txn-bench-{setup.name}-warm"
    _create_topics(setup, [warm])
    for mode in (IDEMPOTENT, TRANSACTIONAL):
        produce(rdkperf, setup, warm, mode, 8 * MIB)
    s.delete_topics(setup.bootstrap, [warm])
    s.settle(setup.data_dirs)

    results = []
    for r in range(count):
        modes = [*_pair(IDEMPOTENT, TRANSACTIONAL, r)] + ([WITH_ABORTS] if aborts else [])
        made: dict[str, Run] = {}
        samples = [made]
        # Each produce run's topic is read (when transactional), deleted and the page
        # cache written back before the next produce: on these VMs a write into pages a
        # deleted file has just freed costs far less than into others (bench/broker.py),
        # and a run after another one's gigabytes measured that, not its producer: RF 3
        # runs second in their round ran at 0.59-0.74 of the first.
        for mode in modes:
            topic = f"txn-bench-{setup.name}-{mode.split(',')[-1].strip()}-r{r}"
            _create_topics(setup, [topic])
            made[f"produce {mode}"] = produce(rdkperf, setup, topic, mode, total)
            if mode != IDEMPOTENT:
                samples += _consume_pairs(rdkperf, setup, topic, mode, total,
                                          made[f"produce {mode}"].aborted_records, pairs,
                                          r * pairs)
            s.delete_topics(setup.bootstrap, [topic])
            s.settle(setup.data_dirs)
        results += samples
        log(f"transactions: {setup.name} round {r + 1}/{count}: " + ", ".join(
            f"{name} {run.mb_s:.0f} MB/s" for sample in samples
            for name, run in sample.items()))
    return results


def _consume_pairs(rdkperf: Path, setup: Setup, topic: str, mode: str, total: int,
                   aborted_records: int, pairs: int, first: int) -> list[dict[str, Run]]:
    """`pairs` samples of the two isolation levels reading the topic, in alternating
    order (the first sample's order by `first`)."""
    samples = []
    for k in range(pairs):
        sample = {}
        for isolation in _pair(UNCOMMITTED, COMMITTED, first + k):
            records = total // RECORD_SIZE + PARTITIONS  # with the warm-up records
            if isolation == COMMITTED:
                records -= aborted_records
            sample[f"consume {mode} {isolation}"] = consume(rdkperf, setup, topic,
                                                            isolation, records)
        samples.append(sample)
    return samples


# -- the brokers ----------------------------------------------------------------------------


def _brokers(workdir: Path, connect: str, count: int) -> list[Any]:
    from moldau.devcluster.brokers import BrokerProcess

    replication = "3" if count == 3 else "1"
    properties = {**s.AUTOTUNED_SOCKETS, "num.partitions": str(PARTITIONS),
                  "log.segment.bytes": str(1 << 30), "file.delete.delay.ms": "1000",
                  "offsets.topic.replication.factor": replication,
                  "transaction.state.log.replication.factor": replication,
                  "transaction.state.log.min.isr": "2" if count == 3 else "1",
                  "auto.leader.rebalance.enable": "false"}
    return [BrokerProcess(str(workdir / f"broker{i}"), i, connect, properties=properties)
            for i in range(1, count + 1)]


def _measure(rdkperf: Path, workdir: Path, connect: str, count: int, plan: Plan,
             log: Callable[[str], None]) -> list[dict[str, Run]]:
    brokers = _brokers(workdir, connect, count)
    try:
        for broker in brokers:
            broker.start()
        pids = [broker.pid() for broker in brokers]
        if None in pids:
            raise RuntimeError("a broker exited at startup")
        setup = Setup("one" if count == 1 else "three", ",".join(b.bootstrap for b in brokers),
                      [p for p in pids if p is not None], [b.data_dir for b in brokers],
                      1 if count == 1 else 3)
        if count == 1:
            return rounds(rdkperf, setup, plan.rounds, plan.run_bytes, plan.consume_pairs,
                          True, log)
        return rounds(rdkperf, setup, plan.cluster_rounds, plan.cluster_run_bytes,
                      plan.consume_pairs, False, log)
    finally:
        for broker in brokers:
            broker.stop()


def run() -> str:
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from _peer_servers import build_rdkperf

    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble

    clock = s.Stopwatch()
    load = OtherLoad()
    plan = Plan.current()
    rdkperf = build_rdkperf()
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-transactions-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        one = _measure(rdkperf, workdir / "one", ensemble.connect_string + "/one", 1, plan, log)
        three = _measure(rdkperf, workdir / "three", ensemble.connect_string + "/three", 3,
                         plan, log)
    finally:
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    load.stop()
    return _report(clock, plan, one, three, load)


# -- the section ----------------------------------------------------------------------------


def _spread(values: Sequence[float]) -> str:
    ordered = sorted(values)
    n = len(ordered)
    if n < 4:
        return f"{median(ordered):.2f} (rounds: {', '.join(f'{v:.2f}' for v in values)})"
    return (f"{median(ordered):.2f} (quartiles {ordered[n // 4]:.2f} and "
            f"{ordered[(3 * n) // 4]:.2f}, all from {ordered[0]:.2f} to {ordered[-1]:.2f})")


def _runs(results: list[dict[str, Run]], row: str) -> list[Run]:
    return [sample[row] for sample in results if row in sample]


def _ratios(results: list[dict[str, Run]], peer: str, row: str,
            figure: Callable[[Run], float] = lambda run: run.mb_s) -> list[float]:
    """row / peer in each sample that has both: runs made side by side."""
    return [figure(r[row]) / figure(r[peer]) for r in results if row in r and peer in r]


def _rate_cells(results: list[dict[str, Run]], row: str) -> list[str]:
    runs = _runs(results, row)
    rates = [run.mb_s for run in runs]
    return [f"{median(rates):.0f}", f"{min(rates):.0f}-{max(rates):.0f}",
            f"{median(run.cpu_s_per_gb for run in runs):.2f}",
            f"{median(run.client_cpu_s_per_gb for run in runs):.2f}"]


def _produce_rows(setup: str, results: list[dict[str, Run]]) -> list[list[str]]:
    rows = []
    for mode in (IDEMPOTENT, TRANSACTIONAL, WITH_ABORTS):
        name = f"produce {mode}"
        runs = _runs(results, name)
        if not runs:
            continue
        txns = (f"{median(run.transactions for run in runs):.0f}: "
                f"{median(run.flush_ms for run in runs):.0f} + "
                f"{median(run.commit_ms for run in runs):.0f}, "
                f"{median(run.first_ack_ms for run in runs):.0f}"
                if mode != IDEMPOTENT else "-")
        ratio = ("1.00" if mode == IDEMPOTENT
                 else f"{median(_ratios(results, f'produce {IDEMPOTENT}', name)):.2f}")
        rows.append([setup, mode, *_rate_cells(results, name), txns, ratio])
    return rows


def _consume_rows(setup: str, results: list[dict[str, Run]]) -> list[list[str]]:
    rows = []
    for mode in (TRANSACTIONAL, WITH_ABORTS):
        for isolation in (UNCOMMITTED, COMMITTED):
            name = f"consume {mode} {isolation}"
            if not _runs(results, name):
                continue
            data = ("committed transactions" if mode == TRANSACTIONAL
                    else f"1 in {ABORT_EVERY} transactions aborted")
            delivered = median(run.delivered_mb_s for run in _runs(results, name))
            ratio = ("1.00" if isolation == UNCOMMITTED else
                     f"{median(_ratios(results, f'consume {mode} {UNCOMMITTED}', name)):.2f}")
            rows.append([setup, data, isolation, *_rate_cells(results, name),
                         f"{delivered:.0f}", ratio])
    return rows


def _ratio_lines(setup: str, results: list[dict[str, Run]]) -> list[str]:
    def cpu(run: Run) -> float:
        return run.cpu_s_per_gb

    lines = [
        f"- {setup}, transactional / idempotent produce MB/s: "
        f"{_spread(_ratios(results, f'produce {IDEMPOTENT}', f'produce {TRANSACTIONAL}'))}; "
        f"brokers' CPU per GB: "
        f"{_spread(_ratios(results, f'produce {IDEMPOTENT}', f'produce {TRANSACTIONAL}', cpu))}.",
    ]
    for mode in (TRANSACTIONAL, WITH_ABORTS):
        peer, row = f"consume {mode} {UNCOMMITTED}", f"consume {mode} {COMMITTED}"
        if not _runs(results, row):
            continue
        data = "committed data" if mode == TRANSACTIONAL else "with aborted transactions"
        lines.append(f"- {setup}, read_committed / read_uncommitted ({data}), log MB/s: "
                     f"{_spread(_ratios(results, peer, row))}; brokers' CPU per GB: "
                     f"{_spread(_ratios(results, peer, row, cpu))}.")
    return lines


def _verdicts(results: list[dict[str, Run]]) -> tuple[float, float]:
    produced = median(_ratios(results, f"produce {IDEMPOTENT}", f"produce {TRANSACTIONAL}"))
    consumed = median(_ratios(results, f"consume {TRANSACTIONAL} {UNCOMMITTED}",
                              f"consume {TRANSACTIONAL} {COMMITTED}"))
    return produced, consumed


def _verdict(ratio: float, goal: float) -> str:
    return f"{ratio:.2f} ({'met' if ratio >= goal else '**missed**'})"


def _report(clock: s.Stopwatch, plan: Plan, one: list[dict[str, Run]],
            three: list[dict[str, Run]], load: OtherLoad) -> str:
    setups = (("1 broker", one), ("3 brokers, RF 3", three))
    goals = []
    for setup, results in setups:
        produced, consumed = _verdicts(results)
        goals.append(f"{setup}: transactional produce at {_verdict(produced, GOALS['produce'])}"
                     f" of idempotent, read_committed at "
                     f"{_verdict(consumed, GOALS['consume'])} of read_uncommitted")
    return "\n".join([
        "## Transactions against idempotence (issue 38)",
        "",
        f"librdkafka {_librdkafka_c()} in C (bench/drivers/rdkperf), 1 KiB records over "
        f"{PARTITIONS} partitions, acks=all, batch.size 1 MiB, linger.ms 5, a "
        f"{QUEUE_KB // 1024} MiB producer queue (the Java producer's buffer.memory; with "
        "librdkafka's 1 GiB a whole run would fit in two transactions). Idempotent: "
        "enable.idempotence. Transactional: the same plus a transactional.id, a transaction "
        f"committed once it is {COMMIT_MS} ms old (as kafka-producer-perf-test's "
        "--transaction-duration-ms, checked every 256 records); the third produce row "
        f"aborts every {ABORT_EVERY}th transaction instead, after flushing its records so "
        "that they are in the log. The clock starts once a first record per partition is "
        "delivered (in a committed transaction when transactional), so connecting and "
        "InitProducerId are not timed. Consumers: `rdkperf -consume` (one process, all "
        "partitions, from the beginning), read_uncommitted and read_committed over the same "
        "topic. Consume MB/s is the log range crossed from the first batch to the last "
        "(offsets x 1 KiB): a read_committed consumer crosses the aborted records without "
        "delivering them; the delivered column is what the application got. "
        f"1 broker: {plan.rounds} rounds of {plan.run_bytes / MIB:.0f} MiB per run; 3 "
        f"brokers (RF 3, min.insync.replicas 2, `__transaction_state` too): "
        f"{plan.cluster_rounds} rounds of {plan.cluster_run_bytes / MIB:.0f} MiB. Each "
        "round: the idempotent and transactional runs in alternating order, each on a fresh "
        f"topic that {plan.consume_pairs} pairs of consume runs then read (transactional "
        "topics; the two isolation levels alternating too), deleted with the page cache "
        "written back before the next produce (a write into pages a deleted file has just "
        "freed is cheaper on these VMs; a run after another's data measured that). "
        "Figures are "
        "medians over the runs, ratios the median of the ratios of runs made side by side "
        "(a round's produce runs, a consume pair). The CPU columns are CPU seconds per GB "
        "of records: the brokers' (their CPU-time clocks) and the driver process's "
        "(librdkafka's threads included).",
        "",
        _load_note(load),
        "",
        s.table(["setup", "producer", "median MB/s", "runs' MB/s", "brokers' CPU s per GB",
                 "driver's CPU s per GB",
                 "transactions per run: ms each to flush + commit, begin to first ack",
                 "ratio to idempotent"],
                _produce_rows("1 broker", one) + _produce_rows("3 brokers, RF 3", three)),
        "",
        s.table(["setup", "data", "isolation", "median log MB/s", "runs' MB/s",
                 "brokers' CPU s per GB", "consumer's CPU s per GB", "delivered MB/s",
                 "ratio to read_uncommitted"],
                _consume_rows("1 broker", one) + _consume_rows("3 brokers, RF 3", three)),
        "",
        *_ratio_lines("1 broker", one),
        *_ratio_lines("3 brokers, RF 3", three),
        "",
        "Goals (issue 38: transactional produce, commit every 100 ms, at least "
        f"{GOALS['produce']:.0%} of idempotent; read_committed at least {GOALS['consume']:.0%} "
        f"of read_uncommitted), medians of the side-by-side ratios: {'; '.join(goals)}.",
        "",
        s.environment(clock, ["confluent-kafka"]),
    ])


def _librdkafka_c() -> str:
    out = subprocess.run(["pkg-config", "--modversion", "rdkafka"], capture_output=True,
                         text=True)
    return out.stdout.strip() or "?"


if __name__ == "__main__":
    print(run())
