"""Three brokers keep every acknowledged record through broker failures: followers copy the
leaders' logs byte for byte, acks=all waits for the ISR, the controller elects a new leader
from the ISR when one dies, and a SIGTERM moves leadership away before the broker exits."""

from __future__ import annotations

import filecmp
import os
import pathlib
import signal
import threading
import time
from typing import Any

from broker.raw import connect, produce_request, records
from confluent_kafka import KafkaException, Producer

from moldau.checker.consumer import verify
from moldau.checker.producer import ProducerRun
from moldau.protocol.generated.produce_request import ProduceRequest

from .conftest import Cluster
from .faults import leaders


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
        # the checkpoint is written after the segment, off the request path: on a loaded
        # machine it may trail the equal segments by a moment
        cluster.wait_for(lambda e=epochs: filecmp.cmp(*e, shallow=False), 10,
                         f"broker {follower}'s leader-epoch-checkpoint equal to the leader's")


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
    cluster.start(victim)
    cluster.wait_for(lambda: all(sorted(p.isrs) == [1, 2, 3]
                                 for p in cluster.partitions(topic).values()),
                     30, "the restarted broker back in every ISR")
    time.sleep(1)
    report = verify(run)
    assert report.ok, report.summary()
    assert report.acknowledged > 1000, report.summary()


def test_acks_all_waits_for_the_isr_and_times_out_alike_on_both_produce_paths(
        cluster: Cluster) -> None:
    """Produce v10, one partition, acks=all takes the fast path (handlers/produce_fast.py),
    v8 the general one. With a follower stopped, the ISR cannot confirm: both answer
    REQUEST_TIMED_OUT after the request's timeout_ms with the offset the records took
    (appended, not committed); once the follower runs again both are committed and a
    new request is answered at once."""
    topic = cluster.create_topic("ackwait", partitions=1)
    leader = leaders(cluster, topic)[0]
    follower = next(b for b in cluster.brokers if b != leader)
    pid = cluster.brokers[follower].pid()
    assert pid is not None

    def produce(conn: Any, version: int, count: int, timeout_ms: int) -> Any:
        request = produce_request(topic, records(count), acks=-1, timeout_ms=timeout_ms)
        return conn.request(0, version, request).responses[0].partition_responses[0]

    with connect(cluster.brokers[leader]) as conn:
        assert produce(conn, 10, 2, 10_000).base_offset == 0  # the ISR is whole
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            fast = produce(conn, 10, 3, 700)
            general = produce(conn, 8, 4, 700)
            waited = time.monotonic() - started
        finally:
            os.kill(pid, signal.SIGCONT)
        assert (fast.error_code, fast.base_offset) == (7, 2), fast  # REQUEST_TIMED_OUT
        assert (general.error_code, general.base_offset) == (7, 5), general
        assert fast.log_start_offset == general.log_start_offset == 0
        assert 1.4 <= waited < 10, waited
        answer = produce(conn, 10, 1, 10_000)
        assert (answer.error_code, answer.base_offset) == (0, 9), answer
    assert sorted(cluster.partitions(topic)[0].isrs) == [1, 2, 3]


