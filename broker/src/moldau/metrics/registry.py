"""Kafka's metrics as Yammer keeps them, under Kafka's MBean names.

A metric is known by its MBean name, e.g.
`kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders`, and read as the
attributes JMX shows for its type:

- Meter: Count, MeanRate, OneMinuteRate, FiveMinuteRate, FifteenMinuteRate (events per
  second; the three moving averages are Yammer's EWMAs, ticked every 5 seconds);
- Histogram: Count, Min, Max, Mean, StdDev and the 50/75/95/98/99/99.9th percentiles of
  the last 1028 values;
- Timer: a meter and a histogram of durations in milliseconds;
- Gauge: Value, read when asked.

Recording is a few additions on the hot path; the averages move in `tick()`, which the
broker calls every TICK_S seconds from its event loop.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

TICK_S = 5.0
RESERVOIR_SIZE = 1028  # Yammer's default sample size
PERCENTILES = (("50thPercentile", 0.5), ("75thPercentile", 0.75), ("95thPercentile", 0.95),
               ("98thPercentile", 0.98), ("99thPercentile", 0.99), ("999thPercentile", 0.999))


def _alpha(minutes: int) -> float:
    return 1 - math.exp(-TICK_S / 60 / minutes)


ALPHAS = (_alpha(1), _alpha(5), _alpha(15))

# An MBean's attributes, {attribute: value}. Values are numbers or unit names here, and
# whatever a gauge or provider reads; the registry only passes them on to JSON.
Attributes = dict[str, object]


def mbean_name(domain: str, type_: str, name: str, tags: Iterable[tuple[str, str]] = ()) -> str:
    """Kafka's MBean name: domain:type=...,name=...,tag=value (tags in the given order)."""
    parts = [f"type={type_}", f"name={name}", *(f"{k}={v}" for k, v in tags)]
    return f"{domain}:{','.join(parts)}"


class Meter:
    __slots__ = ("_rates", "_started", "_uncounted", "count")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        # floats too: the handler idle meter marks fractions of a second
        self.count: float = 0
        self._uncounted: float = 0
        self._rates: list[float] | None = None  # the 1, 5 and 15 minute EWMAs
        self._started = clock()

    def mark(self, n: float = 1) -> None:
        self.count += n
        self._uncounted += n

    def tick(self) -> None:
        instant = self._uncounted / TICK_S
        self._uncounted = 0
        if self._rates is None:
            self._rates = [instant] * 3
        else:
            self._rates = [r + a * (instant - r) for r, a in zip(self._rates, ALPHAS, strict=True)]

    def attributes(self, now: float) -> Attributes:
        elapsed = now - self._started
        m1, m5, m15 = self._rates or (0.0, 0.0, 0.0)
        return {"Count": self.count, "MeanRate": self.count / elapsed if elapsed > 0 else 0.0,
                "OneMinuteRate": m1, "FiveMinuteRate": m5, "FifteenMinuteRate": m15,
                "RateUnit": "SECONDS"}


class Histogram:
    __slots__ = ("_max", "_min", "_sum", "_sum_sq", "_values", "count")

    def __init__(self) -> None:
        self.count = 0
        self._min = math.inf
        self._max = -math.inf
        self._sum = 0.0
        self._sum_sq = 0.0
        self._values: deque[float] = deque(maxlen=RESERVOIR_SIZE)

    def update(self, value: float) -> None:
        self.count += 1
        self._sum += value
        self._sum_sq += value * value
        if value < self._min:  # comparisons: cheaper than calls to min() and max()
            self._min = value
        if value > self._max:
            self._max = value
        self._values.append(value)

    def attributes(self, _now: float) -> Attributes:
        n = self.count
        mean = self._sum / n if n else 0.0
        variance = (self._sum_sq - n * mean * mean) / (n - 1) if n > 1 else 0.0
        out: Attributes = {"Count": n, "Min": self._min if n else 0.0,
                           "Max": self._max if n else 0.0, "Mean": mean,
                           "StdDev": math.sqrt(max(variance, 0.0))}
        ordered = sorted(self._values)
        for label, q in PERCENTILES:
            out[label] = _quantile(ordered, q)
        return out


def _quantile(ordered: list[float], q: float) -> float:
    """Yammer's Snapshot.getValue: linear interpolation at q * (n + 1)."""
    if not ordered:
        return 0.0
    pos = q * (len(ordered) + 1)
    if pos < 1:
        return ordered[0]
    if pos >= len(ordered):
        return ordered[-1]
    lower = ordered[int(pos) - 1]
    upper = ordered[int(pos)]
    return lower + (pos - math.floor(pos)) * (upper - lower)


