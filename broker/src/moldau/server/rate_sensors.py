"""The measurements behind client quotas, with Kafka's arithmetic (its metrics library's
SampledStat, Rate, Avg and TokenBucket, and QuotaUtils' throttle time).

A sampled stat keeps `samples` windows of `window_ms` each (plus one, so that the oldest
window still overlapping the measured span is not lost): a value is added to the current
window, which is replaced by a fresh one once it is `window_ms` old; a window whose last
event is `samples` windows old no longer counts. A rate is the windows' sum over the
time since the oldest window started, but never over less than `samples - 1` full windows:
a client that just started is measured as if it had been idle before, so a first burst
is not taken for a high rate.

Times are milliseconds (floats) of a monotonic clock the caller passes in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WindowConfig:
    """`quota.window.num` samples of `quota.window.size.seconds` (in ms)."""

    samples: int
    window_ms: float

    @classmethod
    def of(cls, samples: int, window_seconds: float) -> WindowConfig:
        return cls(samples, window_seconds * 1000.0)


class _Sample:
    __slots__ = ("count", "last_event_ms", "start_ms", "value")

    def __init__(self, now_ms: float) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: float) -> None:
        self.start_ms = now_ms
        self.last_event_ms = now_ms
        self.value = 0.0
        self.count = 0


class SampledWindows:
    """Kafka's SampledStat over a sum: the windows themselves."""

    __slots__ = ("_current", "_samples", "config")

    def __init__(self, config: WindowConfig) -> None:
        self.config = config
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.config.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.count += 1
        sample.last_event_ms = now_ms

    def _current_sample(self, now_ms: float) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: float) -> _Sample:
        # one window more than counted: the oldest may still overlap the measured span
        self._current = (self._current + 1) % (self.config.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def purge(self, now_ms: float) -> None:
        """Forget the windows without an event in the last `samples` windows."""
        expire = self.config.samples * self.config.window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire:
                sample.reset(now_ms)

    def total(self, now_ms: float) -> float:
        self.purge(now_ms)
        return sum(s.value for s in self._samples)

    def count(self, now_ms: float) -> int:
        self.purge(now_ms)
        return sum(s.count for s in self._samples)

    def oldest_start(self, now_ms: float) -> float:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(s.start_ms for s in self._samples)


class Rate:
    """Kafka's Rate: the windows' sum per second over the elapsed span (see the module
    doc for its lower bound)."""

    __slots__ = ("windows",)

    def __init__(self, config: WindowConfig) -> None:
        self.windows = SampledWindows(config)

    def record(self, value: float, now_ms: float) -> None:
        self.windows.record(value, now_ms)

    def window_ms(self, now_ms: float) -> float:
        """The span the rate is measured over (Rate.windowSize)."""
        windows = self.windows
        windows.purge(now_ms)
        config = windows.config
        elapsed = now_ms - windows.oldest_start(now_ms)
        full = int(elapsed // config.window_ms)
        if full < config.samples - 1:
            elapsed += (config.samples - 1 - full) * config.window_ms
        return elapsed

    def measure(self, now_ms: float) -> float:
        total = self.windows.total(now_ms)
        return total / (self.window_ms(now_ms) / 1000.0)


class Avg:
    """Kafka's Avg over the same windows: the mean of the values recorded in them (0.0
    with none, where Kafka shows NaN: JSON has no NaN)."""

    __slots__ = ("windows",)

    def __init__(self, config: WindowConfig) -> None:
        self.windows = SampledWindows(config)

    def record(self, value: float, now_ms: float) -> None:
        self.windows.record(value, now_ms)

    def measure(self, now_ms: float) -> float:
        count = self.windows.count(now_ms)
        return self.windows.total(now_ms) / count if count else 0.0


class _MaxWindows(SampledWindows):
    """The windows of a Max: each keeps the largest value recorded in it."""

    __slots__ = ()

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.config.window_ms:
            sample = self._advance(now_ms)
        sample.value = value if sample.count == 0 else max(sample.value, value)
        sample.count += 1
        sample.last_event_ms = now_ms

    def maximum(self, now_ms: float) -> float:
        self.purge(now_ms)
        return max((s.value for s in self._samples if s.count), default=0.0)


class Max:
    """Kafka's Max over the windows: the largest value recorded in them (0.0 with none,
    where Kafka shows NaN, as Avg)."""

    __slots__ = ("windows",)

    def __init__(self, config: WindowConfig) -> None:
        self.windows = _MaxWindows(config)

    def record(self, value: float, now_ms: float) -> None:
        self.windows.record(value, now_ms)

    def measure(self, now_ms: float) -> float:
        return self.windows.maximum(now_ms)


class TokenBucket:
    """Kafka's TokenBucket (the controller mutation quota): `quota` tokens a second up to a
    burst of quota x samples x window; a mutation takes its permits even when that leaves
    the bucket negative. It starts full."""

    __slots__ = ("_last_ms", "config", "tokens")

    def __init__(self, config: WindowConfig) -> None:
        self.config = config
        self.tokens: float | None = None  # full until first measured
        self._last_ms = 0.0

    def burst(self, quota: float) -> float:
        return self.config.samples * self.config.window_ms / 1000.0 * quota

    def _refill(self, quota: float, now_ms: float) -> float:
        burst = self.burst(quota)
        if self.tokens is None:
            tokens = burst
        else:
            tokens = min(burst, self.tokens + quota * (now_ms - self._last_ms) / 1000.0)
        self._last_ms = now_ms
        self.tokens = tokens
        return tokens

    def measure(self, quota: float, now_ms: float) -> float:
        return self._refill(quota, now_ms)

    def record(self, permits: float, quota: float, now_ms: float) -> None:
        self.tokens = min(self.burst(quota), self._refill(quota, now_ms) - permits)


def java_round(value: float) -> int:
    """Java's Math.round: halves round up."""
    return math.floor(value + 0.5)


def throttle_time_ms(observed: float, bound: float, window_ms: float) -> int:
    """QuotaUtils.throttleTime: the delay X after which O measured over W falls to T,
    O x W / (W + X) = T, so X = (O - T) / T x W."""
    return java_round((observed - bound) / bound * window_ms)


def token_throttle_time_ms(tokens: float, quota: float) -> int:
    """The controller mutation quota's throttle: the time the bucket takes to refill to
    zero (-tokens / quota seconds)."""
    return java_round(-tokens / quota * 1000.0)
