"""Restarts and ZooKeeper outages: nothing acknowledged is lost across a clean stop or a
kill -9, a SIGTERM deregisters at once, one ZooKeeper node going away interrupts
nothing, and a whole-ensemble outage stops only metadata changes.

This module runs its own ZooKeeper ensemble: it stops and starts nodes, which the shared
session ensemble must never see.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.records import build_batch

from .raw import connect, metadata, server_log, topic_name, wait_log

ZK_TICK_MS = 500
SESSION_TIMEOUT_MS = 3000
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
ADMIN_TIMEOUT_S = 4


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperEnsemble]:
    zk = ZooKeeperEnsemble(tmp_path_factory.mktemp("zk-restarts"), size=3,
                           tick_time=ZK_TICK_MS, die_with_parent=True)
    zk.start(timeout=60)
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture(scope="module")
def chroot() -> str:
    return f"/moldau-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="module")
def kazoo(ensemble: ZooKeeperEnsemble, chroot: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=ensemble.connect_string + chroot, timeout=10)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, ensemble: ZooKeeperEnsemble,
           chroot: str) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        str(tmp_path_factory.mktemp("broker")), 1, ensemble.connect_string + chroot,
        properties={"num.partitions": "1", "auto.create.topics.enable": "true",
                    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    process.start()
    yield process
    if process.running():
        assert process.stop() == 0, process.tail()
    assert "Traceback" not in server_log(process), server_log(process)[-5000:]


def registration(kazoo: KazooClient, broker_id: int = 1) -> bool:
    return kazoo.exists(f"/brokers/ids/{broker_id}") is not None


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def produce(broker: BrokerProcess, topic: str, values: list[bytes]) -> list[int]:
    """Produce with acks=all and idempotence; the acknowledged offsets."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 2})
    offsets: list[int] = []
    errors: list = []

    def report(err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    for value in values:
        producer.produce(topic, value, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []
    return offsets


def consume(broker: BrokerProcess, topic: str, count: int, timeout: float = 20) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value())
    finally:
        consumer.close()
    return got


def values(n: int, tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(n)]


# --- 9 and 10. restarts -------------------------------------------------------------------

N = 2000


def test_clean_shutdown_deregisters_at_once_and_loses_nothing(
        broker: BrokerProcess, kazoo: KazooClient) -> None:
    topic = topic_name("clean")
    sent = values(N, "clean")
    assert sorted(produce(broker, topic, sent)) == list(range(N))
    assert registration(kazoo)
    code = broker.stop()
    assert code == 0, broker.tail()
    # the session was closed, not left to expire: the znode is gone at once
    assert not registration(kazoo)
    assert os.path.exists(os.path.join(broker.data_dir, CLEAN_SHUTDOWN_FILE))
    broker.start()
    assert registration(kazoo)
    assert consume(broker, topic, N) == sent
    assert not os.path.exists(os.path.join(broker.data_dir, CLEAN_SHUTDOWN_FILE))


def test_kill_9_loses_no_acknowledged_record(broker: BrokerProcess,
                                             kazoo: KazooClient) -> None:
    topic = topic_name("killed")
    sent = values(N, "killed")
    assert sorted(produce(broker, topic, sent)) == list(range(N))
    broker.kill()
    assert not os.path.exists(os.path.join(broker.data_dir, CLEAN_SHUTDOWN_FILE))
    # a batch torn by the crash: a header promising more bytes than were written
    segment = os.path.join(broker.data_dir, f"{topic}-0", "00000000000000000000.log")
    with open(segment, "ab") as fh:
        fh.write(build_batch([(None, b"torn" * 100)], base_offset=N)[:150])
    # the dead broker's ephemeral registration lives until its session expires; Kafka
    # refuses to start while another session holds the id, so wait as an operator would
    wait_until(lambda: not registration(kazoo), 3 * SESSION_TIMEOUT_MS / 1000,
               "the killed broker's session to expire")
    broker.start()  # recovery truncates the torn batch
    assert consume(broker, topic, N) == sent
    more = produce(broker, topic, [b"after"])  # the log continues where it was
    assert more == [N]
    assert consume(broker, topic, N + 1)[-1] == b"after"


# --- 9. ZooKeeper outages -----------------------------------------------------------------

class Traffic:
    """A producer (acks=all) and a consumer running in threads while something happens;
    records the latency of every acknowledgement and every record consumed."""

    def __init__(self, broker: BrokerProcess, topic: str, start: int) -> None:
        from confluent_kafka import Consumer, Producer, TopicPartition

        self.topic, self.start = topic, start
        self.producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 0})
        self.consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                                  "enable.auto.commit": False, "fetch.wait.max.ms": 100})
        self.consumer.assign([TopicPartition(topic, 0, start)])
        self.stop = threading.Event()
        self.produced = threading.Event()
        self.sent = 0
        self.acked: list[int] = []
        # (send time, latency) of every ack; check() judges those sent in steady state.
        self.latencies: list[tuple[float, float]] = []
        self.steady_since = float("inf")
        self.errors: list = []
        self.consumed: list[bytes] = []
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]

    def __enter__(self) -> Traffic:
        for thread in self.threads:
            thread.start()
        # The first ack needs a producer id, which the broker takes from ZooKeeper: wait
        # for it, so the faults that follow hit steady traffic, not the producer's setup.
        deadline = time.monotonic() + 20
        while not self.acked and not self.errors and time.monotonic() < deadline:
            time.sleep(0.01)
        self.steady_since = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)
        self.consumer.close()

    def _produce(self) -> None:
        def report(err, msg, started: float) -> None:
            if err is not None:
                self.errors.append(err)
            else:
                self.acked.append(msg.offset())
                self.latencies.append((started, time.monotonic() - started))

        try:
            while not self.stop.is_set():
                started = time.monotonic()
                self.producer.produce(self.topic, b"t-%d" % self.sent,
                                      on_delivery=lambda e, m, s=started: report(e, m, s))
                self.sent += 1
                self.producer.poll(0.01)
            self.producer.flush(30)
        finally:
            self.produced.set()

    def _consume(self) -> None:
        deadline = None
        while not (self.produced.is_set() and len(self.consumed) >= len(self.acked)):
            if self.stop.is_set():
                deadline = deadline or time.monotonic() + 15
                if time.monotonic() > deadline:
                    break
            msg = self.consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                self.consumed.append(msg.value())

    def check(self, max_latency: float) -> None:
        assert self.errors == []
        assert self.sent > 50
        assert sorted(self.acked) == list(range(self.start, self.start + self.sent))
        assert self.consumed == [b"t-%d" % i for i in range(self.sent)]
        # The client's own start (connections, producer id) is not what is judged here.
        steady = [took for sent, took in self.latencies if sent >= self.steady_since]
        assert len(steady) > 50
        assert max(steady) < max_latency, max(steady)


