"""A full disk under a leader: broker 1 keeps its logs in two dirs, the first a 2 MiB
tmpfs (a real filesystem that fills up; mounting needs root, as in CI). While the
durability checker writes to three partitions that broker 1 leads, the tmpfs is filled:
the failing append takes that dir offline, broker 1 tells the controller through
/log_dir_event_notification, its LeaderAndIsr answer names the partitions on the dead
dir (KAFKA_STORAGE_ERROR), and the controller moves their leadership to in-sync replicas.
Nothing acknowledged is lost, writes go on, and broker 1 keeps leading what lives on its
other dir."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic

from moldau.checker.producer import ProducerRun
from moldau.devcluster.brokers import BrokerProcess

from .conftest import CLUSTER_PROPERTIES, Cluster, running
from .faults import RATE, AckWatch, acked, judge, leaders, log_text, wait_acks


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    mount = tmp_path_factory.mktemp("small-disk")
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture(scope="module")
def disk_cluster(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any,
                 small_disk: Path) -> Iterator[Cluster]:
    connect = zk_ensemble.connect_string + f"/moldau-disk-{uuid.uuid4().hex[:12]}"
    brokers = {}
    for i in (1, 2, 3):
        directory = str(tmp_path_factory.mktemp(f"diskbroker{i}"))
        extra = {"log.dirs": f"{small_disk},{directory}/data"} if i == 1 else {}
        brokers[i] = BrokerProcess(directory, i, connect,
                                   properties={**CLUSTER_PROPERTIES, **extra})
    with running(Cluster(brokers, connect)) as cluster:
        yield cluster


def fill(directory: Path) -> None:
    """Write a file until the filesystem is full."""
    chunk = b"\0" * 65536
    with open(directory / "filler", "wb") as fh:
        try:
            while True:
                fh.write(chunk)
                fh.flush()
        except OSError:
            pass


def test_a_full_log_dir_moves_leadership_and_loses_nothing(disk_cluster: Cluster,
                                                           small_disk: Path) -> None:
    cluster = disk_cluster
    topic = f"full-disk-{uuid.uuid4().hex[:8]}"
    admin = cluster.admin()  # held until the answer: its destruction fails the future
    admin.create_topics([NewTopic(topic, 3, replica_assignment=[[1, 2, 3], [1, 3, 2], [1, 2, 3]],
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    cluster.wait_for(lambda: all(sorted(p.isrs) == [1, 2, 3]
                                 for p in cluster.partitions(topic).values()), 30, "full ISRs")
    on_small = {p for p in range(3) if (small_disk / f"{topic}-{p}").is_dir()}
    elsewhere = set(range(3)) - on_small
    assert on_small, "no partition of broker 1 in the small dir"
    run = ProducerRun(cluster.bootstrap, topic, rate=RATE, delivery_timeout_ms=30_000).start()
    watch = AckWatch(run).start()
    try:
        cluster.wait_for(lambda: all(acked(run, p) > 0 for p in range(3)), 15,
                         "first acknowledgements on every partition")
        fill(small_disk)
        cluster.wait_for(lambda: all(m.leader in (2, 3) and 1 not in m.isrs
                                     for p, m in cluster.partitions(topic).items()
                                     if p in on_small), 30,
                         "the partitions on the full dir led elsewhere, broker 1 out of their ISR")
        wait_acks(cluster, run, "after the dir failed", count=5 * RATE, timeout=30)
        assert all(leaders(cluster, topic)[p] == 1 for p in elsewhere)
        assert "are offline due to the failure on log dir" in log_text(cluster, 1)
        judge(run, watch, "full disk on the leader")
    finally:
        os.remove(small_disk / "filler")
        if run.running:
            watch.stop()
            run.stop(flush_timeout=5)
