"""`TransactionalRun`: the checker's transactional writer (confluent-kafka).

It writes the checker's sequenced records (see `records`) round robin over the partitions
in transactions of `transaction_records` records, each record tagged with its transaction
(header `mdc-txn`). A share of the transactions is aborted on purpose, spread evenly and
deterministically: transaction k (from 0) is aborted when floor((k+1)*ratio) exceeds
floor(k*ratio), so a ratio of 1/3 aborts transactions 2, 5, 8, ... The outcome of each is
what the client was told (`txn_report`): committed when `commit_transaction` returned,
aborted when `abort_transaction` did, in doubt when neither is known. After a fatal error
(fenced, an epoch the coordinator refused) the writer starts a new producer with the same
transactional.id, as an application would; its InitProducerId settles whatever the old
one left open.

    run = TransactionalRun(bootstrap, "eos", "checker-tx", abort_ratio=1/3).start()
    ...  # faults
    report = verify_transactions(run)  # stop, read back with read_committed, account
"""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from moldau.checker.consumer import DEFAULT_READ_TIMEOUT, read_partitions
from moldau.checker.producer import ClientConfig, new_run_id, topic_partitions
from moldau.checker.records import CheckerRecord, encode
from moldau.checker.report import PartitionWrites, Report
from moldau.checker.txn_report import (
    ABORTED,
    COMMITTED,
    IN_DOUBT,
    TAG_HEADER,
    TransactionWrites,
    build_transactional_report,
    transactional_writes,
)

DEFAULT_TRANSACTION_TIMEOUT_MS = 30_000
DEFAULT_REQUEST_TIMEOUT_MS = 10_000
MAX_PRODUCER_RESTARTS = 20  # a writer fenced this often is not riding out faults


def aborted_on_purpose(index: int, ratio: float) -> bool:
    """Whether transaction `index` (from 0) is one the writer aborts by choice."""
    return math.floor((index + 1) * ratio + 1e-9) > math.floor(index * ratio + 1e-9)


