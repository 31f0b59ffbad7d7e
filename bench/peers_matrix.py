"""Moldau's side of the wider workload matrix of issue 12: acks and lz4 (issue 12).

One broker, a topic of 1 partition per run, 1 KiB records of text (words drawn from a
small vocabulary, so lz4 has something to compress, about as much as log lines), kcat
as in the peers section. Cases, interleaved round by round: acks=1 (the peers
section's setting), acks=all (with replication factor 1: the leader alone is the ISR),
and acks=1 with lz4-compressed batches. Each case is compared with the acks=1 run of
its round. Three brokers with RF 3 are the replication section's.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from statistics import median

import _peer_servers as ps
import _support as s
import peers
from _peers_report import ratios, spread

ORDER = 113
CASES = {
    "acks=1, no compression": (),
    "acks=all, no compression": ("-X", "acks=all"),
    "acks=1, lz4": ("-X", "compression.codec=lz4"),
}
WORDS = ["sensor", "reading", "temperature", "pressure", "ok", "warn", "error", "host",
         "region", "value", "unit", "id"]


def text_records(path: Path, count: int, size: int) -> Path:
    """`count` lines of `size` bytes of words (a record each for kcat -P)."""
    rng = random.Random(12)
    lines = []
    for _ in range(1000):  # 1000 distinct records, cycled
        words = []
        while sum(len(w) + 1 for w in words) < size:
            words.append(rng.choice(WORDS) + str(rng.randrange(1000)))
        lines.append(" ".join(words)[:size].encode() + b"\n")
    block = b"".join(lines)
    with open(path, "wb") as fh:
        for _ in range(count // 1000):
            fh.write(block)
        fh.write(b"".join(lines[: count % 1000]))
    return path


def run() -> str:
    clock = s.Stopwatch()
    quick = s.RUNS < 10
    count = 20_000 if quick else peers.RECORDS
    ps.install_packages()
    servers = ps.Servers(peers=False).start()
    produce: dict[str, list[peers.Sample]] = {case: [] for case in CASES}
    consume: dict[str, list[peers.Sample]] = {case: [] for case in CASES}
    log_bytes: dict[str, list[int]] = {case: [] for case in CASES}
    loads = []
    try:
        records = text_records(servers.workdir / "text.txt", count, peers.SIZE)
        for r in range(peers.ROUNDS):
            loads.append(os.getloadavg()[0])
            order = list(CASES)
            order = order[r % len(order):] + order[: r % len(order)]
            for i, case in enumerate(order):
                topic = f"matrix-{r}-{i}"
                produce[case].append(peers.kcat_produce(servers, topic, 1, records, count,
                                                        extra=CASES[case]))
                consume[case].append(peers.kcat_consume(servers, topic, count))
                logs = Path(servers.broker.data_dir).glob(f"{topic}-0/*.log")
                log_bytes[case].append(sum(f.stat().st_size for f in logs))
    finally:
        servers.stop()
    base = "acks=1, no compression"
    rows = []
    for case in CASES:
        p = [x.mb_s for x in produce[case]]
        c = [x.mb_s for x in consume[case]]
        rows.append([case, spread(p), spread(ratios(p, [x.mb_s for x in produce[base]]), 2),
                     spread(c), spread(ratios(c, [x.mb_s for x in consume[base]]), 2),
                     f"{median(x.server_cpu for x in produce[case]) * 100:.0f}%",
                     f"{median(log_bytes[case]) / (count * peers.SIZE):.2f}"])
    return "\n".join([
        "## Moldau: acks and lz4 (issue 12)",
        "",
        f"One broker, a topic of 1 partition per run, {count:,} text records of "
        f"{peers.SIZE} B (words from a small vocabulary) produced with kcat (linger.ms 5, "
        "batch.size 1 MiB) and read back from the start, as in the peers section; "
        f"{peers.ROUNDS} rounds, the cases' order rotating. MB/s of uncompressed record "
        "bytes, median of the rounds (min-max); *vs acks=1*: median of the per-round ratios "
        "to the uncompressed acks=1 run. Load average (1 min) at the start of each round: "
        f"{', '.join(f'{x:.1f}' for x in loads)}.",
        "",
        s.table(["case", "produce MB/s", "vs acks=1", "consume MB/s", "vs acks=1",
                 "broker CPU (produce)", "log bytes / record bytes"], rows),
        "",
        "- Produce: `kcat -P -b <broker> -t <topic> -X acks=1 -X linger.ms=5 -X "
        "batch.size=1048576 -X queue.buffering.max.kbytes=1048576 [-X acks=all | -X "
        "compression.codec=lz4] -l <records>`; consume as in the peers section.",
        "",
        s.environment(clock, ["confluent-kafka"]),
    ])


if __name__ == "__main__":
    print(run())
