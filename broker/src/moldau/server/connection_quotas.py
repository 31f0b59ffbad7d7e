"""Kafka's ConnectionQuotas: the connection counts and creation rates the acceptors
(acceptor.py) check each new connection against, with no I/O of its own.

A new connection, in Kafka's order:

1. `record_accept`: it counts into the creation rate of its listener and, unless the
   listener is the protected inter-broker one, the broker-wide rate; the throttle time
   a violation earns (the longer of the two, at most one quota window) is how long the
   acceptor waits before taking it further.
2. `slot_available`: the acceptor also waits while its listener is at its
   `max.connections`, or (protected listener aside) the broker is at its
   `max.connections`; a close or a raised limit frees it.
3. `admit`: the per-address creation rate (`connection_creation_rate` of
   `/config/ips/<ip>`, else of `<default>`): a connection over it is not counted (its
   recording is taken back from every rate) and is closed after the throttle time; then
   `max.connections.per.ip` (or its override): one over it is closed at once.

The inter-broker listener is protected only when the broker has other listeners: its
connections count in the broker-wide total but never wait for it, and while the total
is over `max.connections` the socket server closes the least recently used connections
of the other listeners (`over_broker_limit`).
"""

from __future__ import annotations

import collections
import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from .limits import INT_MAX, ConnectionLimits
from .rate_sensors import Avg, Rate, WindowConfig, throttle_time_ms

DEFAULT_IP = "<default>"  # ClientQuotaConfigs' default entity
IP_RATE_IDLE_MS = 3600 * 1000  # an address's rate is dropped after an hour unused


def normalized_address(address: str) -> str:
    """One spelling per address (as Kafka compares InetAddress values)."""
    try:
        return str(ipaddress.ip_address(address.split("%", 1)[0]))
    except ValueError:
        return address


@dataclass(frozen=True)
class Admission:
    """What `admit` decided: counted (both None), or why not."""

    ip_throttle_ms: int | None = None  # over the address's creation rate: close after this
    ip_limit: int | None = None  # over max.connections.per.ip: close now

    @property
    def admitted(self) -> bool:
        return self.ip_throttle_ms is None and self.ip_limit is None


# Kafka's socket-server-metrics keep their rates and averages over 2 windows of 30 s
# (the default MetricConfig)
METRIC_WINDOWS = WindowConfig.of(2, 30)


class QuotaRate:
    """A creation rate with its limit (Kafka's sensor with a Quota): recording an event
    also tells the throttle time its violation earns."""

    def __init__(self, config: WindowConfig, bound: float) -> None:
        self.rate = Rate(config)
        self.bound = bound
        self.last_record_ms = 0.0

    def record(self, value: float, now_ms: float) -> None:
        self.last_record_ms = now_ms
        self.rate.record(value, now_ms)

    def measure(self, now_ms: float) -> float:
        return self.rate.measure(now_ms)

    def record_and_throttle(self, now_ms: float, max_ms: int) -> int:
        """Kafka's Sensor.record(1) and its quota check: the event counts either way;
        0 within the bound, else QuotaUtils' throttle time, at most `max_ms`."""
        self.record(1.0, now_ms)
        observed = self.rate.measure(now_ms)
        if observed <= self.bound:
            return 0
        return min(throttle_time_ms(observed, self.bound, self.rate.window_ms(now_ms)),
                   max_ms)


@dataclass
class ListenerStats:
    """What one listener's socket-server-metrics read."""

    accept_rate: QuotaRate  # with the listener's creation rate limit as its bound
    # the non-zero throttles for the listener's (or broker's) rate and for the
    # addresses' rates (connection-accept-throttle-time, ip-connection-accept-...)
    throttles: Avg = field(default_factory=lambda: Avg(METRIC_WINDOWS))
    ip_throttles: Avg = field(default_factory=lambda: Avg(METRIC_WINDOWS))
    creation_rate: Rate = field(default_factory=lambda: Rate(METRIC_WINDOWS))
    close_rate: Rate = field(default_factory=lambda: Rate(METRIC_WINDOWS))
    created: int = 0
    closed: int = 0


