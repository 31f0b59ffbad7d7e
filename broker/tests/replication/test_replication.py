"""Three brokers keep every acknowledged record through broker failures: followers copy the
leaders' logs byte for byte, acks=all waits for the ISR, the controller elects a new leader
from the ISR when one dies, and a SIGTERM moves leadership away before the broker exits."""

from __future__ import annotations

import filecmp
import os
import pathlib
import threading
import time

from confluent_kafka import KafkaException, Producer

from moldau.checker.consumer import verify
from moldau.checker.producer import ProducerRun
from moldau.cluster.zk_client import KafkaZkClient

from .conftest import Cluster


def leaders(cluster: Cluster, topic: str, via: int | None = None) -> dict[int, int]:
    return {p: m.leader for p, m in cluster.partitions(topic, via).items()}


def test_followers_hold_the_leaders_log_byte_for_byte(cluster: Cluster) -> None:
    topic = cluster.create_topic("copies", partitions=1)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                         "linger.ms": 5, "compression.type": "lz4"})
    for i in range(2000):
        producer.produce(topic, key=b"k%d" % (i % 7), value=b"v" * (i % 300))
    assert producer.flush(30) == 0
    partition = cluster.partitions(topic)[0]
    assert sorted(partition.isrs) == [1, 2, 3], partition

    def segment(broker_id: int) -> str:
        directory = os.path.join(cluster.brokers[broker_id].data_dir, f"{topic}-0")
        return os.path.join(directory, "00000000000000000000.log")

    # the high watermark reaches the followers with their next fetch
    cluster.wait_for(lambda: len({os.path.getsize(segment(b)) for b in (1, 2, 3)}) == 1, 10,
                     "equal segment sizes on every replica")
    leader = partition.leader
    for follower in {1, 2, 3} - {leader}:
        assert filecmp.cmp(segment(leader), segment(follower), shallow=False), follower
        epochs = [os.path.join(os.path.dirname(segment(b)), "leader-epoch-checkpoint")
                  for b in (leader, follower)]
        assert filecmp.cmp(*epochs, shallow=False)


def test_no_acknowledged_record_is_lost_when_the_leader_is_killed(cluster: Cluster) -> None:
    topic = cluster.create_topic("kill", partitions=3, **{"min.insync.replicas": "2"})
    run = ProducerRun(cluster.bootstrap, topic, rate=300).start()
    time.sleep(2)
    victim = leaders(cluster, topic)[0]
    cluster.brokers[victim].kill()
    survivor = next(b for b in cluster.brokers if b != victim)
    # the controller notices when the victim's ZooKeeper session expires and elects a new
    # leader from the ISR; writes go on
    cluster.wait_for(lambda: all(leader not in (victim, -1)
                                 for leader in leaders(cluster, topic, survivor).values()),
                     20, f"leaders other than the killed broker {victim}")
    acked_before = run.acknowledged
    cluster.wait_for(lambda: run.acknowledged > acked_before + 300, 20,
                     "acknowledged writes after the failover")
    cluster.brokers[victim].start()
    cluster.wait_for(lambda: all(sorted(p.isrs) == [1, 2, 3]
                                 for p in cluster.partitions(topic).values()),
                     30, "the restarted broker back in every ISR")
    time.sleep(1)
    report = verify(run)
    assert report.ok, report.summary()
    assert report.acknowledged > 1000, report.summary()


def test_too_few_in_sync_replicas_refuse_acks_all_but_not_acks_1(cluster: Cluster) -> None:
    topic = cluster.create_topic("minisr", partitions=1, **{"min.insync.replicas": "2"})
    leader = leaders(cluster, topic)[0]
    followers = [b for b in cluster.brokers if b != leader]
    for broker_id in followers:
        cluster.brokers[broker_id].kill()
    try:
        cluster.wait_for(lambda: cluster.partitions(topic, leader)[0].isrs == [leader], 30,
                         "the ISR shrunk to the leader")
        errors: list[str] = []
        strict = Producer({"bootstrap.servers": cluster.brokers[leader].bootstrap,
                           "acks": "all", "message.timeout.ms": 3000, "retries": 0})
        strict.produce(topic, value=b"refused",
                       on_delivery=lambda err, _msg: errors.append(err.name() if err else ""))
        strict.flush(10)
        assert errors == ["NOT_ENOUGH_REPLICAS"], errors
        relaxed = Producer({"bootstrap.servers": cluster.brokers[leader].bootstrap,
                            "acks": "1"})
        relaxed.produce(topic, value=b"taken",
                        on_delivery=lambda err, _msg: errors.append(err.name() if err else ""))
        relaxed.flush(10)
        assert errors == ["NOT_ENOUGH_REPLICAS", ""], errors
    finally:
        for broker_id in followers:
            cluster.brokers[broker_id].start()
    cluster.wait_for(lambda: sorted(cluster.partitions(topic)[0].isrs) == [1, 2, 3], 30,
                     "the followers back in the ISR")


def test_sigterm_moves_leadership_away_before_the_broker_exits(cluster: Cluster) -> None:
    cluster.ensure_all_running()
    topic = cluster.create_topic("drain", partitions=6)
    victim = 2
    watcher = next(b for b in cluster.brokers if b != victim)
    assert victim in leaders(cluster, topic).values()
    # watch the leaders through another broker while the victim stops: no partition of
    # the victim may be without a live leader for more than a second
    leaderless_since: dict[int, float] = {}
    worst: dict[int, float] = {}
    stopped = threading.Event()

    def watch() -> None:
        while not stopped.is_set():
            now = time.monotonic()
            try:
                current = leaders(cluster, topic, watcher)
            except KafkaException:
                continue
            gone = cluster.brokers[victim].pid() is None
            for partition, leader in current.items():
                without = leader == -1 or (leader == victim and gone)
                if without:
                    since = leaderless_since.setdefault(partition, now)
                    worst[partition] = max(worst.get(partition, 0.0), now - since)
                else:
                    leaderless_since.pop(partition, None)
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    started = time.monotonic()
    code = cluster.brokers[victim].stop()
    took = time.monotonic() - started
    time.sleep(2)
    stopped.set()
    thread.join()
    assert code == 0, cluster.brokers[victim].tail()
    assert took < 10, took
    assert victim not in leaders(cluster, topic, watcher).values()
    assert all(t <= 1.0 for t in worst.values()), worst
    log = pathlib.Path(cluster.brokers[victim].log_dir, "server.log").read_text()
    assert "Controlled shutdown request returned successfully" in log
    cluster.brokers[victim].start()


def test_a_new_controller_takes_over_when_controller_znode_goes(cluster: Cluster) -> None:
    cluster.ensure_all_running()
    host, chroot = cluster.zk_connect.split("/", 1)
    with KafkaZkClient(host, "/" + chroot, session_timeout_ms=6000,
                       connection_timeout_ms=15000) as zk:
        before_id = zk.get_controller_id()
        before_epoch = zk.get_controller_epoch()[0]
        zk.kazoo.delete("/controller")
        cluster.wait_for(lambda: (zk.get_controller_epoch() or (0,))[0] > before_epoch, 20,
                         "a new controller epoch")
        assert zk.get_controller_id() in cluster.brokers, before_id
    # the new controller serves topic creation and elects leaders
    topic = cluster.create_topic("after-controller", partitions=2)
    assert all(leader in cluster.brokers for leader in leaders(cluster, topic).values())
