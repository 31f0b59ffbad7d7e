"""Consumer groups with the unmodified clients (confluent-kafka, kafka-python, aiokafka):
assignment with each client's assignors, cooperative rebalancing, rebalances on join,
clean leave and a killed member, committed offsets across consumer and broker restarts, no
loss and no duplicates across rebalances with synchronous commits, and partitions added to
a subscribed topic.

Several members of one group run as threads of this process (see clients.py); the member
that is SIGKILLed runs in a child process. Every wait is bounded and says what it waited
for; failures carry the tail of the broker's server.log.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from moldau.devcluster.brokers import BrokerProcess

from .clients import (
    MEMBER_CLASSES,
    ChildMember,
    ConfluentMember,
    Member,
    Sent,
    committed_offsets,
    describe_group,
    end_offsets,
    log_tail,
    new_topic,
    produce,
    running,
    show,
    wait_for,
    wait_owned_once,
)
from .conftest import start_group_broker

PARTITIONS = 6


def group_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def member(client: str, name: str, broker: BrokerProcess, group: str, topic: str,
           assignor: str = "range", **kwargs: Any) -> Member:
    return MEMBER_CLASSES[client](name, broker.bootstrap, group, [topic], assignor=assignor,
                                  **kwargs)


def everything(topic: str, partitions: int = PARTITIONS) -> set[tuple[str, int]]:
    return {(topic, p) for p in range(partitions)}


@pytest.fixture(scope="module")
def shared_topic(broker: BrokerProcess) -> str:
    """Six partitions, one record in each; every test uses its own group on it."""
    topic = new_topic(broker.bootstrap, "groups", PARTITIONS)
    produce(broker.bootstrap, topic, [(p, b"k%d" % p, b"v%d" % p) for p in range(PARTITIONS)])
    return topic


# --- 1. every client's assignors share the partitions ------------------------------------

ASSIGNMENT_CASES = [
    # librdkafka 2.16 has range, roundrobin and cooperative-sticky; no eager "sticky"
    # (it refuses partition.assignment.strategy=sticky as unsupported)
    ("confluent-kafka", "range"),
    ("confluent-kafka", "roundrobin"),
    ("confluent-kafka", "cooperative-sticky"),
    # kafka-python 3.0 has all four, CooperativeStickyAssignor (KIP-429) included
    ("kafka-python", "range"),
    ("kafka-python", "roundrobin"),
    ("kafka-python", "sticky"),
    ("kafka-python", "cooperative-sticky"),
    # aiokafka 0.14 has no cooperative assignor
    ("aiokafka", "range"),
    ("aiokafka", "roundrobin"),
    ("aiokafka", "sticky"),
]


@pytest.mark.parametrize(("client", "assignor"), ASSIGNMENT_CASES)
def test_three_members_share_six_partitions(broker: BrokerProcess, shared_topic: str,
                                            client: str, assignor: str) -> None:
    """Three members of one group each own two of six partitions, fetch them (each gets
    its partitions' record), DescribeGroups shows the same; after one leaves cleanly the
    other two own three each.

    The assignors are each client's own: librdkafka 2.16 has range, roundrobin and
    cooperative-sticky (no eager sticky); kafka-python 3.0.12 has range, roundrobin,
    sticky and a cooperative sticky (KIP-429) assignor; aiokafka 0.14 has range,
    roundrobin and sticky, nothing cooperative."""
    group = group_name(f"share-{client}-{assignor}")
    members = [member(client, f"{client}-{i}", broker, group, shared_topic, assignor)
               for i in range(3)]
    all_partitions = everything(shared_topic)
    context = lambda: log_tail(broker)  # noqa: E731

    def fetched_their_partitions(live: list[Member]) -> bool:
        return all(m.assignment() <= {(r.topic, r.partition) for r in m.records()}
                   for m in live)

    with running(members):
        owned = wait_owned_once(members, all_partitions, size=2, context=context)
        wait_for(lambda: fetched_their_partitions(members), 20,
                 lambda: "members did not receive the records of their partitions: "
                 + "; ".join(f"{m.name}: {sorted(p for _, p in m.assignment())} got "
                             f"{sorted({r.partition for r in m.records()})}" for m in members))

        # the coordinator's view: Stable, three members, the chosen protocol, and the
        # assignments the leader sent through SyncGroup
        from confluent_kafka import ConsumerGroupState

        def stable() -> Any:
            description = describe_group(broker.bootstrap, group)
            return description if (description.state == ConsumerGroupState.STABLE
                                   and len(description.members) == 3) else None

        description = wait_for(stable, 15, lambda: (
            f"DescribeGroups: {describe_group(broker.bootstrap, group)}\n{context()}"))
        assert description.partition_assignor == assignor
        described = sorted(sorted(tp.partition for tp in m.assignment.topic_partitions)
                           for m in description.members)
        assert described == sorted(sorted(p for _, p in tps) for tps in owned.values())

        members[0].close()
        wait_owned_once(members[1:], all_partitions, size=3, context=context)
        wait_for(lambda: fetched_their_partitions(members[1:]), 20,
                 lambda: "members did not fetch the partitions they took over")


# --- 2. cooperative-sticky: a join revokes only what moves ---------------------------------

@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_cooperative_join_revokes_only_moved_partitions(broker: BrokerProcess,
                                                        shared_topic: str, client: str) -> None:
    """KIP-429: when a third member joins a group of two, the two give up only the
    partitions that move to the newcomer (incremental revoke); what they keep is never
    revoked, and they are assigned nothing new."""
    group = group_name(f"coop-{client}")
    all_partitions = everything(shared_topic)
    context = lambda: log_tail(broker)  # noqa: E731
    a = member(client, "a", broker, group, shared_topic, "cooperative-sticky")
    b = member(client, "b", broker, group, shared_topic, "cooperative-sticky")
    c = member(client, "c", broker, group, shared_topic, "cooperative-sticky")
    with running([a, b]):
        before = wait_owned_once([a, b], all_partitions, size=3, context=context)
        marks = {m.name: len(m.events()) for m in (a, b)}
        with running([c]):
            after = wait_owned_once([a, b, c], all_partitions, size=2, context=context)
            moved: set[tuple[str, int]] = set()
            for m in (a, b):
                events = m.events()[marks[m.name]:]
                revoked = set().union(*[tps for kind, tps in events if kind == "revoke"])
                assigned = set().union(*[tps for kind, tps in events if kind == "assign"])
                history = f"{m.name} before {sorted(before[m.name])}, after " \
                          f"{sorted(after[m.name])}, callbacks since {events}"
                assert after[m.name] <= before[m.name], f"sticky: kept its own; {history}"
                assert not revoked & after[m.name], f"a kept partition was revoked; {history}"
                assert revoked == before[m.name] - after[m.name], history
                assert not assigned, f"assigned while only giving up; {history}"
                assert all(kind != "lost" for kind, _ in events), history
                moved |= revoked
            assert after["c"] == moved
            c_assigned = set().union(*[tps for kind, tps in c.events() if kind == "assign"])
            assert c_assigned == after["c"]


# --- 3. join, clean leave and a killed member each rebalance -------------------------------

def test_join_leave_and_kill_each_rebalance(broker: BrokerProcess, shared_topic: str,
                                            tmp_path: Any) -> None:
    group = group_name("membership")
    all_partitions = everything(shared_topic)
    context = lambda: log_tail(broker)  # noqa: E731
    a, b, c = (ConfluentMember(n, broker.bootstrap, group, [shared_topic]) for n in "abc")
    child = ChildMember("killed", broker.bootstrap, group, shared_topic,
                        str(tmp_path / "child.log"), session_timeout_ms=3000)
    try:
        with running([a, b]):
            wait_owned_once([a, b], all_partitions, size=3, context=context)
            with running([c]):
                # a member joins
                wait_owned_once([a, b, c], all_partitions, size=2, context=context)
                # a member leaves cleanly (LeaveGroup on close)
                b.close()
                wait_owned_once([a, c], all_partitions, size=3, context=context)
                child.start()
                wait_owned_once([a, c, child], all_partitions, size=2, context=context)
                # a member dies: no LeaveGroup, its 3 s session expires
                child.kill()
                wait_owned_once([a, c], all_partitions, size=3, timeout=25, context=context)

                from confluent_kafka import ConsumerGroupState

                description = describe_group(broker.bootstrap, group)
                assert description.state == ConsumerGroupState.STABLE, description
                assert sorted(m.client_id for m in description.members) == ["a", "c"]
    finally:
        child.kill()


# --- 4. committed offsets across consumer restarts -----------------------------------------

COMMIT = {
    "confluent-kafka": lambda consumer: consumer.commit(asynchronous=False),
    "kafka-python": lambda consumer: consumer.commit(),
    "aiokafka": lambda consumer: consumer.commit(),  # a coroutine: Member.call awaits it
}


def consume_new_and_commit(broker: BrokerProcess, client: str, group: str, topic: str,
                           sent: list[Sent], name: str) -> None:
    """A member alone in the group gets exactly `sent` (offsets committed before it are
    resumed: with auto.offset.reset=earliest anything older would come first), commits
    synchronously and leaves; the committed offsets are then the log end offsets."""
    expected = sorted((s.partition, s.offset, s.value) for s in sent)
    consumer = member(client, name, broker, group, topic)
    with running([consumer]):
        wait_for(lambda: len(consumer.records()) >= len(sent), 30,
                 lambda: f"{name} got {len(consumer.records())} of {len(sent)} records; "
                 f"{consumer.problem()}\n{log_tail(broker)}")
        got = sorted((r.partition, r.offset, r.value) for r in consumer.records())
        assert got == expected, f"{name} did not resume at the committed offsets"
        consumer.call(COMMIT[client])
    ends = end_offsets(broker.bootstrap, topic, range(PARTITIONS))
    assert committed_offsets(broker.bootstrap, group, topic, range(PARTITIONS)) == ends


def produce_round(broker: BrokerProcess, topic: str, tag: str, per_partition: int = 4,
                  ) -> list[Sent]:
    return produce(broker.bootstrap, topic, [
        (p, f"{tag}-{p}-{i}".encode(), f"{tag}-{p}-{i}".encode())
        for p in range(PARTITIONS) for i in range(per_partition)])


def test_committed_offsets_resume_across_consumer_restarts(broker: BrokerProcess) -> None:
    """One group, consumed in turn by each client: each resumes where the previous one
    committed (OffsetCommit by one client, OffsetFetch by the next)."""
    topic = new_topic(broker.bootstrap, "resume", PARTITIONS)
    group = group_name("resume")
    for round_no, client in enumerate(["confluent-kafka", "kafka-python", "aiokafka",
                                       "confluent-kafka"]):
        sent = produce_round(broker, topic, f"r{round_no}")
        consume_new_and_commit(broker, client, group, topic, sent, f"{client}-{round_no}")


# --- 5. no loss, no duplicates across clean rebalances --------------------------------------

class Feeder(threading.Thread):
    """Produces keyed records (the default partitioner spreads them) until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="feeder", daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stopping = threading.Event()
        self.sent: list[Sent] = []
        self.errors: list[str] = []

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5})

        def report(err: Any, msg: Any) -> None:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.sent.append(Sent(msg.partition(), msg.offset(), msg.key(), msg.value()))

        i = 0
        while not self.stopping.is_set():
            producer.produce(self.topic, f"v{i}".encode(), f"k{i}".encode(),
                             on_delivery=report)
            producer.poll(0)
            i += 1
            time.sleep(0.004)  # ~200 records/s: records keep arriving during rebalances
        if producer.flush(30):
            self.errors.append("records unacknowledged after 30 s")


