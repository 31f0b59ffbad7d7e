"""`ProducerRun`: the checker's writer, an idempotent acks=all confluent-kafka producer.

It produces sequenced records (see `records`) to explicit partitions in round robin, at
a fixed rate or as fast as the client takes them, on a background thread, and keeps per
partition which sequences were acknowledged (delivery report without error, with the
offset), which failed (delivery report with an error) and, after `stop()`, which stayed
in doubt (no delivery report before the flush timeout).

    run = ProducerRun("broker1:9092", "durability", rate=200)
    run.start()
    ...  # kill brokers
    run.stop()  # flushes; run.writes() is then final
    report = verify(run)  # moldau.checker.consumer

Only confluent-kafka is used, so the run works against any Kafka-compatible cluster.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer

from moldau.checker.records import CheckerRecord, encode
from moldau.checker.report import PartitionWrites

# librdkafka properties, as AdminClient takes them (security settings, ...)
ClientConfig = Mapping[str, str | int | float | bool]

DEFAULT_DELIVERY_TIMEOUT_MS = 60_000  # a write may ride out a minute of faults
DEFAULT_REQUEST_TIMEOUT_MS = 10_000


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def topic_partitions(client: Producer | Consumer, topic: str, timeout: float = 10.0) -> list[int]:
    """The partitions of `topic` from a confluent-kafka client's metadata."""
    deadline = time.monotonic() + timeout
    while True:
        metadata = client.list_topics(topic, timeout=max(0.1, deadline - time.monotonic()))
        meta = metadata.topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions:
            return sorted(meta.partitions)
        if time.monotonic() >= deadline:
            why = meta.error if meta is not None else "not in metadata"
            raise KafkaException(f"topic {topic!r}: {why}")
        time.sleep(0.2)


