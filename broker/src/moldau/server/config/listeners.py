"""Listeners: `listeners` / `advertised.listeners` endpoints, the security protocol map,
and the per-listener keys (`listener.name.<listener>.ssl.*`, `.sasl.*`,
`.max.connections`, `.max.connection.creation.rate`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .errors import ConfigError
from .keys import KEYS, SECURITY_PROTOCOLS
from .schema import ConfigKey


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str  # "" = bind all interfaces / advertise the canonical host name
    port: int
    security_protocol: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


_LISTENER_RE = re.compile(r"^([^:/\s]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)$")


_LISTENER_OVERRIDE = re.compile(
    r"listener\.name\.([^.]+)\.((?:ssl|sasl)\..+|connections\.max\.reauth\.ms|"
    r"max\.connections|max\.connection\.creation\.rate)")
# listener.name.<l>.<mechanism>.<key>: the keys Kafka takes per listener and mechanism
_MECHANISM_OVERRIDE = re.compile(
    r"listener\.name\.([^.]+)\.([a-z0-9-]+)\.(sasl\.jaas\.config|sasl\.login\.class|"
    r"sasl\.login\.callback\.handler\.class|sasl\.server\.callback\.handler\.class|"
    r"connections\.max\.reauth\.ms|sasl\.oauthbearer\.[a-z.]+)")


def listener_override_base(name: str) -> ConfigKey | None:
    """The key a `listener.name.<l>.ssl.*`, `...<l>.sasl.*`, `...<l>.max.connections`
    (and the like) or `...<l>.<mechanism>.sasl.jaas.config` (and its kind) key
    overrides, or None."""
    match = _MECHANISM_OVERRIDE.fullmatch(name)
    base_name = match.group(3) if match is not None else None
    if base_name is None:
        match = _LISTENER_OVERRIDE.fullmatch(name)
        if match is None:
            return None
        base_name = match.group(2)
    base = KEYS.get(base_name)
    return base if base is not None and base.status != "rejected" else None


def parse_protocol_map(key: str, text: str) -> dict[str, str]:
    mapping: dict[str, str] = {}
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or not proto:
            raise ConfigError(key, text, f"entry '{item}' is not LISTENER_NAME:SECURITY_PROTOCOL")
        if proto not in SECURITY_PROTOCOLS:
            raise ConfigError(key, text, f"unknown security protocol {proto} "
                              f"(one of {', '.join(SECURITY_PROTOCOLS)})")
        if name in mapping:
            raise ConfigError(key, text, f"listener name {name} appears twice")
        mapping[name] = proto
    return mapping


def parse_listeners(key: str, text: str, protocols: Mapping[str, str],
                    distinct_ports: bool) -> list[Endpoint]:
    endpoints: list[Endpoint] = []
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        match = _LISTENER_RE.match(item)
        if not match:
            raise ConfigError(key, text, f"'{item}' is not NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(key, text, f"port {port} of listener {name} is out of range")
        if name not in protocols:
            raise ConfigError(key, text, f"No security protocol defined for listener {name} "
                              "(add it to listener.security.protocol.map)")
        endpoints.append(Endpoint(name, host, port, protocols[name]))
    names = [e.listener for e in endpoints]
    if len(set(names)) != len(names):
        raise ConfigError(key, text, "Each listener must have a different name")
    ports = [e.port for e in endpoints if e.port != 0]
    if distinct_ports and len(set(ports)) != len(ports):
        raise ConfigError(key, text, "Each listener must have a different port")
    return endpoints
