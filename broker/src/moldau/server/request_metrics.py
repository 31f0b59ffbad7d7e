"""Kafka's RequestMetrics: per request type, `RequestsPerSec` (a meter tagged with the
request and its version), `ErrorsPerSec` (a meter per request and error, NONE included)
and histograms of where the time went, in milliseconds:

- RequestQueueTimeMs: from the frame's arrival to the handler's start (near zero here:
  the event loop dispatches a frame as soon as it is read);
- LocalTimeMs: the handler's own work;
- RemoteTimeMs: waiting for others (acks=all replication, a fetch's long poll);
- ResponseQueueTimeMs: from the handler's answer to its send starting: the response's
  encoding, and the requests handled after it in the same pass, whose responses leave
  in one write with it (moldau.server.network);
- ResponseSendTimeMs: that write to the socket (or the transport's buffer), sendfile
  ranges included;
- TotalTimeMs: arrival to the response being sent;
- ThrottleTimeMs: the client quota throttle time the response carried (0 mostly).

Fetch is split into FetchConsumer and FetchFollower, as in Kafka. The errors of a
response are its `error_code` fields, counted wherever they sit in the response (one per
partition of a Produce or Fetch answer, as Kafka's errorCounts do).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from moldau import errors
from moldau.errors import error_name
from moldau.metrics.registry import Histogram, Meter, MetricsRegistry
from moldau.protocol._runtime import Message, Struct
from moldau.protocol.generated.api import APIS, ApiKey

if TYPE_CHECKING:
    from moldau.protocol.generated.fetch_request import FetchRequest

NETWORK = "kafka.network"


def _error_names() -> dict[int, str]:
    """Kafka's Errors name of every code in moldau.errors (and 0, NONE): the error tag of
    ErrorsPerSec; a dict, since each answered error code looks its name up."""
    return {code: error_name(code) for code in (0, *errors.codes())}


ERROR_NAMES = _error_names()


# per generated class: (has an error_code field, the struct fields under which an
# error_code can be found, each with whether it is an array)
_Plan = tuple[bool, tuple[tuple[str, bool], ...]]
_PLANS: dict[type, _Plan] = {}


def _plan(cls: type) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is None:
        _PLANS[cls] = (False, ())  # while it is computed (a struct that nests itself)
        fields = getattr(cls, "FIELDS", ())
        has_code = any(f.name == "error_code" for f in fields)
        children = tuple((f.name, f.type == "array") for f in fields
                         if f.struct is not None and _reaches_code(f.struct))
        plan = _PLANS[cls] = (has_code, children)
    return plan


def _reaches_code(cls: type) -> bool:
    has_code, children = _plan(cls)
    return has_code or bool(children)


def error_counts(response: Struct, counts: dict[int, int]) -> None:
    """Add every error_code of a response (and of its nested structs) to counts; the
    walk visits only the fields the generated FIELDS say can lead to one."""
    counter = _COUNTERS.get(type(response))
    if counter is None:
        counter = _counter(type(response))
    counter(response, counts)


# adds the error codes of a generated struct (and of the structs below it) to counts
_Counter = Callable[[Struct, dict[int, int]], None]
# per generated class: its _Counter
_COUNTERS: dict[type, _Counter] = {}


def _counter(cls: type) -> _Counter:
    """The error code walk of a class, made once: an array of structs that have an
    error_code and nothing below it (a Produce answer's partitions, a Fetch answer's)
    is counted in a loop of the parent's walk, without a call per element."""
    has_code, children = _plan(cls)
    fields = {f.name: f.struct for f in getattr(cls, "FIELDS", ())}
    steps = []
    for name, is_array in children:
        child = fields[name]
        leaf = _plan(child) == (True, ())
        steps.append((name, is_array, leaf, child))

    def count(response: Struct, counts: dict[int, int]) -> None:
        if has_code:
            code = response.error_code  # type: ignore[attr-defined]  # FIELDS name it
            counts[code] = counts.get(code, 0) + 1
        for name, is_array, leaf, child in steps:
            value = getattr(response, name, None)
            if value is None:
                continue
            if not is_array:
                error_counts(value, counts)
            elif leaf:
                for item in value:
                    code = item.error_code
                    counts[code] = counts.get(code, 0) + 1
            else:
                walk = _COUNTERS.get(child) or _counter(child)
                for item in value:
                    walk(item, counts)

    _COUNTERS[cls] = count
    return count


