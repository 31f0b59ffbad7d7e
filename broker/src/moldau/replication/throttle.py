"""Replication throttles (KIP-73), so moving a partition does not starve the clients.

Two dynamic broker configs cap throttled replication traffic in bytes per second:
`leader.replication.throttled.rate` (what a leader sends to followers) and
`follower.replication.throttled.rate` (what a follower fetches). Which traffic is
throttled is named per topic: `leader.replication.throttled.replicas` and
`follower.replication.throttled.replicas` hold `*` or `partition:broker` pairs, and a
broker throttles a partition on the leader (follower) side when the pair names it. As
in Kafka, a leader never throttles a follower that is in the ISR.

The limit is a token bucket per broker and side: it refills at the rate and holds at
most one second of it, a throttled partition fetches at most what the bucket holds and
nothing while it is empty, so over any interval the throttled traffic stays within
rate x interval plus one second's worth (plus one record batch: a fetch always returns
a whole first batch).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from moldau.storage.config import ALL_REPLICAS, LogConfig, parse_throttled_replicas

UNLIMITED = float("inf")
LEADER, FOLLOWER = "leader", "follower"


def is_throttled(config: LogConfig, side: str, partition: int, broker_id: int) -> bool:
    """Whether the topic's `<side>.replication.throttled.replicas` names this replica."""
    spec = parse_throttled_replicas(getattr(config, f"{side}_replication_throttled_replicas"))
    if spec == ALL_REPLICAS:
        return True
    return spec is not None and (partition, broker_id) in spec  # None: malformed


class ByteRateQuota:
    """A token bucket holding at most one second of the rate (see the module doc)."""

    def __init__(self, rate: Callable[[], float], clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.rate = rate  # read on every use: a dynamic config change applies at once
        self.clock = clock
        self._tokens = 0.0
        self._last = clock()
        self._last_rate = UNLIMITED

    def available(self) -> float:
        """The bytes throttled traffic may take now (may be negative after a batch that
        was larger than what was left)."""
        rate = self.rate()
        now = self.clock()
        if rate != self._last_rate:  # a new limit starts with a full second of it
            self._tokens, self._last_rate = rate, rate
        elif rate != UNLIMITED:
            self._tokens = min(rate, self._tokens + (now - self._last) * rate)
        self._last = now
        return UNLIMITED if rate == UNLIMITED else self._tokens

    def record(self, size: int) -> None:
        if self._last_rate != UNLIMITED:
            self._tokens -= size


def rate_reader(effective: Callable[[str], float | str | None], name: str
                ) -> Callable[[], float]:
    """Reads a byte rate (`<side>.replication.throttled.rate`,
    `replica.alter.log.dirs.io.max.bytes.per.second`) from the dynamic broker config,
    whose `effective` gives a number for a Kafka key, a string, or None when unset;
    unset or negative is unlimited."""

    def read() -> float:
        value = effective(name)
        try:
            rate = float(value) if value is not None else UNLIMITED
        except (TypeError, ValueError):
            return UNLIMITED
        return rate if rate >= 0 else UNLIMITED

    return read


class ReplicationThrottle:
    """One side (leader or follower) of a broker's replication throttle."""

    def __init__(self, side: str, broker_id: int, topic_config: Callable[[str], LogConfig],
                 rate: Callable[[], float]) -> None:
        self.side = side
        self.broker_id = broker_id
        self.topic_config = topic_config
        self.quota = ByteRateQuota(rate)

    def applies(self, topic: str, partition: int) -> bool:
        return is_throttled(self.topic_config(topic), self.side, partition, self.broker_id)
