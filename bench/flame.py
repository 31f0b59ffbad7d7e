"""Flame graphs of the brokers under RF 3 small produce (issue 42). A tool, not a suite.

    python bench/flame.py [--workload e2e|pp] [--rate 3000] [--tree DIR] [--seconds 15]
                          [--partitions 1] [--native]

Three fresh brokers (from this checkout, or from `--tree`, a directory holding
broker/src) on a fresh ZooKeeper, a topic of 1 partition at RF 3 (min.insync.replicas 2;
`--partitions 6`: the Kafka peer suite's topic, each broker leading two), and one of the
slow rows' loads while py-spy samples the leader of partition 0 and one follower
(`py-spy record --nonblocking`, 200 Hz, idle samples left out; `--native`: with the C
frames, which py-spy then reads while the process is stopped):

- `e2e`: rdkperf -e2e, one acks=all record per request at `--rate` records/s with a
  consumer tailing (the latency knee's load, from librdkafka);
- `pp`: Kafka's ProducerPerformance, acks=all, linger 0 and the producer's other defaults
  at `--rate` records/s (-1: as fast as it goes; needs `make compat-deps`).

Written under bench/results/flames/ (git-ignored): `<workload>-<role>.svg` (py-spy's
flame graph), `<workload>-<role>.txt` (collapsed stacks) and, printed, each broker's CPU
per record and the frames with the largest share of its busy samples.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _support as s
from interleave_commits import _cpu, _leader_of, _three_brokers
from peers_profile import _py_spy, parse, stop_spy

OUT = s.REPO / "bench" / "results" / "flames"
RATE_HZ = 200
TOP = 15


def _spy(pid: int, out: Path, fmt: str, native: bool) -> subprocess.Popen[bytes]:
    # --native unwinds the C stack, which needs the process stopped: not --nonblocking
    mode = ["--native"] if native else ["--nonblocking"]
    return subprocess.Popen([_py_spy(), "record", "--pid", str(pid), "--rate", str(RATE_HZ),
                             *mode, "--format", fmt, "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _load(workload: str, bootstrap: str, rate: int, seconds: int) -> int:
    """Run the load; the records it moved."""
    import json

    if workload == "e2e":
        from _peer_servers import build_rdkperf

        out = subprocess.run([str(build_rdkperf()), "-e2e", bootstrap, "flame", str(rate),
                              str(seconds), "1024", "acks=all", "linger.ms=0"],
                             capture_output=True, text=True, timeout=900, check=True)
        result = json.loads(out.stdout)
        print(f"ack p99 {result['ack_ms']['p99']} ms, e2e p99 {result['e2e_ms']['p99']} ms")
        return int(result["records"])
    from _kafka_peer_clusters import import_paths
    from _kafka_peer_tools import producer_performance

    import_paths()
    count = rate * seconds if rate > 0 else 200_000
    moved = producer_performance(bootstrap, "flame", count, 1024,
                                 Path(tempfile.mkdtemp(prefix="moldau-flame-")),
                                 throughput=rate, props=["linger.ms=0"])
    print(f"{moved.bytes / moved.seconds / 1e6:.1f} MB/s, p50 {moved.p50_ms} ms, "
          f"p99 {moved.p99_ms} ms")
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=("e2e", "pp"), default="e2e")
    parser.add_argument("--rate", type=int, default=3000, help="records/s (pp: -1 = max)")
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--partitions", type=int, default=1,
                        help="the topic's partitions (6: the Kafka peer suite's pp row)")
    parser.add_argument("--native", action="store_true", help="sample C frames too")
    parser.add_argument("--tree", type=Path, default=s.REPO,
                        help="a directory holding broker/src (default: this checkout)")
    args = parser.parse_args()
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    OUT.mkdir(parents=True, exist_ok=True)
    with _three_brokers(args.tree, "flame", args.partitions) as brokers:
        bootstrap = ",".join(b.bootstrap for b in brokers)
        leader = _leader_of(bootstrap, "flame")
        roles = {"leader": brokers[leader - 1],
                 "follower": next(b for b in brokers if b is not brokers[leader - 1])}
        pids = {role: b.pid() for role, b in roles.items()}
        spies = []
        for role, pid in pids.items():
            stem = OUT / f"{args.workload}-{role}"
            spies += [_spy(pid, stem.with_suffix(".txt"), "raw", args.native),
                      _spy(pid, stem.with_suffix(".svg"), "flamegraph", args.native)]
        time.sleep(1.0)  # py-spy attaches
        cpu0 = {role: _cpu([b]) for role, b in roles.items()}
        records = _load(args.workload, bootstrap, args.rate, args.seconds)
        cpu = {role: _cpu([b]) - cpu0[role] for role, b in roles.items()}
        for spy in spies:
            stop_spy(spy)
    for role in roles:
        stem = OUT / f"{args.workload}-{role}"
        total, own, inclusive = parse(stem.with_suffix(".txt").read_text())
        print(f"\n{role}: {cpu[role] * 1e6 / records:.0f} us CPU per record, "
              f"{total} busy samples; flame graph {stem.with_suffix('.svg')}")
        print("  own%  incl%  frame")
        for frame, n in inclusive.most_common(TOP):
            print(f"  {100 * own[frame] / max(total, 1):4.1f}  {100 * n / max(total, 1):5.1f}"
                  f"  {frame}")
        print("  top own:")
        for frame, n in own.most_common(TOP):
            print(f"  {100 * n / max(total, 1):4.1f}  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