def test_no_record_lost_or_duplicated_across_clean_rebalances(broker: BrokerProcess) -> None:
    """Members that commit synchronously after every processed batch (and in their revoke
    callback) while records keep arriving: a member joins and one leaves mid-way. Every
    acknowledged record is consumed exactly once, each partition in offset order."""
    topic = new_topic(broker.bootstrap, "exactly", PARTITIONS)
    group = group_name("exactly")
    all_partitions = everything(topic)
    context = lambda: log_tail(broker)  # noqa: E731

    def make(name: str) -> ConfluentMember:
        return ConfluentMember(name, broker.bootstrap, group, [topic], commit_each_batch=True,
                               batch_size=5, process_seconds=0.01)

    a, b, c = make("a"), make("b"), make("c")
    members = [a, b, c]
    feeder = Feeder(broker.bootstrap, topic)

    def consumed() -> int:
        return sum(len(m.records()) for m in members)

    def wait_consumed(n: int) -> None:
        wait_for(lambda: consumed() >= n, 30,
                 lambda: f"consumed {consumed()} of {n} records\n{context()}")

    try:
        with running([a, b]):
            wait_owned_once([a, b], all_partitions, size=3, context=context)
            feeder.start()
            wait_consumed(100)
            with running([c]):
                wait_owned_once([a, b, c], all_partitions, size=2, context=context)
                wait_consumed(consumed() + 100)
                b.close()
                wait_owned_once([a, c], all_partitions, size=3, context=context)
                wait_consumed(consumed() + 100)
                feeder.stopping.set()
                feeder.join(40)
                assert feeder.errors == [], feeder.errors
                ends = end_offsets(broker.bootstrap, topic, range(PARTITIONS))
                assert sum(ends.values()) == len(feeder.sent)
                # done when the group committed everything: nothing is left to redeliver
                committed = lambda: committed_offsets(  # noqa: E731
                    broker.bootstrap, group, topic, range(PARTITIONS))
                wait_for(lambda: committed() == ends, 30,
                         lambda: f"committed {committed()} != ends {ends}; consumed "
                         f"{consumed()}\n{context()}")
    finally:
        feeder.stopping.set()

    records = sorted((r for m in members for r in m.records()), key=lambda r: r.order)
    by_partition: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for r in records:
        by_partition[r.partition].append(r.offset)
    for p, offsets in by_partition.items():
        seen = set(offsets)
        duplicates = sorted({o for o in offsets if offsets.count(o) > 1})
        assert not duplicates, f"partition {p}: offsets delivered twice {duplicates[:20]}"
        assert offsets == list(range(ends[p])), (
            f"partition {p}: {ends[p] - len(seen)} missing of {ends[p]}, first missing "
            f"{sorted(set(range(ends[p])) - seen)[:10]}")
    assert sorted((r.partition, r.offset, r.key, r.value) for r in records) == sorted(
        (s.partition, s.offset, s.key, s.value) for s in feeder.sent)
    # the rebalances really happened mid-stream: the newcomer and the leaver both worked
    assert b.records() and c.records(), show({m.name: m.assignment() for m in members})
    errors = {m.name: m.commit_errors + m.client_errors for m in (a, b, c)}
    assert not any(errors.values()), f"commit or consumer errors: {errors}"


