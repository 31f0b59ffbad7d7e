"""The Markdown section and the plots of bench/peers.py."""

from __future__ import annotations

import subprocess
from statistics import median
from typing import TYPE_CHECKING, Any

import _support as s

if TYPE_CHECKING:
    from peers import Results

PLOTS = s.REPO / "docs" / "img"
SATURATED = 0.9  # a process using 90% of a core or more is CPU-bound


def spread(values: list[float], digits: int = 0) -> str:
    """'median (min-max)' of a list of runs."""
    fmt = f"{{:,.{digits}f}}"
    return f"{fmt.format(median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b, strict=True)]


def _cpu(values: list[float]) -> str:
    m = median(values)
    return f"{m * 100:.0f}%" + (" (saturated)" if m >= SATURATED else "")


def _dpkg(package: str) -> str:
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True,
                         text=True)
    return out.stdout.strip() or "not installed"


def versions() -> str:
    from _peer_servers import version
    from confluent_kafka import libversion

    return "; ".join([
        version(["nats-server", "--version"]),
        version(["redis-server", "--version"]).split(" sha=")[0],
        f"kcat {_dpkg('kcat')} (librdkafka {_dpkg('librdkafka1')})",
        version(["go", "version"]),
        f"rdkperf built with gcc {_dpkg('gcc')} against librdkafka-dev {_dpkg('librdkafka-dev')}",
        f"nats.go {_dpkg('golang-github-nats-io-go-nats-dev')}",
        f"redigo {_dpkg('golang-github-gomodule-redigo-dev')}",
        f"iperf3 {_dpkg('iperf3')}, fio {_dpkg('fio')}",
        f"rabbitmq-server {_dpkg('rabbitmq-server')} (Erlang {_dpkg('erlang-base')})",
        f"Python clients: confluent-kafka (librdkafka {libversion()[0]})",
    ])


