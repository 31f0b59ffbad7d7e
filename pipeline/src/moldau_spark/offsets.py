"""Offset arithmetic with no I/O: the stream's checkpointed offsets in Spark's Kafka JSON
shape, the ranges a batch reads, the per-trigger limit and the minPartitions split."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from .options import TopicPartition

Offsets = dict[TopicPartition, int]  # next offset to read, per partition


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{("t", 0): 5} -> {"t": {"0": 5}}: Spark's Kafka offset JSON, which the checkpoint
    stores, so a checkpoint reads the same as one of Spark's own Kafka source."""
    result: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = offset
    return result


def from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {(topic, int(p)): int(o) for topic, parts in data.items() for p, o in parts.items()}


@dataclass(frozen=True)
class PartitionRange(InputPartition):
    """Records [start, end) of one topic partition: one Spark task (or part of one when
    minPartitions splits a large range)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def ranges(start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int],
           new_partition_start: int = 0) -> list[PartitionRange]:
    """The non-empty ranges between two offset maps; partitions that appear only in `end`
    were added to the topic since `start` and are read from their beginning."""
    result = []
    for (topic, partition), stop in sorted(end.items()):
        begin = start.get((topic, partition), new_partition_start)
        if stop > begin:
            result.append(PartitionRange(topic, partition, begin, stop))
    return result


def limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
          max_records: int) -> Offsets:
    """Ends that read at most about `max_records` in all, shared among the partitions in
    proportion to their backlog (as Spark's maxOffsetsPerTrigger does). A partition with a
    backlog always advances by at least one record, so a small limit cannot stall a
    stream."""
    backlog = {tp: max(0, end - start.get(tp, 0)) for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    result = {}
    for tp, end in latest.items():
        begin = start.get(tp, 0)
        share = max_records * backlog[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        result[tp] = min(end, begin + step) if backlog[tp] else end
    return result


def split(parts: list[PartitionRange], min_partitions: int | None) -> list[PartitionRange]:
    """Split the largest ranges until there are at least `min_partitions` (or every range
    is one record); splitting is deterministic so a replayed batch reads the same tasks."""
    result = sorted(parts, key=lambda r: (r.topic, r.partition, r.start))
    if not min_partitions:
        return result
    while len(result) < min_partitions:
        largest = max(result, key=lambda r: r.size, default=None)
        if largest is None or largest.size < 2:
            break
        middle = largest.start + largest.size // 2
        result.remove(largest)
        result += [PartitionRange(largest.topic, largest.partition, largest.start, middle),
                   PartitionRange(largest.topic, largest.partition, middle, largest.end)]
        result.sort(key=lambda r: (r.topic, r.partition, r.start))
    return result