# --- 7. partitions added to a subscribed topic ----------------------------------------------

def test_added_partitions_rebalance_and_are_consumed(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = new_topic(broker.bootstrap, "grow", 2)
    group = group_name("grow")
    context = lambda: log_tail(broker)  # noqa: E731
    # librdkafka notices a new partition count at its next metadata refresh
    config = {"topic.metadata.refresh.interval.ms": 1000}
    a, b = (ConfluentMember(n, broker.bootstrap, group, [topic], config=config) for n in "ab")
    with running([a, b]):
        wait_owned_once([a, b], everything(topic, 2), size=1, context=context)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=15)
        owned = wait_owned_once([a, b], everything(topic, 3), timeout=20, context=context)
        sent = produce(broker.bootstrap, topic, [(2, b"new", b"new-%d" % i) for i in range(3)])
        owner = next(m for m in (a, b) if (topic, 2) in owned[m.name])

        def got_new() -> list[tuple[int, bytes | None]]:
            return sorted((r.offset, r.value) for r in owner.records() if r.partition == 2)

        wait_for(lambda: got_new() == sorted((s.offset, s.value) for s in sent), 20,
                 lambda: f"{owner.name} owns partition 2 but got {got_new()}\n{context()}")


# --- 4. committed offsets across broker restarts (a private broker) ------------------------

