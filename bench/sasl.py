"""What SASL costs (issue 35, "Speed"): one broker with an SSL and a SASL_SSL listener on
the same key store (SCRAM-SHA-512, the user's credential in ZooKeeper), measured in the
same run.

1. Throughput: librdkafka (confluent-kafka, in this process) produces
   MOLDAU_BENCH_SASL_BYTES (default 128 MiB) of 1 KiB records per run (acks=1,
   batch.size 1 MiB, linger.ms 5, 6 partitions) and a consumer reads them back, over
   SSL and over SASL_SSL in interleaved pairs (ABBA). Figures: the medians of MB/s, the
   median of the pairs' SASL_SSL / SSL ratios, and the broker's CPU per GB from its
   CPU-time clock. Authentication happens once per connection, before the clock starts,
   so both sides should run at the speed of TLS; the goal is SASL_SSL at 95% of SSL or
   more.
2. A storm of 1,000 new SCRAM connections (each a TLS handshake, ApiVersions,
   SaslHandshake and the SCRAM exchange, then closed; Moldau's own client,
   bench/drivers/sasl_storm.py, in STORM_PROCESSES processes so their PBKDF2 does not
   share an interpreter with the producer) while a paced producer
   (bench/drivers/sasl_producer.py, acks=1, linger.ms 0) sends over SASL_SSL at half the
   maximum rate that the same driver reached earlier in the run. Figures: the producer's
   delivery latency p50/p99 over the storm and over runs without it (interleaved), the
   handshakes per second, the broker's successful-authentication-total (its metrics
   endpoint) and what the storm cost the broker's and the clients' CPUs.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import IO

import _support as s

ORDER = 46  # next to the metrics overhead: another cost of a broker feature
MIB = 1 << 20
PARTITIONS = 6
RECORD_SIZE = 1024
RUN_BYTES = int(os.environ.get("MOLDAU_BENCH_SASL_BYTES", 128 * MIB))
PAIRS = 11  # short runs, many pairs: a busy neighbour hits few of them
GOAL_RATIO = 0.95  # issue 35: SASL_SSL at least 95% of SSL
MECHANISM = "SCRAM-SHA-512"

STORM_CONNECTIONS = 1000
STORM_PROCESSES = int(os.environ.get("MOLDAU_BENCH_SASL_STORM_PROCESSES", 2))
STORM_CONCURRENCY = 4  # connections under way at once in each storm process
STORM_ROUNDS = 3  # storm runs, each paired with a run without the storm (ABBA)
MAX_SECONDS = 5.0  # the producer's maximum-rate run
BASELINE_SECONDS = 5.0  # the window of a run without the storm
SETTLE_SECONDS = 1.0  # the paced producer runs this long before a window opens
PACING_SLEEP = 100e-6  # as the broker suite's latency driver
_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
_DRIVERS = Path(__file__).resolve().parent / "drivers"


@dataclass(frozen=True)
class Plan:
    """How long the suite runs: the full figures, or a short smoke test (--quick)."""

    pairs: int
    run_bytes: int
    storm_connections: int
    storm_rounds: int
    max_seconds: float
    baseline_seconds: float

    @classmethod
    def current(cls) -> Plan:
        if s.RUNS < 10:  # run.py --quick
            return cls(2, 16 * MIB, 200, 1, 2.0, 2.0)
        return cls(PAIRS, RUN_BYTES, STORM_CONNECTIONS, STORM_ROUNDS, MAX_SECONDS,
                   BASELINE_SECONDS)


@dataclass(frozen=True)
class Setup:
    """The running broker and what clients need to reach its two TLS listeners."""

    pid: int
    ssl_port: int
    sasl_port: int
    ca_file: str
    user: str
    password: str
    metrics_port: int

    def client_config(self, protocol: str) -> dict[str, str]:
        """librdkafka's settings for one listener."""
        port = self.sasl_port if protocol == "SASL_SSL" else self.ssl_port
        config = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": protocol,
                  "ssl.ca.location": self.ca_file}
        if protocol == "SASL_SSL":
            config |= {"sasl.mechanism": MECHANISM, "sasl.username": self.user,
                       "sasl.password": self.password}
        return config