@dataclass(slots=True)
class _Metrics:
    name: str
    requests: Meter
    queue: Histogram
    local: Histogram
    remote: Histogram
    response_queue: Histogram
    send: Histogram
    total: Histogram
    throttle: Histogram
    errors: dict[int, Meter]


class RequestMetrics:
    def __init__(self, registry: MetricsRegistry) -> None:
        self.registry = registry
        # by (API key, version), and for Fetch by ("FetchConsumer" or "FetchFollower", version)
        self._by_request: dict[tuple[int | str, int], _Metrics] = {}

    def record(self, api_key: int, version: int, body: Message | None, arrived_ns: int,
               started_ns: int, local_ns: int, remote_ns: int, response: Message | None,
               done_ns: int | None = None,
               error_counts: dict[int, int] | None = None,
               throttle_ms: int = 0) -> tuple[_Metrics, int, int]:
        """Count a handled request; the (metrics, arrival, done) that `sent` takes once
        the response went out. done_ns: when the handler's answer was ready (now when
        not given). error_counts: the response's error codes, for an answer that is
        bytes rather than a response object (else they are read from `response`)."""
        if api_key == ApiKey.FETCH:
            fetch = cast("FetchRequest", body)  # API key 1's body
            follower = (fetch.replica_id if version <= 14
                        else fetch.replica_state.replica_id) >= 0
            key: tuple[int | str, int] = ("FetchFollower" if follower else "FetchConsumer",
                                          version)
        else:
            key = (api_key, version)
        metrics = self._by_request.get(key)
        if metrics is None:
            name = key[0] if isinstance(key[0], str) else APIS[api_key].name
            metrics = self._by_request[key] = self._make(name, version)
        metrics.requests.mark()
        metrics.queue.update((started_ns - arrived_ns) / 1e6)
        metrics.local.update(local_ns / 1e6)
        metrics.remote.update(remote_ns / 1e6)
        metrics.throttle.update(throttle_ms)
        counts = error_counts
        if response is not None:
            counts = {}
            counter = _COUNTERS.get(type(response))
            (counter or _counter(type(response)))(response, counts)
        if counts:
            for code, n in counts.items():
                meter = metrics.errors.get(code)
                if meter is None:
                    error = ERROR_NAMES.get(code, f"ERROR_{code}")
                    meter = metrics.errors[code] = self.registry.meter(
                        NETWORK, "RequestMetrics", "ErrorsPerSec",
                        (("request", metrics.name), ("error", error)))
                meter.mark(n)
        return metrics, arrived_ns, time.monotonic_ns() if done_ns is None else done_ns

    @staticmethod
    def sent(meta: tuple[_Metrics, int, int], send_started_ns: int, sent_ns: int) -> None:
        """The response of a recorded request went out (the socket server calls this)."""
        metrics, arrived_ns, done_ns = meta
        metrics.response_queue.update(max(send_started_ns - done_ns, 0) / 1e6)
        metrics.send.update((sent_ns - send_started_ns) / 1e6)
        metrics.total.update((sent_ns - arrived_ns) / 1e6)

    @staticmethod
    def unanswered(meta: tuple[_Metrics, int, int]) -> None:
        """A request that gets no response (acks=0): its total ends when it is handled."""
        metrics, arrived_ns, done_ns = meta
        metrics.response_queue.update(0.0)
        metrics.send.update(0.0)
        metrics.total.update((done_ns - arrived_ns) / 1e6)

    def _make(self, name: str, version: int) -> _Metrics:
        r, tag = self.registry, (("request", name),)

        def histogram(metric: str) -> Histogram:
            return r.histogram(NETWORK, "RequestMetrics", metric, tag)

        return _Metrics(
            name,
            r.meter(NETWORK, "RequestMetrics", "RequestsPerSec", (*tag, ("version", str(version)))),
            histogram("RequestQueueTimeMs"), histogram("LocalTimeMs"),
            histogram("RemoteTimeMs"), histogram("ResponseQueueTimeMs"),
            histogram("ResponseSendTimeMs"), histogram("TotalTimeMs"),
            histogram("ThrottleTimeMs"), {})
