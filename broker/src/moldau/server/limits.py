"""The socket server's bounds: on requests queued broker-wide and on connections.

* `queued.max.requests` bounds the requests received and not yet handled, across all
  connections (and `queued.max.request.bytes` their bytes, when set); a connection that
  would exceed it stops reading until the count drops. A request counts until its
  handler takes it, not until it is answered: as in Kafka, where a request in purgatory
  has left the request queue, so that the parked long-poll fetches of idle consumers
  cannot stall every other client.
* Kafka's connection quotas (`ConnectionLimits`): the configured limits on connections
  per client address, per listener and broker-wide, and on their creation rate;
  connection_quotas.ConnectionQuotas counts against them.
"""

from __future__ import annotations

import collections
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol


class QueueBoundWaiter(Protocol):
    """A connection parked on a full bound (connection.Connection; a Protocol so that
    this module does not import the connection back)."""

    def resume_from_queue_bound(self) -> None: ...


class RequestQueueBound:
    """`queued.max.requests` and `queued.max.request.bytes` (-1: no byte bound): requests
    received but not yet handled, broker-wide."""

    def __init__(self, limit: int, max_bytes: int = -1) -> None:
        self.limit = limit
        self.max_bytes = max_bytes
        self.queued = 0
        self.queued_bytes = 0
        self._paused: collections.deque[QueueBoundWaiter] = collections.deque()

    def full(self) -> bool:
        return self.queued >= self.limit or 0 <= self.max_bytes <= self.queued_bytes

    def add(self, frames: list[bytearray]) -> None:
        self.queued += len(frames)
        self.queued_bytes += sum(map(len, frames))

    def park(self, conn: QueueBoundWaiter) -> None:
        self._paused.append(conn)

    def release(self, n: int = 1, nbytes: int = 0) -> None:
        self.queued -= n
        self.queued_bytes -= nbytes
        while self._paused and not self.full():
            conn = self._paused.popleft()
            conn.resume_from_queue_bound()


INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class ConnectionLimits:
    """Kafka's connection quotas (SocketServerConfigs), as the connection_quotas module
    applies them:

    * `max.connections.per.ip` (with `max.connections.per.ip.overrides`, "host:count,...")
      on every listener: a connection over it is closed at once;
    * `max.connections` across the listeners and `listener.name.<l>.max.connections`
      (which defaults to the broker-wide value, as Kafka's valuesWithPrefixOverride
      gives it): the listener's acceptor waits for a free slot. The inter-broker
      listener, when there are others, is held to its own limit only;
    * `max.connection.creation.rate` across the listeners (not the inter-broker one) and
      `listener.name.<l>.max.connection.creation.rate` (defaulting to the broker-wide
      rate): the acceptor waits out the throttle, measured over `quota.window.num`
      windows of `quota.window.size.seconds` and at most one window long.
    """

    max_connections: int = INT_MAX
    per_ip: int = INT_MAX
    per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    inter_broker_listener: str = ""
    listener_max_connections: Mapping[str, int] = field(default_factory=dict)
    max_connection_rate: int = INT_MAX
    listener_connection_rates: Mapping[str, int] = field(default_factory=dict)
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1

    def for_listener(self, listener: str) -> int:
        return self.listener_max_connections.get(listener, self.max_connections)

    def rate_for_listener(self, listener: str) -> int:
        return self.listener_connection_rates.get(listener, self.max_connection_rate)

    def for_ip(self, address: str) -> int:
        return self.per_ip_overrides.get(address, self.per_ip)

    @staticmethod
    def parse_overrides(value: str | None) -> dict[str, int]:
        """"host:count,..." with host names resolved to addresses, as Kafka does."""
        overrides: dict[str, int] = {}
        for item in (value or "").split(","):
            item = item.strip()
            if not item:
                continue
            host, _, count = item.rpartition(":")
            try:
                address = socket.gethostbyname(host)
            except OSError:
                address = host
            overrides[address] = int(count)
        return overrides
