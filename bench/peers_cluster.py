"""Replicated: three Moldau brokers (RF 3) next to a three-node NATS JetStream cluster
(R3) and a Redis primary with two replicas, on one machine, in the same run (issue 12).

- Moldau: three brokers and one ZooKeeper node, a topic of replication factor 3 with
  min.insync.replicas 2, acks=all; bench/drivers/rdkperf produces (as in the peers
  section) and `rdkperf -consume` reads the topic back from its beginning. A topic of 1
  partition (one leader, like the one stream of the peers) and one of 6 (the three
  brokers share the leaders, as in the replication section).
- NATS JetStream: three nats-server processes joined by cluster routes on 127.0.0.1, a
  stream of 3 replicas with file storage; bench/drivers/peerbench publishes with
  asynchronous publish acknowledgements and reads the stream back with an ordered
  consumer, connected to the first server.
- Redis Streams: a primary and two replicas (replicaof), AOF everysec on each;
  peerbench pipelines XADDs to the primary with a `WAIT 1 0` after every 1024 of them
  (Redis replication is asynchronous: WAIT is its way to know a write reached a replica)
  and reads the stream back from the primary with XRANGE.

Latency: produce+consume of 1 KiB records at a fixed rate, first 50% of each system's
median produce rate above, then one rate for all (peers.latency_run, as in the peers
section): `rdkperf -e2e` with acks=all into a fresh RF 3 topic of 1 partition, peerbench
e2e on a fresh R3 stream, and on Redis with a `WAIT 1 0` after every 64 XADDs (each
pipeline flush), a record counting as acknowledged when its WAIT answers. Moldau runs
twice, with librdkafka's default requests in flight and with one.

Each round runs every system once, the order rotating; medians of the rounds with the
range, and the ratios are medians of the per-round ratios. The servers' CPU is summed
over the three processes of each system (not ZooKeeper).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from statistics import median
from typing import Any

import _peer_servers as ps
import _support as s
import peers
from _peers_report import LATENCY_COLUMNS, _cpu, latency_rows, ratios, spread, versions

ORDER = 112  # after the single-broker peers section
RECORDS = int(os.environ.get("MOLDAU_BENCH_PEERS_CLUSTER_RECORDS", 200_000))
ROUNDS = 3
WAIT_EVERY = 1024  # Redis: XADDs per WAIT (1 MiB of 1 KiB records, a Kafka batch here)
# Redis latency: peerbench flushes its pipeline every 64 XADDs, so a WAIT per flush is
# one replicated "request", as a librdkafka batch at linger.ms 1 is; 1024 would hold a
# record up to 1024 records' time (0.2 s at 5,000/s) waiting for its WAIT to be sent.
LATENCY_WAIT_EVERY = 64
MOLDAU1, MOLDAU6 = "Moldau, 1 partition", "Moldau, 6 partitions"
FIXED_RATE = 5_000  # records/s, the one offered load for all (below each one's maximum)
# Moldau latency, a second row: with librdkafka's default of up to 1,000,000 requests in
# flight per connection, the small requests of linger.ms 1 queue behind each other (a
# connection's acks=all requests are answered one at a time, as in Kafka); with one
# request in flight the producer batches what comes meanwhile.
MOLDAU1_INFLIGHT1 = "Moldau, 1 partition, 1 request in flight"
MOLDAU_E2E_CONF = {MOLDAU1: ("acks=all",),
                   MOLDAU1_INFLIGHT1: ("acks=all", "max.in.flight.requests.per.connection=1")}
NATS, REDIS = "NATS JetStream", "Redis Streams"
DURABILITY = {
    "Moldau": "acks=all, min.insync.replicas 2: acknowledged once every in-sync replica (all"
              " three while they keep up, at least two) has the batch in its log (page cache);"
              " no fsync (log.flush.interval.messages unset, Kafka's default)",
    NATS: "stream replicas 3, file storage: a publish is acknowledged once a majority (2 of 3)"
          " stored it (Raft); fsync every 2 min (the default sync_interval)",
    REDIS: "asynchronous replication to 2 replicas; a batch of 1024 XADDs counts as"
           " acknowledged when `WAIT 1 0` after it answers (at least one replica has it in"
           " memory: 2 copies); AOF with appendfsync everysec on each of the three"
           " (min-replicas-to-write alone would only refuse writes while too few replicas"
           " are connected, it makes no write wait for a copy)",
}


@dataclass
class ClusterServers(ps.Servers):
    """Three processes per system; `pids` lists them by system for the CPU sums."""

    pids: dict[str, list[int]] = field(default_factory=dict)
    bootstrap: str = ""
    brokers: list[Any] = field(default_factory=list)

    def start(self) -> ClusterServers:
        try:
            self._start_moldau_cluster()
            self._start_nats_cluster()
            self._start_redis_replicated()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_moldau_cluster(self) -> None:
        import sys

        sys.path.insert(0, str(s.REPO / "broker" / "src"))
        from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
        from moldau.devcluster.brokers import BrokerProcess

        ensemble = ZooKeeperEnsemble(self.workdir / "zk", size=1, die_with_parent=True).start()
        self._stoppers.append(ensemble.stop)
        props = {**s.AUTOTUNED_SOCKETS, "log.segment.bytes": str(1 << 30),
                 "offsets.topic.replication.factor": "3"}
        for i in (1, 2, 3):
            broker = BrokerProcess(str(self.workdir / f"moldau{i}"), i,
                                   ensemble.connect_string + "/bench", properties=props)
            self.brokers.append(broker)
            self._stoppers.append(broker.stop)
        for broker in self.brokers:
            broker.start(wait=60.0)
        self.bootstrap = ",".join(b.bootstrap for b in self.brokers)
        self._warm_group_coordinator(self.bootstrap)
        pids = [b.pid() for b in self.brokers]
        self.pids["Moldau"] = pids
        first = self.brokers[0]
        self.systems["Moldau"] = ps.System("Moldau", "kafka", first.port, pids[0],
                                           DURABILITY["Moldau"])

    def _start_nats_cluster(self) -> None:
        client, route, monitor = ([ps.free_port() for _ in range(3)] for _ in range(3))
        procs = []
        for i in range(3):
            store = self.workdir / f"nats{i}"
            store.mkdir()
            others = ",".join(f"nats://127.0.0.1:{route[j]}" for j in range(3) if j != i)
            procs.append(self._spawn([
                "nats-server", "-a", "127.0.0.1", "-p", str(client[i]), "-n", f"n{i}",
                "-m", str(monitor[i]), "-js", "-sd", str(store), "--cluster_name", "bench",
                "--cluster", f"nats://127.0.0.1:{route[i]}", "--routes", others],
                f"nats{i}.log"))
        for port in client:
            ps.wait_port(port)
        _wait_nats_meta_leader(monitor[0])
        self.pids[NATS] = [p.pid for p in procs]
        self.systems[NATS] = ps.System(NATS, "nats", client[0], procs[0].pid, DURABILITY[NATS])

    def _start_redis_replicated(self) -> None:
        ports = [ps.free_port() for _ in range(3)]
        procs = []
        for i, port in enumerate(ports):
            directory = self.workdir / f"redis{i}"
            directory.mkdir()
            replica = ["--replicaof", "127.0.0.1", str(ports[0])] if i else []
            procs.append(self._spawn([
                "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--appendonly",
                "yes", "--appendfsync", "everysec", "--save", "", "--dir", str(directory),
                "--protected-mode", "no", *replica], f"redis{i}.log"))
            ps.wait_port(port)
        _wait_redis_replicas(ports[0], 2)
        self.pids[REDIS] = [p.pid for p in procs]
        self.systems[REDIS] = ps.System(REDIS, "redis", ports[0], procs[0].pid,
                                        DURABILITY[REDIS])

    def cpu(self, system: str) -> float:
        return sum(ps.cpu_seconds(pid) for pid in self.pids[system])


def _wait_nats_meta_leader(monitor: int, timeout: float = 60.0) -> None:
    """JetStream's meta group must elect a leader before a replicated stream can exist."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{monitor}/jsz", timeout=5) as r:
                meta = json.load(r).get("meta_cluster") or {}
            if meta.get("leader") and meta.get("cluster_size") == 3:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("the NATS cluster elected no JetStream meta leader")
        time.sleep(0.5)


