"""The stream writer's memory: which records of a (query, batch, task) are already in the
target topics. Records carry the mark as headers; the scan reads each target partition
backwards from its end in growing windows until it meets a record of the same query from
an earlier batch (all of batch N's records come after those) or the log's start, or has
read `max_records` (then it warns: a replay could duplicate records older than that)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import Consumer, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from . import fetch

log = logging.getLogger("moldau_spark")

QUERY_HEADER = "moldau.query.id"
BATCH_HEADER = "moldau.batch.id"
TASK_HEADER = "moldau.task"
_MARKS = (QUERY_HEADER, BATCH_HEADER, TASK_HEADER)
FIRST_WINDOW = 512
TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Mark:
    query: str
    batch: int
    task: int

    def headers(self) -> list[tuple[str, bytes]]:
        return [(QUERY_HEADER, self.query.encode()), (BATCH_HEADER, str(self.batch).encode()),
                (TASK_HEADER, str(self.task).encode())]


@dataclass(frozen=True)
class Record:
    """One record to write, or found written; equal records are interchangeable, so the
    record itself is its identity for replay (the partition the producer chose is not
    part of it)."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    partition: int | None = None  # only to produce; None: the producer's partitioner decides

    @property
    def identity(self) -> tuple:
        return (self.topic, self.key, self.value, self.headers)


def _read_mark(message: Message) -> tuple[Mark | None, tuple[tuple[str, bytes | None], ...]]:
    found: dict[str, bytes] = {}
    user = []
    for key, value in fetch.record_headers(message):
        if key in _MARKS and value is not None:
            found[key] = value
        else:
            user.append((key, value))
    if len(found) != len(_MARKS):
        return None, tuple(user)
    try:
        mark = Mark(found[QUERY_HEADER].decode(), int(found[BATCH_HEADER]),
                    int(found[TASK_HEADER]))
    except ValueError:
        return None, tuple(user)
    return mark, tuple(user)


def already_written(client: Mapping[str, str], topics: Sequence[str], mark: Mark,
                    max_records: int) -> Counter:
    """How many times each record identity of `mark` is already in the topics."""
    found: Counter = Counter()
    metadata = AdminClient(dict(client)).list_topics(timeout=TIMEOUT_S)
    cons = fetch.consumer(client, "moldau-spark-replay")
    try:
        for topic in topics:
            if topic not in metadata.topics:
                continue  # nothing written there yet (the producer may create it)
            for partition in sorted(metadata.topics[topic].partitions):
                _scan_partition(cons, topic, partition, mark, max_records, found)
    finally:
        cons.close()
    return found


def _scan_partition(cons: Consumer, topic: str, partition: int, mark: Mark, max_records: int,
                    found: Counter) -> None:
    low, high = cons.get_watermark_offsets(
        TopicPartition(topic, partition), timeout=TIMEOUT_S)
    end, window = high, FIRST_WINDOW
    while end > low:
        begin = max(low, end - window)
        earlier = False
        for message in fetch.iter_messages(cons, topic, partition, begin, end,
                                           timeout_s=TIMEOUT_S, fail_on_data_loss=False):
            seen, user_headers = _read_mark(message)
            if seen is None or seen.query != mark.query:
                continue
            if seen.batch < mark.batch:
                earlier = True
            elif seen == mark:
                found[(topic, message.key(), message.value(), user_headers)] += 1
        if earlier:
            return
        if high - begin >= max_records:
            log.warning("%s-%d: replay scan stopped after %d records without finding the "
                        "previous batch of query %s (replayScanMaxRecords)", topic, partition,
                        high - begin, mark.query)
            return
        end, window = begin, window * 4
