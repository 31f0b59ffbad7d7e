"""A two-broker cluster in one ZooKeeper chroot, at one inter.broker.protocol.version,
whose controller and partition leaders move both ways while an acks=all producer runs
under Moldau's durability checker (moldau.checker): the mixed Kafka/Moldau cluster, and a
pure Kafka one as its reference (compat/scenarios/mixed_cluster.py).

The first broker started (id 1) wins the controller; the second (id 2) joins. Then the
first is stopped (the second takes the controller and every leader) and restarted (it
follows, and the ISR must heal), and the same again the other way round. The transcript
names brokers by role (first, second), so a mixed cluster and a Kafka one read the same.
"""

from __future__ import annotations

import functools
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from compat.lab import SHARED_PROPERTIES, KafkaBroker
from compat.transcript import Transcript
from moldau.checker.consumer import verify
from moldau.checker.producer import ProducerRun
from moldau.devcluster.brokers import BrokerProcess

TOPIC = "mixed"
IBP = "3.9"
PROPERTIES = {
    **{k: v for k, v in SHARED_PROPERTIES.items()
       if k not in ("authorizer.class.name", "super.users")},
    "inter.broker.protocol.version": IBP,
    "offsets.topic.replication.factor": "2",
    "auto.create.topics.enable": "false",
    # a follower paused longer than this leaves the ISR: the leader asks the controller
    "replica.lag.time.max.ms": "2000",
}
LAG_SECONDS = 2.0
# Over the lag limit and the leader's shrink check after it (half the limit), and well under
# the ZooKeeper session (10 s, the lab's ensemble caps it): ZooKeeper's Java client pings
# only after a third of the session without traffic, so a pause starts up to 3.3 s after
# the last ping. At 6 s that left 0.7 s, and on a loaded machine Kafka's paused controller
# lost its session and the controller moved, which the steps below do not expect.
PAUSE_SECONDS = 4.0
SETTLE_TIMEOUT = 90.0  # a Kafka JVM's start on a busy 2-core machine, then the ISR heal
PRODUCE_RATE = 200  # records per second, over both partitions


@dataclass
class Member:
    """One broker of the cluster, whichever kind: how to start it and wait for it."""

    role: str  # "first" or "second"
    kind: str  # "kafka" or "moldau"
    broker: KafkaBroker | BrokerProcess

    def start(self) -> None:
        if isinstance(self.broker, KafkaBroker):
            self.broker.start()
            self.broker.wait_ready(SETTLE_TIMEOUT)
        else:
            self.broker.start(wait=SETTLE_TIMEOUT)

    def stop(self) -> bool:
        """Stopped cleanly: exit code 0 (Moldau) or 143 (a JVM ending on SIGTERM)."""
        return self.broker.stop(60.0) in (0, 143, None)

    def signal(self, sig: signal.Signals) -> None:
        process = self.broker.process
        assert process is not None, f"{self.role} was never started"
        os.kill(process.pid, sig)


def member(role: str, kind: str, broker_id: int, base: Path, zookeeper: str) -> Member:
    directory = base / f"{role}-{kind}"
    if kind == "kafka":
        return Member(role, kind, KafkaBroker(directory, zookeeper, broker_id, PROPERTIES))
    return Member(role, kind, BrokerProcess(str(directory), broker_id, zookeeper,
                                            properties=PROPERTIES))


@contextmanager
def cluster(base: Path, zookeeper_root: str, kinds: tuple[str, str]
            ) -> Iterator[tuple[Member, Member]]:
    """Two brokers (ids 1 and 2, of these kinds) under a fresh chroot; stopped at the end."""
    chroot = f"{zookeeper_root}/mixed-{'-'.join(kinds)}-{uuid.uuid4().hex[:8]}"
    members = (member("first", kinds[0], 1, base, chroot),
               member("second", kinds[1], 2, base, chroot))
    try:
        yield members
    finally:
        for m in members:
            m.stop()


def _wait(what: str, condition: Callable[[], bool], timeout: float = SETTLE_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.25)


class View:
    """The cluster as one live broker's Metadata answers it, by role."""

    def __init__(self, members: tuple[Member, Member]) -> None:
        self.members = members
        self.roles = {m.broker.broker_id: m.role for m in members}

    def _metadata(self, via: Member) -> Any:  # Any: confluent's ClusterMetadata
        admin = AdminClient({"bootstrap.servers": via.broker.bootstrap})
        return admin.list_topics(timeout=5)

    def state(self, via: Member) -> tuple[str, dict[int, tuple[str, list[str]]]]:
        """(the controller's role, {partition: (leader's role, ISR roles sorted)})."""
        md = self._metadata(via)
        topic = md.topics.get(TOPIC)
        partitions = {} if topic is None or topic.error is not None else {
            p.id: (self.roles.get(p.leader, "none"), sorted(self.roles[r] for r in p.isrs))
            for p in topic.partitions.values()}
        return self.roles.get(md.controller_id, "none"), partitions

    def leads_everything(self, member: Member) -> bool:
        """The member is the controller and leads every partition (by its own metadata)."""
        controller, partitions = self.state(member)
        return controller == member.role and bool(partitions) and all(
            leader == member.role for leader, _ in partitions.values())

    def settled(self, via: Member, controller: str, leaders: dict[int, str],
                isr: list[str], seen: list[tuple[str, dict[int, tuple[str, list[str]]]]]
                ) -> bool:
        """Whether the cluster is so; the answer read is appended to `seen`."""
        try:
            found_controller, partitions = self.state(via)
        except Exception:  # a broker still starting: ask again
            return False
        seen.append((found_controller, partitions))
        return found_controller == controller and all(
            partitions.get(p) == (leader, isr) for p, leader in leaders.items())