def _wait_redis_replicas(port: int, count: int, timeout: float = 60.0) -> None:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port)
    deadline = time.monotonic() + timeout
    while True:
        info = client.info("replication")
        online = [v for k, v in info.items()
                  if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"]
        if len(online) >= count:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"Redis has {len(online)} of {count} replicas online")
        time.sleep(0.2)


def _run(servers: ClusterServers, system: str, fn: Any) -> tuple[dict[str, Any], peers.Sample]:
    """Run one driver call; the sample takes the CPU of all three server processes."""
    key = "Moldau" if system.startswith("Moldau") else system
    cpu0, child0, t0 = servers.cpu(key), peers._children_cpu(), time.perf_counter()
    result: dict[str, Any] = fn()
    wall = time.perf_counter() - t0
    sample = peers.Sample(result["bytes"] / result["seconds"] / 1e6,
                          (servers.cpu(key) - cpu0) / wall,
                          (peers._children_cpu() - child0) / wall)
    return result, sample


def moldau_round(servers: ClusterServers, rdkperf: Path, system: str, count: int, r: int,
                 out: peers.Results) -> None:
    from replication import _create

    from broker import CONSUMER_SETTINGS

    partitions = 1 if system == MOLDAU1 else 6
    topic = f"cluster-{partitions}p-{r}"
    _create(servers.bootstrap, topic, partitions, 3)  # RF 3, min.insync.replicas 2
    first = servers.systems["Moldau"]
    produced, sample = _run(servers, system, lambda: ps.run_json(
        [str(rdkperf), servers.bootstrap, topic, str(count), str(peers.SIZE), str(partitions),
         *peers.RDKPERF_CONF, "acks=all"], first))
    out.add(system, "produce", sample)
    if peers._end_offsets(servers.bootstrap, topic, partitions) != count:
        raise RuntimeError(f"{topic}: not every record was written")
    consumed, sample = _run(servers, system, lambda: ps.run_json(
        [str(rdkperf), "-consume", servers.bootstrap, topic, str(partitions), str(count),
         *CONSUMER_SETTINGS], first))
    out.add(system, "consume", sample)
    out.commands[f"{system} produce"] = produced["command"]
    out.commands[f"{system} consume"] = consumed["command"]
    _delete_topic(servers.bootstrap, topic)


