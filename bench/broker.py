"""Single-broker throughput and latency with librdkafka (confluent-kafka), next to the
machine's own limits measured in the same run.

Workloads (issue 4): one broker, one topic of 6 partitions, acks=1, producer batch.size
1 MiB and linger.ms 5; records of 100 B and 1 KiB; MOLDAU_BENCH_BYTES (default 2 GiB)
per run. Then a consumer reads the topic from the beginning. Latency: 1 KiB records at a
fixed 20 MB/s with linger.ms 0, send to delivery report.

Limits in the same run: loopback TCP bandwidth (iperf3) and a plain Python sink
(`recv_into` + `os.write` to a file in the broker's data dir) fed by `nc`, so the broker's
figures read against what Python and the machine can do at all.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import _support as s

GIB = 1 << 30
PARTITIONS = 6
TOTAL_BYTES = int(os.environ.get("MOLDAU_BENCH_BYTES", 2 * GIB))
LATENCY_RATE = 20_000_000  # bytes/s
LATENCY_SECONDS = 10
GOALS = {"produce_1k_mb_s": 400, "consume_mb_s": 800, "p99_ms": 5.0}
DEBIAN_PACKAGES = ["iperf3", "netcat-openbsd"]


@dataclass
class Throughput:
    label: str
    records: int
    bytes: int
    seconds: float
    broker_cpu: float  # CPU seconds the broker used / wall seconds

    @property
    def mb_s(self) -> float:
        return self.bytes / self.seconds / 1e6

    @property
    def records_s(self) -> float:
        return self.records / self.seconds


def _install_tools() -> None:
    commands = {"iperf3": "iperf3", "netcat-openbsd": "nc"}
    missing = [p for p in DEBIAN_PACKAGES if shutil.which(commands[p]) is None]
    if missing:
        listing = Path(tempfile.mkstemp(suffix=".txt")[1])
        listing.write_text("\n".join(missing) + "\n")
        subprocess.run([str(s.REPO / "scripts/install-debian-packages"), str(listing)],
                       check=False)
        listing.unlink()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def produce(bootstrap: str, topic: str, size: int, total: int, pid: int) -> Throughput:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5,
                         "batch.size": 1 << 20, "compression.type": "none",
                         "queue.buffering.max.kbytes": 1 << 20,
                         "queue.buffering.max.messages": 2_000_000})
    value = os.urandom(size)
    count = total // size
    cpu0, t0 = _cpu_seconds(pid), time.perf_counter()
    s.produce_all(producer, topic, value, count, PARTITIONS)
    seconds = time.perf_counter() - t0
    cpu = (_cpu_seconds(pid) - cpu0) / seconds
    return Throughput(f"produce {size} B", count, count * size, seconds, cpu)


def consume(bootstrap: str, topic: str, records: int, size: int, pid: int) -> Throughput:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800,
                         "max.partition.fetch.bytes": 10485760,
                         "queued.max.messages.kbytes": 1 << 20})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    cpu0, t0 = _cpu_seconds(pid), time.perf_counter()
    while got < records:
        got += len(consumer.consume(10_000, 1.0))
    seconds = time.perf_counter() - t0
    cpu = (_cpu_seconds(pid) - cpu0) / seconds
    consumer.close()
    return Throughput(f"consume {size} B", got, got * size, seconds, cpu)


def consume_kcat(bootstrap: str, topic: str, records: int, size: int,
                 pid: int) -> Throughput | None:
    """The same topic read by kcat (librdkafka in C, output to /dev/null): the broker's
    consume rate without the Python consumer's per-message cost."""
    kcat = shutil.which("kcat")
    if kcat is None:
        return None
    cpu0, t0 = _cpu_seconds(pid), time.perf_counter()
    subprocess.run([kcat, "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q",
                    "-X", "fetch.max.bytes=52428800", "-X", "queued.max.messages.kbytes=1048576"],
                   stdout=subprocess.DEVNULL, check=True, timeout=600)
    seconds = time.perf_counter() - t0
    cpu = (_cpu_seconds(pid) - cpu0) / seconds
    return Throughput(f"consume {size} B (kcat)", records, records * size, seconds, cpu)


