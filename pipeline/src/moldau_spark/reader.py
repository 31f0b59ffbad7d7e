"""Batch and streaming readers. Planning (which partitions, which offsets) runs on the
driver through `Cluster`; each Spark task reads one exact offset range with its own
consumer (fetch.py), so a replayed micro-batch reads exactly the same records."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from . import fetch
from .cluster import Cluster
from .offsets import Offsets, PartitionRange, from_json, limit, ranges, split, to_json
from .options import OffsetSpec, SourceOptions
from .positions import resolve

log = logging.getLogger("moldau_spark")


class _Planner:
    """Driver-side state shared by both readers; the cluster connection is made lazily and
    left out when Spark pickles the reader for its executors."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._cluster: Cluster | None = None

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.options.client)
        return self._cluster

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_cluster": None}

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, PartitionRange):
            return  # Spark plans one empty partition when there is nothing to read
        opts = self.options
        cons = fetch.consumer(opts.client, opts.group_id_prefix)
        try:
            messages = fetch.iter_messages(
                cons, partition.topic, partition.partition, partition.start, partition.end,
                timeout_s=opts.poll_timeout_ms / 1000,
                fail_on_data_loss=opts.fail_on_data_loss)
            yield from fetch.to_arrow(messages, opts.include_headers)
        finally:
            cons.close()


class BatchReader(_Planner, DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        opts = self.options
        parts = self.cluster.partitions(opts.subscription, require=True)
        start = resolve(self.cluster, opts.starting or OffsetSpec("earliest"), parts,
                        name="startingOffsets", strategy=opts.timestamp_strategy)
        end = resolve(self.cluster, opts.ending or OffsetSpec("latest"), parts,
                      name="endingOffsets")
        backwards = [f"{t}-{p} ({start[(t, p)]} > {end[(t, p)]})" for t, p in parts
                     if start[(t, p)] > end[(t, p)]]
        if backwards:
            raise ValueError(f"startingOffsets is after endingOffsets in {', '.join(backwards)}")
        return split(ranges(start, end), opts.min_partitions)


class StreamReader(_Planner, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are `{"topic": {"partition": next offset}}`, Spark's Kafka source format,
    and live in the query's checkpoint: `commit()` is advisory (Spark calls it one batch
    late) and does nothing."""

    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._available_now: Offsets | None = None  # the end fixed by Trigger.AvailableNow
        self._latest: Offsets | None = None

    def initialOffset(self) -> dict:
        opts = self.options
        parts = self.cluster.partitions(opts.subscription, require=True)
        start = resolve(self.cluster, opts.starting or OffsetSpec("latest"), parts,
                        name="startingOffsets", strategy=opts.timestamp_strategy)
        return to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        cap = self.options.max_offsets_per_trigger
        return ReadMaxRows(cap) if cap else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._current()

    def _current(self) -> Offsets:
        parts = self.cluster.partitions(self.options.subscription, require=False)
        return self.cluster.latest(parts)

    def latestOffset(self, start: dict, limit_: ReadLimit) -> dict:
        begin = from_json(start)
        latest = self._available_now if self._available_now is not None else self._current()
        self._latest = latest
        end = self._check_loss(begin, latest)
        if isinstance(limit_, ReadMaxRows):
            end = limit(begin, end, limit_.max_rows)
        return to_json(end)

    def _check_loss(self, begin: Offsets, latest: Offsets) -> Offsets:
        """Partitions that vanished, and logs that now end before our position, mean the
        records we would read next are gone (a deleted or recreated topic)."""
        end = dict(latest)
        for tp, offset in begin.items():
            if tp not in latest:
                if self._available_now is None:
                    fetch.lost(f"{tp[0]}-{tp[1]} no longer exists", self.options.fail_on_data_loss)
                continue
            if latest[tp] < offset:
                fetch.lost(f"{tp[0]}-{tp[1]}: the log ends at {latest[tp]}, before the "
                           f"stream's position {offset} (was the topic recreated?)",
                           self.options.fail_on_data_loss)
            end[tp] = max(end[tp], offset)
        return end

    def reportLatestOffset(self) -> dict | None:
        return to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        return split(ranges(from_json(start), from_json(end)), self.options.min_partitions)

    def commit(self, end: dict) -> None:
        pass
