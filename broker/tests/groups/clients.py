"""Consumer-group members driven by the real clients, and the checks the group tests share.

Every member polls in its own thread (aiokafka: its own event loop in its own thread) and
records what it was assigned, its rebalance callbacks and every record it consumed, so a
test can run several members of one group in one process and judge the group from
outside. `ChildMember` is a confluent-kafka consumer in a child process, for the member
that is SIGKILLed and must be expired by its session timeout.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import importlib
import inspect
import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

TP = tuple[str, int]  # (topic, partition)

# the order in which records were consumed, across all members (next() holds the GIL)
_consumed_order = itertools.count()

# the assignor classes of the Python clients, by their protocol name
KAFKA_PYTHON_ASSIGNORS = {
    "range": "kafka.coordinator.assignors.range:RangePartitionAssignor",
    "roundrobin": "kafka.coordinator.assignors.roundrobin:RoundRobinPartitionAssignor",
    "sticky": "kafka.coordinator.assignors.sticky.sticky_assignor:StickyPartitionAssignor",
    "cooperative-sticky":
        "kafka.coordinator.assignors.cooperative_sticky:CooperativeStickyAssignor",
}
AIOKAFKA_ASSIGNORS = {
    "range": "aiokafka.coordinator.assignors.range:RangePartitionAssignor",
    "roundrobin": "aiokafka.coordinator.assignors.roundrobin:RoundRobinPartitionAssignor",
    "sticky": "aiokafka.coordinator.assignors.sticky.sticky_assignor:StickyPartitionAssignor",
}


def _load(path: str) -> Any:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    member: str
    order: int  # position in the consumption order across all members


class Owner(Protocol):
    """Anything that owns partitions in a group: a member thread or a child process."""

    name: str

    def assignment(self) -> frozenset[TP]: ...

    def problem(self) -> str | None: ...


class Member:
    """One group member polling in its own thread until close()."""

    client = "?"

    def __init__(self, name: str, bootstrap: str, group: str, topics: Sequence[str], *,
                 assignor: str = "range", session_timeout_ms: int = 6000,
                 heartbeat_interval_ms: int = 500,
                 config: Mapping[str, Any] | None = None) -> None:
        self.name, self.bootstrap, self.group = name, bootstrap, group
        self.topics = list(topics)
        self.assignor = assignor
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.config = dict(config or {})
        self._lock = threading.Lock()
        self._records: list[Record] = []
        self._events: list[tuple[str, frozenset[TP]]] = []
        self._assignment: frozenset[TP] = frozenset()
        self.client_errors: list[str] = []  # errors the client reported while polling
        self.error: BaseException | None = None  # what ended the polling thread early
        self._stopping = threading.Event()
        self._calls: list[tuple[Callable[[Any], Any], concurrent.futures.Future[Any]]] = []
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    # --- the test's side ------------------------------------------------------------------

    def start(self) -> Member:
        self._thread.start()
        return self

    def close(self, timeout: float = 30.0, check: bool = True) -> None:
        """Stop polling and close the consumer (a clean LeaveGroup) in the member's thread."""
        self._stopping.set()
        self._thread.join(timeout)
        if check:
            assert not self._thread.is_alive(), f"{self.name} did not close in {timeout}s"
            assert self.error is None, f"{self.name} failed: {self.error!r}"

    def assignment(self) -> frozenset[TP]:
        with self._lock:
            return self._assignment

    def records(self) -> list[Record]:
        with self._lock:
            return list(self._records)

    def events(self) -> list[tuple[str, frozenset[TP]]]:
        """The rebalance callbacks in the order they ran: ("assign" | "revoke" | "lost",
        the partitions passed)."""
        with self._lock:
            return list(self._events)

    def problem(self) -> str | None:
        if self.error is not None:
            return f"{self.name} ({self.client}) failed: {self.error!r}"
        if not self._thread.is_alive() and not self._stopping.is_set():
            return f"{self.name} ({self.client}) stopped polling"
        return None

    def call(self, fn: Callable[[Any], Any], timeout: float = 30.0) -> Any:
        """Run fn(consumer) in the member's thread between two polls (the clients are not
        thread-safe); its result. aiokafka: a coroutine's result is awaited."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            self._calls.append((fn, future))
        return future.result(timeout)

    # --- the member's thread --------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._main()
        except BaseException as exc:  # the checks report it (problem())
            self.error = exc

    def _main(self) -> None:
        raise NotImplementedError

    def _pending_calls(self) -> list[tuple[Callable[[Any], Any], concurrent.futures.Future[Any]]]:
        with self._lock:
            calls, self._calls = self._calls, []
        return calls

    def _serve_calls(self, consumer: Any) -> None:
        for fn, future in self._pending_calls():
            try:
                future.set_result(fn(consumer))
            except Exception as exc:
                future.set_exception(exc)

    def _record(self, topic: str, partition: int, offset: int, key: bytes | None,
                value: bytes | None) -> None:
        record = Record(topic, partition, offset, key, value, self.name, next(_consumed_order))
        with self._lock:
            self._records.append(record)

    def _event(self, kind: str, partitions: Iterable[Any]) -> None:
        tps = frozenset(_tp(p) for p in partitions)
        with self._lock:
            self._events.append((kind, tps))

    def _set_assignment(self, partitions: Iterable[Any]) -> None:
        tps = frozenset(_tp(p) for p in partitions)
        with self._lock:
            self._assignment = tps


def _tp(partition: Any) -> TP:
    """(topic, partition) of any client's TopicPartition (all three have the attributes)."""
    return (partition.topic, partition.partition)


