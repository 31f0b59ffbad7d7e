"""Reading a topic back, all of it, and judging a producer run against it.

`read_partitions` queries each partition's watermarks first, then reads it from the log
start offset to that end offset with a group-less assigned confluent-kafka consumer
(nothing is committed; ``isolation.level`` stays the client's default), bounded by one
timeout for the whole read. `verify` stops a `ProducerRun` (flushing it), reads its
partitions and returns the `Report`.

With `transactional=True` the end offsets are the high watermarks (queried with
read_uncommitted) and the records are read with read_committed: the read completes only
once every transaction below the high watermark is decided (the last stable offset
reached it), and each record's `mdc-txn` header is kept as its transaction tag.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from moldau.checker.producer import ClientConfig, ProducerRun, topic_partitions
from moldau.checker.records import CorruptRecord, parse
from moldau.checker.report import PartitionRead, Report, build_report
from moldau.checker.txn_report import TAG_HEADER

DEFAULT_READ_TIMEOUT = 60.0


def _watermarks(consumer: Consumer, topic: str, partition: int,
                deadline: float) -> tuple[int, int]:
    """(low, high), retried until `deadline` while leaders move after faults."""
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition),
                timeout=max(0.5, min(10.0, deadline - time.monotonic())), cached=False)
            return low, high
        except KafkaException:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def _reader(bootstrap_servers: str, config: ClientConfig | None,
            isolation_level: str | None) -> Consumer:
    return Consumer({
        **dict(config or {}),
        "bootstrap.servers": bootstrap_servers,
        # the Python client insists on a group id; nothing is subscribed or committed
        "group.id": f"moldau-checker-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
        **({} if isolation_level is None else {"isolation.level": isolation_level}),
    })


def _tag(msg: Message) -> str | None:
    for header in msg.headers() or ():
        name, value = header[0], header[1]
        if name == TAG_HEADER and value is not None:
            return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return None


def read_partitions(bootstrap_servers: str, topic: str, partitions: Sequence[int] | None = None,
                    *, timeout: float = DEFAULT_READ_TIMEOUT,
                    config: ClientConfig | None = None,
                    transactional: bool = False) -> dict[int, PartitionRead]:
    """Every record of each partition from its log start to the end offset found before
    reading, as `PartitionRead`s (records are (offset, parsed record or None)).
    transactional: read_committed up to the high watermark, tags kept (module doc)."""
    deadline = time.monotonic() + timeout
    consumer = _reader(bootstrap_servers, config,
                       "read_committed" if transactional else None)
    # librdkafka's watermark query asks with the client's isolation level: read_committed
    # would answer the last stable offset, which stops short of open transactions
    marks = _reader(bootstrap_servers, config, "read_uncommitted") if transactional \
        else consumer
    try:
        if partitions is None:
            partitions = topic_partitions(consumer, topic,
                                          timeout=max(1.0, deadline - time.monotonic()))
        reads: dict[int, PartitionRead] = {}
        for p in partitions:
            try:
                low, high = _watermarks(marks, topic, p, deadline)
            except KafkaException as exc:
                reads[p] = PartitionRead(p, complete=False, error=f"watermarks: {exc}")
                continue
            reads[p] = PartitionRead(p, start_offset=low, end_offset=high,
                                     complete=high <= low)
        todo = {p for p, r in reads.items() if not r.complete and r.error is None}
        if todo:
            consumer.assign([TopicPartition(topic, p, reads[p].start_offset) for p in sorted(todo)])
        errors: dict[int, str] = {}
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=min(0.5, deadline - time.monotonic())):
                # None where the client has none (an error not about one partition)
                partition, offset = msg.partition(), msg.offset()
                read = reads.get(partition) if partition is not None else None
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if (read is not None and read.partition in todo and offset is not None
                                and offset >= read.end_offset):
                            todo.discard(read.partition)
                    elif partition is not None and partition >= 0:
                        errors[partition] = error.str()
                    continue
                if read is None or read.partition not in todo or offset is None:
                    continue
                if offset >= read.end_offset:  # written after the end offset was taken
                    todo.discard(read.partition)
                    continue
                try:
                    read.records.append((offset, parse(msg.key(), msg.value())))
                except CorruptRecord as exc:
                    read.corrupt.append((offset, str(exc)))
                tag = _tag(msg) if transactional else None
                if tag is not None:
                    read.tags[offset] = tag
                if offset >= read.end_offset - 1:
                    todo.discard(read.partition)
        for p, read in reads.items():
            if read.error is None and p not in todo:
                read.complete = True
        for p in todo:
            last = reads[p].records[-1][0] if reads[p].records else None
            reads[p].complete = False
            reads[p].error = (f"timed out after {timeout:g} s at offset {last} of end offset "
                              f"{reads[p].end_offset}"
                              + (f" (last error: {errors[p]})" if p in errors else "")
                              + (_stable_offset(consumer, topic, p, reads[p].end_offset)
                                 if transactional else ""))
        return reads
    finally:
        consumer.close()
        if marks is not consumer:
            marks.close()


def _stable_offset(consumer: Consumer, topic: str, partition: int, end: int) -> str:
    """Why a read_committed read may stop short: the last stable offset now."""
    try:
        _, stable = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                   timeout=5, cached=False)
    except KafkaException as exc:
        return f" (last stable offset unknown: {exc})"
    why = ": a transaction below the end offset is still open" if stable < end else ""
    return f" (last stable offset {stable}{why})"


def verify(run: ProducerRun, *, timeout: float = DEFAULT_READ_TIMEOUT,
           flush_timeout: float | None = None,
           config: ClientConfig | None = None) -> Report:
    """Stop `run` (if it still runs), read its partitions back and account for them."""
    writes = run.stop(flush_timeout)
    reads = read_partitions(run.bootstrap_servers, run.topic, run.partitions,
                            timeout=timeout,
                            config=run.client_config if config is None else config)
    return build_report(run.run_id, run.topic, writes, reads,
                        producer_errors=dict(run.errors), fatal_error=run.fatal_error)