def test_acks_all_of_several_partitions_in_one_request_waits_for_each_isr(
        cluster: Cluster) -> None:
    """Kafka's Java producer sends a broker the batches of all the partitions it leads
    in one request (v11), which the fast path takes (handlers/produce_fast_many.py):
    with a follower stopped, each partition answers REQUEST_TIMED_OUT with the offset its
    records took; once it runs again, both are confirmed."""
    topic = cluster.create_topic("ackmany", partitions=4)
    by_leader: dict[int, list[int]] = {}
    for index, broker_id in sorted(leaders(cluster, topic).items()):
        by_leader.setdefault(broker_id, []).append(index)
    leader, indexes = next((b, ps[:2]) for b, ps in by_leader.items() if len(ps) >= 2)
    follower = next(b for b in cluster.brokers if b != leader)
    pid = cluster.brokers[follower].pid()
    assert pid is not None

    def produce(conn: Any, timeout_ms: int) -> dict[int, Any]:
        request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=timeout_ms,
                                 topic_data=[ProduceRequest.TopicProduceData(
                                     name=topic, partition_data=[
                                         ProduceRequest.PartitionProduceData(
                                             index=i, records=records(2))
                                         for i in indexes])])
        [answer] = conn.request(0, 11, request).responses
        return {p.index: (p.error_code, p.base_offset) for p in answer.partition_responses}

    with connect(cluster.brokers[leader]) as conn:
        assert produce(conn, 10_000) == dict.fromkeys(indexes, (0, 0))
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            timed_out = produce(conn, 700)
            waited = time.monotonic() - started
        finally:
            os.kill(pid, signal.SIGCONT)
        assert timed_out == dict.fromkeys(indexes, (7, 2)), timed_out  # REQUEST_TIMED_OUT
        assert 0.7 <= waited < 10, waited
        assert produce(conn, 10_000) == dict.fromkeys(indexes, (0, 4))


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
            cluster.start(broker_id)
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
    cluster.start(victim)


def test_a_new_controller_takes_over_when_controller_znode_goes(cluster: Cluster) -> None:
    cluster.ensure_all_running()
    with cluster.zookeeper() as zk:
        before_id = zk.get_controller_id()
        before_epoch = zk.get_controller_epoch()[0]
        zk.kazoo.delete("/controller")
        cluster.wait_for(lambda: (zk.get_controller_epoch() or (0,))[0] > before_epoch, 20,
                         "a new controller epoch")
        assert zk.get_controller_id() in cluster.brokers, before_id
    # the new controller serves topic creation and elects leaders
    topic = cluster.create_topic("after-controller", partitions=2)
    assert all(leader in cluster.brokers for leader in leaders(cluster, topic).values())


def test_elect_leaders_moves_leadership_back_to_the_preferred_replica(
        cluster: Cluster) -> None:
    from confluent_kafka import ElectionType, TopicPartition

    cluster.ensure_all_running()
    topic = cluster.create_topic("preferred", partitions=1)
    preferred = cluster.partitions(topic)[0].replicas[0]
    tp = TopicPartition(topic, 0)
    # records under the first epoch: a later leader's empty epoch then sits past them
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(topic, b"before-%d" % i, partition=0)
    assert producer.flush(30) == 0

    def elect() -> Any:
        # the previous test may have moved the controller a moment ago
        return cluster.on_controller(
            lambda admin: admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)[tp])

    assert elect().name() == "ELECTION_NOT_NEEDED"
    assert cluster.brokers[preferred].stop() == 0  # controlled shutdown: leadership moves
    try:
        cluster.wait_for(lambda: leaders(cluster, topic)[0] not in (preferred, -1), 10,
                         "a leader other than the stopped preferred replica")
        assert elect().name() == "PREFERRED_LEADER_NOT_AVAILABLE"
    finally:
        cluster.start(preferred)
    cluster.wait_for(lambda: preferred in cluster.partitions(topic)[0].isrs, 30,
                     "the preferred replica back in the ISR")
    assert leaders(cluster, topic)[0] != preferred  # nothing moves it back by itself
    assert elect() is None
    # the answer comes once the controller decided; brokers learn it by UpdateMetadata
    cluster.wait_for(lambda: leaders(cluster, topic)[0] == preferred, 10,
                     "the preferred replica leading again")
    # the replica that led meanwhile, with an epoch it never wrote under, follows again:
    # it copies what the preferred leader takes now
    for i in range(10):
        producer.produce(topic, b"after-%d" % i, partition=0)
    assert producer.flush(30) == 0

    def segment(broker_id: int) -> bytes:
        path = pathlib.Path(cluster.brokers[broker_id].data_dir, f"{topic}-0",
                            "00000000000000000000.log")
        return path.read_bytes()

    cluster.wait_for(lambda: segment(1) == segment(2) == segment(3)
                     and len(cluster.partitions(topic)[0].isrs) == 3, 30,
                     "every replica caught up and in the ISR after the election")


