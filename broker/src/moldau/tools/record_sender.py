"""The console producer's send path, as Kafka's KafkaProducer behaves for it: records
collect in per-partition batches of up to batch.size bytes that leave when full or after
linger.ms; one Produce request per leader; acks=0 waits for nothing; retriable errors are
retried (retries, retry.backoff.ms, within delivery.timeout.ms), an unreachable leader is
tried again (moldau.tools.reconnect's backoffs) until delivery.timeout.ms; an idempotent
producer gets its id from InitProducerId and numbers each partition's records."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.protocol.generated.api import APIS
from moldau.protocol.generated.produce_request import ProduceRequest
from moldau.protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, build_batch
from moldau.tools.admin import Admin, NodeUnreachable, SslAuthenticationError
from moldau.tools.kafka_errors import KafkaToolError, check, error_text, exception_class
from moldau.tools.options import ToolError

# one record: (key, value, headers)
LineRecord = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
# errors Kafka's producer retries (RetriableException subclasses)
RETRIABLE = {2, 3, 5, 6, 7, 13, 19, 20, 56, 74}
DUPLICATE_SEQUENCE = 46
NETWORK_EXCEPTION = 13
TIMEOUT_EXCEPTION = "org.apache.kafka.common.errors.TimeoutException"
# InitProducerId answers worth asking again (coordinator moving or loading)
RETRIABLE_INIT = {7, 13, 14, 15, 16}
BATCH_OVERHEAD = 61  # a v2 batch's header
PRODUCE = next(spec for spec in APIS.values() if spec.name == "Produce")
PRODUCE_VERSION = 9


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (seed 0x9747b28c), as a signed 32-bit int."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, count: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % count


def record_size(record: LineRecord) -> int:
    """About what the record takes in a batch (its varints counted generously)."""
    key, value, headers = record
    return 12 + len(key or b"") + len(value or b"") + sum(
        4 + len(k.encode()) + len(v or b"") for k, v in headers)


@dataclass
class Batch:
    partition: int
    created: float
    records: list[LineRecord] = field(default_factory=list)
    size: int = BATCH_OVERHEAD
    closed: bool = False  # full: no more records go in
    attempts: int = 0  # retries spent on answered or broken requests
    sent: bool = False  # a request with it went out (it may have been written)


@dataclass
class Failure:
    """A batch given up on, with the Java exception Kafka's producer completes it with."""

    batch: Batch
    exception: str  # the class, e.g. org.apache.kafka.common.errors.TimeoutException
    message: str


class Accumulator:
    """Kafka's RecordAccumulator for one topic: a record goes in its partition's open
    batch when it fits in batch.size (the first always does), else a new batch starts."""

    def __init__(self, batch_size: int, linger_ms: int) -> None:
        self.batch_size, self.linger = batch_size, linger_ms / 1000
        self.queues: dict[int, list[Batch]] = {}

    def append(self, partition: int, record: LineRecord) -> Batch:
        queue = self.queues.setdefault(partition, [])
        size = record_size(record)
        if not queue or queue[-1].closed or (
                queue[-1].records and queue[-1].size + size > self.batch_size):
            if queue:
                queue[-1].closed = True
            queue.append(Batch(partition, time.monotonic()))
        batch = queue[-1]
        batch.records.append(record)
        batch.size += size
        return batch

    def is_ready(self, batch: Batch, now: float) -> bool:
        return batch.closed or batch.size >= self.batch_size or \
            now >= batch.created + self.linger

    def next_deadline(self) -> float | None:
        """When the oldest waiting batch's linger ends (None: nothing waits)."""
        heads = [q[0].created + self.linger for q in self.queues.values() if q]
        return min(heads) if heads else None

    def drain(self, flush: bool = False) -> list[Batch]:
        """At most one ready batch per partition (as Kafka drains), oldest first."""
        now = time.monotonic()
        out = []
        for queue in self.queues.values():
            if queue and (flush or len(queue) > 1 or self.is_ready(queue[0], now)):
                out.append(queue.pop(0))
        return out

    def pending(self) -> bool:
        return any(self.queues.values())


