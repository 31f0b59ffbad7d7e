"""BrokerConfig: a `server.properties` parsed against the key table, with Kafka's
precedence rules applied and the derived values (listeners, log dirs, ZooKeeper) built."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moldau.storage.config import ConfigError as _StorageConfigError
from moldau.storage.config import LogConfig

from .errors import ConfigError
from .keys import KEYS, KEYS_LIST, TOPIC_SYNONYMS
from .listeners import Endpoint, listener_override_base, parse_listeners, parse_protocol_map
from .loading import load_properties, parse_properties
from .value_types import LONG_MAX, ConfigValue
from .values import convert, describe_value, show_value
from .zk_connect import ZkConnect, parse_zk_connect

_HOUR_MS = 3600 * 1000


@dataclass
class BrokerConfig:
    """Typed values of every non-rejected key, plus the effective (derived) values."""

    # Typed by each key's table type (see value_types.ConfigValue). Any, not ConfigValue:
    # callers read a key they know the type of (`config["broker.id"] + 1`), and the union
    # would make each of them narrow it again.
    values: dict[str, Any]
    explicit: frozenset[str]
    warnings: list[str] = field(default_factory=list)
    # `listener.name.<listener>.ssl.*` per-listener overrides (typed like their base key)
    listener_overrides: dict[str, ConfigValue] = field(default_factory=dict)

    # derived by _derive()
    log_dirs: list[str] = field(default_factory=list)
    listeners: list[Endpoint] = field(default_factory=list)
    advertised_listeners: list[Endpoint] = field(default_factory=list)
    protocol_map: dict[str, str] = field(default_factory=dict)
    inter_broker_listener_name: str = "PLAINTEXT"
    control_plane_listener_name: str | None = None  # control.plane.listener.name
    zookeeper: ZkConnect | None = None

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: object = None) -> Any:
        return self.values.get(key, default)

    # ---- construction

    @classmethod
    def from_properties(cls, source: str | Mapping[str, object]) -> BrokerConfig:
        """Properties text, or a mapping of raw values (strings or Python values)."""
        raw = parse_properties(source) if isinstance(source, str) else dict(source)
        warnings: list[str] = []
        values: dict[str, ConfigValue] = {}
        overrides: dict[str, ConfigValue] = {}
        explicit: set[str] = set()
        for name, value in raw.items():
            key = KEYS.get(name)
            if key is None:
                base = listener_override_base(name)
                if base is not None:
                    converted = convert(base, value)
                    if base.validator is not None:
                        base.validator.check(name, converted)
                    overrides[name] = converted
                    explicit.add(name)
                    continue
                warnings.append(
                    f"The configuration '{name}' was supplied but isn't a known config.")
                continue
            if key.status == "rejected":
                raise ConfigError(name, value, f"{key.note}; remove {name} from the file "
                                  "and set zookeeper.connect")
            values[name] = convert(key, value)
            explicit.add(name)
        for key in KEYS_LIST:
            if key.status == "rejected":
                continue
            if key.name not in values:
                values[key.name] = key.default
            if key.validator is not None:
                key.validator.check(key.name, values[key.name])
        config = cls(values=values, explicit=frozenset(explicit), warnings=warnings,
                     listener_overrides=overrides)
        config._derive()
        return config

    @classmethod
    def from_file(cls, path: str) -> BrokerConfig:
        return cls.from_properties(load_properties(path))

    def _derive(self) -> None:
        v = self.values
        # broker.id and its generation
        broker_id = v["broker.id"]
        if v["broker.id.generation.enable"]:
            reserved = v["reserved.broker.max.id"]
            if not -1 <= broker_id <= reserved:
                raise ConfigError("broker.id", broker_id, "broker.id must be at least -1 and "
                                  f"not above reserved.broker.max.id ({reserved})")
        elif broker_id < 0:
            raise ConfigError("broker.id", broker_id, "broker.id must be at least 0 when "
                              "broker.id.generation.enable is false")
        if v["zookeeper.metadata.migration.enable"]:
            raise ConfigError("zookeeper.metadata.migration.enable", "true",
                              "ZooKeeper-to-KRaft migration is not supported by Moldau")
        # ZooKeeper
        if v["zookeeper.connect"] is None:
            raise ConfigError("zookeeper.connect", None, "Missing required configuration "
                              "zookeeper.connect which has no default value")
        self.zookeeper = parse_zk_connect("zookeeper.connect", v["zookeeper.connect"])
        if v["zookeeper.connection.timeout.ms"] is None:
            v["zookeeper.connection.timeout.ms"] = v["zookeeper.session.timeout.ms"]
        # log dirs: log.dirs wins over log.dir
        dirs_key = "log.dirs" if v["log.dirs"] is not None else "log.dir"
        self.log_dirs = [d.strip() for d in v[dirs_key].split(",") if d.strip()]
        if not self.log_dirs:
            raise ConfigError(dirs_key, v[dirs_key], "at least one log directory is required")
        if len(set(self.log_dirs)) != len(self.log_dirs):
            raise ConfigError(dirs_key, v[dirs_key], "duplicate log directory")
        self._derive_listeners()
        # flush.ms falls back to the scheduler interval (Kafka's logFlushIntervalMs)
        if v["log.flush.interval.ms"] is None:
            v["log.flush.interval.ms"] = v["log.flush.scheduler.interval.ms"]
        # the deprecated timestamp difference feeds before/after left at their default
        diff = v["log.message.timestamp.difference.max.ms"]
        for name in ("log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms"):
            if v[name] == LONG_MAX:
                v[name] = diff
        self.log_config()  # validate the topic-level view now, naming broker keys

    def _derive_listeners(self) -> None:
        v = self.values
        self.protocol_map = parse_protocol_map("listener.security.protocol.map",
                                               v["listener.security.protocol.map"])
        self.listeners = parse_listeners("listeners", v["listeners"], self.protocol_map, True)
        if not self.listeners:
            raise ConfigError("listeners", v["listeners"], "at least one listener is required")
        if v["advertised.listeners"] is None:
            self.advertised_listeners = list(self.listeners)
        else:
            self.advertised_listeners = parse_listeners(
                "advertised.listeners", v["advertised.listeners"], self.protocol_map, False)
            names = {e.listener for e in self.listeners}
            for ep in self.advertised_listeners:
                if ep.listener not in names:
                    raise ConfigError("advertised.listeners", v["advertised.listeners"],
                                      f"listener {ep.listener} is not defined in listeners")
                if ep.host == "0.0.0.0":
                    raise ConfigError("advertised.listeners", v["advertised.listeners"],
                                      "cannot use the nonroutable meta-address 0.0.0.0")
        if "inter.broker.listener.name" in self.explicit:
            if "security.inter.broker.protocol" in self.explicit:
                raise ConfigError("inter.broker.listener.name", v["inter.broker.listener.name"],
                                  "inter.broker.listener.name and security.inter.broker.protocol "
                                  "must not both be set; set only inter.broker.listener.name")
            name = v["inter.broker.listener.name"].upper()
        else:
            name = v["security.inter.broker.protocol"]
        if name not in {e.listener for e in self.advertised_listeners}:
            key = ("inter.broker.listener.name" if "inter.broker.listener.name" in self.explicit
                   else "security.inter.broker.protocol")
            raise ConfigError(key, name, "inter.broker.listener.name must be a listener name "
                              "defined in advertised.listeners")
        self.inter_broker_listener_name = name
        self.control_plane_listener_name = self._control_plane_listener()

    def _control_plane_listener(self) -> str | None:
        """control.plane.listener.name, checked in Kafka's order and with its messages: a
        listener of the protocol map, advertised, and not the inter-broker listener."""
        key = "control.plane.listener.name"
        raw = self.values[key]
        if raw is None:
            return None
        name = raw.strip().upper()  # Kafka's ListenerName.normalised
        if name not in self.protocol_map:
            raise ConfigError(key, raw, f"Listener with {name} defined in {key} not found in "
                              "listener.security.protocol.map.")
        advertised = [e.listener for e in self.advertised_listeners]
        if name not in advertised:
            raise ConfigError(key, raw, f"{key} must be a listener name defined in "
                              "advertised.listeners. The valid options based on currently "
                              f"configured listeners are {','.join(advertised)}")
        if name == self.inter_broker_listener_name:
            raise ConfigError(key, raw, f"{key}, when defined, should have a different value "
                              "from the inter broker listener name. Currently they both have "
                              f"the value {name}")
        return name

    @property
    def controller_listener_name(self) -> str:
        """The listener the controller reaches the brokers on: the control-plane listener
        when set, else the inter-broker one (Kafka's ControllerChannelManager)."""
        return self.control_plane_listener_name or self.inter_broker_listener_name

    def listener_settings(self, listener: str) -> dict[str, ConfigValue]:
        """The `ssl.*` settings of one listener, per-listener overrides applied."""
        from moldau.security.ssl_settings import listener_settings

        return listener_settings({**self.values, **self.listener_overrides}, listener)

    # ---- effective values with Kafka's precedence

    @property
    def broker_id(self) -> int:
        return self.values["broker.id"]

    @property
    def log_retention_ms(self) -> int:
        v = self.values
        if v["log.retention.ms"] is not None:
            millis = v["log.retention.ms"]
        elif v["log.retention.minutes"] is not None:
            millis = v["log.retention.minutes"] * 60 * 1000
        else:
            millis = v["log.retention.hours"] * _HOUR_MS
        return -1 if millis < 0 else millis

    @property
    def log_roll_ms(self) -> int:
        v = self.values
        if v["log.roll.ms"] is not None:
            return v["log.roll.ms"]
        return v["log.roll.hours"] * _HOUR_MS

    @property
    def log_roll_jitter_ms(self) -> int:
        v = self.values
        if v["log.roll.jitter.ms"] is not None:
            return v["log.roll.jitter.ms"]
        return v["log.roll.jitter.hours"] * _HOUR_MS

    def _effective_log_value(self, broker_key: str) -> ConfigValue:
        if broker_key == "log.retention.ms":
            return self.log_retention_ms
        if broker_key == "log.roll.ms":
            return self.log_roll_ms
        if broker_key == "log.roll.jitter.ms":
            return self.log_roll_jitter_ms
        return self.values[broker_key]

    def log_config(self) -> LogConfig:
        """The broker-level defaults every topic's LogConfig starts from."""
        # Any: LogConfig's fields each take one of the table's value types
        kwargs: dict[str, Any] = {}
        for broker_key, topic_key in TOPIC_SYNONYMS.items():
            value = self._effective_log_value(broker_key)
            if topic_key == "cleanup.policy" and isinstance(value, list):
                kwargs["cleanup_policy"] = tuple(dict.fromkeys(value))  # the order given
                continue
            kwargs[topic_key.replace(".", "_")] = value
        try:
            return LogConfig(**kwargs)
        except _StorageConfigError as exc:
            # name the broker key whose topic synonym the storage layer complained about
            message = str(exc)
            for broker_key, topic_key in TOPIC_SYNONYMS.items():
                if re.search(rf"\b{re.escape(topic_key)}\b", message):
                    value = self._effective_log_value(broker_key)
                    raise ConfigError(broker_key, value, f"{message} (topic synonym "
                                      f"{topic_key})") from None
            raise ConfigError("log.*", "", message) from None

    # ---- reporting

    def describe(self) -> list[tuple[str, str | None, str]]:
        """(key, value, source) per key, with DescribeConfigs' source names."""
        rows: list[tuple[str, str | None, str]] = []
        for name in sorted(self.values):
            source = "STATIC_BROKER_CONFIG" if name in self.explicit else "DEFAULT_CONFIG"
            rows.append((name, describe_value(KEYS[name], self.values[name]), source))
        return rows

    def dump(self) -> str:
        """The startup log block, in the shape of Kafka's 'KafkaConfig values:'."""
        lines = ["KafkaConfig values: "]
        for name in sorted(self.values):
            lines.append(f"\t{name} = {show_value(KEYS[name], self.values[name])}")
        return "\n".join(lines) + "\n"