class ConfluentMember(Member):
    """confluent-kafka (librdkafka): consume() batches; with commit_each_batch, every batch
    is committed synchronously once processed, and what is processed but not yet committed
    is committed synchronously in the revoke callback (and before close)."""

    client = "confluent-kafka"

    def __init__(self, *args: Any, commit_each_batch: bool = False, batch_size: int = 10,
                 process_seconds: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commit_each_batch = commit_each_batch
        self.batch_size = batch_size
        self.process_seconds = process_seconds  # simulated work per batch
        self.commit_errors: list[str] = []
        self._uncommitted: dict[TP, int] = {}

    def _commit(self, consumer: Any, only: frozenset[TP] | None = None) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        todo = {tp: off for tp, off in self._uncommitted.items() if only is None or tp in only}
        if not todo:
            return
        try:
            result = consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o
                                              in todo.items()], asynchronous=False)
        except KafkaException as exc:
            self.commit_errors.append(f"{sorted(todo.items())}: {exc}")
            return
        for tp in result or []:
            if tp.error is not None:
                self.commit_errors.append(f"{tp.topic}[{tp.partition}]: {tp.error}")
        for tp in todo:
            self._uncommitted.pop(tp, None)

    def _main(self) -> None:
        from confluent_kafka import Consumer, KafkaError

        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": self.group,
            "client.id": self.name,
            "partition.assignment.strategy": self.assignor,
            "session.timeout.ms": self.session_timeout_ms,
            "heartbeat.interval.ms": self.heartbeat_interval_ms,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            **self.config,
        })

        def on_assign(_consumer: Any, partitions: list[Any]) -> None:
            self._event("assign", partitions)

        def on_revoke(c: Any, partitions: list[Any]) -> None:
            self._event("revoke", partitions)
            if self.commit_each_batch:
                self._commit(c, frozenset(_tp(p) for p in partitions))

        def on_lost(_consumer: Any, partitions: list[Any]) -> None:
            self._event("lost", partitions)

        # confluent-kafka assigns / unassigns (incrementally for a cooperative protocol)
        # after these callbacks, since they do not do it themselves
        consumer.subscribe(self.topics, on_assign=on_assign, on_revoke=on_revoke,
                           on_lost=on_lost)
        try:
            while not self._stopping.is_set():
                for message in consumer.consume(num_messages=self.batch_size, timeout=0.1):
                    error = message.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            self.client_errors.append(str(error))
                        continue
                    self._record(message.topic(), message.partition(), message.offset(),
                                 message.key(), message.value())
                    self._uncommitted[(message.topic(), message.partition())] = (
                        message.offset() + 1)
                if self.process_seconds:
                    time.sleep(self.process_seconds)
                if self.commit_each_batch:
                    self._commit(consumer)
                self._set_assignment(consumer.assignment())
                self._serve_calls(consumer)
        finally:
            if self.commit_each_batch:
                self._commit(consumer)
            consumer.close()  # the revoke callback, then LeaveGroup


class KafkaPythonMember(Member):
    client = "kafka-python"
    POLL_MS = 1000

    def _main(self) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                member._event("revoke", revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                member._event("assign", assigned)

            def on_partitions_lost(self, lost: Any) -> None:
                member._event("lost", lost)

        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
            partition_assignment_strategy=[_load(KAFKA_PYTHON_ASSIGNORS[self.assignor])],
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
            **self.config)
        consumer.subscribe(self.topics, listener=Listener())
        try:
            while not self._stopping.is_set():
                # kafka-python 3.0.12 can lose a JoinGroup/SyncGroup round that completes
                # just after a poll's timeout expired mid-rebalance (the member then never
                # heartbeats again); a longer poll lets a rebalance finish inside one call
                for messages in consumer.poll(timeout_ms=self.POLL_MS).values():
                    for m in messages:
                        self._record(m.topic, m.partition, m.offset, m.key, m.value)
                self._set_assignment(consumer.assignment())
                self._serve_calls(consumer)
        finally:
            consumer.close()


