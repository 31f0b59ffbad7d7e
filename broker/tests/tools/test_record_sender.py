"""The console producer's batching (tools/record_sender.py) on its own: Kafka's
RecordAccumulator rules for batch.size and linger.ms, and the built-in partitioner."""

from __future__ import annotations

import time

from moldau.tools.record_sender import Accumulator, LineRecord, Partitioner, key_partition

RECORD: LineRecord = (None, b"x" * 20, [])


def test_batches_close_at_batch_size_and_leave_when_full() -> None:
    accumulator = Accumulator(batch_size=200, linger_ms=60_000)
    for _ in range(20):
        accumulator.append(0, RECORD)
    drained = []
    while (ready := accumulator.drain()):
        drained += ready
    # every full batch leaves at once; the last, open one waits for its linger
    assert len(drained) >= 3 and all(len(b.records) > 1 for b in drained)
    assert accumulator.pending()
    rest = accumulator.drain(flush=True)
    assert sum(len(b.records) for b in drained + rest) == 20


def test_a_batch_waits_for_linger_and_batch_size_zero_sends_records_alone() -> None:
    accumulator = Accumulator(batch_size=16384, linger_ms=50)
    accumulator.append(0, RECORD)
    assert accumulator.drain() == []
    deadline = accumulator.next_deadline()
    assert deadline is not None
    time.sleep(max(deadline - time.monotonic(), 0) + 0.01)
    assert [len(b.records) for b in accumulator.drain()] == [1]
    alone = Accumulator(batch_size=0, linger_ms=60_000)
    for _ in range(3):
        alone.append(0, RECORD)
    assert [len(b.records) for b in alone.drain(flush=True)] == [1]
    assert alone.pending()


def test_partitioner_keys_and_stickiness() -> None:
    partitioner = Partitioner(count=3, batch_size=100, ignore_keys=False)
    assert partitioner.partition((b"user-1", b"v", [])) == key_partition(b"user-1", 3)
    first = partitioner.partition(RECORD)
    assert {partitioner.partition(RECORD) for _ in range(2)} == {first}
    # after batch.size bytes the sticky partition moves on
    moved = {partitioner.partition(RECORD) for _ in range(10)}
    assert moved - {first}
    ignoring = Partitioner(count=3, batch_size=1 << 20, ignore_keys=True)
    assert len({ignoring.partition((f"k{i}".encode(), b"v", [])) for i in range(20)}) == 1