def latency(bootstrap: str, topic: str) -> list[float]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0})
    value = os.urandom(1024)
    # Warm up: the topic is created and its metadata known before the clock starts, so
    # the figures are the steady state, not topic creation.
    for i in range(PARTITIONS * 10):
        producer.produce(topic, value, partition=i % PARTITIONS)
    producer.flush(30)
    samples: list[float] = []
    interval = 1024 / LATENCY_RATE
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < LATENCY_SECONDS:
        # Coordinated omission: latency counts from when the record was due, not sent.
        due = start + sent * interval
        now = time.perf_counter()
        if now < due:
            producer.poll(0)
            continue
        producer.produce(topic, value, partition=sent % PARTITIONS,
                         on_delivery=lambda err, _m, d=due: samples.append(
                             time.perf_counter() - d))
        sent += 1
        if sent % 64 == 0:
            producer.poll(0)
    producer.flush(30)
    return sorted(samples)


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
    import json

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


def run() -> str:
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess

    clock = s.Stopwatch()
    quick = s.RUNS < 10
    total = min(TOTAL_BYTES, 64 << 20) if quick else TOTAL_BYTES
    _install_tools()
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-broker-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()
    broker = BrokerProcess(str(workdir / "broker"), 1, ensemble.connect_string + "/bench",
                           properties={"num.partitions": str(PARTITIONS),
                                       "log.segment.bytes": str(1 << 30)})
    try:
        broker.start()
        pid = broker.pid()
        assert pid is not None
        results: list[list[Throughput]] = []
        for size in (1024, 100):
            topic = f"bench-{size}"
            produced = produce(broker.bootstrap, topic, size, total, pid)
            consumed = consume(broker.bootstrap, topic, produced.records, size, pid)
            by_kcat = consume_kcat(broker.bootstrap, topic, produced.records, size, pid)
            results.append([produced, consumed] + ([by_kcat] if by_kcat else []))
        samples = latency(broker.bootstrap, "bench-latency")
        iperf = loopback_iperf3()
        sink = python_sink(Path(broker.data_dir), min(total, 2 * GIB))
    finally:
        broker.stop()
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return _report(clock, total, results, samples, iperf, sink)


def _pct(samples: list[float], q: float) -> float:
    return samples[min(len(samples) - 1, int(q * len(samples)))] * 1000 if samples else float("nan")


def _report(clock: s.Stopwatch, total: int, results: list[list[Throughput]],
            samples: list[float], iperf: float | None, sink: float | None) -> str:
    rows = []
    for group in results:
        for t in group:
            rows.append((t.label, f"{t.mb_s:.0f}", f"{t.records_s:,.0f}", f"{t.seconds:.1f}",
                         f"{t.broker_cpu * 100:.0f}%"))
    lines = [
        f"One broker, {PARTITIONS} partitions, acks=1, librdkafka "
        f"{_librdkafka()} producer (batch.size 1 MiB, linger.ms 5) and consumer, "
        f"{total / GIB:.2f} GiB per run; client and broker share the machine's 2 cores.",
        "",
        s.table(["workload", "MB/s", "records/s", "seconds", "broker CPU"], rows),
        "",
        s.table(["limit measured in the same run", "MB/s"], [
            ("loopback TCP (iperf3, 5 s)", f"{iperf:.0f}" if iperf else "iperf3 missing"),
            ("Python recv_into + os.write sink fed by nc",
             f"{sink:.0f}" if sink else "nc missing"),
        ]),
        "",
        f"Latency at a fixed {LATENCY_RATE / 1e6:.0f} MB/s of 1 KiB records, linger.ms 0, "
        f"{LATENCY_SECONDS} s, send to delivery report (coordinated omission corrected): "
        f"p50 {_pct(samples, 0.5):.2f} ms, p99 {_pct(samples, 0.99):.2f} ms, "
        f"p99.9 {_pct(samples, 0.999):.2f} ms over {len(samples):,} records.",
        "",
        f"Goals (issue 4): produce >= {GOALS['produce_1k_mb_s']} MB/s of 1 KiB records, "
        f"consume >= {GOALS['consume_mb_s']} MB/s, p99 < {GOALS['p99_ms']:.0f} ms at 20 MB/s.",
        "",
        s.environment(clock, ["confluent-kafka"]),
    ]
    return "\n".join(lines)


def _librdkafka() -> str:
    from confluent_kafka import libversion

    return libversion()[0]


if __name__ == "__main__":
    print(run())
