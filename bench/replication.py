"""Replication on three brokers of one machine (issue 6): produce throughput with
replication factor 3 and acks=all next to the same run with replication factor 1, and
the failover time after a kill -9 of a partition leader.

Throughput: one topic of 6 partitions per run (RF 3 with min.insync.replicas 2, and RF
1), 1 KiB records, librdkafka producer with acks=all, batch.size 1 MiB, linger.ms 5;
MOLDAU_BENCH_REPLICATION_BYTES (default 512 MiB) per run. The three brokers, the
ZooKeeper node and the client share the machine's 2 cores, so RF 3 pays for three
copies of every byte on the same CPUs.

Failover: a topic of one partition (RF 3, min.insync.replicas 2) takes an acks=all
record every 5 ms; its leader is killed with SIGKILL and the time from the kill to the
first acknowledgement after it is measured (every acknowledgement after the kill comes
from a new leader: the dead one is in the ISR until the controller moves leadership).
The broker is restarted and the ISR is full again before the next trial.
zookeeper.session.timeout.ms is 6000 and ZooKeeper's tickTime 500 ms, so detection takes
6 to 6.5 s.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import _support as s

MIB = 1 << 20
TOTAL_BYTES = int(os.environ.get("MOLDAU_BENCH_REPLICATION_BYTES", 512 * MIB))
SESSION_MS = 6000
# ZooKeeper expires sessions on tick boundaries: a 2 s tick (the common default) alone
# adds up to 2 s to the detection of a dead broker, so the bench uses 500 ms
TICK_MS = 500
TRIALS = 20
GOALS = {"rf3_ratio": 0.40, "failover_extra_s": 2.0}


def _admin(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def _create(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    from confluent_kafka.admin import NewTopic

    admin = _admin(bootstrap)
    config = {"min.insync.replicas": "2"} if rf == 3 else {}
    admin.create_topics([NewTopic(name, partitions, rf, config=config)])[name].result(60)
    _wait(lambda: all(len(p.isrs) == rf for p in
                      admin.list_topics(name, timeout=10).topics[name].partitions.values()),
          60)


def _wait(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if condition():
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        time.sleep(0.1)


def produce_mb_s(bootstrap: str, topic: str, total: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.size": MIB, "queue.buffering.max.kbytes": 1 << 20,
                         "queue.buffering.max.messages": 2_000_000})
    value = os.urandom(1024)
    count = total // len(value)
    t0 = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10000 == 0:
            producer.poll(0)
    assert producer.flush(300) == 0, "records left undelivered"
    return count * len(value) / (time.perf_counter() - t0) / 1e6


def failover_trial(cluster: dict[int, Any], bootstrap: str, topic: str) -> tuple[float, bool]:
    """Seconds from a kill -9 of the leader to the next acknowledged record, and whether
    the victim was the controller too."""
    from confluent_kafka import Producer

    metadata = _admin(bootstrap).list_topics(topic, timeout=10)
    leader = metadata.topics[topic].partitions[0].leader
    was_controller = metadata.controller_id == leader
    acked: list[float] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                         "enable.idempotence": True, "message.timeout.ms": 60000})
    stop = threading.Event()

    def on_delivery(err: Any, _message: Any) -> None:
        if err is None:
            acked.append(time.monotonic())

    def writer() -> None:
        while not stop.is_set():
            producer.produce(topic, b"x" * 100, partition=0, on_delivery=on_delivery)
            producer.poll(0.005)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        _wait(lambda: len(acked) > 50, 20)
        killed_at = time.monotonic()
        cluster[leader].kill()
        _wait(lambda: acked and acked[-1] > killed_at, 60)
        first = next(t for t in acked if t > killed_at)
    finally:
        stop.set()
        thread.join()
        producer.flush(30)
    # back to full strength: the old registration expires, the broker returns to the ISR
    _wait(lambda: leader not in _admin(bootstrap).list_topics(timeout=10).brokers, 30)
    cluster[leader].start()
    _wait(lambda: len(_admin(bootstrap).list_topics(topic, timeout=10)
                      .topics[topic].partitions[0].isrs) == 3, 60)
    return first - killed_at, was_controller


def run() -> str:
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
    from moldau.devcluster.brokers import BrokerProcess

    clock = s.Stopwatch()
    quick = s.RUNS < 10
    total = min(TOTAL_BYTES, 32 * MIB) if quick else TOTAL_BYTES
    trials = 3 if quick else TRIALS
    workdir = Path(tempfile.mkdtemp(prefix="moldau-bench-replication-"))
    ensemble = ZooKeeperEnsemble(workdir / "zk", size=1, tick_time=TICK_MS,
                                 die_with_parent=True).start()
    connect = ensemble.connect_string + "/bench"
    props = {"zookeeper.session.timeout.ms": str(SESSION_MS), "log.segment.bytes": str(1 << 30),
             "offsets.topic.replication.factor": "3", "auto.leader.rebalance.enable": "false"}
    cluster = {i: BrokerProcess(str(workdir / f"broker{i}"), i, connect, properties=props)
               for i in (1, 2, 3)}
    try:
        for broker in cluster.values():
            broker.start()
        bootstrap = ",".join(b.bootstrap for b in cluster.values())
        rates = {}
        for rf in (1, 3):
            topic = f"bench-rf{rf}-{uuid.uuid4().hex[:6]}"
            _create(bootstrap, topic, 6, rf)
            rates[rf] = produce_mb_s(bootstrap, topic, total)
        failover_topic = "bench-failover"
        _create(bootstrap, failover_topic, 1, 3)
        samples = [failover_trial(cluster, bootstrap, failover_topic) for _ in range(trials)]
    finally:
        for broker in cluster.values():
            broker.stop()
        ensemble.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return _report(clock, total, rates, samples)


def _report(clock: s.Stopwatch, total: int, rates: dict[int, float],
            samples: list[tuple[float, bool]]) -> str:
    times = sorted(t for t, _ in samples)
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    ratio = rates[3] / rates[1]
    limit = SESSION_MS / 1000 + GOALS["failover_extra_s"]
    controllers = sum(1 for _, c in samples if c)
    lines = [
        f"Three brokers and one ZooKeeper node on this machine, 6 partitions, 1 KiB records, "
        f"acks=all, {total / MIB:.0f} MiB per run, librdkafka producer (batch.size 1 MiB, "
        "linger.ms 5).",
        "",
        s.table(["replication", "MB/s", "ratio to RF 1"], [
            ("RF 1", f"{rates[1]:.0f}", "1.00"),
            ("RF 3, min.insync.replicas 2", f"{rates[3]:.0f}", f"{ratio:.2f}"),
        ]),
        "",
        f"Failover after kill -9 of the leader (zookeeper.session.timeout.ms {SESSION_MS}, "
        f"ZooKeeper tickTime {TICK_MS} ms), "
        f"kill to the first acknowledged acks=all record, {len(times)} trials "
        f"({controllers} of them killed the controller too): p50 "
        f"{statistics.median(times):.2f} s, p99 {p99:.2f} s, max {times[-1]:.2f} s.",
        "",
        f"Goals (issue 6): RF 3 at least {GOALS['rf3_ratio']:.0%} of RF 1 "
        f"({'met' if ratio >= GOALS['rf3_ratio'] else 'missed'}); failover under the session "
        f"timeout plus {GOALS['failover_extra_s']:.0f} s = {limit:.0f} s "
        f"({'met' if p99 < limit else 'missed'} at p99).",
        "",
        s.environment(clock, ["confluent-kafka"]),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
