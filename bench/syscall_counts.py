"""System calls per record on the brokers under unbatched acks=all at RF 3 (issue 42). A
tool, not a suite: counts, which a loaded machine does not blur as it blurs CPU time.

    python bench/syscall_counts.py [--rate 1000] [--seconds 8] [--loop-only] [--tree DIR]
                                   [--workload e2e|pp] [--records 100000]

Three fresh brokers (from this checkout, or from `--tree`, a directory holding
broker/src) on a fresh ZooKeeper, a topic of 1 partition at RF 3 (min.insync.replicas 2),
and `rdkperf -e2e` (one acks=all 1 KiB record per request at `--rate` records/s, linger.ms
0, a consumer tailing) while `strace -f -c` counts the system calls of the partition's
leader and of one follower (`--loop-only`: of their event loop's thread alone, without
the ZooKeeper client's, whose polls add calls when the ISR changes under load; it
made a new epoll selector per poll until cluster/zk_handler.py). Printed per role: the
calls per record, in all and by name, and per append (a `pwrite`: past the knee the
producer puts several records in one).

`--workload pp` is the Kafka peer suite's slowest row instead: Kafka's ProducerPerformance
(acks=all, the Java producer's defaults) sends `--records` 1 KiB records as fast as it
goes into a topic of 6 partitions at RF 3 (`make compat-deps` first); each broker then
leads two partitions and follows four, and the counts are per record produced.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _support as s
from interleave_commits import _leader_of, _three_brokers

TOP = 10


def _strace(pid: int, out: Path, every_thread: bool) -> subprocess.Popen[bytes]:
    # without -f only the thread whose id is the pid: the event loop's
    follow = ["-f"] if every_thread else []
    return subprocess.Popen(["strace", *follow, "-c", "-o", str(out), "-p", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _calls(summary: str) -> dict[str, int]:
    """strace -c's table as {syscall: calls}."""
    calls: dict[str, int] = {}
    for line in summary.splitlines():
        fields = line.split()
        # % time, seconds, usecs/call, calls, [errors,] syscall
        if len(fields) in (5, 6) and fields[3].isdigit() and fields[-1] != "total":
            calls[fields[-1]] = int(fields[3])
    return calls


def _producer_performance(bootstrap: str, records: int) -> tuple[int, str]:
    """Kafka's Java producer as fast as it goes: (records, what to print)."""
    from _kafka_peer_clusters import import_paths
    from _kafka_peer_tools import producer_performance

    import_paths()
    moved = producer_performance(bootstrap, "counts", records, 1024,
                                 Path(tempfile.mkdtemp(prefix="moldau-strace-pp-")))
    return records, (f"{records} records by ProducerPerformance, "
                     f"{moved.bytes / moved.seconds / 1e6:.1f} MB/s, p99 {moved.p99_ms} ms")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=int, default=1000, help="records/s")
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--loop-only", action="store_true",
                        help="count the event loop's thread alone (not the ZooKeeper "
                             "client's, the file worker's, ...)")
    parser.add_argument("--workload", choices=("e2e", "pp"), default="e2e")
    parser.add_argument("--records", type=int, default=100_000, help="pp's records")
    parser.add_argument("--tree", type=Path, default=s.REPO,
                        help="a directory holding broker/src (default: this checkout)")
    args = parser.parse_args()
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from _peer_servers import build_rdkperf

    rdkperf = build_rdkperf()
    outdir = Path(tempfile.mkdtemp(prefix="moldau-strace-"))
    with _three_brokers(args.tree, "counts", 6 if args.workload == "pp" else 1) as brokers:
        bootstrap = ",".join(b.bootstrap for b in brokers)
        leader = _leader_of(bootstrap, "counts")
        roles = {"leader": brokers[leader - 1],
                 "follower": next(b for b in brokers if b is not brokers[leader - 1])}
        tracers = {role: _strace(b.pid(), outdir / role, not args.loop_only)
                   for role, b in roles.items()}
        time.sleep(1.0)  # strace attaches to every thread
        if args.workload == "pp":
            records, summary = _producer_performance(bootstrap, args.records)
        else:
            run = subprocess.run([str(rdkperf), "-e2e", bootstrap, "counts", str(args.rate),
                                  str(args.seconds), "1024", "acks=all", "linger.ms=0"],
                                 capture_output=True, text=True, timeout=900, check=True)
            result = json.loads(run.stdout)
            records = int(result["records"])
            summary = (f"{records} records at {args.rate}/s; ack p99 "
                       f"{result['ack_ms']['p99']} ms, e2e p99 {result['e2e_ms']['p99']} ms")
        for tracer in tracers.values():
            tracer.send_signal(signal.SIGINT)  # strace writes its table on SIGINT
            tracer.wait(60)
    print(summary)
    for role in roles:
        calls = _calls((outdir / role).read_text())
        total = sum(calls.values())
        # past its knee the producer batches: a pwrite is an append, a request's records
        appends = calls.get("pwrite64", 0) + calls.get("pwritev", 0)
        print(f"{role}: {total / records:.1f} system calls per record, "
              f"{total / max(appends, 1):.1f} per append ({appends / records:.2f} appends "
              f"per record)")
        for name, n in sorted(calls.items(), key=lambda kv: -kv[1])[:TOP]:
            print(f"  {n / records:5.2f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
