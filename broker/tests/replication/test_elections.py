"""Elections after the worst failures: every in-sync replica dies and a stale one returns
(unclean election off: the partition waits; on: the stale replica leads and exactly the
records it never had are gone), and a leader that took acks=1 writes nobody copied
returns after a new leader was elected and cuts its log where the two diverged."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from .conftest import Cluster


def read_all(cluster: Cluster, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(values) < high - low and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                values.append(message.value())
        return values
    finally:
        consumer.close()


def produce(cluster: Cluster, topic: str, values: list[bytes], acks: str) -> int:
    acked: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks,
                         "linger.ms": 2, "message.timeout.ms": 15000})
    for value in values:
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda err, _m: acked.append(err))
    producer.flush(20)
    return sum(1 for err in acked if err is None)


def create_with_assignment(cluster: Cluster, name: str, replicas: list[int],
                           **config: str) -> None:
    admin = cluster.admin()
    futures = admin.create_topics([NewTopic(name, 1, replica_assignment=[replicas],
                                            config=config)])
    futures[name].result(30)
    cluster.wait_for(lambda: sorted(cluster.partitions(name)[0].isrs) == sorted(replicas),
                     30, f"{name} with a full ISR")


def leader_of(cluster: Cluster, topic: str, via: int) -> int:
    return cluster.partitions(topic, via)[0].leader


def test_all_in_sync_replicas_die_and_a_stale_one_returns(cluster: Cluster) -> None:
    """Kafka in Action, fig. 6.5, with unclean election off (topic `clean`) and on
    (topic `unclean`), both on replicas [1, 2, 3]."""
    cluster.ensure_all_running()
    suffix = os.urandom(3).hex()
    clean, unclean = f"clean-{suffix}", f"unclean-{suffix}"
    create_with_assignment(cluster, clean, [1, 2, 3])
    create_with_assignment(cluster, unclean, [1, 2, 3],
                           **{"unclean.leader.election.enable": "true"})
    try:
        cluster.brokers[3].kill()  # the follower that falls behind
        for topic in (clean, unclean):
            cluster.wait_for(lambda t=topic: sorted(cluster.partitions(t, 1)[0].isrs) == [1, 2],
                             20, f"{topic}: broker 3 out of the ISR")
        written = [b"r%d" % i for i in range(200)]
        for topic in (clean, unclean):
            assert produce(cluster, topic, written, "all") == len(written)
        cluster.wait_gone(3)
        cluster.brokers[1].kill()
        cluster.brokers[2].kill()
        time.sleep(6.5)  # their ZooKeeper sessions end (nobody is left to watch)
        cluster.start(3)  # the stale replica returns alone
        cluster.wait_for(lambda: leader_of(cluster, unclean, 3) == 3, 30,
                         "the stale replica leading the unclean topic")
        # the clean topic stays offline: no ISR member is alive
        time.sleep(2)
        assert leader_of(cluster, clean, 3) == -1
        # exactly the records broker 3 never had are gone; new writes are taken
        assert read_all(cluster, unclean) == []
        assert produce(cluster, unclean, [b"after"], "1") == 1
        cluster.start(2)  # an ISR member returns: the clean topic is back whole
        cluster.wait_for(lambda: leader_of(cluster, clean, 3) == 2, 30,
                         "broker 2 leading the clean topic")
        assert read_all(cluster, clean) == written
    finally:
        cluster.ensure_all_running()
    for topic in (clean, unclean):
        cluster.wait_for(lambda t=topic: sorted(cluster.partitions(t)[0].isrs) == [1, 2, 3],
                         30, f"{topic}: every replica back in the ISR")
    # the old ISR members dropped what the unclean leader never had
    assert read_all(cluster, unclean) == [b"after"]


def test_a_returning_leader_truncates_what_nobody_copied(cluster: Cluster) -> None:
    cluster.ensure_all_running()
    topic = f"diverge-{os.urandom(3).hex()}"
    create_with_assignment(cluster, topic, [1, 2, 3])
    assert produce(cluster, topic, [b"base%d" % i for i in range(50)], "all") == 50
    followers = [cluster.brokers[2].pid(), cluster.brokers[3].pid()]
    for pid in followers:  # cut the leader off from its followers for a moment
        os.kill(pid, signal.SIGSTOP)
    try:
        # the followers' pending fetches expire (replica.fetch.wait.max.ms): nothing the
        # leader takes now reaches them
        time.sleep(1)
        taken = produce(cluster, topic, [b"lost%d" % i for i in range(30)], "1")
        cluster.brokers[1].kill()
    finally:
        for pid in followers:
            os.kill(pid, signal.SIGCONT)
    assert taken == 30
    cluster.wait_for(lambda: leader_of(cluster, topic, 2) in (2, 3), 30,
                     "a follower elected leader")
    after = [b"new%d" % i for i in range(40)]
    assert produce(cluster, topic, after, "all") == 40
    cluster.start(1)
    cluster.wait_for(lambda: sorted(cluster.partitions(topic)[0].isrs) == [1, 2, 3], 30,
                     "the old leader back in the ISR")
    expected = [b"base%d" % i for i in range(50)] + after
    assert read_all(cluster, topic) == expected

    def segment(broker_id: int) -> bytes:
        path = os.path.join(cluster.brokers[broker_id].data_dir, f"{topic}-0",
                            "00000000000000000000.log")
        with open(path, "rb") as fh:
            return fh.read()

    cluster.wait_for(lambda: segment(1) == segment(2) == segment(3), 10,
                     "byte-identical logs on every replica")
    # it learnt where to cut from its first fetch (IBP 2.7+), not from OffsetForLeaderEpoch
    with open(os.path.join(cluster.brokers[1].log_dir, "server.log")) as fh:
        cuts = [line for line in fh if f"Truncating partition {topic}-0" in line]
    assert cuts and all("from the diverging epoch of a fetch response" in c for c in cuts)