class AiokafkaMember(Member):
    client = "aiokafka"

    def _main(self) -> None:
        asyncio.run(self._amain())

    async def _amain(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.abc import ConsumerRebalanceListener

        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                member._event("revoke", revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                member._event("assign", assigned)

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=self.group, client_id=self.name,
            partition_assignment_strategy=(_load(AIOKAFKA_ASSIGNORS[self.assignor]),),
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            enable_auto_commit=False, auto_offset_reset="earliest", fetch_max_wait_ms=100,
            **self.config)
        await consumer.start()
        try:
            consumer.subscribe(self.topics, listener=Listener())
            while not self._stopping.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                for messages in batches.values():
                    for m in messages:
                        self._record(m.topic, m.partition, m.offset, m.key, m.value)
                self._set_assignment(consumer.assignment())
                for fn, future in self._pending_calls():
                    try:
                        result = fn(consumer)
                        if inspect.isawaitable(result):
                            result = await result
                        future.set_result(result)
                    except Exception as exc:
                        future.set_exception(exc)
        finally:
            await consumer.stop()


MEMBER_CLASSES: dict[str, type[Member]] = {
    "confluent-kafka": ConfluentMember,
    "kafka-python": KafkaPythonMember,
    "aiokafka": AiokafkaMember,
}


# --- a member in a child process ----------------------------------------------------------

CHILD_SCRIPT = r"""
import json, sys
from confluent_kafka import Consumer

bootstrap, group, topic, session_timeout_ms = sys.argv[1:5]
consumer = Consumer({
    "bootstrap.servers": bootstrap, "group.id": group, "client.id": "child",
    "partition.assignment.strategy": "range",
    "session.timeout.ms": int(session_timeout_ms), "heartbeat.interval.ms": 300,
    "enable.auto.commit": False, "auto.offset.reset": "earliest",
})
consumer.subscribe([topic])
last = None
while True:
    consumer.poll(0.1)
    now = sorted([tp.topic, tp.partition] for tp in consumer.assignment())
    if now != last:
        print(json.dumps(now), flush=True)
        last = now
"""

PR_SET_PDEATHSIG = 1  # prctl(2): the child gets SIGKILL when the test process dies


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class ChildMember:
    """A confluent-kafka group member in a child process that prints its assignment (one
    JSON line per change), for the member that is SIGKILLed: it never leaves the group,
    the coordinator must expire its session."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, log_path: str,
                 session_timeout_ms: int = 2000) -> None:
        self.name = name
        self.args = [bootstrap, group, topic, str(session_timeout_ms)]
        self.log_path = log_path
        self.process: subprocess.Popen[str] | None = None
        self._assignment: frozenset[TP] = frozenset()
        self._lock = threading.Lock()

    def start(self) -> ChildMember:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-c", CHILD_SCRIPT, *self.args], stdout=subprocess.PIPE,
                stderr=log, stdin=subprocess.DEVNULL, text=True, preexec_fn=_die_with_parent)
        threading.Thread(target=self._read, name=f"child-{self.name}", daemon=True).start()
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            tps = frozenset((t, p) for t, p in json.loads(line))
            with self._lock:
                self._assignment = tps

    def assignment(self) -> frozenset[TP]:
        with self._lock:
            return self._assignment

    def problem(self) -> str | None:
        if self.process is not None and self.process.poll() is not None:
            return f"{self.name} exited with {self.process.returncode}; see {self.log_path}"
        return None

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no more heartbeats."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


# --- checks -------------------------------------------------------------------------------

def wait_for(check: Callable[[], Any], timeout: float, describe: Callable[[], str]) -> Any:
    """Poll check() until it returns something true; fail with describe() at the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s: {describe()}")
        time.sleep(0.05)


def ownership_problem(owned: Mapping[str, frozenset[TP]], expected: Iterable[TP],
                      size: int | None = None) -> str | None:
    """None when every expected partition is owned by exactly one member, nothing else is
    owned, and every member owns something (exactly `size` partitions if given)."""
    expected = set(expected)
    counts: dict[TP, int] = {}
    for tps in owned.values():
        for tp in tps:
            counts[tp] = counts.get(tp, 0) + 1
    twice = sorted(tp for tp, n in counts.items() if n > 1)
    missing = sorted(expected - counts.keys())
    extra = sorted(counts.keys() - expected)
    uneven = {name: len(tps) for name, tps in owned.items()
              if not tps or (size is not None and len(tps) != size)}
    if twice or missing or extra or uneven:
        return (f"owned twice {twice}, unowned {missing}, unexpected {extra}, "
                f"members without their share {uneven}")
    return None


def show(owned: Mapping[str, frozenset[TP]]) -> str:
    return "; ".join(f"{name}: {sorted(p for _, p in tps)}" for name, tps in owned.items())


def wait_owned_once(owners: Sequence[Owner], expected: Iterable[TP], *, size: int | None = None,
                    timeout: float = 30.0, context: Callable[[], str] = lambda: "",
                    ) -> dict[str, frozenset[TP]]:
    """Wait until the live members own every expected partition exactly once (the group
    went through its rebalance); their assignments."""
    expected = set(expected)
    state: dict[str, Any] = {}

    def check() -> dict[str, frozenset[TP]] | None:
        problems = [p for p in (o.problem() for o in owners) if p]
        assert not problems, "; ".join(problems)
        owned = {o.name: o.assignment() for o in owners}
        state["owned"], state["why"] = owned, ownership_problem(owned, expected, size)
        return None if state["why"] else owned

    return wait_for(check, timeout, lambda: (
        f"partitions not owned once each: {state.get('why')}\n  assignments: "
        f"{show(state.get('owned', {}))}\n{context()}\nthreads:\n{thread_stacks()}"))


def thread_stacks(frames: int = 8) -> str:
    """Where this process's other threads are (the members' and the clients' own), for the
    failure message of a member that stopped making progress."""
    current = sys._current_frames()
    out = []
    for thread in threading.enumerate():
        frame = current.get(thread.ident or -1)
        if frame is None or thread is threading.current_thread():
            continue
        stack = "".join(traceback.format_stack(frame)[-frames:])
        out.append(f"--- thread {thread.name}\n{stack}")
    return "\n".join(out)


@contextlib.contextmanager
def running(members: Iterable[Member]) -> Iterator[list[Member]]:
    """Start the members; close whatever is still open at the end (also after a failure)."""
    started: list[Member] = []
    try:
        for member in members:
            started.append(member.start())
        yield started
    finally:
        for member in started:
            member.close(check=False)


def log_tail(broker: Any, chars: int = 4000) -> str:
    """The end of the broker's server.log, for failure messages."""
    try:
        with open(os.path.join(broker.log_dir, "server.log"), errors="replace") as fh:
            return "server.log tail:\n" + fh.read()[-chars:]
    except OSError as exc:
        return f"(no server.log: {exc})"


# --- topics, producing, offsets ------------------------------------------------------------

def new_topic(bootstrap: str, prefix: str, partitions: int) -> str:
    """CreateTopics (one replica), then wait until Metadata shows every partition's leader."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=15)

    def led() -> bool:
        topic = admin.list_topics(name, timeout=5).topics[name]
        return (topic.error is None and len(topic.partitions) == partitions
                and all(p.error is None and p.leader >= 0 for p in topic.partitions.values()))

    wait_for(led, 15, lambda: f"no leaders for the {partitions} partitions of {name}")
    return name


@dataclass(frozen=True)
class Sent:
    partition: int
    offset: int
    key: bytes | None
    value: bytes


def produce(bootstrap: str, topic: str, items: Iterable[tuple[int | None, bytes | None, bytes]],
            ) -> list[Sent]:
    """Produce (partition or None for the key's, key, value) with acks=all; what was
    acknowledged, in acknowledgement order."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 2})
    sent: list[Sent] = []
    errors: list[str] = []

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            sent.append(Sent(msg.partition(), msg.offset(), msg.key(), msg.value()))

    for partition, key, value in items:
        if partition is None:
            producer.produce(topic, value, key, on_delivery=report)
        else:
            producer.produce(topic, value, key, partition=partition, on_delivery=report)
        producer.poll(0)
    assert producer.flush(30) == 0, "records left unacknowledged after 30 s"
    assert errors == [], errors
    return sent


def end_offsets(bootstrap: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end-offsets"})
    try:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions}
    finally:
        consumer.close()


def committed_offsets(bootstrap: str, group: str, topic: str,
                      partitions: Iterable[int]) -> dict[int, int]:
    """The group's committed offsets (OffsetFetch, without joining); -1001: none."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        answer = consumer.committed([TopicPartition(topic, p) for p in partitions],
                                    timeout=10)
        for tp in answer:
            assert tp.error is None, f"OffsetFetch {topic}[{tp.partition}]: {tp.error}"
        return {tp.partition: tp.offset for tp in answer}
    finally:
        consumer.close()


def describe_group(bootstrap: str, group: str) -> Any:
    """DescribeGroups through confluent-kafka's AdminClient: a ConsumerGroupDescription."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
