"""Reading a topic back, all of it, and judging a producer run against it.

`read_partitions` queries each partition's watermarks first, then reads it from the log
start offset to that end offset with a group-less assigned confluent-kafka consumer
(nothing is committed; ``isolation.level`` stays the client's default), bounded by one
timeout for the whole read. `verify` stops a `ProducerRun` (flushing it), reads its
partitions and returns the `Report`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from moldau.checker.producer import ClientConfig, ProducerRun, topic_partitions
from moldau.checker.records import CorruptRecord, parse
from moldau.checker.report import PartitionRead, Report, build_report

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


def read_partitions(bootstrap_servers: str, topic: str, partitions: Sequence[int] | None = None,
                    *, timeout: float = DEFAULT_READ_TIMEOUT,
                    config: ClientConfig | None = None) -> dict[int, PartitionRead]:
    """Every record of each partition from its log start to the end offset found before
    reading, as `PartitionRead`s (records are (offset, parsed record or None))."""
    deadline = time.monotonic() + timeout
    consumer = Consumer({
        **dict(config or {}),
        "bootstrap.servers": bootstrap_servers,
        # the Python client insists on a group id; nothing is subscribed or committed
        "group.id": f"moldau-checker-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })
    try:
        if partitions is None:
            partitions = topic_partitions(consumer, topic,
                                          timeout=max(1.0, deadline - time.monotonic()))
        reads: dict[int, PartitionRead] = {}
        for p in partitions:
            try:
                low, high = _watermarks(consumer, topic, p, deadline)
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
                              + (f" (last error: {errors[p]})" if p in errors else ""))
        return reads
    finally:
        consumer.close()


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