class ConnectionQuotas:
    def __init__(self, limits: ConnectionLimits, listeners: Iterable[str] = (),
                 ip_rates: Callable[[], Mapping[str, float]] = dict) -> None:
        self._limits = limits
        self.ip_rates = ip_rates  # ClientQuotaConfigs.ip_connection_rates
        self.per_ip: collections.Counter[str] = collections.Counter()
        self.per_listener: collections.Counter[str] = collections.Counter()
        self.total = 0
        self.broker_rate = self._rate(limits.max_connection_rate)
        self.listeners: dict[str, ListenerStats] = {}
        self.ip_accept_rates: dict[str, QuotaRate] = {}
        for name in listeners:
            self.add_listener(name)

    # --- configuration -----------------------------------------------------------------

    @property
    def limits(self) -> ConnectionLimits:
        return self._limits

    @limits.setter
    def limits(self, limits: ConnectionLimits) -> None:
        """New limits apply to the next connection; the rates keep what they measured."""
        self._limits = limits
        self.broker_rate.bound = limits.max_connection_rate
        for name, stats in self.listeners.items():
            stats.accept_rate.bound = limits.rate_for_listener(name)

    def add_listener(self, name: str) -> None:
        self.listeners[name] = ListenerStats(self._rate(self._limits.rate_for_listener(name)))

    def _rate(self, bound: float) -> QuotaRate:
        limits = self._limits
        return QuotaRate(WindowConfig.of(limits.quota_window_num,
                                         limits.quota_window_size_seconds), bound)

    @property
    def max_throttle_ms(self) -> int:
        return self._limits.quota_window_size_seconds * 1000

    def protected(self, listener: str) -> bool:
        return listener == self._limits.inter_broker_listener and len(self.listeners) > 1

    # --- a new connection --------------------------------------------------------------

    def record_accept(self, listener: str, now_ms: float) -> int:
        """Count a new connection into the listener's and the broker's creation rates;
        the throttle time, in ms, the acceptor must wait before going on."""
        max_ms = self.max_throttle_ms
        throttle = 0
        if not self.protected(listener):
            throttle = self.broker_rate.record_and_throttle(now_ms, max_ms)
        stats = self.listeners.get(listener)
        if stats is not None:
            throttle = max(throttle, stats.accept_rate.record_and_throttle(now_ms, max_ms))
            if throttle > 0:
                stats.throttles.record(throttle, now_ms)
        return throttle

    def slot_available(self, listener: str) -> bool:
        if self.per_listener[listener] >= self._limits.for_listener(listener):
            return False
        return self.protected(listener) or self.total < self._limits.max_connections

    def admit(self, listener: str, address: str, now_ms: float) -> Admission:
        """The per-address checks; a connection admitted is counted until `release`."""
        address = normalized_address(address)
        throttle = self._record_ip(listener, address, now_ms)
        if throttle:
            return Admission(ip_throttle_ms=throttle)
        limit = self._limits.for_ip(address)
        if self.per_ip[address] >= limit:
            return Admission(ip_limit=limit)
        self.per_ip[address] += 1
        self.per_listener[listener] += 1
        self.total += 1
        stats = self.listeners.get(listener)
        if stats is not None:
            stats.created += 1
            stats.creation_rate.record(1.0, now_ms)
        return Admission()

    def release(self, listener: str, address: str, now_ms: float) -> None:
        address = normalized_address(address)
        self.per_ip[address] -= 1
        if self.per_ip[address] <= 0:
            del self.per_ip[address]
        self.per_listener[listener] -= 1
        self.total -= 1
        stats = self.listeners.get(listener)
        if stats is not None:
            stats.closed += 1
            stats.close_rate.record(1.0, now_ms)

    def over_broker_limit(self, listener: str) -> bool:
        """Kafka's maxConnectionsExceeded: the total is over `max.connections` and this
        listener's connections may be closed to bring it down."""
        return self.total > self._limits.max_connections and not self.protected(listener)

    # --- the per-address creation rate -------------------------------------------------

    def ip_rate_limit(self, address: str) -> float:
        rates = self.ip_rates()
        if not rates:
            return INT_MAX
        rate = rates.get(address)
        if rate is None:  # the entity may spell the address another way (::0001)
            rate = next((v for k, v in rates.items()
                         if k != DEFAULT_IP and normalized_address(k) == address), None)
        if rate is None:
            rate = rates.get(DEFAULT_IP, INT_MAX)
        return rate

    def _record_ip(self, listener: str, address: str, now_ms: float) -> int:
        """Kafka's recordIpConnectionMaybeThrottle: 0, or the throttle time of a
        connection over its address's rate, whose recording is then taken back."""
        limit = self.ip_rate_limit(address)
        if limit >= INT_MAX:
            return 0
        rate = self.ip_accept_rates.get(address)
        if rate is None:
            rate = self.ip_accept_rates[address] = self._rate(limit)
        rate.bound = limit
        throttle = rate.record_and_throttle(now_ms, self.max_throttle_ms)
        if throttle <= 0:
            return 0
        rate.record(-1.0, now_ms)
        if not self.protected(listener):
            self.broker_rate.record(-1.0, now_ms)
        stats = self.listeners.get(listener)
        if stats is not None:
            stats.ip_throttles.record(throttle, now_ms)
            stats.accept_rate.record(-1.0, now_ms)
        return throttle

    def expire_idle_ip_rates(self, now_ms: float) -> None:
        """Drop the rates of addresses unseen for an hour (Kafka's sensor expiry)."""
        for address, rate in list(self.ip_accept_rates.items()):
            if now_ms - rate.last_record_ms > IP_RATE_IDLE_MS:
                del self.ip_accept_rates[address]
