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
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import _support as s

MIB = 1 << 20
TOTAL = int(os.environ.get("MOLDAU_BENCH_BYTES", 512 * MIB))
SIZE = 1024


def _worktree(commit: str) -> Path:
    sha = subprocess.run(["git", "-C", str(s.REPO), "rev-parse", commit], check=True,
                         capture_output=True, text=True).stdout.strip()
    path = Path(tempfile.gettempdir()) / f"moldau-ab-{sha[:12]}"
    if not path.exists():
        subprocess.run(["git", "-C", str(s.REPO), "worktree", "add", "--detach", str(path),
                        sha], check=True, capture_output=True)
    return path


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", default="HEAD")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from _peer_servers import build_rdkperf

    from broker import _install_tools

    _install_tools()  # librdkafka-dev and the rest of the broker suite's Debian packages
    rdkperf = build_rdkperf()
    trees = {"before": _worktree(args.before), "after": _worktree(args.after)}
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for i in range(args.rounds):
        for side in (("before", "after") if i % 2 == 0 else ("after", "before")):
            runs[side].append(_one_run(trees[side], rdkperf))
            print(f"round {i + 1} {side}: {runs[side][-1]}", flush=True)
    print(f"\n{args.rounds} rounds (ABBA), {TOTAL // MIB} MiB of {SIZE} B records per run; "
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
