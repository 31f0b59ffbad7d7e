"""The transaction metrics under Kafka 3.9's MBean names (see moldau.metrics.registry).

- `kafka.server:type=transaction-coordinator-metrics`, attributes `partition-load-time-max`
  and `partition-load-time-avg`: Kafka's TransactionsPartitionLoadTime sensor (a Kafka
  Metrics sensor, so a bean without `name=` whose attributes are the metric names), the
  time from a `__transaction_state` partition's election to its transactions being
  served, over `metrics.num.samples` windows of `metrics.sample.window.ms`;
- `kafka.server:type=ReplicaManager,name=PartitionsWithLateTransactionsCount`: the
  partitions this broker leads whose earliest open transaction's producer last wrote more
  than `transaction.max.timeout.ms` + 5 minutes ago (hanging transactions), and
  `...,name=ProducerIdCount`: the producers known to every hosted replica;
- `kafka.coordinator.transaction:type=TransactionMarkerChannelManager,name=
  UnknownDestinationQueueSize` (markers waiting for their partitions' leader) and
  `LogAppendRetryQueueSize` (Complete records waiting to be written again).

All are read from the live state when scraped: nothing is counted on the request path.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.metrics.registry import MetricsRegistry

from .rate_sensors import Avg, Max, WindowConfig

if TYPE_CHECKING:
    from moldau.coordinator.transaction.coordinator import TransactionCoordinator
    from moldau.replication.replica_manager import ReplicaManager

    from .txn_marker_channel import TxnMarkerChannel

COORDINATOR_METRICS = "kafka.server:type=transaction-coordinator-metrics"
MARKER_CHANNEL = ("kafka.coordinator.transaction", "TransactionMarkerChannelManager")
REPLICA_MANAGER = ("kafka.server", "ReplicaManager")


class PartitionLoadTimes:
    """Kafka's TransactionsPartitionLoadTime sensor: Max and Avg of the load times (ms)
    recorded in the last windows; 0.0 with none (Kafka: NaN, which JSON cannot carry)."""

    def __init__(self, window: WindowConfig,
                 clock_ms: Callable[[], float] = lambda: time.monotonic() * 1000) -> None:
        self._max = Max(window)
        self._avg = Avg(window)
        self._clock_ms = clock_ms

    def record(self, ms: float) -> None:
        now = self._clock_ms()
        self._max.record(ms, now)
        self._avg.record(ms, now)

    def beans(self) -> dict[str, dict[str, object]]:
        now = self._clock_ms()
        return {COORDINATOR_METRICS: {"partition-load-time-max": self._max.measure(now),
                                      "partition-load-time-avg": self._avg.measure(now)}}


@dataclass(frozen=True)
class TransactionMetricSources:
    """What the gauges read; the parts the broker's start creates come as functions that
    return them (None until they exist)."""

    registry: MetricsRegistry
    replica_manager: Callable[[], ReplicaManager | None]
    coordinator: Callable[[], TransactionCoordinator | None]
    channel: Callable[[], TxnMarkerChannel | None]
    max_transaction_timeout_ms: int  # transaction.max.timeout.ms (read-only in Kafka)
    window: WindowConfig  # metrics.num.samples x metrics.sample.window.ms


def register_transaction_metrics(sources: TransactionMetricSources) -> PartitionLoadTimes:
    """The gauges and the load-time sensor; the caller hands the sensor's `record` to the
    transaction state manager (`on_load_time`)."""
    registry = sources.registry

    def late_transactions() -> int:
        replica_manager = sources.replica_manager()
        if replica_manager is None:
            return 0
        now_ms = int(time.time() * 1000)  # batch timestamps are wall-clock times
        limit = sources.max_transaction_timeout_ms
        return sum(1 for p in list(replica_manager.partitions.values())
                   if p.is_leader and p.log.producer_state.has_late_transaction(now_ms, limit))

    def producer_ids() -> int:
        replica_manager = sources.replica_manager()
        if replica_manager is None:
            return 0
        return sum(len(p.log.producer_state.producers)
                   for p in list(replica_manager.partitions.values()))

    registry.gauge(*REPLICA_MANAGER, "PartitionsWithLateTransactionsCount", late_transactions)
    registry.gauge(*REPLICA_MANAGER, "ProducerIdCount", producer_ids)

    def unknown_destination() -> int:
        channel = sources.channel()
        return channel.unknown_destination_markers() if channel is not None else 0

    def log_append_retries() -> int:
        coordinator = sources.coordinator()
        return coordinator.completion.retrying if coordinator is not None else 0

    registry.gauge(*MARKER_CHANNEL, "UnknownDestinationQueueSize", unknown_destination)
    registry.gauge(*MARKER_CHANNEL, "LogAppendRetryQueueSize", log_append_retries)

    load_times = PartitionLoadTimes(sources.window)
    registry.add_provider(load_times.beans)
    return load_times