def plot(out: Results, systems: list[str]) -> list[str]:
    """Two PNGs under docs/img; returns their Markdown image lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    PLOTS.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.38
    for i, workload in enumerate(("produce", "consume")):
        values = [median(x.mb_s for x in out.throughput[(name, workload)]) for name in systems]
        lows = [v - min(x.mb_s for x in out.throughput[(n, workload)])
                for v, n in zip(values, systems, strict=True)]
        highs = [max(x.mb_s for x in out.throughput[(n, workload)]) - v
                 for v, n in zip(values, systems, strict=True)]
        ax.bar([j + (i - 0.5) * width for j in range(len(systems))], values, width,
               yerr=[lows, highs], capsize=3, label=workload)
    ax.set_xticks(range(len(systems)), systems, fontsize=8)
    ax.set_ylabel("MB/s (1 KiB records)")
    ax.set_title("Throughput, native drivers, median and range of the rounds", fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(PLOTS / "peers-throughput.png", dpi=100)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
    labels = ["p50", "p99", "p99.9"]
    keys = ["p50", "p99", "p999"]
    lat_systems = [n for n in systems if (n, "half") in out.latency]
    titles = {"half": "at 50% of each system's maximum", "fixed": "at the same fixed rate"}
    for ax, (label, title) in zip(axes, titles.items(), strict=True):
        for i, name in enumerate(lat_systems):
            runs = [run for run in out.latency[(name, label)] if "error" not in run]
            values = [median(run["e2e_ms"][k] for run in runs) if runs else 0.0 for k in keys]
            ax.bar([j + (i - 1) * 0.27 for j in range(3)], values, 0.27, label=name)
        ax.set_xticks(range(3), labels)
        ax.set_yscale("log")
        ax.set_title(f"End-to-end latency {title}", fontsize=9)
    axes[0].set_ylabel("ms, due time to receipt")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(PLOTS / "peers-latency.png", dpi=100)
    plt.close(fig)
    return ["![throughput](img/peers-throughput.png)", "![latency](img/peers-latency.png)"]


def size_rows(out: Results, sizes: tuple[int, ...]) -> list[list[str]]:
    from peers import MOLDAU, NATS, REDIS, SIZE

    rows = []
    for size in sorted(sizes):
        for workload in ("produce", "consume"):
            key = workload if size == SIZE else f"{workload} {size}"
            mb = {n: [x.mb_s for x in out.throughput[(n, key)]] for n in (MOLDAU, NATS, REDIS)}
            rows.append([f"{size:,} B", workload, *(spread(mb[n]) for n in mb),
                         spread(ratios(mb[MOLDAU], mb[NATS]), 2),
                         spread(ratios(mb[MOLDAU], mb[REDIS]), 2)])
    return rows


LATENCY_COLUMNS = ["system", "offered records/s", "ack p50", "ack p99", "ack p99.9",
                   "e2e p50", "e2e p99", "e2e p99.9", "server CPU", "driver CPU"]


def latency_rows(out: Results, systems: tuple[str, ...],
                 labels: tuple[str, ...] = ("half", "fixed")) -> list[list[str]]:
    """The rows of LATENCY_COLUMNS: per offered rate (label) and system, ms as median of
    the runs (min-max); a rate some runs failed at says so, one all failed at is a row of
    'failed'."""
    from peers import SIZE

    lat_rows = []
    for name, label in ((n, lab) for lab in labels for n in systems):
        every = out.latency[(name, label)]
        runs = [run for run in every if "error" not in run]
        rate = every[0]["offered_records_s"]
        failed = f"; {len(every) - len(runs)} of {len(every)} runs failed" if len(runs) < len(
            every) else ""
        label_cell = f"{rate:,.0f} ({rate * SIZE / 1e6:.0f} MB/s){failed}"
        if not runs:
            lat_rows.append([name, label_cell, *["failed"] * 8])
            continue

        def q(kind: str, key: str, runs: list[dict[str, Any]] = runs) -> str:
            return spread([run[kind][key] for run in runs], 2)

        lat_rows.append([name, label_cell,
                         q("ack_ms", "p50"), q("ack_ms", "p99"), q("ack_ms", "p999"),
                         q("e2e_ms", "p50"), q("e2e_ms", "p99"), q("e2e_ms", "p999"),
                         _cpu([run["server_cpu"] for run in runs]),
                         _cpu([run["client_cpu"] for run in runs])])
    return lat_rows


def _met(value: float, goal: float) -> str:
    return "met" if value >= goal else "**missed**"


def render(clock: s.Stopwatch, out: Results, count: int, py_count: int,
           rates: dict[str, float], durability: dict[str, str], loads: list[float]) -> str:
    from peers import (
        FIXED_RATE,
        GOALS,
        LATENCY_SECONDS,
        MOLDAU,
        MOLDAU6,
        NATS,
        OTHER_SIZES,
        RABBITMQ,
        RDKPERF_CONF,
        REDIS,
        ROUNDS,
        SIZE,
    )

    systems = [MOLDAU, MOLDAU6, NATS, REDIS]
    native = "rdkperf / kcat (librdkafka, C)"
    drivers = {MOLDAU: native, MOLDAU6: native,
               NATS: "peerbench (Go, nats.go)", REDIS: "peerbench (Go, redigo)"}

    def mb(name: str, workload: str) -> list[float]:
        return [x.mb_s for x in out.throughput[(name, workload)]]

    rows = []
    for name in systems:
        p, c = out.throughput[(name, "produce")], out.throughput[(name, "consume")]
        rows.append([name, drivers[name], spread(mb(name, "produce")),
                     f"{median(x.mb_s for x in p) * 1e6 / SIZE:,.0f}",
                     spread(mb(name, "consume")),
                     f"{_cpu([x.server_cpu for x in p])} / {_cpu([x.server_cpu for x in c])}",
                     f"{_cpu([x.client_cpu for x in p])} / {_cpu([x.client_cpu for x in c])}"])
    prod_nats = ratios(mb(MOLDAU, "produce"), mb(NATS, "produce"))
    cons_nats = ratios(mb(MOLDAU, "consume"), mb(NATS, "consume"))
    pairs = [(MOLDAU, NATS), (MOLDAU, REDIS), (MOLDAU6, NATS)]
    ratio_rows = [[f"{mine} / {peer}", workload,
                   spread(ratios(mb(mine, workload), mb(peer, workload)), 2)]
                  for mine, peer in pairs for workload in ("produce", "consume")]

    lat_rows = latency_rows(out, (MOLDAU, NATS, REDIS))

    py_rows = []
    for name in (n for n in (MOLDAU, NATS, REDIS, RABBITMQ) if (n, "produce") in out.python):
        produce, consume = out.python[(name, "produce")], out.python[(name, "consume")]
        py_rows.append([name, spread(produce), spread(consume),
                        "" if name == MOLDAU else
                        f"{spread(ratios(out.python[(MOLDAU, 'produce')], produce), 2)} / "
                        f"{spread(ratios(out.python[(MOLDAU, 'consume')], consume), 2)}"])

    iperf, page, direct = (out.limits[k] for k in ("iperf3", "fio page cache", "fio direct"))
    limit_rows = [
        ["loopback TCP, iperf3 -t 2 (one stream)", spread(iperf),
         spread(ratios(mb(MOLDAU, "produce"), iperf), 2),
         spread(ratios(mb(MOLDAU, "consume"), iperf), 2)],
        ["sequential write, fio 1 MiB psync, 512 MiB, page cache (what an un-fsynced log"
         " append hits)", spread(page), spread(ratios(mb(MOLDAU, "produce"), page), 2), ""],
        ["the same with O_DIRECT (--direct=1: to the disk)", spread(direct),
         spread(ratios(mb(MOLDAU, "produce"), direct), 2), ""],
    ]
    commands = [f"- {name}: `{cmd}`" for name, cmd in sorted(out.commands.items())]
    images = plot(out, systems)
    lines = [
        "## Peers: Moldau, NATS JetStream, Redis Streams, RabbitMQ streams (issue 12)",
        "",
        f"One server of each on 127.0.0.1, on the machine's 2 cores with their load driver "
        f"(`make bench ONLY=peers`). {ROUNDS} rounds; in each, every system produces "
        f"{count:,} records of {SIZE} B into a fresh topic/stream and then consumes them from "
        "the start; the order of the systems rotates between rounds. Figures: median of the "
        "rounds (min-max); ratios: median of the per-round ratios (min-max). MB/s = 10^6 B/s. "
        "CPU: share of one core, median of the rounds (server / driver, produce / consume); "
        "(saturated) marks 90% or more. Load average (1 min) at the start of each round: "
        f"{', '.join(f'{x:.1f}' for x in loads)}.",
        "",
        "Durability (each acknowledges a write once it is in the server's log, none fsyncs "
        "before acknowledging):",
        "",
        *[f"- {name}: {text}" for name, text in durability.items()],
        "",
        "Moldau records go into a topic of 1 partition (NATS: one stream, Redis: one key); "
        "the 6-partition row is the same run into 6 partitions. Moldau's producer is "
        "bench/drivers/rdkperf, a C loop over librdkafka's rd_kafka_produce (one static "
        "payload, no copy, round-robin partitions; linger.ms 5, batch.size 1 MiB), its "
        "consumer kcat; the driver CPU column shows when a driver is the bottleneck. NATS "
        "async publishes with 4096 acknowledgements outstanding; Redis "
        "pipelined XADDs, 4096 replies outstanding; consumers: kcat (fetch.max.bytes 50 MiB), "
        "NATS ordered push consumer (flow control), Redis XRANGE pages of 1000.",
        "",
        "### Throughput, native drivers",
        "",
        s.table(["system", "driver", "produce MB/s", "produce records/s", "consume MB/s",
                 "server CPU", "driver CPU"], rows),
        "",
        s.table(["ratio", "workload", "median (min-max)"], ratio_rows),
        "",
        f"Goals (issue 12): Moldau produce >= {GOALS['produce_vs_nats']:.0f}x NATS JetStream: "
        f"{median(prod_nats):.2f}x, {_met(median(prod_nats), GOALS['produce_vs_nats'])}; "
        f"consume >= {GOALS['consume_vs_nats']:.0f}x NATS: {median(cons_nats):.2f}x, "
        f"{_met(median(cons_nats), GOALS['consume_vs_nats'])}. A driver marked (saturated) "
        "bounds its row: the figure is then the driver's limit as much as the server's.",
        "",
        *images,
        "",
        "### Record sizes",
        "",
        f"The same rounds with {' and '.join(f'{x:,} B' for x in OTHER_SIZES)} records (the "
        f"headline's bytes per run, at most {count:,} records), 1 partition/stream/key; "
        f"{SIZE:,} B from the table above. MB/s, median of {ROUNDS} rounds (min-max).",
        "",
        s.table(["record size", "workload", MOLDAU, NATS, REDIS, "Moldau / NATS",
                 "Moldau / Redis"], size_rows(out, (SIZE, *OTHER_SIZES))),
        "",
        "### Latency at a fixed rate (rdkperf for Moldau, peerbench for NATS and Redis)",
        "",
        f"Each system first at 50% of its median produce rate above, then all at {FIXED_RATE:,} "
        f"records/s; {LATENCY_SECONDS:.0f} s per run, a consumer in the same process; "
        "1 partition/stream/key. Records are sent on a "
        "fixed schedule and each carries the time it was due: *ack* is due time to the "
        "producer's acknowledgement, *e2e* due time to receipt by the consumer (coordinated "
        "omission corrected: a stalled sender does not hide the wait). Moldau's driver here "
        "is `rdkperf -e2e` (C, librdkafka; producer linger.ms 1, acks=1; consumer "
        "fetch.wait.max.ms 10, in a second thread). Moldau's 50% is of its maximum with "
        "linger.ms 5 and 1 MiB batches; at linger.ms 1 the same rate comes in many smaller "
        "requests, so a broker that cannot keep up shows it here as latencies that grow "
        "over the run (p50 of a second or more). A run whose consumer had not received "
        "every record 2 minutes after the last was sent counts as failed (the reason is "
        "in the command's output). Milliseconds, median of the runs (min-max).",
        "",
        s.table(LATENCY_COLUMNS, lat_rows),
        "",
        "### Python clients",
        "",
        f"The same produce and consume, {py_count:,} records of {SIZE} B, with each system's "
        "Python client: confluent-kafka (librdkafka; produce() loop, consume(10000)), nats-py "
        "(publish_async, 4000 outstanding; ordered consumer), redis-py (pipelines of 1000 "
        "XADDs; XRANGE pages of 1000), rstream for RabbitMQ streams (send_batch of 1000, at most "
        "10,000 unconfirmed; a consumer from the first offset with a credit of 100 chunks; "
        "a one-node RabbitMQ started for these rounds only, no native row: Debian packages "
        "no stream-protocol client or perf tool). One process, so the client's own CPU "
        "bounds most rows.",
        "",
        s.table(["system", "produce MB/s", "consume MB/s", "Moldau / it (produce / consume)"],
                py_rows),
        "",
        "### Physical limits, measured in the same rounds",
        "",
        s.table(["limit", "MB/s", "Moldau produce / it", "Moldau consume / it"], limit_rows),
        "",
        "Commands (the last round's; ports are chosen free per run):",
        "",
        "- Moldau produce: `rdkperf <broker> <topic> <records> <size> <partitions> "
        f"{' '.join(RDKPERF_CONF)}` (bench/drivers/rdkperf, built with gcc against "
        "librdkafka-dev)",
        "- Moldau consume: `kcat -C -b <broker> -t <topic> -o beginning -e -q -c <records> -X "
        "fetch.max.bytes=52428800 -X queued.max.messages.kbytes=1048576 -X "
        "fetch.wait.max.ms=10 > /dev/null`",
        *commands,
        f"- fio: `fio --directory=<log dir> {' '.join(_fio_args())} --direct=0|1`",
        "",
        f"Versions: {versions()}.",
        "",
        s.environment(clock, ["confluent-kafka", "nats-py", "redis", "rstream", "matplotlib"]),
    ]
    return "\n".join(lines)


def _fio_args() -> list[str]:
    from peers import FIO_ARGS

    return FIO_ARGS

