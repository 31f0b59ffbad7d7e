"""Helpers of the fault tests: the checker run on a topic, acknowledgement watching, and
the cluster's view of leaders and ISRs."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from moldau.checker.consumer import verify
from moldau.checker.producer import ProducerRun
from moldau.cluster import zk_data
from moldau.cluster.zk_client import KafkaZkClient

from .conftest import Cluster

RATE = 200  # records per second over the three partitions


def broker_epoch(zk: KafkaZkClient, broker_id: int) -> int | None:
    """The czxid of /brokers/ids/<id>: changes with every registration."""
    found = zk.get(zk_data.broker_path(broker_id))
    return found[1].czxid if found else None


def leaders(cluster: Cluster, topic: str, via: int | None = None) -> dict[int, int]:
    return {p: m.leader for p, m in cluster.partitions(topic, via).items()}


def isrs_full(cluster: Cluster, topic: str | None = None, via: int | None = None) -> bool:
    """Every partition (of `topic`, or of every topic) has a leader and a full ISR."""
    server = cluster.bootstrap if via is None else cluster.brokers[via].bootstrap
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": server}).list_topics(topic, timeout=10)
    topics = [metadata.topics[topic]] if topic else list(metadata.topics.values())
    return all(t.error is None and p.leader in cluster.brokers
               and sorted(p.isrs) == sorted(p.replicas)
               for t in topics for p in t.partitions.values())


def acked(run: ProducerRun, partition: int) -> int:
    return len(run.writes()[partition].acknowledged)


def survivor(cluster: Cluster, *dead: int) -> int:
    return next(b for b in cluster.brokers if b not in dead)


def restore(cluster: Cluster) -> None:
    """Every broker resumed or started again, every ISR full."""
    for broker in cluster.brokers.values():
        pid = broker.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
    cluster.ensure_all_running()
    cluster.wait_for(lambda: isrs_full(cluster), 45, "every ISR full again")


class AckWatch:
    """Samples the run's acknowledged count; `longest_stall` is the longest time during
    which it did not grow."""

    def __init__(self, run: ProducerRun) -> None:
        self.run = run
        self.longest_stall = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> AckWatch:
        self._thread.start()
        return self

    def _watch(self) -> None:
        last_count, last_change = self.run.acknowledged, time.monotonic()
        while not self._stop.wait(0.05):
            count, now = self.run.acknowledged, time.monotonic()
            if count != last_count:
                last_count, last_change = count, now
            self.longest_stall = max(self.longest_stall, now - last_change)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.longest_stall


@contextlib.contextmanager
def checker(cluster: Cluster, prefix: str, **run_options: Any
            ) -> Iterator[tuple[ProducerRun, AckWatch]]:
    """A topic of 3 partitions (RF 3, min.insync.replicas 2) and a checker run on it; the
    run is stopped on the way out (verify() stops it on the normal path)."""
    topic = cluster.create_topic(prefix, partitions=3, replication_factor=3,
                                 **{"min.insync.replicas": "2"})
    run = ProducerRun(cluster.bootstrap, topic, rate=RATE, **run_options).start()
    watch = AckWatch(run).start()
    try:
        cluster.wait_for(lambda: all(acked(run, p) > 0 for p in range(3)), 15,
                         "first acknowledgements on every partition")
        yield run, watch
    finally:
        watch.stop()
        if run.running:
            with contextlib.suppress(Exception):
                run.stop(flush_timeout=5)


def wait_acks(cluster: Cluster, run: ProducerRun, what: str, count: int = RATE,
              timeout: float = 20) -> None:
    """`count` more acknowledgements, at least some on every partition."""
    before = run.acknowledged
    per_partition = {p: acked(run, p) for p in range(3)}
    try:
        cluster.wait_for(lambda: run.acknowledged >= before + count
                         and all(acked(run, p) > n for p, n in per_partition.items()),
                         timeout, f"acknowledged writes on every partition {what}")
    except AssertionError as exc:
        now = {p: acked(run, p) for p in range(3)}
        raise AssertionError(f"acknowledged per partition {per_partition} -> {now}, "
                             f"counters {run.counters()}, producer errors "
                             f"{run.last_error}\n{exc}") from None


def judge(run: ProducerRun, watch: AckWatch, name: str) -> float:
    """Verify the run; returns the longest acknowledgement stall."""
    stall = watch.stop()
    report = verify(run)
    print(f"\n{name}: acked {report.acknowledged}, longest acknowledgement stall "
          f"{stall:.2f}s, producer errors {dict(run.errors)}")
    assert report.ok, report.summary()
    assert report.acknowledged > 5 * RATE, report.summary()
    return stall


def log_text(cluster: Cluster, broker_id: int, name: str = "server.log") -> str:
    return pathlib.Path(cluster.brokers[broker_id].log_dir, name).read_text(errors="replace")