class TransactionalRun:
    """One transactional writer run; `start()` writes on a background thread until
    `stop()` (or `max_records`), finishing the transaction under way."""

    def __init__(self, bootstrap_servers: str, topic: str, transactional_id: str, *,
                 partitions: Sequence[int] | None = None,
                 rate: float | None = None,
                 transaction_records: int = 10,
                 abort_ratio: float = 1 / 3,
                 record_size: int = 100,
                 config: ClientConfig | None = None,
                 transaction_timeout_ms: int = DEFAULT_TRANSACTION_TIMEOUT_MS,
                 request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
                 max_records: int | None = None,
                 run_id: str | None = None) -> None:
        if transaction_records < 1:
            raise ValueError("a transaction needs at least one record")
        if not 0 <= abort_ratio <= 1:
            raise ValueError(f"abort ratio {abort_ratio}: between 0 and 1")
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.transactional_id = transactional_id
        self.rate = rate or None
        self.transaction_records = transaction_records
        self.abort_ratio = abort_ratio
        self.record_size = record_size
        self.max_records = max_records
        self.run_id = run_id or new_run_id()
        # a commit or abort is retried this long before its outcome counts as unknown
        self.end_timeout = transaction_timeout_ms / 1000
        self.client_config = dict(config or {})
        self.config = {
            **self.client_config,
            "bootstrap.servers": bootstrap_servers,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": transaction_timeout_ms,
            "request.timeout.ms": request_timeout_ms,
            "linger.ms": 5,
            "error_cb": self._on_error,
        }
        self._lock = threading.Lock()
        self.errors: Counter[str] = Counter()  # client errors (error_cb and raised), by name
        self.last_error: dict[str, str] = {}
        self.fatal_error: str | None = None  # set when the writer gave up
        self.restarts = 0  # producers started again after a fatal error
        self._producer = self._new_producer()
        self.partitions = list(partitions) if partitions is not None else topic_partitions(
            self._producer, topic)
        if not self.partitions:
            raise ValueError("no partitions to write to")
        self._sent = dict.fromkeys(self.partitions, 0)
        self._transactions: list[TransactionWrites] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_error: BaseException | None = None

    # the client

    def _new_producer(self) -> Producer:
        producer = Producer(self.config)
        deadline = time.monotonic() + self.end_timeout + 30
        while True:
            try:
                producer.init_transactions(max(1.0, deadline - time.monotonic()))
                return producer
            except KafkaException as exc:
                error = self._note(exc)
                if error is None or not error.retriable() or time.monotonic() >= deadline:
                    raise

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self.errors[err.name()] += 1
            self.last_error[err.name()] = err.str()

    def _note(self, exc: KafkaException) -> KafkaError | None:
        error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        name = error.name() if error is not None else type(exc).__name__
        with self._lock:
            self.errors[name] += 1
            self.last_error[name] = error.str() if error is not None else str(exc)
        return error

    def _on_delivery(self, txn: TransactionWrites, partition: int, seq: int,
                     err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            with self._lock:
                txn.undelivered.add((partition, seq))

    # writing

    def start(self) -> TransactionalRun:
        if self._thread is not None:
            raise RuntimeError("this run was started already")
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name=f"checker-txn-{self.run_id}")
        self._thread.start()
        return self

    def run(self, duration: float | None = None) -> list[TransactionWrites]:
        """Write for `duration` seconds (or until `max_records`), then stop."""
        self.start()
        assert self._thread is not None
        self._thread.join(duration)
        return self.stop()

    def _loop(self) -> None:
        try:
            self._write()
        except BaseException as exc:  # reported by stop()
            self._thread_error = exc

    def _write(self) -> None:
        interval = 1.0 / self.rate if self.rate else 0.0
        next_at = time.monotonic()
        index = count = 0
        while not self._stop.is_set() and self.fatal_error is None:
            if self.max_records is not None and count >= self.max_records:
                return
            size = self.transaction_records
            if self.max_records is not None:
                size = min(size, self.max_records - count)
            txn = TransactionWrites(str(index), IN_DOUBT,
                                    on_purpose=aborted_on_purpose(index, self.abort_ratio))
            index += 1
            with self._lock:
                self._transactions.append(txn)
            try:
                self._producer.begin_transaction()
            except KafkaException as exc:
                # nothing of it was written: the producer is unusable, start another
                txn.outcome, txn.error = ABORTED, f"begin_transaction: {exc}"
                self._restart(exc)
                continue
            for _ in range(size):
                if interval:
                    now = time.monotonic()
                    if now < next_at:
                        self._producer.poll(next_at - now)
                    next_at = max(next_at + interval, time.monotonic() - 1.0)
                if not self._produce_one(txn, count):
                    break
                count += 1
            self._end(txn)

    def _produce_one(self, txn: TransactionWrites, count: int) -> bool:
        partition = self.partitions[count % len(self.partitions)]
        seq = self._sent[partition]
        key, value = encode(CheckerRecord(self.run_id, partition, seq,
                                          int(time.time() * 1000)), self.record_size)
        while True:
            try:
                self._producer.produce(
                    self.topic, value, key, partition=partition,
                    headers=[(TAG_HEADER, txn.tag.encode())],
                    on_delivery=functools.partial(self._on_delivery, txn, partition, seq))
            except BufferError:  # the client's queue is full: serve callbacks, retry
                self._producer.poll(0.05)
                continue
            except KafkaException as exc:  # the transaction failed already: end it
                self._note(exc)
                return False
            break
        with self._lock:
            self._sent[partition] = seq + 1
            txn.records.setdefault(partition, []).append(seq)
        self._producer.poll(0)
        return True

    def _end(self, txn: TransactionWrites) -> None:
        """Commit (or abort on purpose) and set the outcome the client was told."""
        if not txn.on_purpose:
            done, error = self._retry(functools.partial(self._producer.commit_transaction))
            if done:
                txn.outcome = COMMITTED
                return
            txn.error = f"commit: {error}"
            if error is not None and error.fatal():
                self._restart(error)  # in doubt: InitProducerId settles it either way
                return
        if txn.on_purpose:
            # the records reach the log first, so the abort has something to hide
            # (abort_transaction drops what is still queued)
            self._producer.flush(self.end_timeout)
        done, abort_error = self._retry(functools.partial(self._producer.abort_transaction))
        if done:
            txn.outcome = ABORTED
            return
        txn.error = f"{txn.error + '; ' if txn.error else ''}abort: {abort_error}"
        self._restart(abort_error)

    def _retry(self, end: Callable[[float], None]) -> tuple[bool, KafkaError | None]:
        """Call commit or abort until it returns, fails for good, or the end timeout."""
        deadline = time.monotonic() + self.end_timeout
        while True:
            try:
                end(max(1.0, deadline - time.monotonic()))
                return True, None
            except KafkaException as exc:
                error = self._note(exc)
                if (error is None or not error.retriable() or error.fatal()
                        or time.monotonic() >= deadline):
                    return False, error
                time.sleep(0.2)

    def _restart(self, cause: KafkaException | KafkaError | None) -> None:
        """A new producer with the same transactional.id after an unusable one."""
        with contextlib.suppress(Exception):
            self._producer.purge(in_queue=True, in_flight=True, blocking=False)
            self._producer.poll(0)
        while not self._stop.is_set():
            if self.restarts >= MAX_PRODUCER_RESTARTS:
                self.fatal_error = f"gave up after {self.restarts} producer restarts: {cause}"
                return
            self.restarts += 1
            try:
                self._producer = self._new_producer()
                return
            except KafkaException as exc:
                cause = exc

    def stop(self) -> list[TransactionWrites]:
        """Stop after the transaction under way; returns the transactions. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if hasattr(self._producer, "close"):  # nothing is left to send between transactions
            with contextlib.suppress(Exception):
                self._producer.close()
        if self._thread_error is not None:
            raise RuntimeError(f"the writer thread failed: {self._thread_error!r}") \
                from self._thread_error
        return self.transactions()

    # what the run did

    def transactions(self) -> list[TransactionWrites]:
        with self._lock:
            return [TransactionWrites(t.tag, t.outcome,
                                      {p: list(s) for p, s in t.records.items()},
                                      set(t.undelivered), t.on_purpose, t.error)
                    for t in self._transactions]

    def writes(self) -> dict[int, PartitionWrites]:
        with self._lock:
            sent = dict(self._sent)
        return transactional_writes(self.transactions(), sent)

    def counters(self) -> dict[str, int]:
        txns = self.transactions()
        outcomes = Counter(t.outcome for t in txns)
        return {"transactions": len(txns), "committed": outcomes[COMMITTED],
                "aborted": outcomes[ABORTED], "in_doubt": outcomes[IN_DOUBT],
                "records": sum(t.size() for t in txns), "restarts": self.restarts}

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


def verify_transactions(run: TransactionalRun, *, timeout: float = DEFAULT_READ_TIMEOUT,
                        config: ClientConfig | None = None) -> Report:
    """Stop `run`, read its partitions with read_committed once every transaction is
    decided, and account for records and transactions."""
    transactions = run.stop()
    reads = read_partitions(run.bootstrap_servers, run.topic, run.partitions,
                            timeout=timeout, transactional=True,
                            config=run.client_config if config is None else config)
    return build_transactional_report(run.run_id, run.topic, run.writes(), transactions,
                                      reads, producer_errors=dict(run.errors),
                                      fatal_error=run.fatal_error)
