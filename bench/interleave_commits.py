"""The broker suite's core workloads against two commits of Moldau, runs interleaved (ABBA),
so that a drift of the machine's load falls on both sides: how a change's "the hot path
is not slower" is checked (issue 34). Not a suite of `make bench` (no run()): a tool.

    python bench/interleave_commits.py --before ddc941f [--after HEAD] [--rounds 5]

Each side is a git worktree of its commit under /tmp; each run starts a fresh ZooKeeper
and broker from that side's source (PYTHONPATH), produces MOLDAU_BENCH_BYTES (default
512 MiB) of 1 KiB records with rdkperf (bench/broker.py's C driver over librdkafka,
acks=1, batch 1 MiB, linger 5 ms, 6 partitions), reads them back, and records MB/s and
the broker's CPU seconds per GB. Printed: per side the median and range of each figure,
and the median of the rounds' after/before ratios.

`--workload rf3-tail` runs three brokers instead, a topic of 6 partitions at replication
factor 3 (min.insync.replicas 2): a consumer tails the topic while an acks=all producer
fills it (its long-polled fetches park between batches, so what wakes them shows), then
a second consumer reads it all back with nothing appended meanwhile; the three brokers'
CPU seconds per GB consumed for each. `--workload rf3-e2e` sends one acks=all record per
request at `--rate` records/s for 15 s into a topic of 1 partition at RF 3 with a consumer
tailing it (rdkperf -e2e, its fetch.wait.max.ms 10): the brokers' CPU per record, the
leader's alone too, and the p99 latencies. A side may also be a directory holding broker/src
(an export with uncommitted changes), used as it is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _support as s

MIB = 1 << 20
TOTAL = int(os.environ.get("MOLDAU_BENCH_BYTES", 512 * MIB))
SIZE = 1024
RATE = 1000  # records/s of the rf3-e2e workload
E2E_SECONDS = 15
PP_RECORDS = 200_000  # records of the rf3-pp workload (the Kafka peer suite's count)
PP_PARTITIONS = 6


def _worktree(commit: str) -> Path:
    sha = subprocess.run(["git", "-C", str(s.REPO), "rev-parse", commit], check=True,
                         capture_output=True, text=True).stdout.strip()
    path = Path(tempfile.gettempdir()) / f"moldau-ab-{sha[:12]}"
    if not path.exists():
        subprocess.run(["git", "-C", str(s.REPO), "worktree", "add", "--detach", str(path),
                        sha], check=True, capture_output=True)
    return path


def _tree(spec: str) -> Path:
    """A directory holding broker/src is used as it is; anything else names a commit."""
    if (Path(spec) / "broker" / "src").is_dir():
        return Path(spec)
    return _worktree(spec)


@contextlib.contextmanager
def _three_brokers(tree: Path, topic: str, partitions: int) -> Iterator[list[Any]]:
    """Three fresh brokers from `tree` on a fresh ZooKeeper, with `topic` at RF 3
    (min.insync.replicas 2), every replica in sync; stopped and removed after."""
    from _kafka_peer_clusters import create_topic

    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess

    workdir = Path(tempfile.mkdtemp(prefix="moldau-ab-run-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()
    env = {"PYTHONPATH": str(tree / "broker" / "src")}
    brokers = [BrokerProcess(str(workdir / f"broker{i}"), i, ensemble.connect_string + "/ab",
                             properties={**s.AUTOTUNED_SOCKETS,
                                         "log.segment.bytes": str(1 << 30)}, env=env)
               for i in (1, 2, 3)]
    try:
        for broker in brokers:
            broker.start(wait=None)
        for broker in brokers:
            broker.wait_healthy(120)
        create_topic(",".join(b.bootstrap for b in brokers), topic, partitions, 3)
        yield brokers
    finally:
        for broker in brokers:
            broker.stop()
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _cpu(brokers: list[Any]) -> float:
    """The brokers' CPU seconds so far."""
    from _peer_servers import cpu_seconds

    return sum(cpu_seconds(pid) for pid in (b.pid() for b in brokers) if pid is not None)