def run(transcript: Transcript, base: Path, zookeeper_root: str,
        kinds: tuple[str, str]) -> None:
    """The whole scenario on a fresh cluster of these kinds (first broker, second one)."""
    with cluster(base, zookeeper_root, kinds) as (first, second):
        view = View((first, second))
        first.start()
        second.start()
        admin = AdminClient({"bootstrap.servers": first.broker.bootstrap})
        # partition 0 led by the first broker, partition 1 by the second
        new = NewTopic(TOPIC, 2, replica_assignment=[[1, 2], [2, 1]],
                       config={"min.insync.replicas": "2"})
        admin.create_topics([new])[TOPIC].result(30)
        both = ["first", "second"]
        timings: list[str] = []  # the report's column: how long each heal took

        def settle(step: str, via: Member, controller: str, leaders: dict[int, str]) -> None:
            started = time.monotonic()
            seen: list[tuple[str, dict[int, tuple[str, list[str]]]]] = []
            _wait(f"{step}: controller {controller}, leaders {leaders}, ISR {both}",
                  lambda: view.settled(via, controller, leaders, both, seen))
            # the answer that settled it: another Metadata request may reach another broker
            found_controller, partitions = seen[-1]
            transcript.add(f"{step}: controller {found_controller}")
            for p, (leader, isr) in sorted(partitions.items()):
                transcript.add(f"{step}: partition {p} leader {leader} isr {','.join(isr)}")
            timings.append(f"{step} {time.monotonic() - started:.0f} s")

        settle("joined", second, "first", {0: "first", 1: "second"})
        producer = ProducerRun(f"{first.broker.bootstrap},{second.broker.bootstrap}", TOPIC,
                               rate=PRODUCE_RATE, delivery_timeout_ms=240_000,
                               request_timeout_ms=10_000).start()
        try:
            time.sleep(3)
            # the controller paused: the second broker's leader drops it from the ISR and
            # adds it back, each through the controller (AlterPartition at IBP 3.9)
            first.signal(signal.SIGSTOP)
            time.sleep(PAUSE_SECONDS)
            first.signal(signal.SIGCONT)
            # a resumed leader finds its follower behind and shrinks too: let that happen
            # before waiting for the heal
            time.sleep(2 * LAG_SECONDS + 1)
            settle("first resumed", second, "first", {0: "first", 1: "second"})
            for leaving, staying in ((first, second), (second, first)):
                clean = leaving.stop()
                transcript.add(f"{leaving.role} stopped: {'cleanly' if clean else 'NOT cleanly'}")
                _wait(f"{staying.role} leads everything",
                      functools.partial(view.leads_everything, staying))
                transcript.add(f"{leaving.role} stopped: {staying.role} is the controller "
                                "and leads every partition")
                time.sleep(2)  # acks=all waits for the ISR: writes queue meanwhile
                leaving.start()
                settle(f"{leaving.role} restarted", staying, staying.role,
                       {0: staying.role, 1: staying.role})
                time.sleep(3)  # replicate from the new leaders before the next move
        finally:
            report = verify(producer, timeout=120)
        transcript.note = (f"{report.acknowledged} acknowledged, "
                           f"{'ok' if report.ok else 'NOT OK'}; " + ", ".join(timings))
        (base / "checker-report.txt").write_text(report.summary() + "\n")
        transcript.add(f"checker: {'ok' if report.ok else 'NOT OK'}; acknowledged "
                        f"{'some' if report.acknowledged > 0 else 'none'}")
        # one line whatever the kinds: the columns have one and two Kafka brokers
        refused = sum(_count_in_logs(m.broker.log_dir, "UnsupportedVersionException")
                      for m in (first, second) if isinstance(m.broker, KafkaBroker))
        transcript.add("UnsupportedVersionException in Kafka's logs: "
                       f"{'none' if refused == 0 else 'some'}")


def _count_in_logs(log_dir: Path, needle: str) -> int:
    return sum(path.read_text(errors="replace").count(needle)
               for path in log_dir.glob("*.log") if path.is_file())
