"""What consuming costs the broker, per listener (issues 42 and 35). A tool, not a suite:
CPU seconds per GB and system calls per fetch, which a loaded machine blurs far less than
it blurs MB/s.

    python bench/consume_cost.py [--tree DIR ...] [--rounds 5] [--mib 256]
                                 [--listeners PLAINTEXT,SSL,SASL_SSL] [--strace] [--spy DIR]

One broker per `--tree` (a directory holding broker/src; default this checkout; name
several to compare commits, e.g. a `git archive` of HEAD against the working tree) on one
ZooKeeper, each with a PLAINTEXT, an SSL and a SASL_SSL (SCRAM-SHA-512) listener on the
dev cluster's key store and Kafka's default socket buffers (a 100 KiB send buffer, as the
kafka suite runs both systems; `--autotuned-sockets`: -1), and a topic of 6 partitions
filled once with `--mib` MiB of 1 KiB records. Then, in rounds, rdkperf -consume
(librdkafka, the kafka suite's consume settings: 50 MiB fetches, 10 MiB per partition)
reads the topic from the beginning over each listener of each broker, the order
alternating per round; per read: MB/s, the broker's CPU (user+system, all threads, its
CPU-time clock) per GB with the kernel's share of it (/proc), and the load average.

`--strace`: one more read per listener and broker under `strace -f -c`, printed as
system calls per fetch request (from the broker's request metrics). `--spy DIR`: three
(`--spy-reads`) more reads per listener and broker under py-spy (native frames, 250 Hz;
it pauses the broker to sample, as --native needs): DIR/<tree>-<listener>.txt (collapsed
stacks) and .svg (the event loop's busy samples, bench/flame_svg.py).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import _support as s

MIB = 1 << 20
PARTITIONS = 6
SIZE = 1024
MECHANISM = "SCRAM-SHA-512"
CONSUME_SETTINGS = ["fetch.max.bytes=52428800", "max.partition.fetch.bytes=10485760",
                    "queued.max.messages.kbytes=1048576"]
_LIBC = ctypes.CDLL("libc.so.6", use_errno=True)


@dataclass
class Broker:
    """One broker under test and its listeners' client settings."""

    name: str
    process: object  # moldau.devcluster.brokers.BrokerProcess
    ports: dict[str, int]
    client: dict[str, list[str]]  # listener -> rdkperf key=value settings
    metrics_port: int
    cpu_per_gb: dict[str, list[float]] = field(default_factory=dict)
    mb_s: dict[str, list[float]] = field(default_factory=dict)
    system_share: dict[str, list[float]] = field(default_factory=dict)

    def pid(self) -> int:
        pid = self.process.pid()  # type: ignore[attr-defined]
        if pid is None:
            raise RuntimeError(f"broker {self.name} exited: "
                               f"{self.process.tail()}")  # type: ignore[attr-defined]
        return int(pid)

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def cpu_ns(pid: int) -> int:
    """The process's CPU time (all threads), from its CPU-time clock."""
    clock = ctypes.c_int()
    if _LIBC.clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
        raise OSError(f"no CPU clock for process {pid}")
    return time.clock_gettime_ns(clock.value)


def fetch_requests(broker: Broker) -> int:
    """The broker's count of consumers' Fetch requests so far (RequestsPerSec)."""
    beans = s.jmx_beans(broker.metrics_port,
                        "kafka.network:type=RequestMetrics,name=RequestsPerSec,*")
    return sum(int(b.get("Count", 0)) for b in beans if "request=FetchConsumer," in b["name"])