def _tail_run(tree: Path, rdkperf: Path) -> dict[str, float]:
    """A consumer tailing an acks=all producer at RF 3, then a consumer reading the topic
    back; MB/s and the three brokers' CPU s per GB."""
    from broker import CONSUMER_SETTINGS, PARTITIONS

    count = TOTAL // SIZE
    shares = ",".join(str(p) for p in range(PARTITIONS))
    gb = count * SIZE / 1e9

    def read(proc: subprocess.Popen[str]) -> dict[str, float]:
        out, err = proc.communicate(timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"rdkperf -consume failed: {err.strip()}")
        return dict(json.loads(out))

    with _three_brokers(tree, "ab", PARTITIONS) as brokers:
        bootstrap = ",".join(b.bootstrap for b in brokers)
        consume = [str(rdkperf), "-consume", bootstrap, "ab", shares, str(count),
                   *CONSUMER_SETTINGS]
        cpu0 = _cpu(brokers)
        tail = subprocess.Popen(consume, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        made = subprocess.run([str(rdkperf), bootstrap, "ab", str(count), str(SIZE),
                               str(PARTITIONS), "acks=all", "linger.ms=5",
                               "batch.size=1048576", "compression.type=none",
                               "queue.buffering.max.kbytes=1048576"],
                              capture_output=True, text=True, timeout=900)
        if made.returncode != 0:
            tail.kill()
            raise RuntimeError(f"rdkperf failed: {made.stderr.strip()}")
        read(tail)
        cpu1 = _cpu(brokers)
        again = read(subprocess.Popen(consume, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
        produced = json.loads(made.stdout)
        return {"produce MB/s": produced["bytes"] / produced["seconds"] / 1e6,
                "tailing brokers CPU s/GB": (cpu1 - cpu0) / gb,
                "consume-after MB/s": again["bytes"] / again["seconds"] / 1e6,
                "consume-after brokers CPU s/GB": (_cpu(brokers) - cpu1) / gb}


def _e2e_run(tree: Path, rdkperf: Path) -> dict[str, float]:
    """rdkperf -e2e at RATE records/s for E2E_SECONDS (one acks=all record per request,
    its consumer tailing) into a topic of 1 partition at RF 3: the brokers' CPU ms per
    record, the leader's and the three together, and the latencies' p99."""
    with _three_brokers(tree, "e2e", 1) as brokers:
        bootstrap = ",".join(b.bootstrap for b in brokers)
        leader = _leader_of(bootstrap, "e2e")
        cpu0, lead0 = _cpu(brokers), _cpu([brokers[leader - 1]])
        out = subprocess.run([str(rdkperf), "-e2e", bootstrap, "e2e", str(RATE),
                              str(E2E_SECONDS), str(SIZE), "acks=all", "linger.ms=0"],
                             capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            raise RuntimeError(f"rdkperf -e2e failed: {out.stderr.strip()}")
        result = json.loads(out.stdout)
        records = result["records"]
        return {"brokers CPU ms/record": (_cpu(brokers) - cpu0) * 1000 / records,
                "leader CPU ms/record": (_cpu([brokers[leader - 1]]) - lead0) * 1000
                / records,
                "ack p99 ms": result["ack_ms"]["p99"], "e2e p99 ms": result["e2e_ms"]["p99"]}


def _pp_run(tree: Path, rdkperf: Path) -> dict[str, float]:
    """Kafka's ProducerPerformance, acks=all and the Java producer's defaults, as fast as
    it goes into PP_PARTITIONS partitions at RF 3: MB/s, the three brokers' CPU seconds
    per 100,000 records and the p99 ms."""
    from _kafka_peer_clusters import import_paths
    from _kafka_peer_tools import producer_performance

    import_paths()
    with _three_brokers(tree, "pp", PP_PARTITIONS) as brokers:
        bootstrap = ",".join(b.bootstrap for b in brokers)
        cpu0 = _cpu(brokers)
        moved = producer_performance(bootstrap, "pp", PP_RECORDS, SIZE,
                                     Path(tempfile.mkdtemp(prefix="moldau-ab-pp-")))
        return {"MB/s": moved.bytes / moved.seconds / 1e6,
                "brokers CPU s per 100k records": (_cpu(brokers) - cpu0) * 1e5 / PP_RECORDS,
                "p99 ms": moved.p99_ms}


def _leader_of(bootstrap: str, topic: str) -> int:
    """The broker id leading partition 0 (asked until the answering broker knows it)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    leader: list[int] = []

    def known() -> bool:
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if 0 in partitions and partitions[0].leader > 0:
            leader.append(partitions[0].leader)
        return bool(leader)

    s.wait_until(known, 60, f"the leader of {topic}")
    return leader[0]


def _one_run(tree: Path, rdkperf: Path) -> dict[str, float]:
    """A fresh broker from `tree`: produce then consume; MB/s and broker CPU s per GB."""
    from broker import consume_c, produce_c
    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess

    workdir = Path(tempfile.mkdtemp(prefix="moldau-ab-run-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, die_with_parent=True).start()
    env = {"PYTHONPATH": str(tree / "broker" / "src")}
    broker = BrokerProcess(str(workdir / "broker"), 1, ensemble.connect_string + "/ab",
                           properties={**s.AUTOTUNED_SOCKETS, "num.partitions": "6",
                                       "log.segment.bytes": str(1 << 30)}, env=env)
    try:
        broker.start()
        pid = broker.pid()
        assert pid is not None
        made = produce_c(rdkperf, broker.bootstrap, "ab", SIZE, TOTAL, pid)
        read = consume_c(rdkperf, broker.bootstrap, "ab", made.records, SIZE, pid)
        return {"produce MB/s": made.mb_s, "consume MB/s": read.mb_s,
                "produce broker CPU s/GB": made.broker_cpu * made.seconds / (made.bytes / 1e9),
                "consume broker CPU s/GB": read.broker_cpu * read.seconds / (read.bytes / 1e9)}
    finally:
        broker.stop()
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    global SIZE, RATE, PP_RECORDS  # the runs read them, as they read TOTAL
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workload", choices=("rf1", "rf3-tail", "rf3-e2e", "rf3-pp"),
                        default="rf1")
    parser.add_argument("--size", type=int, default=SIZE, help="record size, bytes")
    parser.add_argument("--rate", type=int, default=RATE, help="rf3-e2e's records/s")
    parser.add_argument("--records", type=int, default=PP_RECORDS, help="rf3-pp's records")
    args = parser.parse_args()
    SIZE, RATE, PP_RECORDS = args.size, args.rate, args.records
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from _peer_servers import build_rdkperf

    from broker import _install_tools

    _install_tools()  # librdkafka-dev and the rest of the broker suite's Debian packages
    rdkperf = build_rdkperf()
    trees = {"before": _tree(args.before), "after": _tree(args.after)}
    one_run = {"rf1": _one_run, "rf3-tail": _tail_run, "rf3-e2e": _e2e_run,
               "rf3-pp": _pp_run}[args.workload]
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for i in range(args.rounds):
        for side in (("before", "after") if i % 2 == 0 else ("after", "before")):
            load = os.getloadavg()[0]
            runs[side].append(one_run(trees[side], rdkperf))
            print(f"round {i + 1} {side} (load average {load:.1f} at the start): "
                  f"{runs[side][-1]}", flush=True)
    volume = (f"{RATE} records/s for {E2E_SECONDS} s" if args.workload == "rf3-e2e"
              else f"{PP_RECORDS:,} records" if args.workload == "rf3-pp"
              else f"{TOTAL // MIB} MiB")
    print(f"\n{args.rounds} rounds (ABBA) of {args.workload}, {volume} of {SIZE} B records "
          f"per run; "
          f"before = {args.before}, after = {args.after}")
    for name in runs["before"][0]:
        cells = []
        for side in ("before", "after"):
            values = [r[name] for r in runs[side]]
            cells.append(f"{side} {statistics.median(values):.2f} "
                         f"({min(values):.2f}-{max(values):.2f})")
        ratios = [a[name] / b[name] if b[name] else float("nan")
                  for a, b in zip(runs["after"], runs["before"], strict=True)]
        print(f"{name}: {'; '.join(cells)}; after/before median {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f}-{max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