def _delete_topic(bootstrap: str, topic: str) -> None:
    """A deleted topic's dirty pages do not throttle the next round's writes."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until answered
    admin.delete_topics([topic])[topic].result(60)


def peer_round(servers: ClusterServers, driver: Path, system: str, count: int, r: int,
               out: peers.Results) -> None:
    target = servers.systems[system]
    name = f"cluster{r}"
    extra: dict[str, object] = ({"replicas": 3} if system == NATS
                                else {"wait": 1, "waitevery": WAIT_EVERY})
    produced, sample = _run(servers, system, lambda: ps.drive(
        driver, target, "produce", name=name, count=count, size=peers.SIZE, window=4096,
        **extra))
    out.add(system, "produce", sample)
    consume_extra = extra if system == NATS else {}
    consumed, sample = _run(servers, system, lambda: ps.drive(
        driver, target, "consume", name=name, count=count, size=peers.SIZE, **consume_extra))
    out.add(system, "consume", sample)
    out.commands[f"{system} produce"] = produced["command"]
    out.commands[f"{system} consume"] = consumed["command"]
    if system == REDIS:
        peers._redis_del(target.addr, name)


def _servers_cpu(servers: ClusterServers, key: str,
                 fn: Callable[[], dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """fn, its result's server CPU taken over the system's three processes."""
    def run() -> dict[str, Any]:
        cpu0, t0 = servers.cpu(key), time.perf_counter()
        result = fn()
        result["server_cpu"] = (servers.cpu(key) - cpu0) / (time.perf_counter() - t0)
        return result
    return run


def latency_round(servers: ClusterServers, driver: Path, rdkperf: Path,
                  rates: dict[str, float], r: int, out: peers.Results, label: str) -> None:
    """Each replicated system at its rate in `rates`, the order rotating with the round."""
    from replication import _create

    jobs = [*MOLDAU_E2E_CONF, NATS, REDIS]
    for i, system in enumerate(jobs[r % len(jobs):] + jobs[: r % len(jobs)]):
        moldau = system in MOLDAU_E2E_CONF
        key = "Moldau" if moldau else system
        target, name, rate = servers.systems[key], f"lat-{label}-{r}-{i}", rates[system]
        fn: Callable[[], dict[str, Any]]
        if moldau:
            _create(servers.bootstrap, name, 1, 3)  # RF 3, min.insync.replicas 2
            fn = partial(peers.rdkperf_e2e, rdkperf, target, servers.bootstrap, name, rate,
                         *MOLDAU_E2E_CONF[system])
        else:
            extra: dict[str, object] = ({"replicas": 3} if system == NATS
                                        else {"wait": 1, "waitevery": LATENCY_WAIT_EVERY})
            fn = partial(peers.peerbench_e2e, driver, target, name, rate, **extra)
        peers.latency_run(_servers_cpu(servers, key, fn), system, rate, label, out)
        if moldau:
            _delete_topic(servers.bootstrap, name)
        elif system == REDIS:
            peers._redis_del(target.addr, name)


def run() -> str:
    clock = s.Stopwatch()
    quick = s.RUNS < 10
    count = 20_000 if quick else RECORDS
    ps.install_packages()
    driver = ps.build_driver()
    rdkperf = ps.build_rdkperf()
    servers = ClusterServers(peers=True).start()
    out = peers.Results()
    loads = []
    jobs = [MOLDAU1, NATS, REDIS, MOLDAU6]
    try:
        for r in range(ROUNDS):
            loads.append(os.getloadavg()[0])
            for system in jobs[r % len(jobs):] + jobs[: r % len(jobs)]:
                if system.startswith("Moldau"):
                    moldau_round(servers, rdkperf, system, count, r, out)
                else:
                    peer_round(servers, driver, system, count, r, out)
        rates = {system: 0.5 * median(x.mb_s for x in out.throughput[(system, "produce")])
                 * 1e6 / peers.SIZE for system in (MOLDAU1, NATS, REDIS)}
        rates[MOLDAU1_INFLIGHT1] = rates[MOLDAU1]
        for r in range(ROUNDS):
            loads.append(os.getloadavg()[0])
            latency_round(servers, driver, rdkperf, rates, r, out, "half")
            latency_round(servers, driver, rdkperf, dict.fromkeys(rates, FIXED_RATE), r, out,
                          "fixed")
    finally:
        servers.stop()
    return report(clock, out, count, loads)


def report(clock: s.Stopwatch, out: peers.Results, count: int, loads: list[float]) -> str:
    rows = []
    for system in (MOLDAU1, MOLDAU6, NATS, REDIS):
        row = [system]
        for workload in ("produce", "consume"):
            samples = out.throughput[(system, workload)]
            mb_s = [x.mb_s for x in samples]
            rows_nats = [x.mb_s for x in out.throughput[(NATS, workload)]]
            row += [spread(mb_s), spread(ratios(mb_s, rows_nats), 2),
                    f"{median(x.server_cpu for x in samples) * 100:.0f}%",
                    _cpu([x.client_cpu for x in samples])]
        rows.append(row)
    durability = [f"- {name}: {text}." for name, text in DURABILITY.items()]
    commands = [f"- {name}: `{command}`" for name, command in sorted(out.commands.items())]
    produce_ratio = median(ratios([x.mb_s for x in out.throughput[(MOLDAU1, "produce")]],
                                  [x.mb_s for x in out.throughput[(NATS, "produce")]]))
    consume_ratio = median(ratios([x.mb_s for x in out.throughput[(MOLDAU1, "consume")]],
                                  [x.mb_s for x in out.throughput[(NATS, "consume")]]))
    return "\n".join([
        "## Peers, replicated: 3 Moldau brokers (RF 3) vs NATS JetStream R3 and Redis with"
        " 2 replicas (issue 12)",
        "",
        __doc__.split("\n\n", 1)[1].split("\n\nEach round")[0].strip(),
        "",
        f"{count:,} records of {peers.SIZE} B per run, produced into a fresh topic/stream and "
        f"then read back from its beginning; {ROUNDS} rounds, the systems' order "
        "rotating. MB/s: median of the rounds (min-max); *vs NATS*: median of the per-round "
        "ratios; servers' CPU: the three server processes together, in cores (100% = one "
        "core busy); client CPU: the driver process ((saturated): 90% of a core or more). "
        "Load average (1 min) at the start of "
        f"each round: {_loads(loads[:ROUNDS])} (2 cores, shared with other "
        "work: absolute figures travel badly, the ratios better).",
        "",
        s.table(["system", "produce MB/s", "vs NATS", "servers' CPU", "client CPU",
                 "consume MB/s", "vs NATS", "servers' CPU", "client CPU"], rows),
        "",
        f"Moldau (1 partition) produces {produce_ratio:.2f}x and consumes {consume_ratio:.2f}x "
        "what the NATS R3 stream does in the same rounds.",
        "",
        "### Latency at a fixed rate",
        "",
        "Produce+consume at a fixed offered rate, first 50% of each system's median produce "
        "rate in the table above (Moldau: the 1-partition row), then all at "
        f"{FIXED_RATE:,} records/s; {peers.LATENCY_SECONDS:.0f} s per run, {peers.SIZE} B "
        "records, a consumer in the same process as the producer, one partition/stream/key "
        f"created for the run; {ROUNDS} rounds, the systems' order rotating. As in the peers "
        "section, records leave on a fixed schedule and carry the time they were due: *ack* "
        "is due time to the producer's acknowledgement, *e2e* due time to receipt by the "
        "consumer (coordinated omission corrected: a stalled sender does not hide the wait).",
        "",
        "- Moldau: `rdkperf -e2e` (C, librdkafka; linger.ms 1, acks=all) into a topic of RF 3 "
        "with min.insync.replicas 2; its consumer (fetch.wait.max.ms 10) gets a record only "
        "once the in-sync replicas have it (the high watermark). Its 50% is of its maximum "
        "at linger.ms 5 and 1 MiB batches; at linger.ms 1 the same rate comes in many "
        "smaller requests, each replicated on its own. The first Moldau row keeps "
        "librdkafka's default of up to 1,000,000 requests in flight per connection. As in "
        "Kafka, a connection's requests are handled one at a time and an acks=all request "
        "holds its connection until the in-sync replicas have it, so these small requests "
        "queue behind each other whenever one's replication takes longer than the gap to "
        "the next. (Until this suite found it, the requests queued that way also filled "
        "queued.max.requests, which stopped the leader reading its followers' fetches: a "
        "30 s stall until replica.lag.time.max.ms dropped the followers from the ISR. "
        "Fixed: the bound now parks only connections holding queued requests, never one "
        "whose requests are all handled, such as a follower's; broker/tests/replication/"
        "test_pipelined_acks_all.py.) The second row sets "
        "max.in.flight.requests.per.connection=1 (the producer batches what comes while "
        "one request is out).",
        "- NATS JetStream: `peerbench -mode e2e` on an R3 stream (asynchronous publishes, each "
        "acknowledged once a majority stored it; an ordered push consumer on the first "
        "server, which delivers what the stream has stored).",
        f"- Redis Streams: `peerbench -mode e2e` with a `WAIT 1 0` after every "
        f"{LATENCY_WAIT_EVERY} XADDs (each flush of its pipeline; the throughput runs use "
        f"{WAIT_EVERY:,}, which at these rates would hold a record back until {WAIT_EVERY:,} "
        "more were sent); a record's *ack* is the reply of the WAIT after it. The consumer "
        "blocks in XREAD on the primary, which serves a record before any replica has it: "
        "Redis's *e2e*, unlike the other two, does not wait for replication and can be "
        "shorter than its *ack*.",
        "",
        "A run whose consumer had not received every record 2 minutes after the last was "
        "sent (or whose driver failed) counts as failed. Milliseconds, median of the runs "
        "(min-max); server CPU: the three server processes together; driver CPU: the "
        "driver process ((saturated): 90% of a core or more). Load average (1 min) at the "
        f"start of each latency round: {_loads(loads[ROUNDS:])}.",
        "",
        s.table(LATENCY_COLUMNS, latency_rows(out, (*MOLDAU_E2E_CONF, NATS, REDIS))),
        "",
        "RabbitMQ streams are not in these tables: Debian packages no native stream client "
        "(the peers section compares one RabbitMQ node through the Python client rstream), "
        "and a client of another class would measure the client.",
        "",
        "Durability, as each system acknowledges a write:",
        "",
        *durability,
        "",
        "Commands (addresses, topic and stream names as in the last round):",
        "",
        *commands,
        "",
        "- Versions: " + versions(),
        "",
        s.environment(clock, ["confluent-kafka", "redis"]),
    ])


def _loads(loads: list[float]) -> str:
    return ", ".join(f"{x:.1f}" for x in loads)


if __name__ == "__main__":
    print(run())
