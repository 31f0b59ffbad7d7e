"""The connection limits the broker's configs give (limits.ConnectionLimits), and the
check Kafka's per-listener connection quotas make of a dynamic update.

A listener's `max.connections` and `max.connection.creation.rate` are its
`listener.name.<l>.` override, else the broker-wide value (Kafka reads them through
valuesWithPrefixOverride, which falls back to the unprefixed key). As dynamic configs,
Kafka's ListenerConnectionQuota refuses either one at 0 or below for every listener whose
values the update changes (static configs take 0): the update fails with
"Invalid dynamic configuration" and nothing is written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from .dynamic_config_error import DynamicConfigError
from .limits import INT_MAX, ConnectionLimits

log = logging.getLogger("kafka.server.DynamicBrokerConfig")

MAX_CONNECTIONS = "max.connections"
MAX_CONNECTION_RATE = "max.connection.creation.rate"
LISTENER_LIMIT_KEYS = (MAX_CONNECTIONS, MAX_CONNECTION_RATE)
# the keys whose change gives the socket server new limits (SocketServer's and the
# listeners' reconfigurable configs)
CONNECTION_LIMIT_KEYS = frozenset({MAX_CONNECTIONS, "max.connections.per.ip",
                                   "max.connections.per.ip.overrides", MAX_CONNECTION_RATE})

# a config value by name (typed or a string; None when unset)
Lookup = Callable[[str], object]


def listener_prefix(listener: str) -> str:
    return f"listener.name.{listener.lower()}."


def is_connection_limit_key(name: str) -> bool:
    if name in CONNECTION_LIMIT_KEYS:
        return True
    return name.startswith("listener.name.") and name.endswith(
        tuple("." + key for key in LISTENER_LIMIT_KEYS))


def _int(value: object, default: int = INT_MAX) -> int:
    return default if value is None else int(str(value).strip())


def listener_value(lookup: Lookup, listener: str, key: str) -> int:
    """The listener's override of `key`, else the broker-wide value."""
    value = lookup(listener_prefix(listener) + key)
    return _int(value if value is not None else lookup(key))


def connection_limits(lookup: Lookup, listeners: Iterable[str], inter_broker: str
                      ) -> ConnectionLimits:
    names = list(listeners)
    overrides = lookup("max.connections.per.ip.overrides")
    return ConnectionLimits(
        max_connections=_int(lookup(MAX_CONNECTIONS)),
        per_ip=_int(lookup("max.connections.per.ip")),
        per_ip_overrides=ConnectionLimits.parse_overrides(
            None if overrides is None else str(overrides)),
        inter_broker_listener=inter_broker,
        listener_max_connections={n: listener_value(lookup, n, MAX_CONNECTIONS)
                                  for n in names},
        max_connection_rate=_int(lookup(MAX_CONNECTION_RATE)),
        listener_connection_rates={n: listener_value(lookup, n, MAX_CONNECTION_RATE)
                                   for n in names},
        quota_window_num=_int(lookup("quota.window.num"), 11),
        quota_window_size_seconds=_int(lookup("quota.window.size.seconds"), 1),
    )


def check_listener_limits(listeners: Iterable[str], current: Lookup, proposed: Lookup) -> None:
    """Kafka's ListenerConnectionQuota.validateReconfiguration, for each listener whose
    limits the proposed configs change."""
    for listener in listeners:
        before = [listener_value(current, listener, key) for key in LISTENER_LIMIT_KEYS]
        after = [listener_value(proposed, listener, key) for key in LISTENER_LIMIT_KEYS]
        if before == after:
            continue
        for key, value in zip(LISTENER_LIMIT_KEYS, after, strict=True):
            if value <= 0:
                log.info("Validation of the dynamic config update failed for listener %s: "
                         "Invalid %s %d", listener, key, value)
                raise DynamicConfigError("Invalid dynamic configuration")
