"""Kafka's RequestMetrics: per request type, `RequestsPerSec` (a meter tagged with the
request and its version) and histograms of where the time went, in milliseconds:

- RequestQueueTimeMs: from the frame's arrival to the handler's start (near zero here:
  the event loop dispatches a frame as soon as it is read);
- LocalTimeMs: the handler's own work;
- RemoteTimeMs: waiting for others (acks=all replication, a fetch's long poll);
- TotalTimeMs: arrival to the response being ready (sending is the network's).

Fetch is split into FetchConsumer and FetchFollower, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from moldau.metrics.registry import Histogram, Meter, MetricsRegistry
from moldau.protocol.api import APIS

NETWORK = "kafka.network"
FETCH = 1


@dataclass(slots=True)
class _Metrics:
    requests: Meter
    queue: Histogram
    local: Histogram
    remote: Histogram
    total: Histogram


class RequestMetrics:
    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = registry
        self._by_request: dict[tuple[str, int], _Metrics] = {}

    def record(self, api_key: int, version: int, body: Any, arrived_ns: int, started_ns: int,
               local_ns: int, remote_ns: int, done_ns: int) -> None:
        name = APIS[api_key].name
        if api_key == FETCH:
            follower = (body.replica_id if version <= 14 else body.replica_state.replica_id) >= 0
            name = "FetchFollower" if follower else "FetchConsumer"
        metrics = self._by_request.get((name, version))
        if metrics is None:
            metrics = self._by_request[(name, version)] = self._make(name, version)
        metrics.requests.mark()
        metrics.queue.update((started_ns - arrived_ns) / 1e6)
        metrics.local.update(local_ns / 1e6)
        metrics.remote.update(remote_ns / 1e6)
        metrics.total.update((done_ns - arrived_ns) / 1e6)

    def _make(self, name: str, version: int) -> _Metrics:
        r, tag = self.registry, (("request", name),)
        return _Metrics(
            r.meter(NETWORK, "RequestMetrics", "RequestsPerSec", (*tag, ("version", str(version)))),
            r.histogram(NETWORK, "RequestMetrics", "RequestQueueTimeMs", tag),
            r.histogram(NETWORK, "RequestMetrics", "LocalTimeMs", tag),
            r.histogram(NETWORK, "RequestMetrics", "RemoteTimeMs", tag),
            r.histogram(NETWORK, "RequestMetrics", "TotalTimeMs", tag))