ZK_SESSION_MS = 3000  # the killed broker's registration expires this soon


def test_committed_offsets_survive_broker_restarts(tmp_path_factory: pytest.TempPathFactory,
                                                   zk_ensemble: Any) -> None:
    """The group's offsets are in __consumer_offsets: after a clean stop (SIGTERM) and
    after a kill -9, the restarted broker's coordinator loads them and a new consumer of
    the group resumes exactly after what was committed."""
    from kazoo.client import KazooClient

    broker = start_group_broker(tmp_path_factory, zk_ensemble.connect_string,
                                **{"zookeeper.session.timeout.ms": str(ZK_SESSION_MS)})
    zk = KazooClient(hosts=broker.zookeeper_connect, timeout=10)
    zk.start(timeout=15)
    try:
        topic = new_topic(broker.bootstrap, "durable", PARTITIONS)
        group = group_name("durable")
        consume_new_and_commit(broker, "confluent-kafka", group, topic,
                               produce_round(broker, topic, "first"), "before-restart")

        assert broker.stop() == 0, broker.tail()
        broker.start()
        consume_new_and_commit(broker, "confluent-kafka", group, topic,
                               produce_round(broker, topic, "second"), "after-sigterm")

        broker.kill()
        # Kafka refuses to start while the dead session still holds /brokers/ids/<id>
        registered: Callable[[], bool] = lambda: zk.exists(  # noqa: E731
            f"/brokers/ids/{broker.broker_id}") is not None
        wait_for(lambda: not registered(), 4 * ZK_SESSION_MS / 1000,
                 lambda: "the killed broker's ZooKeeper session did not expire")
        broker.start()
        consume_new_and_commit(broker, "confluent-kafka", group, topic,
                               produce_round(broker, topic, "third"), "after-kill-9")
    finally:
        zk.stop()
        zk.close()
        if broker.running():
            code = broker.stop()
            assert code == 0, f"broker exited with {code} on SIGTERM\n{broker.tail()}"