@contextlib.contextmanager
def brokers(trees: list[Path], workdir: Path, autotuned: bool) -> Iterator[list[Broker]]:
    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess, free_port
    from moldau.devcluster.sasl import ADMIN_USER, DevSasl

    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()
    started: list[Broker] = []
    try:
        for i, tree in enumerate(trees, 1):
            chroot = ensemble.connect_string + f"/cost{i}"
            sasl = DevSasl(workdir / f"sasl{i}", MECHANISM)
            sasl.prepare()
            sasl.register_admin(chroot)
            plaintext, ssl_port, sasl_port, metrics_port = (free_port() for _ in range(4))
            props = sasl.broker_properties(plaintext, sasl_port)
            props["listeners"] += f",SSL://127.0.0.1:{ssl_port}"
            props |= {"num.partitions": str(PARTITIONS), "log.segment.bytes": str(1 << 30),
                      **(s.AUTOTUNED_SOCKETS if autotuned else {})}
            process = BrokerProcess(str(workdir / f"broker{i}"), 1, chroot, port=plaintext,
                                    properties=props,
                                    env={"PYTHONPATH": str(tree / "broker" / "src"),
                                         "MOLDAU_METRICS_PORT": str(metrics_port)})
            process.start(wait=120)
            tls = ["ssl.ca.location=" + str(sasl.tls.ca_cert)]
            client = {"PLAINTEXT": [], "SSL": ["security.protocol=SSL", *tls],
                      "SASL_SSL": ["security.protocol=SASL_SSL", *tls,
                                   f"sasl.mechanism={MECHANISM}",
                                   f"sasl.username={ADMIN_USER}",
                                   f"sasl.password={sasl.admin_password()}"]}
            started.append(Broker(f"{i}:{tree.name or tree}", process,
                                  {"PLAINTEXT": plaintext, "SSL": ssl_port,
                                   "SASL_SSL": sasl_port}, client, metrics_port))
        yield started
    finally:
        for broker in started:
            broker.process.stop()  # type: ignore[attr-defined]
        ensemble.stop()


def fill(rdkperf: Path, broker: Broker, count: int) -> None:
    subprocess.run([str(rdkperf), broker.bootstrap("PLAINTEXT"), "cost", str(count), str(SIZE),
                    str(PARTITIONS), "acks=1", "linger.ms=5", "batch.size=1048576",
                    "queue.buffering.max.kbytes=1048576",
                    "queue.buffering.max.messages=1000000"],
                   check=True, capture_output=True, timeout=900)