@dataclass(frozen=True)
class Transfer:
    """One produce or consume run: its rate and the broker's CPU for it."""

    mb_s: float
    cpu_s_per_gb: float


@dataclass(frozen=True)
class StormShare:
    """What one storm process reports (bench/drivers/sasl_storm.py)."""

    connections: int  # authenticated
    failed: int
    first_error: str | None
    started: float  # CLOCK_MONOTONIC seconds of its first connect
    finished: float  # and of its last close
    cpu_s: float
    setup_ms: list[float]  # each connection's connect-to-authenticated

    @classmethod
    def from_json(cls, text: str) -> StormShare:
        data = json.loads(text)
        return cls(int(data["connections"]), int(data["failed"]), data["first_error"],
                   float(data["started"]), float(data["finished"]), float(data["cpu_s"]),
                   [float(ms) for ms in data["setup_ms"]])


@dataclass(frozen=True)
class PacedRun:
    """One run of the paced producer, with or without the storm, over its window."""

    storm: bool
    window_s: float
    latencies_ms: list[float]  # of the records due in the window, sorted
    delivered: int  # records whose delivery report came in the window: the broker's work
    broker_cpu_s: float  # over the window
    authentications: int  # successful-authentication-total's rise over the window
    failed_authentications: int
    handshakes: int  # the storm's clients' count of authenticated connections
    storm_failures: int
    storm_cpu_s: float  # the storm processes' CPU over the storm
    setup_ms: list[float]  # each storm connection's connect-to-authenticated, sorted

    def quantile(self, q: float) -> float:
        return _quantile(self.latencies_ms, q)


# -- the broker ------------------------------------------------------------------------


