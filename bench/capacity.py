"""What a partition and a segment cost one Moldau broker, measured (issue 12).

One broker (1 ZooKeeper node), no other load from this suite:

- Partitions: topics of 100 partitions (RF 1) are created step by step up to
  MOLDAU_BENCH_CAPACITY_PARTITIONS; after each step every new partition gets one record
  (a partition opens its first segment's files when it is created, the write checks that
  it serves). The broker's RSS (/proc/<pid>/status VmRSS) and open descriptors
  (/proc/<pid>/fd) are read after each step; the cost per partition is the slope of a
  least-squares line through the steps.
- Segments: one partition with segment.bytes 1 MiB takes 1 KiB records until it has
  rolled SEGMENTS segments; the same slope per segment.

docs/sizing.md turns the figures into sizing advice.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import _peer_servers as ps
import _support as s

ORDER = 112
STEP = 100
PARTITIONS = int(os.environ.get("MOLDAU_BENCH_CAPACITY_PARTITIONS", 4000))
SEGMENTS = 200


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def maps(pid: int) -> int:
    return len(Path(f"/proc/{pid}/maps").read_text().splitlines())


def slope(xs: list[float], ys: list[float]) -> float:
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else 0.0


def _settle(pid: int) -> tuple[int, int, int]:
    time.sleep(1.0)  # let the broker finish the step's background work
    return ps.rss_bytes(pid), fds(pid), maps(pid)


def partitions_step(servers: ps.Servers, name: str) -> float:
    """Create a topic of STEP partitions and write one record to each; seconds taken."""
    from confluent_kafka import Producer

    t0 = time.perf_counter()
    servers.create_topic(name, STEP)
    producer = Producer({"bootstrap.servers": servers.systems["Moldau"].addr, "linger.ms": 5})
    for p in range(STEP):
        producer.produce(name, b"x" * 100, partition=p)
    if producer.flush(120) != 0:
        raise RuntimeError(f"records to {name} not acknowledged")
    return time.perf_counter() - t0


def segments(servers: ps.Servers, pid: int, count: int
             ) -> tuple[list[int], list[tuple[int, int, int]]]:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    addr = servers.systems["Moldau"].addr
    admin = AdminClient({"bootstrap.servers": addr})
    admin.create_topics([NewTopic("segments", 1, 1, config={"segment.bytes": str(1 << 20)})])[
        "segments"].result(60)
    time.sleep(1.0)
    producer = Producer({"bootstrap.servers": addr, "linger.ms": 5, "batch.size": 64 << 10})
    value = os.urandom(1024)
    xs, ys = [], []
    per_step = count // 5
    for step in range(6):
        if step:
            for _ in range(per_step * 1000):  # 1000 records of 1 KiB ~ one 1 MiB segment
                producer.produce("segments", value, partition=0)
                producer.poll(0)
            producer.flush(120)
        done = len(list(Path(servers.broker.data_dir).glob("segments-0/*.log")))
        xs.append(done)
        ys.append(_settle(pid))
    return xs, ys


def metadata_seconds(addr: str, runs: int = 5) -> float:
    """Median time of a Metadata request for every topic (what a client's refresh costs)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": addr})
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        admin.list_topics(timeout=60)
        times.append(time.perf_counter() - t0)
    return sorted(times)[runs // 2]


def restart_seconds(servers: ps.Servers) -> float:
    """A clean stop and a start until the broker answers Metadata with itself."""
    servers.broker.stop(timeout=120)
    t0 = time.perf_counter()
    servers.broker.start(wait=600)
    return time.perf_counter() - t0


def run() -> str:
    clock = s.Stopwatch()
    quick = s.RUNS < 10
    total = 2 * STEP if quick else PARTITIONS
    servers = ps.Servers(peers=False).start()
    try:
        pid = servers.systems["Moldau"].pid
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        base = _settle(pid)
        xs, ys, seconds = [0], [base], []
        for i in range(total // STEP):
            seconds.append(partitions_step(servers, f"cap{i}"))
            xs.append((i + 1) * STEP)
            ys.append(_settle(pid))
        seg_xs, seg_ys = segments(servers, pid, 20 if quick else SEGMENTS)
        max_map = int(Path("/proc/sys/vm/max_map_count").read_text())
        metadata = metadata_seconds(servers.systems["Moldau"].addr)
        restart = restart_seconds(servers)
    finally:
        servers.stop()
    rss_p, fd_p, map_p = (slope(xs, [y[k] for y in ys]) for k in range(3))
    rss_s, fd_s, map_s = (slope(seg_xs, [y[k] for y in seg_ys]) for k in range(3))
    rows = [[f"{x:,}", f"{y[0] / 2**20:,.0f}", f"{y[1]:,}", f"{y[2]:,}"]
            for x, y in zip(xs, ys, strict=True)]
    seg_rows = [[f"{x:,}", f"{y[0] / 2**20:,.0f}", f"{y[1]:,}", f"{y[2]:,}"]
                for x, y in zip(seg_xs, seg_ys, strict=True)]
    by_fds = limit / fd_p if fd_p > 0 else float("inf")
    by_maps = max_map / map_p if map_p > 0 else float("inf")
    return "\n".join([
        "## Capacity: what a partition and a segment cost (issue 12)",
        "",
        f"One broker; topics of {STEP} partitions (RF 1) created one after the other, one "
        "100 B record written to every partition; the broker's resident memory, open "
        "descriptors and memory mappings after each step. Per-partition cost: slope of a "
        "least-squares line through the steps.",
        "",
        s.table(["partitions", "RSS MiB", "open fds", "mappings"], rows),
        "",
        f"- Per partition (one segment each): {rss_p / 1024:,.1f} KiB of RSS, {fd_p:.2f} "
        f"descriptors, {map_p:.2f} mappings. Creating and writing a step of {STEP} took "
        f"{min(seconds):.1f}-{max(seconds):.1f} s.",
        f"- This process's limits: {limit:,} open files (RLIMIT_NOFILE, inherited by the "
        f"broker), vm.max_map_count {max_map:,}: about {min(by_fds, by_maps):,.0f} "
        f"single-segment partitions before the first of them runs out "
        f"({'descriptors' if by_fds <= by_maps else 'mappings'}).",
        f"- With {xs[-1]:,} partitions: a Metadata request for all topics took "
        f"{metadata * 1000:,.0f} ms (median of 5, confluent-kafka `list_topics`); a clean "
        f"restart of the broker (stop, then start until it serves) {restart:.1f} s.",
        "",
        "Segments: one partition with segment.bytes 1 MiB, 1 KiB records, the same "
        "readings as it rolls:",
        "",
        s.table(["segments", "RSS MiB", "open fds", "mappings"], seg_rows),
        "",
        f"- Per segment: {rss_s / 1024:,.1f} KiB of RSS, {fd_s:.2f} descriptors, "
        f"{map_s:.2f} mappings.",
        "",
        s.environment(clock, ["confluent-kafka"]),
    ])


if __name__ == "__main__":
    print(run())
