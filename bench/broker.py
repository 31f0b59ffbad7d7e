"""Single-broker throughput and latency with librdkafka, next to the machine's own limits
measured in the same run.

Workloads (issue 4): one broker, one topic of 6 partitions, acks=1, producer batch.size
1 MiB and linger.ms 5; records of 100 B and 1 KiB; MOLDAU_BENCH_BYTES (default 2 GiB)
per run. Then a consumer reads the topic from the beginning. Each workload runs with two
drivers: confluent-kafka's Python API (the issue's driver: what a Python application
gets) and bench/drivers/rdkperf (C loops over librdkafka, as Kafka's own perf tools are
tight Java loops), whose small share of the 2 cores shows the broker's own capacity.
Latency at a fixed 20 MB/s of 1 KiB records with linger.ms 0, from the record's due time:
confluent-kafka to the delivery report, and `rdkperf -e2e` to the delivery report and to
a consumer's receipt.

The 1 KiB workloads and the latency runs are repeated ROUNDS times (fresh topics, each
deleted and the page cache written back once its produce and consume runs are done, so
no run writes next to the last one's data) and reported as medians
with the rounds' range: two runs of the same workload on an idle shared machine have
differed by up to 2x. The 100 B workloads run once.

Limits in the same run: loopback TCP bandwidth (iperf3) and a plain Python sink
(`recv_into` + `os.write` to a file in the broker's data dir) fed by `nc`, so the broker's
figures read against what Python and the machine can do at all.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _support as s
from _peer_servers import cpu_seconds

GIB = 1 << 30
PARTITIONS = 6
TOTAL_BYTES = int(os.environ.get("MOLDAU_BENCH_BYTES", 2 * GIB))
LATENCY_RATE = 20_000_000  # bytes/s
LATENCY_SECONDS = 10
PACING_SLEEP = 100e-6  # the latency drivers' pause between sending passes, as rdkperf -e2e
ROUNDS = int(os.environ.get("MOLDAU_BENCH_ROUNDS", 3))
CONSUMERS = 3  # consumer processes at once in the parallel consume rows (2 partitions each)
GOALS = {"produce_1k_mb_s": 400, "consume_mb_s": 800, "p99_ms": 5.0}
DEBIAN_PACKAGES = ["iperf3", "netcat-openbsd", "gcc", "pkg-config", "librdkafka-dev"]
HEADERS = {"librdkafka-dev": "/usr/include/librdkafka/rdkafka.h"}
PRODUCER_SETTINGS = ["acks=1", "linger.ms=5", "batch.size=1048576", "compression.type=none",
                     "queue.buffering.max.kbytes=1048576"]
CONSUMER_SETTINGS = ["fetch.max.bytes=52428800", "max.partition.fetch.bytes=10485760",
                     "queued.max.messages.kbytes=1048576"]


@dataclass
class Throughput:
    label: str
    records: int
    bytes: int
    seconds: float
    broker_cpu: float  # CPU seconds the broker used / wall seconds
    client_cpu: float = 0.0  # CPU seconds the driver's processes used / wall seconds
    # Consume rows: the bytes that arrived after the first batch, and the seconds from
    # it to the last, so the client's start (connecting, metadata, offset lookup; over
    # 0.5 s of librdkafka's offset-query timer) is left out, as kafka-consumer-perf-test
    # leaves the group join out of its fetch.MB.sec.
    fetched_bytes: int | None = None
    fetch_seconds: float | None = None

    @property
    def mb_s(self) -> float:
        """The row's rate: for consume rows, from the first batch on."""
        if self.fetched_bytes is None or not self.fetch_seconds:
            return self.whole_mb_s
        return self.fetched_bytes / self.fetch_seconds / 1e6

    @property
    def whole_mb_s(self) -> float:
        """From the start of the run (for consume rows: the assignment) to its end."""
        return self.bytes / self.seconds / 1e6

    @property
    def start_seconds(self) -> float | None:
        """Consume rows: from the assignment to the first batch."""
        return None if self.fetch_seconds is None else self.seconds - self.fetch_seconds

    @property
    def records_s(self) -> float:
        """At the row's rate (mb_s): the records are all of one size."""
        return self.mb_s * 1e6 * self.records / self.bytes


