"""/brokers/ids/<id>: a broker's registration (Kafka's BrokerInfo and BrokerIdZNode), and
the advertised listeners in it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .zk_json import (
    java_hashmap_order,
    json_bytes,
    now_ms,
    ordered,
    parse_object,
    scala_immutable_order,
    scala_mutable_order,
)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Moldau's field for `moldau.broker.host` (a Moldau extension). Kafka's
# BrokerIdZNode.decode reads its own keys by name and ignores any other, so a Kafka broker
# or tool reading this registration sees the Kafka fields only.
MOLDAU_HOST_FIELD = "moldau_host"
BROKER_REGISTRATION_VERSION = 5  # what a 3.9 broker (inter.broker.protocol.version >= 2.7) writes


class EndPoint(NamedTuple):
    """An advertised listener: Kafka's EndPoint (a plain tuple works wherever one is taken)."""

    listener_name: str
    host: str | None
    port: int
    security_protocol: str

    def connection_string(self) -> str:
        """EndPoint.connectionString: NAME://host:port, IPv6 hosts in brackets."""
        if self.host is None:
            return f"{self.listener_name}://:{self.port}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, protocol_map: Mapping[str, str] | None = None) -> EndPoint:
        """Parse NAME://host:port; the protocol comes from the map, else from the name."""
        name, sep, rest = text.partition("://")
        host, colon, port = rest.rpartition(":")
        if not sep or not colon:
            raise ValueError(f"unable to parse {text!r} to a broker endpoint")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        protocol = (protocol_map or {}).get(name)
        if protocol is None:
            # Registrations before v4 had no map: the listener name is the protocol name.
            protocol = name.upper() if name.upper() in SECURITY_PROTOCOLS else name
        return cls(name, host or None, int(port), protocol)


@dataclass
class BrokerRegistration:
    """The data of /brokers/ids/<id> (Kafka's BrokerInfo)."""

    id: int
    endpoints: list[EndPoint]
    rack: str | None = None
    jmx_port: int = -1
    # feature name -> {"min_version": n, "max_version": m}; a ZooKeeper-mode broker sends {}
    features: dict[str, dict[str, int]] = field(default_factory=dict)
    timestamp: int | None = None  # ms; None: the time of encoding, as Kafka does
    version: int = BROKER_REGISTRATION_VERSION
    epoch: int = field(default=-1, compare=False)  # czxid of the znode, when read from it
    # `moldau.broker.host`: the server this broker shares with others (None: its own)
    moldau_host: str | None = None

    def __post_init__(self) -> None:
        self.endpoints = [EndPoint(*e) for e in self.endpoints]

    def endpoint(self, listener_name: str) -> EndPoint | None:
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)

    def encode(self) -> bytes:
        """BrokerIdZNode.encode. The top-level host and port are those of the first PLAINTEXT
        endpoint (for pre-0.9 clients), else null and -1."""
        plaintext = next((e for e in self.endpoints if e.security_protocol == "PLAINTEXT"), None)
        obj: dict[str, Any] = {
            "version": self.version,
            "host": plaintext.host if plaintext else None,
            "port": plaintext.port if plaintext else -1,
            "endpoints": [e.connection_string() for e in self.endpoints],
            "jmx_port": self.jmx_port,
            "timestamp": str(self.timestamp if self.timestamp is not None else now_ms()),
        }
        if self.rack is not None and self.version >= 3:
            obj["rack"] = self.rack
        if self.version >= 4:
            names = [e.listener_name for e in self.endpoints]
            protocols = {e.listener_name: e.security_protocol for e in self.endpoints}
            obj["listener_security_protocol_map"] = ordered(
                protocols, scala_immutable_order(tuple(names))
            )
        if self.version >= 5:
            # Features.toMap is a java.util.HashMap; each range a LinkedHashMap (min, max).
            obj["features"] = {
                name: {k: self.features[name][k] for k in ("min_version", "max_version")
                       if k in self.features[name]}
                for name in java_hashmap_order(list(self.features))
            }
        # mutable.Map(6 entries) starts with a 16-slot table; rack/map/features join it.
        keys = ("version", "host", "port", "endpoints", "jmx_port", "timestamp", "rack",
                "listener_security_protocol_map", "features")
        present = tuple(k for k in keys if k in obj)
        encoded = ordered(obj, scala_mutable_order(present, 16))
        if self.moldau_host is not None:
            encoded[MOLDAU_HOST_FIELD] = self.moldau_host  # last: Kafka's fields keep order
        return json_bytes(encoded)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        """BrokerIdZNode.decode: versions 1 to 5."""
        obj = parse_object(data, f"registration of broker {broker_id}")
        version = int(obj.get("version", 1))
        if version < 1:
            raise ValueError(f"unsupported version of broker registration: {data!r}")
        if version == 1 or "endpoints" not in obj:
            endpoints = [EndPoint("PLAINTEXT", obj.get("host"), int(obj["port"]), "PLAINTEXT")]
        else:
            protocol_map = obj.get("listener_security_protocol_map") or None
            endpoints = [EndPoint.parse(s, protocol_map) for s in obj["endpoints"]]
        features = {
            name: {k: int(v) for k, v in ranges.items()}
            for name, ranges in (obj.get("features") or {}).items()
        }
        timestamp = obj.get("timestamp")
        return cls(
            id=broker_id,
            endpoints=endpoints,
            rack=obj.get("rack"),
            jmx_port=int(obj.get("jmx_port", -1)),
            features=features,
            timestamp=int(timestamp) if timestamp not in (None, "") else None,
            version=version,
            moldau_host=_optional_text(obj.get(MOLDAU_HOST_FIELD)),
        )


def _optional_text(value: object) -> str | None:
    # a hand-edited or foreign znode may carry anything there: only a name counts
    return value if isinstance(value, str) and value else None