def test_preferred_replica_election_znode(cluster: Cluster) -> None:
    from moldau.cluster import zk_data

    cluster.ensure_all_running()
    topic = cluster.create_topic("zk-preferred", partitions=1)
    preferred = cluster.partitions(topic)[0].replicas[0]
    assert cluster.brokers[preferred].stop() == 0
    cluster.start(preferred)
    cluster.wait_for(lambda: preferred in cluster.partitions(topic)[0].isrs, 30,
                     "the preferred replica back in the ISR")
    with cluster.zookeeper() as zk:
        # what kafka-preferred-replica-election.sh --zookeeper used to write
        zk.kazoo.create(zk_data.PREFERRED_REPLICA_ELECTION_PATH,
                        zk_data.encode_preferred_replica_election([(topic, 0)]))
        cluster.wait_for(lambda: leaders(cluster, topic)[0] == preferred, 15,
                         "the preferred leader elected")
        cluster.wait_for(lambda: not zk.exists(zk_data.PREFERRED_REPLICA_ELECTION_PATH), 10,
                         "the controller deleting the znode")


def test_only_the_controller_elects_leaders(cluster: Cluster) -> None:
    from moldau.client.blocking import BlockingConnection
    from moldau.protocol.generated.elect_leaders_request import ElectLeadersRequest

    cluster.ensure_all_running()
    with cluster.zookeeper() as zk:
        controller = zk.get_controller_id()
    other = next(b for b in cluster.brokers.values() if b.broker_id != controller)
    request = ElectLeadersRequest(election_type=0, timeout_ms=5000, topic_partitions=[
        ElectLeadersRequest.TopicPartitions(topic="anything", partitions=[0])])
    with BlockingConnection("127.0.0.1", other.port) as conn:
        answer = conn.request(43, 2, request)
    codes = [p.error_code for r in answer.replica_election_results for p in r.partition_result]
    assert (answer.error_code, codes) == (0, [41]), answer  # NOT_CONTROLLER


def test_a_topic_of_replication_factor_1_is_unavailable_while_its_broker_is_down(
        cluster: Cluster) -> None:
    """Its broker is the controller too: the next controller must mark it offline."""
    from confluent_kafka.admin import NewTopic

    cluster.ensure_all_running()
    with cluster.zookeeper() as zk:
        victim = zk.get_controller_id()
    assert victim in cluster.brokers
    other = next(b for b in cluster.brokers if b != victim)
    topic = f"rf1-{os.urandom(3).hex()}"
    # a broker's metadata may still name a controller the previous test moved
    cluster.on_controller(lambda admin: admin.create_topics(
        [NewTopic(topic, 1, replica_assignment=[[victim]])])[topic].result(30))
    cluster.wait_for(lambda: leaders(cluster, topic)[0] == victim, 20, "the controller leading")

    def produce(value: bytes) -> str:
        outcome: list[str] = []
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "1",
                             "message.timeout.ms": 4000})
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda err, _m: outcome.append(err.name() if err else ""))
        producer.flush(15)
        return outcome[0] if outcome else "no report"

    assert produce(b"before") == ""
    cluster.brokers[victim].kill()
    try:
        cluster.wait_for(lambda: leaders(cluster, topic, other)[0] == -1, 30,
                         "the partition offline")
        assert produce(b"while down") != ""  # no replica can take it
    finally:
        cluster.start(victim)
    cluster.wait_for(lambda: leaders(cluster, topic)[0] == victim, 30,
                     "its broker leading again")
    assert produce(b"after") == ""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"g-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(values) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            values.append(message.value())
    consumer.close()
    assert values == [b"before", b"after"]