def _install_tools() -> None:
    commands = {"iperf3": "iperf3", "netcat-openbsd": "nc", "gcc": "gcc",
                "pkg-config": "pkg-config"}
    missing = [p for p in DEBIAN_PACKAGES
               if (shutil.which(commands[p]) is None if p in commands
                   else not Path(HEADERS[p]).exists())]
    if missing:
        listing = Path(tempfile.mkstemp(suffix=".txt")[1])
        listing.write_text("\n".join(missing) + "\n")
        subprocess.run([str(s.REPO / "scripts/install-debian-packages"), str(listing)],
                       check=False)
        listing.unlink()


def _driven(label: str, args: list[str], pid: int) -> Throughput:
    """Run an rdkperf mode that prints {"records", "bytes", "seconds"}; the broker's CPU
    share over the driver's whole run."""
    cpu0, client0, t0 = cpu_seconds(pid), _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    out = subprocess.run(args, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {out.stderr.strip()}")
    return _throughput(label, [json.loads(out.stdout)], (cpu_seconds(pid) - cpu0) / wall,
                       (_cpu(resource.RUSAGE_CHILDREN) - client0) / wall)


def _cpu(who: int) -> float:
    """User and system CPU seconds of this process (RUSAGE_SELF: with its client
    library's threads) or of its waited-for children."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _throughput(label: str, results: list[dict[str, Any]], cpu: float,
                client_cpu: float) -> Throughput:
    """One row from one or more driver processes' {"records", "bytes", "seconds"} and,
    for consumers, their "first_at", "first_bytes", "last_at" (CLOCK_MONOTONIC seconds):
    together they fetched from the earliest first batch to the latest last one."""
    t = Throughput(label, sum(r["records"] for r in results),
                   sum(r["bytes"] for r in results), max(r["seconds"] for r in results), cpu,
                   client_cpu)
    if all("first_at" in r for r in results):
        t.fetched_bytes = t.bytes - sum(r["first_bytes"] for r in results)
        t.fetch_seconds = (max(r["last_at"] for r in results)
                           - min(r["first_at"] for r in results))
    return t


def produce_c(rdkperf: Path, bootstrap: str, topic: str, size: int, total: int,
              pid: int) -> Throughput:
    return _driven(f"produce {size} B", [str(rdkperf), bootstrap, topic, str(total // size),
                                          str(size), str(PARTITIONS), *PRODUCER_SETTINGS], pid)


def _parallel(label: str, commands: list[list[str]], pid: int) -> Throughput:
    """Run consumer processes at once, each printing {"records", "bytes", "seconds"}: the
    broker's consume capacity when one client process is the limit."""
    cpu0, client0, t0 = cpu_seconds(pid), _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for command in commands]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"{commands[0][0]} failed: {err.strip()}")
        results.append(json.loads(out))
    wall = time.perf_counter() - t0
    return _throughput(label, results, (cpu_seconds(pid) - cpu0) / wall,
                       (_cpu(resource.RUSAGE_CHILDREN) - client0) / wall)


def _shares(consumers: int) -> list[str]:
    """Each consumer's partitions, as "0,3": what a consumer group's members would get."""
    return [",".join(str(p) for p in range(first, PARTITIONS, consumers))
            for first in range(consumers)]


def consume_c(rdkperf: Path, bootstrap: str, topic: str, records: int, size: int, pid: int,
              consumers: int = 1) -> Throughput:
    """`consumers` rdkperf -consume processes at once, each on its share."""
    return _parallel(_consume_label(size, consumers),
                     [[str(rdkperf), "-consume", bootstrap, topic, share,
                       str(_share_records(records, share)), *CONSUMER_SETTINGS]
                      for share in _shares(consumers)], pid)


def _share_records(records: int, share: str) -> int:
    """How many of `records`, produced round-robin over the partitions, a share holds."""
    return sum(records // PARTITIONS + (int(p) < records % PARTITIONS)
               for p in share.split(","))


def _consume_label(size: int, consumers: int) -> str:
    return f"consume {size} B" + (f", {consumers} consumers" if consumers > 1 else "")


def produce_python(bootstrap: str, topic: str, size: int, total: int, pid: int) -> Throughput:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "batch.size": 1 << 20, "compression.type": "none",
                         "queue.buffering.max.kbytes": 1 << 20,
                         "queue.buffering.max.messages": 2_000_000})
    value = os.urandom(size)
    count = total // size
    cpu0, client0, t0 = cpu_seconds(pid), _cpu(resource.RUSAGE_SELF), time.perf_counter()
    s.produce_all(producer, topic, value, count, PARTITIONS)
    seconds = time.perf_counter() - t0
    return Throughput(f"produce {size} B", count, count * size, seconds,
                      (cpu_seconds(pid) - cpu0) / seconds,
                      (_cpu(resource.RUSAGE_SELF) - client0) / seconds)


