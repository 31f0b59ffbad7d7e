"""Exactly-once copiers for the transaction tests: consume-transform-produce with
confluent-kafka, as a Kafka Streams-less EOS application does it, and the judge.

A copier consumes the source topic in a group with isolation.level=read_committed, writes
each record unchanged to the same partition of the sink topic inside a transaction
(tagged with the transaction, header `mdc-txn`), adds the consumed offsets with
send_offsets_to_transaction and commits; every third transaction (by default) it aborts
on purpose and rewinds to the group's committed offsets, as an application does after an
abort. Each transaction is logged (JSON lines, flushed per line) before its end and again
with the outcome the client was told, so a copier killed with kill -9 leaves its last
transaction in doubt, and the judge (`judge`) knows every tag it may find.

The source is filled by the durability checker (`ProducerRun`), so the sink is judged
with the checker's accounting: each source record exactly once in the sink (nothing lost,
nothing duplicated, per partition in order), no record of an aborted transaction visible,
no transaction torn.

Run as a program (`python -m transactions.copiers SPEC_JSON`) it is one copier process,
for the tests that kill copiers.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from moldau.checker.consumer import read_partitions
from moldau.checker.records import parse
from moldau.checker.report import PartitionWrites, Report
from moldau.checker.transactional import aborted_on_purpose
from moldau.checker.txn_report import (
    ABORTED,
    COMMITTED,
    IN_DOUBT,
    TAG_HEADER,
    TransactionWrites,
    build_transactional_report,
)

END_TIMEOUT = 40.0  # seconds a commit or abort is retried before its outcome is unknown
# A transaction under way this long is a client call blocked past every timeout we gave
# it: librdkafka's send_offsets_to_transaction can wait forever for a group coordinator
# that left the cluster metadata (confluentinc/librdkafka#5511, #5456, open in 2.16). A
# real deployment's liveness check would restart such a copier; the supervisor does.
HUNG_AFTER = END_TIMEOUT + 10.0


@dataclass
class CopierSpec:
    bootstrap: str
    source: str
    sink: str
    group: str
    transactional_id: str
    name: str  # unique per copier instance: its transactions' tags are name:index
    log_path: str
    abort_ratio: float = 1 / 3
    batch: int = 50
    transaction_timeout_ms: int = 30_000
    session_timeout_ms: int = 10_000
    debug: str = ""  # librdkafka's `debug` contexts for the producer (to stderr)
    pause: float = 0.0  # seconds between transactions (the soak paces its copiers)


class TxnLog:
    """A copier's transactions as JSON lines; the last line of a tag is its state."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())

    def record(self, txn: TransactionWrites) -> None:
        self._file.write(json.dumps({
            "tag": txn.tag, "outcome": txn.outcome, "on_purpose": txn.on_purpose,
            "records": {str(p): s for p, s in txn.records.items()},
            "undelivered": sorted(txn.undelivered), "error": txn.error}) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    @staticmethod
    def load(paths: Iterable[str | Path]) -> list[TransactionWrites]:
        found: dict[str, TransactionWrites] = {}
        for path in paths:
            for line in Path(path).read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except ValueError:  # the last line of a killed copier, cut short
                    continue
                found[row["tag"]] = TransactionWrites(
                    row["tag"], row["outcome"],
                    {int(p): s for p, s in row["records"].items()},
                    {(p, s) for p, s in row["undelivered"]}, row["on_purpose"], row["error"])
        return list(found.values())


class Fatal(Exception):
    """The producer cannot go on (fenced, ...): a replacement takes over."""


def _error(exc: KafkaException) -> KafkaError | None:
    return exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None


class Copier:
    """One copier instance: `run()` copies until `stop` is set or the producer is fenced."""

    def __init__(self, spec: CopierSpec, stop: threading.Event | None = None) -> None:
        self.spec = spec
        self.stop = stop or threading.Event()
        self.log = TxnLog(spec.log_path)
        self.counts = {COMMITTED: 0, ABORTED: 0, IN_DOUBT: 0}
        self.ended: str | None = None  # why run() returned
        self.consumer = Consumer({
            "bootstrap.servers": spec.bootstrap, "group.id": spec.group,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": spec.session_timeout_ms,
            "heartbeat.interval.ms": max(500, spec.session_timeout_ms // 5),
            "enable.partition.eof": False})
        self.producer = Producer({
            "bootstrap.servers": spec.bootstrap, "transactional.id": spec.transactional_id,
            "transaction.timeout.ms": spec.transaction_timeout_ms, "linger.ms": 5,
            **({"debug": spec.debug} if spec.debug else {})})

    def run(self) -> str:
        try:
            self._retry(self.producer.init_transactions)
            self.consumer.subscribe([self.spec.source])
            index = 0
            while not self.stop.is_set():
                batch = [m for m in self.consumer.consume(self.spec.batch, timeout=0.5)
                         if m.error() is None]
                if batch:
                    self._transaction(batch, index)
                    index += 1
                    self.stop.wait(self.spec.pause)
            self.ended = "stopped"
        except (Fatal, KafkaException) as exc:
            self.ended = f"fatal: {exc}"
        finally:
            self.log.close()
            with contextlib.suppress(Exception):
                self.consumer.close()
        return self.ended

    def _transaction(self, batch: Sequence[Message], index: int) -> None:
        spec = self.spec
        txn = TransactionWrites(f"{spec.name}:{index}", IN_DOUBT,
                                on_purpose=aborted_on_purpose(index, spec.abort_ratio))
        offsets: dict[int, int] = {}
        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            raise Fatal(f"begin_transaction: {exc}") from None
        try:
            for m in batch:
                partition, offset = m.partition(), m.offset()
                record = parse(m.key(), m.value())
                assert record is not None and partition is not None and offset is not None
                seq = record.sequence
                self._produce(m, txn, partition, seq)
                txn.records.setdefault(partition, []).append(seq)
                offsets[partition] = offset + 1
            self.log.record(txn)  # killed from here on, it is in doubt
            self._retry(lambda timeout: self.producer.send_offsets_to_transaction(
                [TopicPartition(spec.source, p, o) for p, o in sorted(offsets.items())],
                self.consumer.consumer_group_metadata(), timeout))
            if not txn.on_purpose:
                self._retry(self.producer.commit_transaction)
                txn.outcome = COMMITTED
        except KafkaException as exc:
            error = _error(exc)
            txn.error = str(exc)
            if error is None or error.fatal() or not error.txn_requires_abort():
                self.log.record(txn)
                raise Fatal(f"{txn.tag}: {exc}") from None
        if txn.outcome != COMMITTED:
            if txn.on_purpose:  # into the log first: the abort must have records to hide
                self.producer.flush(END_TIMEOUT)
            try:
                self._retry(self.producer.abort_transaction)
            except KafkaException as exc:
                txn.error = f"{txn.error}; abort: {exc}"
                self.log.record(txn)
                raise Fatal(f"{txn.tag}: abort: {exc}") from None
            txn.outcome = ABORTED
            self._rewind()
        self.counts[txn.outcome] += 1
        self.log.record(txn)

    def _produce(self, m: Message, txn: TransactionWrites, partition: int, seq: int) -> None:
        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                txn.undelivered.add((partition, seq))

        while True:
            try:
                self.producer.produce(self.spec.sink, m.value(), m.key(), partition=partition,
                                      headers=[(TAG_HEADER, txn.tag.encode())],
                                      on_delivery=delivered)
                return
            except BufferError:
                self.producer.poll(0.05)

    def _retry(self, call: Any) -> None:
        """A transactional call, again while it fails with a retriable error."""
        deadline = time.monotonic() + END_TIMEOUT
        while True:
            try:
                call(max(1.0, deadline - time.monotonic()))
                return
            except KafkaException as exc:
                error = _error(exc)
                if (error is None or not error.retriable() or error.fatal()
                        or time.monotonic() >= deadline):
                    raise
                time.sleep(0.1)

    def _rewind(self) -> None:
        """Back to the group's committed offsets: the aborted batch is read again."""
        deadline = time.monotonic() + END_TIMEOUT
        while True:
            try:
                assignment = self.consumer.assignment()
                for tp in self.consumer.committed(assignment, timeout=30):
                    offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                    self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
                return
            except KafkaException:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)


# --- a group of copiers, supervised ------------------------------------------------------


class CopierThread:
    """A copier on a thread of the test process."""

    def __init__(self, spec: CopierSpec) -> None:
        self.copier = Copier(spec)
        self.thread = threading.Thread(target=self.copier.run, daemon=True,
                                       name=f"copier-{spec.name}")
        self.thread.start()

    def alive(self) -> bool:
        return self.thread.is_alive()

    def stop(self) -> None:
        self.copier.stop.set()
        self.thread.join(END_TIMEOUT * 3)

    def ended(self) -> str | None:
        return self.copier.ended

    def hung(self) -> bool:
        return False  # a thread cannot be killed: the tests with threads avoid the case


def group_progress(bootstrap: str, group: str, source: str, partitions: Sequence[int]
                   ) -> int:
    """The group's committed (stable) offsets summed over the source's partitions."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed"})
    try:
        found = consumer.committed([TopicPartition(source, p) for p in partitions],
                                   timeout=10)
        return sum(max(tp.offset, 0) for tp in found)
    finally:
        consumer.close()


@dataclass
class CopyRun:
    """Copiers moving one source topic to a sink; `slots` copiers, each a transactional
    id, restarted (a new instance, the same transactional.id) when one dies."""

    bootstrap: str
    source: str
    sink: str
    source_run_id: str
    total: int  # records in the source
    partitions: Sequence[int]
    log_dir: Path
    transactional_ids: Sequence[str]
    group: str = ""
    abort_ratio: float = 1 / 3
    batch: int = 50
    pause: float = 0.0

    def __post_init__(self) -> None:
        self.group = self.group or f"copiers-{uuid.uuid4().hex[:8]}"
        self.instances: dict[int, Any] = {}
        self.generation = dict.fromkeys(range(len(self.transactional_ids)), 0)
        self.replaced: list[str] = []  # why instances ended before the end
        self.watchdog_kills: list[str] = []  # hung copiers killed (see HUNG_AFTER)

    def spec(self, slot: int) -> CopierSpec:
        name = f"c{slot}g{self.generation[slot]}"
        return CopierSpec(self.bootstrap, self.source, self.sink, self.group,
                          self.transactional_ids[slot], name,
                          str(self.log_dir / f"{name}.jsonl"), self.abort_ratio, self.batch,
                          pause=self.pause)

    def start(self, slot: int, kind: type = CopierThread) -> None:
        self.generation[slot] += 1
        self.instances[slot] = kind(self.spec(slot))

    def start_all(self, kind: type = CopierThread) -> CopyRun:
        for slot in range(len(self.transactional_ids)):
            self.start(slot, kind)
        return self

    def supervise(self, kind: type = CopierThread) -> None:
        """Start a replacement for every copier that ended on its own."""
        for slot, instance in list(self.instances.items()):
            if instance.alive() and instance.hung():
                self.watchdog_kills.append(f"{slot}: {instance.spec.name}")
                instance.kill()
            if not instance.alive():
                self.replaced.append(f"{slot}: {instance.ended()}")
                self.start(slot, kind)

    def progress(self) -> int:
        return group_progress(self.bootstrap, self.group, self.source, self.partitions)

    def wait_done(self, timeout: float, kind: type = CopierThread) -> None:
        deadline = time.monotonic() + timeout
        done = 0
        while time.monotonic() < deadline:
            self.supervise(kind)
            with contextlib.suppress(KafkaException):
                done = self.progress()
            if done >= self.total:
                return
            time.sleep(0.5)
        raise AssertionError(f"copiers committed {done} of {self.total} source records in "
                             f"{timeout:g} s; replaced: {self.replaced}")

    def stop(self) -> None:
        for instance in self.instances.values():
            instance.stop()

    def transactions(self) -> list[TransactionWrites]:
        return TxnLog.load(sorted(self.log_dir.glob("*.jsonl")))

    def judge(self, timeout: float = 60.0) -> Report:
        return judge(self.bootstrap, self.source_run_id, self.sink, self.total,
                     self.partitions, self.transactions(), timeout)


def judge(bootstrap: str, source_run_id: str, sink: str, per_partition: int | dict[int, int],
          partitions: Sequence[int], transactions: list[TransactionWrites],
          timeout: float = 60.0) -> Report:
    """The sink against the source: every source sequence exactly once, in order, nothing
    of an aborted transaction, no transaction torn. per_partition: the source's records
    per partition (an int: the total, spread round robin as the checker writes)."""
    if isinstance(per_partition, int):
        total = per_partition
        per_partition = {p: total // len(partitions) + (i < total % len(partitions))
                         for i, p in enumerate(partitions)}
    # every source record was acknowledged: each must be in the sink (offsets differ)
    writes = {p: PartitionWrites(p, n, dict.fromkeys(range(n), -1))
              for p, n in per_partition.items()}
    reads = read_partitions(bootstrap, sink, partitions, timeout=timeout, transactional=True)
    return build_transactional_report(source_run_id, sink, writes, transactions, reads)


@contextlib.contextmanager
def copy_run(**kwargs: Any) -> Iterator[CopyRun]:
    run = CopyRun(**kwargs)
    try:
        yield run
    finally:
        run.stop()


# --- a copier process (kill -9 in the soak) ------------------------------------------------


class CopierProcess:
    """A copier in a process of its own: `kill()` is kill -9, `pause()` SIGSTOP."""

    def __init__(self, spec: CopierSpec) -> None:
        import subprocess

        tests = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [tests, os.environ.get("PYTHONPATH", "")]))
        self.spec = spec
        self.process = subprocess.Popen(
            [sys.executable, "-m", "transactions.copiers", json.dumps(asdict(spec))],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(spec.log_path + ".err", "ab"))  # noqa: SIM115

    def alive(self) -> bool:
        return self.process.poll() is None

    def hung(self) -> bool:
        """A transaction under way (logged in doubt) for longer than HUNG_AFTER."""
        path = Path(self.spec.log_path)
        try:
            if time.time() - path.stat().st_mtime < HUNG_AFTER:
                return False
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            return False
        try:
            return bool(lines) and json.loads(lines[-1])["outcome"] == IN_DOUBT
        except ValueError:
            return False

    def ended(self) -> str | None:
        """The exit status and the copier's own last word (not librdkafka's logs)."""
        try:
            lines = Path(self.spec.log_path + ".err").read_text(errors="replace").splitlines()
        except OSError:
            lines = []
        said = [line for line in lines if line and not line.startswith("%")]
        return f"exit {self.process.poll()}" + (f": {said[-1][:200]}" if said else "")

    def kill(self) -> None:
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        import signal

        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
                os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(END_TIMEOUT * 2)
            except Exception:
                self.kill()


def main(argv: list[str]) -> int:
    import signal

    spec = CopierSpec(**json.loads(argv[0]))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ended = Copier(spec, stop).run()
    print(ended, file=sys.stderr, flush=True)
    return 0 if ended == "stopped" else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