def user_system(pid: int) -> tuple[float, float]:
    """The process's user and system CPU seconds (/proc, in clock ticks)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


@dataclass(frozen=True)
class Read:
    """One read of the topic."""

    mb_s: float  # by rdkperf's clock, from its first batch to its last
    cpu_s_per_gb: float  # the broker's
    system_share: float  # of that CPU, the kernel's


def consume(rdkperf: Path, broker: Broker, listener: str, count: int) -> Read:
    """Read the topic over a listener."""
    pid = broker.pid()
    before = cpu_ns(pid)
    user0, system0 = user_system(pid)
    out = subprocess.run([str(rdkperf), "-consume", broker.bootstrap(listener), "cost",
                          str(PARTITIONS), str(count), *CONSUME_SETTINGS,
                          *broker.client[listener]],
                         check=True, capture_output=True, text=True, timeout=900)
    cpu = (cpu_ns(pid) - before) / 1e9
    user1, system1 = user_system(pid)
    user, system = user1 - user0, system1 - system0
    result = json.loads(out.stdout)
    moved = result["bytes"] - result["first_bytes"]
    return Read(moved / max(result["last_at"] - result["first_at"], 1e-9) / 1e6,
                cpu / (count * SIZE / 1e9), system / max(user + system, 1e-9))


def load() -> float:
    return os.getloadavg()[0]


def strace_counts(rdkperf: Path, broker: Broker, listener: str, count: int) -> str:
    out = Path(tempfile.mkstemp(prefix="moldau-strace-")[1])
    fetches0 = fetch_requests(broker)
    tracer = subprocess.Popen(["strace", "-f", "-c", "-o", str(out), "-p", str(broker.pid())],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    consume(rdkperf, broker, listener, count)
    tracer.send_signal(signal.SIGINT)
    tracer.wait(60)
    fetches = max(fetch_requests(broker) - fetches0, 1)
    calls: dict[str, int] = {}
    for line in out.read_text().splitlines():
        fields = line.split()
        if len(fields) in (5, 6) and fields[3].isdigit() and fields[-1] != "total":
            calls[fields[-1]] = int(fields[3])
    out.unlink()
    total = sum(calls.values())
    top = sorted(calls.items(), key=lambda kv: -kv[1])[:10]
    return (f"{broker.name} {listener}: {fetches} fetches, {total / fetches:.1f} calls per "
            f"fetch, {total / (count * SIZE / MIB):.2f} per MiB; "
            + ", ".join(f"{name} {n / fetches:.2f}" for name, n in top))


def spy(rdkperf: Path, broker: Broker, listener: str, count: int, outdir: Path,
        reads: int) -> None:
    from flame_svg import busy_stacks, render
    from peers_profile import _py_spy, stop_spy

    outdir.mkdir(parents=True, exist_ok=True)
    stem = outdir / f"{broker.name.replace(':', '-')}-{listener}"
    raw = stem.with_suffix(".txt")
    proc = subprocess.Popen([_py_spy(), "record", "--pid", str(broker.pid()), "--rate", "250",
                             "--native", "--format", "raw", "--output", str(raw)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    for _ in range(reads):
        consume(rdkperf, broker, listener, count)
    stop_spy(proc)
    title = f"{broker.name} consume over {listener}"
    stem.with_suffix(".svg").write_text(render(busy_stacks(raw.read_text()), title))


def summary(started: list[Broker], listeners: list[str], count: int, rounds: int,
            loads: list[float]) -> None:
    print(f"\n{count:,} records of {SIZE} B, {rounds} rounds, load average (1 "
          f"min) {min(loads):.2f}-{max(loads):.2f}, median {median(loads):.2f}")
    for broker in started:
        for listener in listeners:
            cpu = broker.cpu_per_gb[listener]
            print(f"{broker.name} {listener}: median {median(broker.mb_s[listener]):.0f}"
                  f" MB/s, broker CPU s/GB median {median(cpu):.3f} (all "
                  + ", ".join(f"{v:.3f}" for v in cpu) + "), system time "
                  f"{100 * median(broker.system_share[listener]):.0f}% of it")
    for listener in listeners[1:]:
        for broker in started:
            ratios = [a / b for a, b in zip(broker.cpu_per_gb[listener],
                                            broker.cpu_per_gb[listeners[0]],
                                            strict=True)]
            print(f"{broker.name} CPU per GB {listener} / {listeners[0]}: median "
                  f"{median(ratios):.3f}")
    if len(started) > 1:
        for listener in listeners:
            ratios = [a / b for a, b in zip(started[-1].cpu_per_gb[listener],
                                            started[0].cpu_per_gb[listener],
                                            strict=True)]
            print(f"{listener}: CPU per GB {started[-1].name} / {started[0].name}: "
                  f"median {median(ratios):.3f} (rounds "
                  + ", ".join(f"{v:.3f}" for v in ratios) + ")")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, action="append",
                        help="a directory holding broker/src (repeatable)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--listeners", default="PLAINTEXT,SSL,SASL_SSL")
    parser.add_argument("--autotuned-sockets", action="store_true",
                        help="socket.*.buffer.bytes -1 (the kernel sizes the buffers) "
                             "instead of Kafka's defaults (a 100 KiB send buffer)")
    parser.add_argument("--strace", action="store_true")
    parser.add_argument("--spy", type=Path)
    parser.add_argument("--spy-reads", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from _peer_servers import build_rdkperf

    rdkperf = build_rdkperf()
    trees = args.tree or [s.REPO]
    listeners = args.listeners.split(",")
    count = args.mib * MIB // SIZE
    workdir = Path(tempfile.mkdtemp(prefix="moldau-consume-cost-"))
    loads: list[float] = []
    try:
        with brokers(trees, workdir, args.autotuned_sockets) as started:
            for broker in started:
                fill(rdkperf, broker, count)
            for broker in started:  # warm-up: page cache, connections, code paths
                for listener in listeners:
                    consume(rdkperf, broker, listener, count // 4)
            for r in range(args.rounds):
                order = [(b, listener) for b in started for listener in listeners]
                for broker, listener in order if r % 2 == 0 else order[::-1]:
                    loads.append(load())
                    read = consume(rdkperf, broker, listener, count)
                    broker.mb_s.setdefault(listener, []).append(read.mb_s)
                    broker.cpu_per_gb.setdefault(listener, []).append(read.cpu_s_per_gb)
                    broker.system_share.setdefault(listener, []).append(read.system_share)
                    print(f"round {r + 1} {broker.name} {listener}: {read.mb_s:.0f} MB/s, "
                          f"{read.cpu_s_per_gb:.3f} CPU s/GB (load {loads[-1]:.2f})",
                          flush=True)
            if args.rounds:
                summary(started, listeners, count, args.rounds, loads)
            if args.strace:
                for broker in started:
                    for listener in listeners:
                        print(strace_counts(rdkperf, broker, listener, count), flush=True)
            if args.spy:
                for broker in started:
                    for listener in listeners:
                        spy(rdkperf, broker, listener, count, args.spy, args.spy_reads)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