class ProducerRun:
    """One writer run. `start()` produces on a background thread until `stop()` (or
    `max_records`); `run(duration)` does both in the calling thread's time."""

    def __init__(self, bootstrap_servers: str, topic: str, *,
                 partitions: Sequence[int] | None = None,
                 rate: float | None = 100.0,
                 record_size: int = 100,
                 config: ClientConfig | None = None,
                 delivery_timeout_ms: int = DEFAULT_DELIVERY_TIMEOUT_MS,
                 request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
                 max_records: int | None = None,
                 run_id: str | None = None) -> None:
        """rate: records per second over all partitions; None or 0: unlimited.
        config: extra client properties (security settings, ...); the checker's own
        (acks, idempotence, timeouts) win over it."""
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.rate = rate or None
        self.record_size = record_size
        self.max_records = max_records
        self.run_id = run_id or new_run_id()
        self.delivery_timeout_ms = delivery_timeout_ms
        self.client_config = dict(config or {})  # what a consumer of the run needs too
        self.config = {
            **self.client_config,
            "bootstrap.servers": bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "delivery.timeout.ms": delivery_timeout_ms,
            "request.timeout.ms": request_timeout_ms,
            "linger.ms": 5,
            "error_cb": self._on_error,
        }
        self._producer = Producer(self.config)
        self.partitions = list(partitions) if partitions is not None else topic_partitions(
            self._producer, topic)
        if not self.partitions:
            raise ValueError("no partitions to write to")
        self._lock = threading.Lock()
        self._writes = {p: PartitionWrites(p) for p in self.partitions}
        self._flushed = False  # stop() gave up waiting: later errors leave records in doubt
        self.errors: Counter[str] = Counter()  # client errors (error_cb), by name
        self.last_error: dict[str, str] = {}  # the latest text of each
        self.fatal_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._thread_error: BaseException | None = None
        self.started_at: float | None = None
        self.stopped_at: float | None = None

    # the delivery and error callbacks run in whichever thread polls or flushes

    def _on_delivery(self, partition: int, seq: int, err: KafkaError | None,
                     msg: Message) -> None:
        with self._lock:
            writes = self._writes[partition]
            if err is None:
                # No offset (None) when librdkafka took a retried batch's
                # DUPLICATE_SEQUENCE_NUMBER as success: -1, checked for loss only.
                offset = msg.offset()
                writes.acknowledged[seq] = -1 if offset is None else offset
                writes.failed.pop(seq, None)
            elif not self._flushed:  # after the flush timeout (a purge): stays in doubt
                writes.failed[seq] = err.str()

    def _on_error(self, err: KafkaError) -> None:
        with self._lock:
            self.errors[err.name()] += 1
            self.last_error[err.name()] = err.str()
            if err.fatal():
                self.fatal_error = err.str()

    # producing

    def start(self) -> ProducerRun:
        if self._thread is not None:
            raise RuntimeError("this run was started already")
        self.started_at = time.monotonic()
        self._thread = threading.Thread(target=self._produce_loop,
                                        name=f"checker-producer-{self.run_id}", daemon=True)
        self._thread.start()
        return self

    def run(self, duration: float | None = None,
            stop_event: threading.Event | None = None,
            flush_timeout: float | None = None) -> dict[int, PartitionWrites]:
        """Produce for `duration` seconds, or until `stop_event` is set, or until
        `max_records`; then stop (flush) and return the writes."""
        self.start()
        deadline = None if duration is None else time.monotonic() + duration
        while self._thread is not None and self._thread.is_alive():
            if stop_event is not None and stop_event.is_set():
                break
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            self._thread.join(0.1 if remaining is None else min(0.1, remaining))
        return self.stop(flush_timeout)

    def _produce_loop(self) -> None:
        try:
            self._produce()
        except BaseException as exc:  # reported by stop()
            self._thread_error = exc

    def _produce(self) -> None:
        interval = 1.0 / self.rate if self.rate else 0.0
        next_at = time.monotonic()
        count = 0
        index = 0
        while not self._stop.is_set() and self.fatal_error is None:
            if self.max_records is not None and count >= self.max_records:
                return
            if interval:
                now = time.monotonic()
                if now < next_at:
                    self._producer.poll(min(next_at - now, 0.05))
                    continue
                # never burst more than a second's worth to catch up
                next_at = max(next_at + interval, now - 1.0)
            partition = self.partitions[index % len(self.partitions)]
            index += 1
            with self._lock:
                seq = self._writes[partition].sent
            key, value = encode(CheckerRecord(self.run_id, partition, seq,
                                              int(time.time() * 1000)), self.record_size)
            while not self._stop.is_set():
                try:
                    self._producer.produce(
                        self.topic, value, key, partition=partition,
                        on_delivery=functools.partial(self._on_delivery, partition, seq))
                except BufferError:  # the client's queue is full: serve callbacks, retry
                    self._producer.poll(0.05)
                    continue
                except KafkaException as exc:  # e.g. after a fatal error: not enqueued
                    with self._lock:
                        self._writes[partition].sent = seq + 1
                        self._writes[partition].failed[seq] = str(exc)
                    error = exc.args[0] if exc.args else None
                    if isinstance(error, KafkaError) and error.fatal():
                        self.fatal_error = self.fatal_error or error.str()
                    break
                with self._lock:
                    self._writes[partition].sent = seq + 1
                count += 1
                break
            self._producer.poll(0)

    def stop(self, flush_timeout: float | None = None) -> dict[int, PartitionWrites]:
        """Stop producing, wait up to `flush_timeout` seconds (default: the delivery
        timeout plus 10 s, by when every record has its answer) for outstanding delivery
        reports, and fix the in-doubt sets. Returns the writes. Idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if not self._flushed:
            if flush_timeout is None:
                flush_timeout = self.delivery_timeout_ms / 1000 + 10
            self._producer.flush(flush_timeout)
            with self._lock:
                self._flushed = True
            # whatever is left is in doubt; drop it so closing does not wait for it
            with contextlib.suppress(Exception):
                self._producer.purge(in_queue=True, in_flight=True, blocking=False)
                self._producer.poll(0)
            if hasattr(self._producer, "close"):
                with contextlib.suppress(Exception):
                    self._producer.close()
            self.stopped_at = time.monotonic()
        if self._thread_error is not None:
            raise RuntimeError(f"the producer thread failed: {self._thread_error!r}") \
                from self._thread_error
        return self.writes()

    # what the run did

    def writes(self) -> dict[int, PartitionWrites]:
        """A copy of the per-partition writes (final once stop() returned)."""
        with self._lock:
            return {p: PartitionWrites(p, w.sent, dict(w.acknowledged), dict(w.failed))
                    for p, w in self._writes.items()}

    def counters(self) -> dict[str, int]:
        """Totals so far: sent, acknowledged, failed, and pending (no answer yet; after
        stop() these are the in-doubt records)."""
        with self._lock:
            sent = sum(w.sent for w in self._writes.values())
            acked = sum(len(w.acknowledged) for w in self._writes.values())
            failed = sum(len(w.failed) for w in self._writes.values())
        return {"sent": sent, "acknowledged": acked, "failed": failed,
                "pending": sent - acked - failed}

    @property
    def sent(self) -> int:
        return self.counters()["sent"]

    @property
    def acknowledged(self) -> int:
        return self.counters()["acknowledged"]

    @property
    def failed(self) -> int:
        return self.counters()["failed"]

    @property
    def in_doubt(self) -> int:
        return self.counters()["pending"]

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