def consume_python(bootstrap: str, topic: str, records: int, size: int, pid: int,
                   consumers: int = 1) -> Throughput:
    """`consumers` confluent-kafka consumer processes (bench/drivers/consume_share.py) at
    once, each on its share of the partitions."""
    driver = Path(__file__).parent / "drivers" / "consume_share.py"
    return _parallel(_consume_label(size, consumers),
                     [[sys.executable, str(driver), bootstrap, topic, share,
                       str(_share_records(records, share)), str(size)]
                      for share in _shares(consumers)], pid)


def latency_c(rdkperf: Path, bootstrap: str, topic: str) -> dict[str, Any]:
    """`rdkperf -e2e`: ack and end-to-end latency quantiles (ms) at LATENCY_RATE."""
    rate = LATENCY_RATE / 1024
    out = subprocess.run([str(rdkperf), "-e2e", bootstrap, topic, f"{rate:.0f}",
                          str(LATENCY_SECONDS), "1024", "acks=1", "linger.ms=0"],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"rdkperf -e2e failed: {out.stderr.strip()}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def latency_python(bootstrap: str, topic: str) -> dict[str, Any]:
    """confluent-kafka: send to delivery report at LATENCY_RATE, quantiles in ms
    (bench/drivers/latency_python.py, in a process of its own)."""
    driver = Path(__file__).parent / "drivers" / "latency_python.py"
    out = subprocess.run([sys.executable, str(driver), bootstrap, topic, str(LATENCY_RATE),
                          str(LATENCY_SECONDS), "1024", str(PARTITIONS), str(PACING_SLEEP)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{driver.name} failed: {out.stderr.strip()}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _produce_requests(metrics_port: int) -> int:
    """The ProduceRequests the broker has handled (kafka.network RequestsPerSec Count)."""
    beans = s.jmx_beans(metrics_port,
                        "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,*")
    return sum(int(bean["Count"]) for bean in beans)


def _with_broker_load(pid: int, metrics_port: int,
                      latency_run: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """A latency run's quantiles and what it cost the broker: its CPU share of one core
    and the ProduceRequests a second, over the whole run (the driver's start and final
    flush included). Near 100% the event loop is saturated and latency is queueing."""
    requests0, cpu0, t0 = _produce_requests(metrics_port), cpu_seconds(pid), time.perf_counter()
    steal0 = _steal_seconds()
    result = latency_run(*args)
    wall = time.perf_counter() - t0
    return result | {"broker_cpu": (cpu_seconds(pid) - cpu0) / wall,
                     "produce_requests_s": (_produce_requests(metrics_port) - requests0) / wall,
                     "steal_s": _steal_seconds() - steal0}


def _steal_seconds() -> float:
    """CPU time the hypervisor gave to others while this machine's CPUs wanted it (the
    steal column of /proc/stat, all CPUs): a round with steal lost time no server here
    could have had."""
    with open("/proc/stat") as fh:
        fields = fh.readline().split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK") if len(fields) > 8 else 0.0


def loopback_iperf3() -> float | None:
    iperf = shutil.which("iperf3")
    if iperf is None:
        return None
    port = _free_port()
    server = subprocess.Popen([iperf, "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        out = subprocess.run([iperf, "-c", "127.0.0.1", "-p", str(port), "-t", "5", "-J"],
                             capture_output=True, text=True, timeout=60).stdout
    finally:
        server.wait(10)
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 8 / 1e6


def python_sink(directory: Path, total: int) -> float | None:
    """MB/s of a Python recv_into + os.write loop fed by nc from /dev/zero."""
    nc = shutil.which("nc")
    if nc is None:
        return None
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    result: list[float] = []

    def sink() -> None:
        conn, _ = listener.accept()
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        fd = os.open(directory / "sink.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        got = 0
        t0 = time.perf_counter()
        while got < total:
            n = conn.recv_into(buf)
            if not n:
                break
            os.write(fd, view[:n])
            got += n
        result.append(got / (time.perf_counter() - t0) / 1e6)
        os.close(fd)
        conn.close()

    thread = threading.Thread(target=sink)
    thread.start()
    feeder = subprocess.Popen(f"head -c {total} /dev/zero | {nc} -N 127.0.0.1 {port}",
                              shell=True)
    thread.join(300)
    feeder.wait(30)
    listener.close()
    os.unlink(directory / "sink.bin")
    return result[0] if result else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _median_of(rounds: list[list[Throughput]], index: int) -> tuple[Throughput, str]:
    """The round whose row `index` has the median MB/s, and the rounds' MB/s range."""
    rows = sorted((r[index] for r in rounds), key=lambda t: t.mb_s)
    spread = f"{rows[0].mb_s:.0f}-{rows[-1].mb_s:.0f}" if len(rows) > 1 else "-"
    return rows[len(rows) // 2], spread


def run() -> str:
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from _peer_servers import build_rdkperf

    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess

    clock = s.Stopwatch()
    quick = s.RUNS < 10
    total = min(TOTAL_BYTES, 64 << 20) if quick else TOTAL_BYTES
    _install_tools()
    rdkperf = build_rdkperf()
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-broker-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()
    metrics_port = _free_port()
    broker = BrokerProcess(str(workdir / "broker"), 1, ensemble.connect_string + "/bench",
                           properties={**s.AUTOTUNED_SOCKETS,
                                       "num.partitions": str(PARTITIONS),
                                       "log.segment.bytes": str(1 << 30),
                                       # a deleted round's files go at once
                                       "file.delete.delay.ms": "1000"},
                           env={"MOLDAU_METRICS_PORT": str(metrics_port)})
    try:
        broker.start()
        pid = broker.pid()
        assert pid is not None
        bootstrap = broker.bootstrap
        python: list[list[Throughput]] = []  # per round: produce, consume, parallel consume
        native: list[list[Throughput]] = []  # per round: produce, consume, parallel consume
        latencies: list[dict[str, dict[str, Any]]] = []
        for r in range(1 if quick else ROUNDS):
            sizes = (1024, 100) if r == 0 else (1024,)
            py_round: list[Throughput] = []
            c_round: list[Throughput] = []
            for size in sizes:
                # Each driver's topic goes, and the page cache is written back, before the
                # next produce. Otherwise the next one wrote while the last one's 2 GiB
                # stayed cached, so its pages came from memory the page cache had not
                # used lately. On the bench machine (a VM) such pages cost far more: 2 GiB
                # of os.write ran at 320 to 370 MB/s, with Dirty far below the kernel's
                # thresholds, against 2,000 to 2,300 MB/s into the pages a deleted file
                # had just freed. rdkperf made 282 to 335 MB/s at 83% of the broker's
                # core that way, 630 to 643 MB/s at 48% with the last topic deleted.
                topic = f"bench-py-{size}-r{r}"
                made = produce_python(bootstrap, topic, size, total, pid)
                py_round += [made, consume_python(bootstrap, topic, made.records, size, pid),
                             consume_python(bootstrap, topic, made.records, size, pid,
                                            CONSUMERS)]
                s.delete_topics(bootstrap, [topic])
                s.settle([broker.data_dir])
                topic = f"bench-c-{size}-r{r}"
                made = produce_c(rdkperf, bootstrap, topic, size, total, pid)
                c_round += [made,
                            consume_c(rdkperf, bootstrap, topic, made.records, size, pid),
                            consume_c(rdkperf, bootstrap, topic, made.records, size, pid,
                                      CONSUMERS)]
                s.delete_topics(bootstrap, [topic])
                s.settle([broker.data_dir])
            python.append(py_round)
            native.append(c_round)
            latencies.append({
                "python": _with_broker_load(pid, metrics_port, latency_python, bootstrap,
                                            f"bench-latency-py-r{r}"),
                "native": _with_broker_load(pid, metrics_port, latency_c, rdkperf, bootstrap,
                                            f"bench-latency-c-r{r}")})
        iperf = loopback_iperf3()
        sink = python_sink(Path(broker.data_dir), min(total, 2 * GIB))
    finally:
        broker.stop()
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return _report(clock, total, python, native, latencies, iperf, sink)


def _rows(rounds: list[list[Throughput]], driver: str) -> list[tuple[str, ...]]:
    rows = []
    for index in range(len(rounds[0])):
        t, spread = _median_of(rounds, index) if index < len(rounds[-1]) else (
            rounds[0][index], "-")
        start = t.start_seconds
        rows.append((t.label, driver, f"{t.mb_s:.0f}", spread,
                     "-" if start is None else f"{t.whole_mb_s:.0f} ({start:.2f} s)",
                     f"{t.records_s:,.0f}", f"{t.seconds:.1f}", f"{t.broker_cpu * 100:.0f}%",
                     f"{t.client_cpu * 100:.0f}%"))
    return rows


def _goals(name: str, produced: float, consumed: float, p99: float) -> str:
    return (f"with {name}: produce {produced:.0f} MB/s "
            f"{_verdict(produced >= GOALS['produce_1k_mb_s'])}, consume "
            f"{consumed:.0f} MB/s {_verdict(consumed >= GOALS['consume_mb_s'])}, "
            f"p99 {p99:.2f} ms {_verdict(p99 < GOALS['p99_ms'])}")


def _median_latency(latencies: list[dict[str, dict[str, Any]]], driver: str,
                    key: str | None = None) -> dict[str, float]:
    """The median over the rounds of each quantile."""
    runs = [lat[driver][key] if key else lat[driver] for lat in latencies]
    loads = [lat[driver] for lat in latencies]
    return {q: statistics.median(run[q] for run in runs) for q in ("p50", "p99", "p999")} | {
        "count": runs[0]["count"], "p99s": [run["p99"] for run in runs],
        "broker_cpu": statistics.median(load["broker_cpu"] for load in loads),
        "produce_requests_s": statistics.median(load["produce_requests_s"] for load in loads),
        "steals": [load["steal_s"] for load in loads]}


def _report(clock: s.Stopwatch, total: int, python: list[list[Throughput]],
            native: list[list[Throughput]], latencies: list[dict[str, dict[str, Any]]],
            iperf: float | None, sink: float | None) -> str:
    py_lat = _median_latency(latencies, "python")
    ack = _median_latency(latencies, "native", "ack_ms")
    e2e = _median_latency(latencies, "native", "e2e_ms")
    rounds = len(python)

    def p99s(lat: dict[str, Any]) -> str:
        return ", ".join(f"{p:.2f}" for p in lat["p99s"])

    lines = [
        f"One broker, {PARTITIONS} partitions, acks=1, {total / GIB:.2f} GiB per run, "
        "producer batch.size 1 MiB and linger.ms 5; the broker's socket buffers are left to "
        "the kernel (`socket.send.buffer.bytes` and `socket.receive.buffer.bytes` -1, as "
        "high-throughput deployments set them). Two drivers: confluent-kafka's Python "
        f"API (librdkafka {_librdkafka()}), the issue's driver, and bench/drivers/rdkperf, "
        f"C loops over Debian's librdkafka {_librdkafka_c()} (consumer: the simple consumer "
        "on all partitions, batches of 10,000), which leave more of the machine's 2 cores "
        "to the broker, "
        "as Kafka's own perf tools (tight Java loops) do. One consumer process, in C or "
        f"Python, is bound by its own core before the broker is: the parallel rows run "
        f"{CONSUMERS} consumer processes at once, each on its share of the partitions, as "
        "a consumer group's members would be, with the assignment fixed so that they start "
        "together (a Python consumer is always a process of bench/drivers/"
        "consume_share.py). The 1 KiB rows and the "
        f"latency runs are the medians of {rounds} rounds (fresh topics each, deleted after "
        "its produce and consume runs, and the page cache written back (`sync`) before the "
        "next run; the range shows the rounds' spread); the 100 B "
        "rows ran once. Consume rows "
        "count from the first batch's arrival to the last's (the bytes after the first "
        "batch; with several consumers, from the earliest first batch to the latest last "
        "one), leaving out the client's start as kafka-consumer-perf-test's fetch.MB.sec "
        "leaves out the group join: librdkafka assigns before it has metadata, and its "
        "simple consumer then waits for a 500 ms offset-query timer before the first "
        "fetch. The column after the spread gives the rate from the assignment and the "
        "start's length. The CPU columns are CPU seconds per second of the run (100% is "
        "one of the 2 cores) of the broker and of the driver's processes together (with "
        "librdkafka's threads): where they add up to about 200%, the machine is the "
        "limit, and the driver's share is what the broker could not have.",
        "",
        s.table(["workload", "driver", "MB/s", "rounds' MB/s",
                 "consume: MB/s with the client's start (its length)", "records/s",
                 "seconds", "broker CPU", "driver CPU"],
                _rows(python, "confluent-kafka (Python)") + _rows(native, "rdkperf (C)")),
        "",
        s.table(["limit measured in the same run", "MB/s"], [
            ("loopback TCP (iperf3, 5 s)", f"{iperf:.0f}" if iperf else "iperf3 missing"),
            ("Python recv_into + os.write sink fed by nc",
             f"{sink:.0f}" if sink else "nc missing"),
        ]),
        "",
        f"Latency at a fixed {LATENCY_RATE / 1e6:.0f} MB/s of 1 KiB records, linger.ms 0, "
        f"{LATENCY_SECONDS} s per round, coordinated omission corrected (latency counts "
        "from when a record was due), both drivers in processes of their own and paced "
        "alike (bench/drivers/latency_python.py and `rdkperf -e2e`: each pass sends what is "
        f"due, serves delivery reports, sleeps {PACING_SLEEP * 1e6:.0f} µs), medians over "
        "the rounds: confluent-kafka, send to "
        f"delivery report over 6 partitions: p50 {py_lat['p50']:.2f} ms, p99 "
        f"{py_lat['p99']:.2f} ms (rounds: {p99s(py_lat)}), p99.9 {py_lat['p999']:.2f} ms "
        f"({py_lat['count']:,} records per round); `rdkperf -e2e` on partition 0: to the "
        f"delivery report p50 {ack['p50']:.2f} ms, p99 {ack['p99']:.2f} ms (rounds: "
        f"{p99s(ack)}), p99.9 {ack['p999']:.2f} ms, to the consumer's receipt p50 "
        f"{e2e['p50']:.2f} ms, p99 {e2e['p99']:.2f} ms ({ack['count']:,} records per round).",
        "",
        "What the latency runs cost the broker (medians over the rounds, over each whole "
        "run, the driver's start and final flush included): with confluent-kafka "
        f"{py_lat['produce_requests_s']:,.0f} ProduceRequests a second and "
        f"{py_lat['broker_cpu']:.0%} of a core; with rdkperf "
        f"{ack['produce_requests_s']:,.0f} ProduceRequests a second (and its consumer's "
        f"fetches) and {ack['broker_cpu']:.0%} of a core. With linger.ms 0 librdkafka "
        "sends a request per partition as soon as it has a record; near 100% of a core the "
        "broker's event loop is saturated, and the tail is the queue behind any pause "
        "(docs/sizing.md, \"CPU and throughput\"). CPU time the hypervisor took from this "
        "machine (steal, both CPUs) during the confluent-kafka rounds: "
        + ", ".join(f"{x:.2f}" for x in py_lat["steals"]) + " s; a round after the "
        "throughput runs' writes has shown 0.40 s, with single loop callbacks taking "
        "19 ms of wall time.",
        "",
        f"Goals (issue 4: produce >= {GOALS['produce_1k_mb_s']} MB/s of 1 KiB records, "
        f"consume >= {GOALS['consume_mb_s']} MB/s, p99 < {GOALS['p99_ms']:.0f} ms at 20 MB/s), "
        "medians: "
        + _goals(f"confluent-kafka ({CONSUMERS} consumer processes for consume; one "
                 f"consumer: {_median_of(python, 1)[0].mb_s:.0f} MB/s)",
                 _median_of(python, 0)[0].mb_s, _median_of(python, 2)[0].mb_s,
                 py_lat["p99"]) + "; "
        + _goals(f"rdkperf ({CONSUMERS} consumers for consume)", _median_of(native, 0)[0].mb_s,
                 _median_of(native, 2)[0].mb_s, ack["p99"]) + ".",
        "",
        s.environment(clock, ["confluent-kafka"]),
    ]
    return "\n".join(lines)


def _verdict(met: bool) -> str:
    return "(met)" if met else "(**missed**)"


def _librdkafka_c() -> str:
    out = subprocess.run(["pkg-config", "--modversion", "rdkafka"], capture_output=True,
                         text=True)
    return out.stdout.strip() or "?"


def _librdkafka() -> str:
    from confluent_kafka import libversion

    return libversion()[0]


if __name__ == "__main__":
    print(run())