def run() -> str:
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess, free_port
    from moldau.devcluster.sasl import ADMIN_USER, SCRAM_ITERATIONS, DevSasl

    clock = s.Stopwatch()
    plan = Plan.current()
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-sasl-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()
    broker: BrokerProcess | None = None
    try:
        zookeeper = ensemble.connect_string + "/sasl"
        sasl = DevSasl(workdir, MECHANISM)
        sasl.prepare()
        sasl.register_admin(zookeeper)  # before the broker starts: it loads users at startup
        plaintext, ssl_port, sasl_port, metrics_port = (free_port() for _ in range(4))
        # the dev cluster's PLAINTEXT and SASL_SSL listeners, and SSL on the same key store
        properties = sasl.broker_properties(plaintext, sasl_port)
        properties["listeners"] += f",SSL://127.0.0.1:{ssl_port}"
        properties |= {"num.partitions": str(PARTITIONS),
                       "log.segment.bytes": str(max(plan.run_bytes // PARTITIONS, MIB)),
                       "log.retention.bytes": str(2 * plan.run_bytes // PARTITIONS),
                       "log.retention.check.interval.ms": "5000",
                       # the first check too (Kafka's default waits 30 s after startup)
                       "log.initial.task.delay.ms": "5000",
                       **s.AUTOTUNED_SOCKETS}
        broker = BrokerProcess(str(workdir / "broker"), 1, zookeeper, port=plaintext,
                               properties=properties,
                               env={"MOLDAU_METRICS_PORT": str(metrics_port)})
        broker.start()
        pid = broker.pid()
        if pid is None:
            raise RuntimeError(f"the broker exited at startup:\n{broker.tail()}")
        setup = Setup(pid, ssl_port, sasl_port, str(sasl.tls.ca_cert), ADMIN_USER,
                      sasl.admin_password(), metrics_port)
        transfers = _throughput_pairs(setup, plan)
        max_rate = _max_rate(setup, plan)
        paced = _storm_rounds(setup, plan, max_rate / 2)
    finally:
        if broker is not None:
            broker.stop()
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return _report(clock, plan, SCRAM_ITERATIONS, transfers, max_rate, paced)


def _cpu_ns(pid: int) -> int:
    """Nanoseconds the process (all its threads) spent on a CPU: its CPU-time clock
    (clock_getcpuclockid), exact where /proc's ticks are 10 ms."""
    clock = ctypes.c_int()
    if _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
        raise OSError(f"no CPU clock for process {pid}: has the broker exited?")
    return time.clock_gettime_ns(clock.value)


def _authentication_totals(setup: Setup) -> tuple[int, int]:
    """The SASL_SSL listener's successful- and failed-authentication-total."""
    beans = s.jmx_beans(setup.metrics_port, "kafka.server:type=socket-server-metrics,*")
    for bean in beans:
        # the listener's connection-accept bean has the same listener key, without these
        if (",listener=SASL_SSL," in bean["name"] + ","
                and "successful-authentication-total" in bean):
            return (int(bean["successful-authentication-total"]),
                    int(bean["failed-authentication-total"]))
    raise RuntimeError("the broker's metrics have no socket-server-metrics for the "
                       f"SASL_SSL listener; beans: {[b['name'] for b in beans]}")


# -- 1. throughput, SSL against SASL_SSL ---------------------------------------------------


def _throughput_pairs(setup: Setup, plan: Plan) -> dict[str, list[tuple[Transfer, Transfer]]]:
    """Per listener, each run's (produce, consume), in ABBA order over the pairs."""
    results: dict[str, list[tuple[Transfer, Transfer]]] = {"SSL": [], "SASL_SSL": []}
    for protocol in results:  # warm-up: topic creation, first segments, TLS code paths
        _produce_and_consume(setup, protocol, 8 * MIB)
    for i in range(plan.pairs):
        order = ("SSL", "SASL_SSL") if i % 2 == 0 else ("SASL_SSL", "SSL")
        for protocol in order:
            results[protocol].append(_produce_and_consume(setup, protocol, plan.run_bytes))
    return results


def _produce_and_consume(setup: Setup, protocol: str, total: int) -> tuple[Transfer, Transfer]:
    """Produce `total` bytes of 1 KiB records to the listener's topic, then read them back
    from where this run's records start."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    config = setup.client_config(protocol)
    topic = f"sasl-bench-{protocol.lower()}"
    value = os.urandom(RECORD_SIZE)
    count = total // RECORD_SIZE
    producer = Producer(config | {"acks": 1, "linger.ms": 5, "batch.size": 1 << 20,
                                  "compression.type": "none",
                                  "queue.buffering.max.kbytes": 1 << 20,
                                  "queue.buffering.max.messages": 2_000_000})
    # connected, authenticated and the topic known before the clock starts
    s.produce_all(producer, topic, value, PARTITIONS, PARTITIONS)
    consumer = Consumer(config | {"group.id": "sasl-bench", "enable.auto.commit": False,
                                  "fetch.max.bytes": 52428800,
                                  "max.partition.fetch.bytes": 10485760,
                                  "queued.max.messages.kbytes": 1 << 20})
    starts = [TopicPartition(topic, p, consumer.get_watermark_offsets(
        TopicPartition(topic, p), timeout=30)[1]) for p in range(PARTITIONS)]

    cpu0, t0 = _cpu_ns(setup.pid), time.perf_counter()
    s.produce_all(producer, topic, value, count, PARTITIONS)
    produced = Transfer(total / (time.perf_counter() - t0) / 1e6,
                        (_cpu_ns(setup.pid) - cpu0) / 1e9 / (count * RECORD_SIZE / 1e9))

    cpu0 = _cpu_ns(setup.pid)
    consumer.assign(starts)
    got, first_at, first_got, last_at = 0, 0.0, 0, 0.0
    deadline = time.perf_counter() + 600
    while got < count:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{protocol}: consumed {got} of {count} records in 600 s")
        # no more than is still due: a batch that cannot fill waits out the timeout
        batch = consumer.consume(min(10_000, count - got), 1.0)
        for message in batch:
            if message.error() is not None:
                raise RuntimeError(f"{protocol}: consume failed: {message.error()}")
        if batch:
            got += len(batch)
            last_at = time.perf_counter()
            if not first_got:  # the rate counts from the first batch, as consume_share.py
                first_at, first_got = last_at, got
    consumed_cpu = (_cpu_ns(setup.pid) - cpu0) / 1e9
    consumer.close()
    fetched = (got - first_got) * RECORD_SIZE
    consumed = Transfer(fetched / max(last_at - first_at, 1e-9) / 1e6,
                        consumed_cpu / (got * RECORD_SIZE / 1e9))
    return produced, consumed


# -- 2. the storm ---------------------------------------------------------------------------


def _producer_command(setup: Setup, mode: str, *args: str) -> list[str]:
    return [sys.executable, str(_DRIVERS / "sasl_producer.py"),
            json.dumps(setup.client_config("SASL_SSL")), "sasl-bench-paced", str(PARTITIONS),
            str(RECORD_SIZE), mode, *args]


def _max_rate(setup: Setup, plan: Plan) -> float:
    """Records a second the paced driver's producer reaches flat out over SASL_SSL."""
    out = subprocess.run(_producer_command(setup, "max", str(plan.max_seconds)),
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"sasl_producer.py max failed: {out.stderr.strip()}")
    result = json.loads(out.stdout)
    return float(result["records"]) / float(result["seconds"])


def _storm_rounds(setup: Setup, plan: Plan, rate: float) -> list[PacedRun]:
    """Runs with and without the storm, in ABBA order."""
    runs = []
    for i in range(plan.storm_rounds):
        for storm in ((False, True) if i % 2 == 0 else (True, False)):
            runs.append(_paced_run(setup, plan, rate, storm))
    return runs


def _start_storm(setup: Setup, connections: int) -> list[subprocess.Popen[str]]:
    """The storm's processes, each with its share, started and waiting for "go"."""
    shares = [connections // STORM_PROCESSES + (i < connections % STORM_PROCESSES)
              for i in range(STORM_PROCESSES)]
    procs = [subprocess.Popen(
        [sys.executable, str(_DRIVERS / "sasl_storm.py"), "127.0.0.1", str(setup.sasl_port),
         setup.ca_file, setup.user, setup.password, str(share), str(STORM_CONCURRENCY)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for share in shares]
    for proc in procs:
        _expect_line(proc, "ready", "sasl_storm.py")
    return procs


def _expect_line(proc: subprocess.Popen[str], expected: str, name: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != expected:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise RuntimeError(f"{name} said {line!r} instead of {expected!r}: {err.strip()}")


def _send_line(stream: IO[str] | None, line: str) -> None:
    assert stream is not None
    stream.write(line + "\n")
    stream.flush()


def _paced_run(setup: Setup, plan: Plan, rate: float, storm: bool) -> PacedRun:
    """The paced producer at `rate` records a second; its latencies over a window that
    is the storm (first connect to last close) or BASELINE_SECONDS without one."""
    storm_procs = _start_storm(setup, plan.storm_connections) if storm else []
    samples = Path(tempfile.mkstemp(prefix="moldau-bench-sasl-", suffix=".bin")[1])
    producer = subprocess.Popen(
        _producer_command(setup, "paced", f"{rate:.0f}", str(samples), str(PACING_SLEEP)),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _expect_line(producer, "ready", "sasl_producer.py")
        time.sleep(SETTLE_SECONDS)
        authentications0 = _authentication_totals(setup)
        cpu0, opened = _cpu_ns(setup.pid), time.monotonic()
        if storm:
            for proc in storm_procs:
                _send_line(proc.stdin, "go")
            clients = [_storm_result(proc) for proc in storm_procs]
            start = min(c.started for c in clients)
            end = max(c.finished for c in clients)
        else:
            time.sleep(plan.baseline_seconds)
            clients, start, end = [], opened, time.monotonic()
        broker_cpu = (_cpu_ns(setup.pid) - cpu0) / 1e9
        authentications1 = _authentication_totals(setup)
        _send_line(producer.stdin, "stop")
        out, err = producer.communicate(timeout=300)
        if producer.returncode != 0:
            raise RuntimeError(f"sasl_producer.py paced failed: {err.strip()}")
        summary = json.loads(out)
        if summary["failed"]:
            raise RuntimeError(f"the paced producer lost {summary['failed']} records: "
                               f"{summary['first_error']}")
        latencies, delivered = _window_samples(samples, start, end)
    finally:
        for proc in [producer, *storm_procs]:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        samples.unlink(missing_ok=True)
    return PacedRun(
        storm=storm, window_s=end - start, latencies_ms=latencies, delivered=delivered,
        broker_cpu_s=broker_cpu,
        authentications=authentications1[0] - authentications0[0],
        failed_authentications=authentications1[1] - authentications0[1],
        handshakes=sum(c.connections for c in clients),
        storm_failures=sum(c.failed for c in clients),
        storm_cpu_s=sum(c.cpu_s for c in clients),
        setup_ms=sorted(ms for c in clients for ms in c.setup_ms))


def _storm_result(proc: subprocess.Popen[str]) -> StormShare:
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"sasl_storm.py failed: {err.strip()}")
    result = StormShare.from_json(out)
    if result.failed:
        raise RuntimeError(f"{result.failed} storm connections failed, the first with: "
                           f"{result.first_error}")
    return result


def _window_samples(path: Path, start: float, end: float) -> tuple[list[float], int]:
    """The latencies (ms, sorted) of the records due in [start, end], and how many records
    were delivered in it; the file holds (due time, latency) pairs of doubles as
    sasl_producer.py writes them."""
    pairs = array("d")
    pairs.frombytes(path.read_bytes())
    dues, latencies = pairs[0::2], pairs[1::2]
    in_window = sorted(latency * 1000 for due, latency in zip(dues, latencies, strict=True)
                       if start <= due <= end)
    delivered = sum(start <= due + latency <= end
                    for due, latency in zip(dues, latencies, strict=True))
    return in_window, delivered


def _quantile(ordered: Sequence[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _pbkdf2_seconds(iterations: int, calls: int = 5) -> float:
    """CPU seconds of one SCRAM-SHA-512 client's salted password at the credential's
    iterations, the median of s.RUNS runs of `calls`. CPU time, not wall time: it is
    compared with the storm clients' CPU per connection, and a busy neighbour stretches
    wall time only."""
    import hashlib

    salt = os.urandom(16)
    runs = []
    for _ in range(s.RUNS):
        started = time.process_time()
        for _ in range(calls):
            hashlib.pbkdf2_hmac("sha512", b"password", salt, iterations)
        runs.append((time.process_time() - started) / calls)
    return median(runs)


# -- the section ----------------------------------------------------------------------------


def _spread(values: Sequence[float], digits: int = 3) -> str:
    ordered = sorted(values)
    n = len(ordered)
    return (f"{median(ordered):.{digits}f} (quartiles {ordered[n // 4]:.{digits}f} and "
            f"{ordered[(3 * n) // 4]:.{digits}f}, all from {ordered[0]:.{digits}f} to "
            f"{ordered[-1]:.{digits}f})")


def _report(clock: s.Stopwatch, plan: Plan, iterations: int,
            transfers: Mapping[str, list[tuple[Transfer, Transfer]]], max_rate: float,
            paced: list[PacedRun]) -> str:
    ssl, sasl = transfers["SSL"], transfers["SASL_SSL"]
    ratios = {kind: [b[k].mb_s / a[k].mb_s for a, b in zip(ssl, sasl, strict=True)]
              for k, kind in enumerate(("produce", "consume"))}
    cpu_ratios = {kind: [b[k].cpu_s_per_gb / a[k].cpu_s_per_gb
                         for a, b in zip(ssl, sasl, strict=True)]
                  for k, kind in enumerate(("produce", "consume"))}
    rows = []
    for k, kind in enumerate(("produce", "consume")):
        for protocol, runs in (("SSL", ssl), (f"SASL_SSL ({MECHANISM})", sasl)):
            rates = [r[k].mb_s for r in runs]
            rows.append([kind, protocol, f"{median(rates):.0f}",
                         f"{min(rates):.0f}-{max(rates):.0f}",
                         f"{median(r[k].cpu_s_per_gb for r in runs):.2f}"])
    met = all(median(values) >= GOAL_RATIO for values in ratios.values())
    return "\n".join([
        "## SASL_SSL against SSL (issue 35)",
        "",
        f"One broker with an SSL and a SASL_SSL listener on the same key store (EC P-256, "
        f"TLS as negotiated by both clients), SASL_SSL with {MECHANISM} and the user's "
        f"credential in ZooKeeper ({iterations:,} iterations, as the dev cluster stores it: "
        "Kafka's minimum and kafka-configs' default). Everything (ZooKeeper, broker, "
        "clients) shares the machine.",
        "",
        "### Throughput",
        "",
        f"confluent-kafka in the bench's process produces {plan.run_bytes / MIB:.0f} MiB "
        f"of 1 KiB records per run (acks=1, batch.size 1 MiB, linger.ms 5, {PARTITIONS} "
        "partitions), then a consumer reads them back (rate from its first batch to the "
        f"last); {plan.pairs} interleaved pairs (ABBA) of SSL and SASL_SSL runs. Clients "
        "connect and authenticate before the clock starts: what is measured is the "
        "authenticated connection's steady state, which SASL should leave at the speed "
        "of TLS. Broker CPU: its CPU-time clock (all threads) over the run.",
        "",
        s.table(["run", "listener", "median MB/s", "range MB/s", "broker CPU s per GB"],
                rows),
        "",
        f"- Produce, SASL_SSL / SSL, median of the pairs' ratios: {_spread(ratios['produce'])}"
        f"; broker CPU per GB: {_spread(cpu_ratios['produce'])}.",
        f"- Consume, SASL_SSL / SSL: {_spread(ratios['consume'])}; broker CPU per GB: "
        f"{_spread(cpu_ratios['consume'])}.",
        "",
        "The ratios of MB/s carry the machine's noise (their quartiles say how much on this "
        "run); the ratios of the broker's CPU per GB hardly do, and a broker bound by its "
        "one event loop's CPU runs at the inverse of that ratio.",
        "",
        f"Goal (issue 35): produce and consume over SASL_SSL at least "
        f"{GOAL_RATIO * 100:.0f}% of SSL (medians of the pairs' ratios): "
        f"{'met' if met else 'NOT met'} on this run.",
        "",
        _storm_section(plan, iterations, max_rate, paced),
        "",
        s.environment(clock, ["confluent-kafka"]),
    ])


def _storm_section(plan: Plan, iterations: int, max_rate: float,
                   paced: list[PacedRun]) -> str:
    quiet = [r for r in paced if not r.storm]
    storms = [r for r in paced if r.storm]
    rate = max_rate / 2
    # The broker's CPU per produced record, from the runs without the storm: what it spent
    # during a storm above that, for the records it took in meanwhile, went to the new
    # connections. Per record, not per second: a producer held back by the storm sends
    # less in its window.
    per_record = median(r.broker_cpu_s / max(r.delivered, 1) for r in quiet)
    producer_cpu = median(r.broker_cpu_s / r.window_s for r in quiet)
    per_handshake_ms = median((r.broker_cpu_s - per_record * r.delivered) / r.handshakes
                              for r in storms) * 1000
    per_handshake = (f"the broker spent {per_handshake_ms:.2f} ms of CPU per new connection "
                     "above what the records it took in meanwhile cost it without the storm"
                     if per_handshake_ms > 0 else
                     "the broker's CPU per new connection is not measurable on this run (it "
                     "spent less during the storm than the producer's records alone cost "
                     "it: the machine's other load dominated)")
    rows = [[("with" if r.storm else "without") + " the storm", f"{r.window_s:.2f}",
             f"{len(r.latencies_ms):,}", f"{r.quantile(0.5):.2f}", f"{r.quantile(0.99):.2f}",
             f"{r.quantile(0.999):.2f}", f"{r.broker_cpu_s / r.window_s * 100:.0f}%"]
            for r in paced]
    handshake_rates = [r.handshakes / r.window_s for r in storms]
    counted = ", ".join(f"{r.authentications:,}" for r in storms)
    failed = sum(r.failed_authentications for r in paced)
    client_cores = [r.storm_cpu_s / r.window_s for r in storms]
    client_ms = median(r.storm_cpu_s / r.handshakes for r in storms) * 1000
    pbkdf2_ms = _pbkdf2_seconds(iterations) * 1000
    setup = sorted(ms for r in storms for ms in r.setup_ms)
    p99 = {storm: median(r.quantile(0.99) for r in paced if r.storm is storm)
           for storm in (False, True)}
    p50 = {storm: median(r.quantile(0.5) for r in paced if r.storm is storm)
           for storm in (False, True)}
    return "\n".join([
        "### A storm of new SCRAM connections",
        "",
        f"First the paced producer's driver (bench/drivers/sasl_producer.py, confluent-kafka "
        f"in a process of its own, acks=1, linger.ms 0, 1 KiB records, {PARTITIONS} "
        f"partitions, over SASL_SSL, a delivery callback per record) ran flat out for "
        f"{plan.max_seconds:.0f} s: "
        f"{max_rate:,.0f} records/s ({max_rate * RECORD_SIZE / 1e6:.1f} MB/s). Then it ran "
        f"paced at half that, {rate:,.0f} records/s, in {len(paced)} runs alternating "
        f"(ABBA) between a quiet window of {plan.baseline_seconds:.0f} s and a storm of "
        f"{plan.storm_connections:,} new connections, each a TLS handshake, ApiVersions, "
        f"SaslHandshake and the {MECHANISM} exchange, then closed (Moldau's client, "
        f"bench/drivers/sasl_storm.py: {STORM_PROCESSES} processes, {STORM_CONCURRENCY} "
        "connections under way in each). Latency: from the record's due time to its "
        "delivery report (coordinated omission corrected), for the records due in the "
        "window (the storm's: its first connect to its last close).",
        "",
        s.table(["run", "window s", "records", "p50 ms", "p99 ms", "p99.9 ms",
                 "broker CPU"], rows),
        "",
        f"- Producer latency, medians over the runs: p50 {p50[False]:.2f} ms and p99 "
        f"{p99[False]:.2f} ms without the storm, p50 {p50[True]:.2f} ms and p99 "
        f"{p99[True]:.2f} ms during it.",
        f"- Handshakes per second: {_spread(handshake_rates, 0)} (authenticated "
        f"connections over the storm's window); the broker's "
        f"successful-authentication-total on the SASL_SSL listener rose by {counted} "
        f"(failed-authentication-total by {failed}).",
        f"- A connection's setup (connect to authenticated) as the storm's clients saw it: "
        f"p50 {_quantile(setup, 0.5):.1f} ms, p99 {_quantile(setup, 0.99):.1f} ms.",
        f"- CPU: {per_handshake} (the producer alone: {producer_cpu * 100:.0f}% of a "
        f"core, {per_record * 1e6:.0f} µs per record); the "
        f"storm's {STORM_PROCESSES} client processes used {_spread(client_cores, 2)} cores "
        f"(CPU seconds per second of the storm), {client_ms:.2f} ms of CPU per connection, "
        f"of which the PBKDF2 of the password that every Kafka client computes for each "
        f"new SCRAM connection takes {pbkdf2_ms:.2f} ms ({iterations:,} rounds of HMAC-SHA-512, "
        "CPU time in this process); the rest is the client's TLS handshake and its Python. "
        f"On this machine's {os.cpu_count()} cores the storm's clients, the producer and "
        "the broker compete: the handshake rate is bounded by all three.",
    ])


if __name__ == "__main__":
    print(run())
