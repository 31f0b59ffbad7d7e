"""The connection quotas' metrics under Kafka's names:

* `kafka.network:type=Acceptor,name=AcceptorBlockedPercent,listener=<l>`: a meter of
  the time each listener's acceptor spent holding a connection back (seconds per
  second, as Kafka's counts nanoseconds per nanosecond);
* `kafka.server:type=socket-server-metrics`: `broker-connection-accept-rate`;
* `kafka.server:type=socket-server-metrics,listener=<l>`: `connection-accept-rate`,
  `connection-accept-throttle-time` and `ip-connection-accept-throttle-time` (the mean
  of the non-zero throttles);
* `kafka.server:type=socket-server-metrics,ip=<address>`: `connection-accept-rate` of
  each address with a `connection_creation_rate`;
* `kafka.server:type=socket-server-metrics,listener=<l>,networkProcessor=0`:
  `connection-creation-rate`/`-total` and `connection-close-rate`/`-total` (one event
  loop plays every network processor here).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from moldau.metrics.registry import MetricsRegistry

if TYPE_CHECKING:
    from .socket_server import SocketServer

NETWORK, SERVER = "kafka.network", "kafka.server"
GROUP = f"{SERVER}:type=socket-server-metrics"


def connection_quota_beans(server: SocketServer) -> dict[str, dict[str, object]]:
    quotas = server.quotas
    now = time.monotonic() * 1000
    quotas.expire_idle_ip_rates(now)
    beans: dict[str, dict[str, object]] = {
        GROUP: {"broker-connection-accept-rate": quotas.broker_rate.measure(now)}}
    for name, stats in quotas.listeners.items():
        beans[f"{GROUP},listener={name}"] = {
            "connection-accept-rate": stats.accept_rate.measure(now),
            "connection-accept-throttle-time": stats.throttles.measure(now),
            "ip-connection-accept-throttle-time": stats.ip_throttles.measure(now),
        }
        beans[f"{GROUP},listener={name},networkProcessor=0"] = {
            "connection-creation-rate": stats.creation_rate.measure(now),
            "connection-creation-total": stats.created,
            "connection-close-rate": stats.close_rate.measure(now),
            "connection-close-total": stats.closed,
        }
    for address, rate in quotas.ip_accept_rates.items():
        beans[f"{GROUP},ip={address}"] = {"connection-accept-rate": rate.measure(now)}
    return beans


def register_connection_metrics(registry: MetricsRegistry, server: SocketServer) -> None:
    """Before the socket server starts: its acceptors' meters and the beans above."""
    server.blocked_meter = lambda listener: registry.meter(
        NETWORK, "Acceptor", "AcceptorBlockedPercent", (("listener", listener),))
    registry.add_provider(lambda: connection_quota_beans(server))
