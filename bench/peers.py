"""Moldau next to NATS JetStream and Redis Streams on the same machine, in the same run,
and the machine's limits (issue 12).

One Moldau broker (RF 1, a topic of 1 partition, and one of 6), one NATS server
(JetStream, file storage) and one Redis server (AOF everysec) run side by side on
127.0.0.1, installed from Debian's packages by the suite (scripts/bench-packages.txt).
The workloads run in rounds; within a round every system gets the same workload one
after the other (the order rotates), so a busy spell of the shared machine hits a round's
systems alike, and the per-round ratios are what the page quotes.

- Throughput, native drivers: produce-only of MOLDAU_BENCH_PEERS_RECORDS records of
  1 KiB into a fresh topic/stream, then consume-only of the same records from the start.
  Moldau: bench/drivers/rdkperf (a C producer loop over librdkafka) and kcat (librdkafka's
  C client) to consume; NATS and Redis: bench/drivers/peerbench (Go, nats.go and redigo).
- Latency: produce+consume at a fixed rate of 50% of each system's median produce rate,
  then at one rate for all; `rdkperf -e2e` (C, librdkafka) for Moldau, peerbench for the
  peers; due time to acknowledgement and to receipt, coordinated omission corrected.
- Python clients: the same produce and consume with confluent-kafka, nats-py, redis-py,
  and rstream for RabbitMQ streams (one node, started only for these rounds).
- Limits: iperf3 on loopback and fio sequential writes in the directory of the logs.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import _peer_pyclients as py
import _peer_servers as ps
import _support as s

ORDER = 110  # after the single-broker and replication sections
SIZE = 1024
RECORDS = int(os.environ.get("MOLDAU_BENCH_PEERS_RECORDS", 300_000))
PY_RECORDS = int(os.environ.get("MOLDAU_BENCH_PEERS_PY_RECORDS", 100_000))
ROUNDS = 3
LATENCY_SECONDS = 4.0
FIXED_RATE = 10_000  # records/s: one offered load for all, below every system's maximum
OTHER_SIZES = (100, 10240)
GOALS = {"produce_vs_nats": 1.0, "consume_vs_nats": 2.0}
MOLDAU, NATS, REDIS = "Moldau", "NATS JetStream", "Redis Streams"
RABBITMQ = "RabbitMQ streams"  # Python client only: Debian has no native stream driver
MOLDAU6 = "Moldau, 6 partitions"


@dataclass
class Sample:
    mb_s: float
    server_cpu: float
    client_cpu: float


@dataclass
class Results:
    """Per system and workload, one sample per round (rounds in order)."""

    throughput: dict[tuple[str, str], list[Sample]] = field(default_factory=dict)
    latency: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)
    python: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    limits: dict[str, list[float]] = field(default_factory=dict)
    commands: dict[str, str] = field(default_factory=dict)

    def add(self, system: str, workload: str, sample: Sample) -> None:
        self.throughput.setdefault((system, workload), []).append(sample)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(args: list[str], pid: int, stdout: Any = None) -> tuple[float, float, float]:
    """Run a client command; (wall seconds, server CPU share, client CPU share)."""
    cpu0, child0, t0 = ps.cpu_seconds(pid), _children_cpu(), time.perf_counter()
    subprocess.run(args, check=True, stdout=stdout or subprocess.DEVNULL, timeout=900)
    wall = time.perf_counter() - t0
    return wall, (ps.cpu_seconds(pid) - cpu0) / wall, (_children_cpu() - child0) / wall


def _end_offsets(addr: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": addr, "group.id": "peers-check"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def kcat_produce(servers: ps.Servers, topic: str, partitions: int, records: Path,
                  count: int, *, create: bool = True, size: int = SIZE,
                  extra: tuple[str, ...] = ()) -> Sample:
    """kcat -P of every line of `records` (extra: more -X settings, e.g. acks=all)."""
    moldau = servers.systems[MOLDAU]
    if create:
        servers.create_topic(topic, partitions)
    args = ["kcat", "-P", "-b", moldau.addr, "-t", topic, "-X", "acks=1", "-X", "linger.ms=5",
            "-X", "batch.size=1048576", "-X", "queue.buffering.max.kbytes=1048576",
            *extra, "-l", str(records)]
    wall, server, client = _timed(args, moldau.pid)
    produced = _end_offsets(moldau.addr, topic, partitions)
    if produced != count:
        raise RuntimeError(f"kcat produced {produced} of {count} records to {topic}")
    return Sample(count * size / wall / 1e6, server, client)


RDKPERF_CONF = ("acks=1", "linger.ms=5", "batch.size=1048576",
                "queue.buffering.max.kbytes=1048576", "queue.buffering.max.messages=1000000")


def rdkperf_produce(servers: ps.Servers, rdkperf: Path, topic: str, partitions: int,
                    count: int, size: int = SIZE, *, create: bool = True) -> Sample:
    """The C librdkafka producer (bench/drivers/rdkperf): one static payload, no copy."""
    moldau = servers.systems[MOLDAU]
    if create:
        servers.create_topic(topic, partitions)
    args = [str(rdkperf), moldau.addr, topic, str(count), str(size), str(partitions),
            *RDKPERF_CONF]
    wall, server, client = _timed(args, moldau.pid)
    produced = _end_offsets(moldau.addr, topic, partitions)
    if produced != count:
        raise RuntimeError(f"rdkperf produced {produced} of {count} records to {topic}")
    return Sample(count * size / wall / 1e6, server, client)


def kcat_consume(servers: ps.Servers, topic: str, count: int, size: int = SIZE) -> Sample:
    moldau = servers.systems[MOLDAU]
    # -c: exit on the last record instead of waiting for an empty fetch at the end.
    args = ["kcat", "-C", "-b", moldau.addr, "-t", topic, "-o", "beginning", "-e", "-q",
            "-c", str(count), "-X", "fetch.max.bytes=52428800",
            "-X", "queued.max.messages.kbytes=1048576", "-X", "fetch.wait.max.ms=10"]
    wall, server, client = _timed(args, moldau.pid)
    return Sample(count * size / wall / 1e6, server, client)


def _driver_sample(result: dict[str, Any]) -> Sample:
    return Sample(result["bytes"] / result["seconds"] / 1e6, result["server_cpu"],
                  result["client_cpu"])


def throughput_round(servers: ps.Servers, driver: Path, rdkperf: Path, count: int, r: int,
                     out: Results, size: int = SIZE) -> None:
    """Every system produces `count` records of `size` B, then reads them back.

    Results of the headline size are keyed (system, "produce"); other sizes
    (system, "produce <size>")."""
    jobs = [MOLDAU, NATS, REDIS, MOLDAU6] if size == SIZE else [MOLDAU, NATS, REDIS]
    jobs = jobs[r % len(jobs):] + jobs[: r % len(jobs)]  # rotate who goes first
    suffix = "" if size == SIZE else f" {size}"
    for system in jobs:
        if system in (MOLDAU, MOLDAU6):
            partitions = 1 if system == MOLDAU else 6
            topic = f"peers-{partitions}p-{size}-{r}"
            out.add(system, "produce" + suffix,
                    rdkperf_produce(servers, rdkperf, topic, partitions, count, size))
            out.add(system, "consume" + suffix, kcat_consume(servers, topic, count, size))
            continue
        target = servers.systems[system]
        name = f"peers{size}-{r}"
        produced = ps.drive(driver, target, "produce", name=name, count=count, size=size,
                            window=4096)
        consumed = ps.drive(driver, target, "consume", name=name, count=count, size=size)
        out.add(system, "produce" + suffix, _driver_sample(produced))
        out.add(system, "consume" + suffix, _driver_sample(consumed))
        out.commands[f"{system} produce"] = produced["command"]
        out.commands[f"{system} consume"] = consumed["command"]
        if system == REDIS:
            _redis_del(target.addr, name)


def _redis_del(addr: str, key: str) -> None:
    import redis

    host, port = addr.rsplit(":", 1)
    redis.Redis(host=host, port=int(port)).delete(key)


def latency_run(run: Callable[[], dict[str, Any]], system: str, rate: float, label: str,
                out: Results) -> None:
    """One e2e run into out.latency[(system, label)]; a system that cannot keep up at
    `rate` gives a failed row, not a crash."""
    try:
        result = run()
    except RuntimeError as exc:
        print(f"latency run failed: {exc}", file=sys.stderr)
        result = {"error": str(exc), "offered_records_s": rate,
                  "command": str(exc).split(" failed:")[0]}
    out.latency.setdefault((system, label), []).append(result)
    out.commands[f"{system} e2e"] = result["command"]


def rdkperf_e2e(rdkperf: Path, target: ps.System, bootstrap: str, topic: str, rate: float,
                *conf: str) -> dict[str, Any]:
    """`rdkperf -e2e` into partition 0 of an existing topic (conf: producer settings)."""
    return ps.run_json([str(rdkperf), "-e2e", bootstrap, topic, str(round(rate)),
                        str(LATENCY_SECONDS), str(SIZE), *conf], target)


def peerbench_e2e(driver: Path, target: ps.System, name: str, rate: float,
                  **flags: object) -> dict[str, Any]:
    return ps.drive(driver, target, "e2e", name=name, size=SIZE, rate=round(rate),
                    seconds=LATENCY_SECONDS, window=1 << 20, **flags)


def latency_round(servers: ps.Servers, driver: Path, rdkperf: Path, rates: dict[str, float],
                  r: int, out: Results, label: str) -> None:
    for system in (MOLDAU, NATS, REDIS):
        target = servers.systems[system]
        name = f"lat-{label}-{r}"
        rate = rates[system]

        def run(target: ps.System = target, name: str = name,
                rate: float = rate, system: str = system) -> dict[str, Any]:
            if system != MOLDAU:
                return peerbench_e2e(driver, target, name, rate)
            servers.create_topic(name, 1)
            return rdkperf_e2e(rdkperf, target, target.addr, name, rate, "acks=1")

        latency_run(run, system, rate, label, out)
        if system == REDIS:
            _redis_del(target.addr, name)


def python_round(servers: ps.Servers, count: int, r: int, out: Results) -> None:
    moldau, nats_, redis_ = (servers.systems[n] for n in (MOLDAU, NATS, REDIS))
    topic = f"peers-py-{r}"
    servers.create_topic(topic, 1)
    runs = [
        (MOLDAU, "produce", lambda: py.kafka_produce(moldau.addr, topic, count, SIZE, 1)),
        (MOLDAU, "consume", lambda: py.kafka_consume(moldau.addr, topic, count, 1)),
        (NATS, "produce", lambda: py.nats_produce(nats_.addr, f"py{r}", count, SIZE)),
        (NATS, "consume", lambda: py.nats_consume(nats_.addr, f"py{r}", count)),
        (REDIS, "produce", lambda: py.redis_produce(redis_.addr, f"py{r}", count, SIZE)),
        (REDIS, "consume", lambda: py.redis_consume(redis_.addr, f"py{r}", count)),
    ]
    if RABBITMQ in servers.systems:
        rabbit = servers.systems[RABBITMQ].addr
        runs += [
            (RABBITMQ, "produce", lambda: py.rabbitmq_produce(rabbit, f"py{r}", count, SIZE)),
            (RABBITMQ, "consume", lambda: py.rabbitmq_consume(rabbit, f"py{r}", count)),
        ]
    for system, workload, fn in runs:
        seconds = fn()
        out.python.setdefault((system, workload), []).append(count * SIZE / seconds / 1e6)
    _redis_del(redis_.addr, f"py{r}")
    if RABBITMQ in servers.systems:
        py.rabbitmq_delete(servers.systems[RABBITMQ].addr, f"py{r}")


def iperf3(attempts: int = 5) -> float:
    """Loopback TCP MB/s of one iperf3 stream for 2 s (a fresh server per call)."""
    import json

    port = ps.free_port()
    server = subprocess.Popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(attempts):
            # no connection probe: iperf3 takes any connection for a test's control channel
            time.sleep(1.0)
            out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "2",
                                  "-J"], capture_output=True, text=True, timeout=60).stdout
            try:
                result = json.loads(out)["end"]["sum_received"]["bits_per_second"]
            except (ValueError, KeyError):
                continue  # not listening yet, or busy: try again
            return float(result) / 8 / 1e6
        raise RuntimeError(f"iperf3 failed {attempts} times: {out[-500:]}")
    finally:
        server.terminate()
        server.wait(10)


FIO_ARGS = ["--name=seqwrite", "--rw=write", "--bs=1M", "--size=512M", "--ioengine=psync",
            "--numjobs=1", "--output-format=json"]


def fio(directory: Path, direct: bool) -> float:
    import json

    args = ["fio", f"--directory={directory}", *FIO_ARGS, f"--direct={int(direct)}"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300, check=True).stdout
    for path in directory.glob("seqwrite*"):
        path.unlink()
    job = json.loads(out)["jobs"][0]["write"]
    return float(job["io_bytes"]) / (job["runtime"] / 1000) / 1e6 if job["runtime"] else 0.0


def run() -> str:
    clock = s.Stopwatch()
    quick = s.RUNS < 10
    count = 20_000 if quick else RECORDS
    py_count = 5_000 if quick else PY_RECORDS
    ps.install_packages()
    driver = ps.build_driver()
    rdkperf = ps.build_rdkperf()
    servers = ps.Servers().start()
    out = Results()
    try:
        loads = []
        for r in range(ROUNDS):
            loads.append(os.getloadavg()[0])
            throughput_round(servers, driver, rdkperf, count, r, out)
            out.limits.setdefault("iperf3", []).append(iperf3())
            out.limits.setdefault("fio page cache", []).append(fio(servers.workdir, False))
            out.limits.setdefault("fio direct", []).append(fio(servers.workdir, True))
        for size in OTHER_SIZES:
            # the same bytes per run as the headline (at most `count` records)
            n = min(count, count * SIZE // size)
            for r in range(ROUNDS):
                loads.append(os.getloadavg()[0])
                throughput_round(servers, driver, rdkperf, n, r, out, size)
        rates = {system: 0.5 * median(x.mb_s for x in out.throughput[(system, "produce")]) * 1e6
                 / SIZE for system in (MOLDAU, NATS, REDIS)}
        for r in range(ROUNDS):
            loads.append(os.getloadavg()[0])
            latency_round(servers, driver, rdkperf, rates, r, out, "half")
            fixed = dict.fromkeys(rates, FIXED_RATE)
            latency_round(servers, driver, rdkperf, fixed, r, out, "fixed")
        servers.start_rabbitmq()
        for r in range(ROUNDS):
            loads.append(os.getloadavg()[0])
            python_round(servers, py_count, r, out)
        durability = {name: system.durability for name, system in servers.systems.items()}
    finally:
        servers.stop()
    import _peers_report

    return _peers_report.render(clock, out, count, py_count, rates, durability, loads)


if __name__ == "__main__":
    print(run())
