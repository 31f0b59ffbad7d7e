"""Many partitions on one broker under the shell's open-files limit (issue 42), as an
operator would try it: topics of 1,000 partitions created up to each step's total, one
100 B record written to every partition, then the broker's descriptors (by kind), memory
mappings and RSS; at the end a clean restart, timed until the broker serves Metadata.

    ulimit -n 20000; .venv/bin/python bench/many_partitions.py 1000,5000,10000

Not a suite of run.py (no `run()`): it takes minutes per 5,000 partitions, and its
figures are quoted in docs/benchmarks.md by hand. If the broker dies on the way (out of
descriptors) it prints the errors of its log.
"""

from __future__ import annotations

import collections
import os
import resource
import subprocess
import sys
import time

import _peer_servers as ps


def descriptors(pid: int) -> tuple[int, dict[str, int]]:
    """The open descriptors, by kind: file suffix, socket, pipe or other target."""
    kinds: collections.Counter[str] = collections.Counter()
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            continue
        if target.startswith(("socket:", "pipe:", "anon_inode:")):
            kind = target.split(":")[0]
        else:
            kind = os.path.splitext(target.replace(" (deleted)", ""))[1] or "other"
        kinds[kind] += 1
    return sum(kinds.values()), dict(kinds.most_common())


def mappings(pid: int) -> int:
    with open(f"/proc/{pid}/maps") as f:
        return sum(1 for _ in f)


def produce_one_each(addr: str, topic: str, partitions: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": addr, "linger.ms": 20})
    for p in range(partitions):
        producer.produce(topic, b"x" * 100, partition=p)
        if p % 1000 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise RuntimeError(f"records to {topic} not acknowledged")


def report(label: str, pid: int) -> None:
    count, kinds = descriptors(pid)
    print(f"{label}: {count:,} descriptors {kinds}, {mappings(pid):,} mappings, "
          f"RSS {ps.rss_bytes(pid) / 2**20:.0f} MiB", flush=True)


def main(steps: list[int]) -> None:
    print("RLIMIT_NOFILE", resource.getrlimit(resource.RLIMIT_NOFILE), flush=True)
    servers = ps.Servers(peers=False).start()
    try:
        pid = servers.systems["Moldau"].pid
        addr = servers.systems["Moldau"].addr
        report("no topics", pid)
        done = 0
        for total in steps:
            t0 = time.monotonic()
            while done < total:
                count = min(1000, total - done)
                servers.create_topic(f"t{done}", count)
                produce_one_each(addr, f"t{done}", count)
                done += count
            time.sleep(2)  # let the step's background work finish
            report(f"{done:,} partitions (+{time.monotonic() - t0:.0f} s)", pid)
        servers.broker.stop(timeout=120)
        t0 = time.monotonic()
        servers.broker.start(wait=600)
        seconds = time.monotonic() - t0
        time.sleep(2)
        report(f"restarted in {seconds:.1f} s", servers.broker.pid())
    except Exception as exc:
        print(f"failed: {type(exc).__name__}: {exc}", flush=True)
        logs = servers.workdir / "moldau"
        subprocess.run(f"grep -rh -m5 -i 'too many\\|offline\\|failed' {logs} | head -20",
                       shell=True, check=False)
    finally:
        servers.stop()


if __name__ == "__main__":
    main([int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "1000,5000,10000").split(",")])