class Timer:
    """Durations in milliseconds: a meter of their rate and a histogram of their size."""

    __slots__ = ("histogram", "meter")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.meter = Meter(clock)
        self.histogram = Histogram()

    def update(self, ms: float) -> None:
        self.meter.mark()
        self.histogram.update(ms)

    def tick(self) -> None:
        self.meter.tick()

    def attributes(self, now: float) -> Attributes:
        return {**self.histogram.attributes(now), **self.meter.attributes(now),
                "LatencyUnit": "MILLISECONDS"}


class Gauge:
    __slots__ = ("read",)

    def __init__(self, read: Callable[[], object]) -> None:
        self.read = read

    def attributes(self, _now: float) -> Attributes:
        return {"Value": self.read()}


Metric = Meter | Histogram | Timer | Gauge


# Many MBeans at once, computed when read (per-partition gauges): {mbean: attributes}
Provider = Callable[[], Mapping[str, Mapping[str, object]]]

_M = TypeVar("_M", Meter, Histogram, Timer)


class MetricsRegistry:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.metrics: dict[str, Metric] = {}
        self.providers: list[Provider] = []

    def add_provider(self, provider: Provider) -> None:
        """MBeans that come and go with the state (a gauge per partition): computed
        only when the registry is read, so they cost nothing in between."""
        self.providers.append(provider)

    def meter(self, domain: str, type_: str, name: str,
              tags: Iterable[tuple[str, str]] = ()) -> Meter:
        return self._get(mbean_name(domain, type_, name, tags), lambda: Meter(self.clock), Meter)

    def histogram(self, domain: str, type_: str, name: str,
                  tags: Iterable[tuple[str, str]] = ()) -> Histogram:
        return self._get(mbean_name(domain, type_, name, tags), Histogram, Histogram)

    def timer(self, domain: str, type_: str, name: str,
              tags: Iterable[tuple[str, str]] = ()) -> Timer:
        return self._get(mbean_name(domain, type_, name, tags), lambda: Timer(self.clock), Timer)

    def gauge(self, domain: str, type_: str, name: str, read: Callable[[], object],
              tags: Iterable[tuple[str, str]] = ()) -> Gauge:
        gauge = Gauge(read)
        self.metrics[mbean_name(domain, type_, name, tags)] = gauge
        return gauge

    def remove(self, domain: str, type_: str, name: str,
               tags: Iterable[tuple[str, str]] = ()) -> None:
        self.metrics.pop(mbean_name(domain, type_, name, tags), None)

    def _get(self, key: str, make: Callable[[], _M], kind: type[_M]) -> _M:
        metric = self.metrics.get(key)
        if metric is None:
            made = self.metrics[key] = make()
            return made
        if not isinstance(metric, kind):
            raise TypeError(f"{key} is a {type(metric).__name__}, not a {kind.__name__}")
        return metric

    def tick(self) -> None:
        """Move the moving averages of every meter and timer (every TICK_S seconds)."""
        for metric in list(self.metrics.values()):
            if isinstance(metric, Meter | Timer):
                metric.tick()

    def snapshot(self, query: str | None = None) -> list[Attributes]:
        """[{"name": mbean, attribute: value, ...}] of the metrics matching query (an
        MBean pattern as JMX takes it: `domain:key=value,...` with `*` for the rest)."""
        now = self.clock()
        found: dict[str, Mapping[str, object]] = {}
        for name, metric in self.metrics.items():
            if query is None or matches(query, name):
                try:
                    found[name] = metric.attributes(now)
                except Exception as exc:  # a gauge that cannot be read now
                    found[name] = {"Error": str(exc)}
        for provider in self.providers:
            try:
                provided = provider()
            except Exception:  # the state is changing under it: skip this read
                continue
            for name, attributes in provided.items():
                if query is None or matches(query, name):
                    # several providers may add attributes to one MBean (socket-server-metrics)
                    found[name] = {**found[name], **attributes} if name in found else attributes
        return [{"name": name, **found[name]} for name in sorted(found)]


def matches(query: str, name: str) -> bool:
    """JMX ObjectName pattern matching for the forms tools use: `domain:*`,
    `domain:type=X,*`, `domain:type=X,name=Y,topic=z` (exact), `*:*`."""
    q_domain, _, q_props = query.partition(":")
    domain, _, props = name.partition(":")
    if q_domain not in ("*", domain):
        return False
    wanted = [p for p in q_props.split(",") if p]
    wildcard = "*" in wanted
    wanted_pairs = {tuple(p.split("=", 1)) for p in wanted if p != "*"}
    have = {tuple(p.split("=", 1)) for p in props.split(",") if p}
    if not wanted_pairs <= have:
        return False
    return wildcard or wanted_pairs == have