class Sender:
    def __init__(self, admin: Admin, topic: str, config: Mapping[str, Any],
                 idempotent: bool) -> None:
        self.admin, self.topic, self.config = admin, topic, config
        self.acks = -1 if config["acks"] == "all" else int(config["acks"])
        self.codec = CODECS[config["compression.type"]]
        self.leaders: dict[int, int] = {}
        self.producer_id, self.epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        self.sequences: dict[int, int] = {}
        self._new_id_needed = False
        self.refresh()
        if idempotent:
            self._init_producer_id()

    def refresh(self, deadline: float | None = None) -> None:
        """The partitions' leaders, waiting up to max.block.ms (or the deadline) for the
        topic as KafkaProducer.waitOnMetadata does."""
        if deadline is None:
            deadline = time.monotonic() + self.config["max.block.ms"] / 1000
        while True:
            try:
                topic = self.admin.metadata([self.topic], auto_create=True).topics[0]
            except KafkaToolError:
                raise
            except ToolError:  # timed out (request.timeout.ms) or reconnecting: again
                if time.monotonic() >= deadline:
                    raise
                time.sleep(self.config["retry.backoff.ms"] / 1000)
                continue
            if topic.error_code == 0 and all(p.leader_id >= 0 for p in topic.partitions):
                self.leaders = {p.partition_index: p.leader_id for p in topic.partitions}
                return
            if topic.error_code not in (3, 5):  # not yet created / electing: ask again
                check(topic.error_code)
            if time.monotonic() >= deadline:
                raise ToolError(f"Topic {self.topic} not present in metadata after "
                                f"{self.config['max.block.ms']} ms.")
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0)))

    def _init_producer_id(self) -> None:
        deadline = time.monotonic() + self.config["max.block.ms"] / 1000
        while True:
            try:
                answer = self.admin.call(
                    "InitProducerId", 4, None, transactional_id=None,
                    transaction_timeout_ms=self.config["transaction.timeout.ms"],
                    producer_id=-1, producer_epoch=-1)
            except KafkaToolError:
                raise
            except ToolError:  # no broker reachable yet: as refresh()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(self.config["retry.backoff.ms"] / 1000)
                continue
            if answer.error_code not in RETRIABLE_INIT or time.monotonic() >= deadline:
                break
            time.sleep(self.config["retry.backoff.ms"] / 1000)
        check(answer.error_code)
        self.producer_id, self.epoch = answer.producer_id, answer.producer_epoch
        self.sequences.clear()

    def send(self, batches: list[Batch]) -> list[Failure]:
        """Each batch to its partition's leader (one request per leader); the batches
        given up on, as KafkaProducer's Sender gives up: a retriable error answered to a
        sent batch is retried `retries` times; a broker that cannot be reached costs no
        retry (nothing was sent), its batches wait; every batch expires once
        delivery.timeout.ms has passed since it was created. Between rounds: a
        retry.backoff.ms pause and fresh metadata (leaders may have moved)."""
        if self._new_id_needed and batches:
            self._init_producer_id()
            self._new_id_needed = False
        given_up: list[Failure] = []
        while batches:
            again: list[Batch] = []
            for batch, code, message, sent in self._send_once(batches):
                batch.sent = batch.sent or sent
                if self._expired(batch):
                    given_up.append(self._expiry(batch))
                elif not sent:
                    again.append(batch)
                elif code in RETRIABLE and batch.attempts < self.config["retries"]:
                    batch.attempts += 1
                    again.append(batch)
                else:
                    given_up.append(Failure(batch, exception_class(code),
                                            error_text(code, message)))
            if again:
                time.sleep(self.config["retry.backoff.ms"] / 1000)
                self._refresh_until(min(self._deadline(b) for b in again))
            batches = again
        if any(f.batch.sent for f in given_up) and self.producer_id != NO_PRODUCER_ID:
            # a batch that may have been written is given up: its sequence numbers are in
            # doubt, so the next send starts over with a new producer id (as Kafka's
            # producer resets it); not now, the cluster may still be out of reach
            self._new_id_needed = True
        return given_up

    def _deadline(self, batch: Batch) -> float:
        return batch.created + self.config["delivery.timeout.ms"] / 1000

    def _expired(self, batch: Batch) -> bool:
        return time.monotonic() >= self._deadline(batch)

    def _expiry(self, batch: Batch) -> Failure:
        """Kafka's TimeoutException for a batch past delivery.timeout.ms."""
        elapsed = int((time.monotonic() - batch.created) * 1000)
        return Failure(batch, TIMEOUT_EXCEPTION,
                       f"Expiring {len(batch.records)} record(s) for "
                       f"{self.topic}-{batch.partition}:{elapsed} ms has passed since "
                       "batch creation")

    def _refresh_until(self, deadline: float) -> None:
        """Fresh leaders when the cluster answers before the deadline; else the ones
        known (the batches then fail or expire on their own terms)."""
        try:
            self.refresh(deadline)
        except KafkaToolError:
            raise
        except ToolError:
            pass

    def _send_once(self, batches: list[Batch]) -> list[tuple[Batch, int, str | None, bool]]:
        """The batches that failed, with their error code, message and whether the
        request went out (False: no connection to the leader could be opened)."""
        by_leader: dict[int, list[Batch]] = {}
        for batch in batches:
            by_leader.setdefault(self.leaders[batch.partition], []).append(batch)
        failed: list[tuple[Batch, int, str | None, bool]] = []
        for leader, items in by_leader.items():
            fields: dict[str, Any] = dict(
                transactional_id=None, acks=self.acks,
                timeout_ms=self.config["request.timeout.ms"],
                topic_data=[ProduceRequest.TopicProduceData(name=self.topic, partition_data=[
                    ProduceRequest.PartitionProduceData(index=b.partition,
                                                        records=self._encode(b))
                    for b in items])])
            try:
                if self.acks == 0:  # no response comes: Kafka's producer does not wait
                    self.admin.node(leader).send(PRODUCE.key, PRODUCE_VERSION,
                                                 PRODUCE.request(**fields))
                    continue
                answer = self.admin.call("Produce", PRODUCE_VERSION, leader, **fields)
            except NodeUnreachable as exc:
                if not exc.retriable:
                    raise
                failed += [(b, NETWORK_EXCEPTION, str(exc), False) for b in items]
                continue
            except (KafkaToolError, SslAuthenticationError):
                raise  # authentication refused: fatal, as in Kafka
            except ToolError as exc:  # the connection failed: Kafka's NetworkException
                failed += [(b, NETWORK_EXCEPTION, str(exc), True) for b in items]
                continue
            except OSError as exc:  # acks=0: the send itself failed
                self.admin.drop(leader)
                failed += [(b, NETWORK_EXCEPTION, str(exc), True) for b in items]
                continue
            codes = {p.index: (p.error_code, p.error_message)
                     for r in answer.responses for p in r.partition_responses}
            for batch in items:
                code, message = codes.get(batch.partition, (NETWORK_EXCEPTION, None))
                if code in (0, DUPLICATE_SEQUENCE):
                    self._acknowledged(batch)
                else:
                    failed.append((batch, code, message, True))
        return failed

    def _encode(self, batch: Batch) -> bytes:
        if self.producer_id == NO_PRODUCER_ID:
            return build_batch(batch.records, compression=self.codec)
        return build_batch(batch.records, compression=self.codec,
                           producer_id=self.producer_id, producer_epoch=self.epoch,
                           base_sequence=self.sequences.get(batch.partition, 0))

    def _acknowledged(self, batch: Batch) -> None:
        if self.producer_id != NO_PRODUCER_ID:
            self.sequences[batch.partition] = (self.sequences.get(batch.partition, 0)
                                               + len(batch.records)) % (1 << 31)


class Partitioner:
    """Kafka 3.9's built-in partitioner: murmur2 of the key; keyless records stick to
    one partition until batch.size bytes went there, then another is picked."""

    def __init__(self, count: int, batch_size: int, ignore_keys: bool) -> None:
        self.count, self.batch_size, self.ignore_keys = count, batch_size, ignore_keys
        self.sticky = random.randrange(count)
        self.produced = 0

    def partition(self, record: LineRecord) -> int:
        key = record[0]
        if key is not None and not self.ignore_keys:
            return key_partition(key, self.count)
        if self.produced >= max(self.batch_size, 1) and self.count > 1:
            self.sticky = random.choice([p for p in range(self.count) if p != self.sticky])
            self.produced = 0
        self.produced += record_size(record)
        return self.sticky


__all__ = ["NO_SEQUENCE", "Accumulator", "Batch", "Failure", "Partitioner", "Sender",
           "key_partition", "murmur2"]