def test_losing_one_zookeeper_node_interrupts_nothing(
        broker: BrokerProcess, ensemble: ZooKeeperEnsemble, kazoo: KazooClient) -> None:
    topic = topic_name("zk-one")
    produce(broker, topic, [b"warm-up"])  # auto-created
    leader = next(i for i in range(ensemble.size) if ensemble.mode(i) == "leader")
    with Traffic(broker, topic, start=1) as traffic:
        time.sleep(0.5)
        ensemble.stop_node(leader)  # the hardest one: the others elect a new leader
        time.sleep(1.0)
        ensemble.start_node(leader)
        time.sleep(0.3)
    traffic.check(max_latency=1.0)
    ensemble.wait_quorum(30)
    assert registration(kazoo)


def test_losing_the_whole_ensemble_stops_only_metadata_changes(
        broker: BrokerProcess, ensemble: ZooKeeperEnsemble, kazoo: KazooClient) -> None:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("zk-all")
    produce(broker, topic, [b"warm-up"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    log_start = len(server_log(broker))
    for i in range(ensemble.size):
        ensemble.stop_node(i)
    try:
        with Traffic(broker, topic, start=1) as traffic:
            time.sleep(0.5)
            # A metadata change needs ZooKeeper: it fails within the client's timeout, with
            # the broker's REQUEST_TIMED_OUT once ZooKeeper has been unreachable for the
            # session timeout, or the client's own timeout if that comes first.
            started = time.monotonic()
            future = admin.create_topics([NewTopic(topic_name("no-zk"), 1, 1)],
                                         request_timeout=ADMIN_TIMEOUT_S)
            with pytest.raises(KafkaException) as failure:
                next(iter(future.values())).result(timeout=3 * ADMIN_TIMEOUT_S)
            took = time.monotonic() - started
        traffic.check(max_latency=1.0)  # the existing partition kept serving throughout
        error = failure.value.args[0]
        assert error.code() in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT), error
        assert took < ADMIN_TIMEOUT_S + 2, took
        with connect(broker) as conn:  # metadata is served from the broker's cache
            assert metadata(conn, [topic]).topics[0].error_code == 0
    finally:
        for i in range(ensemble.size):
            ensemble.start_node(i)
    ensemble.wait_quorum(30)
    wait_until(lambda: registration(kazoo), 20, "the broker's registration")
    created = topic_name("zk-back")
    future = admin.create_topics([NewTopic(created, 1, 1)], request_timeout=15)
    next(iter(future.values())).result(timeout=20)
    assert produce(broker, created, [b"back"]) == [0]
    assert "Traceback" not in server_log(broker)[log_start:]


def test_session_expiry_re_registers(broker: BrokerProcess, kazoo: KazooClient) -> None:
    """A broker frozen for longer than its session timeout (a long GC pause, a stopped VM)
    loses its session and its registration; when it runs again it gets a new session,
    registers again and serves as before."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = topic_name("expiry")
    assert produce(broker, topic, [b"before"]) == [0]
    pid = broker.pid()
    assert pid is not None
    log_start = len(server_log(broker))
    epoch = kazoo.get("/brokers/ids/1")[1].czxid
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_until(lambda: not registration(kazoo), 3 * SESSION_TIMEOUT_MS / 1000,
                   "the frozen broker's session to expire")
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_until(lambda: registration(kazoo), 15, "the broker to register again")
    assert kazoo.get("/brokers/ids/1")[1].czxid > epoch  # a new registration
    wait_log(broker, "Re-registered broker 1", start=log_start, timeout=10)
    assert produce(broker, topic, [b"after"]) == [1]
    assert consume(broker, topic, 2) == [b"before", b"after"]
    # the controller's /controller znode went with the session: it is elected again
    wait_until(lambda: kazoo.exists("/controller") is not None, 10, "a controller")
    with connect(broker) as conn:
        wait_until(lambda: metadata(conn, []).controller_id == 1, 10,
                   "the broker to be the controller again")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = topic_name("after-expiry")
    next(iter(admin.create_topics([NewTopic(created, 1, 1)], request_timeout=15)
              .values())).result(timeout=20)
    assert produce(broker, created, [b"new"]) == [0]
