"""Broker configuration: Kafka 3.9 (ZooKeeper mode) `server.properties` keys.

This package's modules, one job each (import from `moldau.server.config`, which
re-exports their public names):

* `keys.py`: the key table `KEYS_LIST` / `KEYS` (every broker key with Kafka's name, type,
  default, importance and validator, and Moldau's status and note), Moldau's own
  `moldau.*` keys (`EXTENSION_KEYS`) and `TOPIC_SYNONYMS`;
* `schema.py`: `ConfigKey` and the `impl` / `acc` / `rej` / `ext` row builders;
* `value_types.py`: Kafka's types and their Python values (`ConfigValue`), Java's bounds;
* `validators.py`: `Range`, `OneOf` and the other value validators;
* `values.py`: `convert` (text to typed, as ConfigDef.parseType) and the renderings back;
* `loading.py`: reading properties text and files;
* `listeners.py`: listener endpoints, the protocol map, per-listener `ssl.*` keys;
* `zk_connect.py`: the `zookeeper.connect` string;
* `broker_config.py`: `BrokerConfig.from_properties()` (conversion, validation, Kafka's
  precedence rules, unknown keys as warnings) and the effective values;
* `docs.py`: `markdown_table()`, which renders docs/broker-config.md.
"""

from __future__ import annotations

from .broker_config import BrokerConfig
from .docs import markdown_table
from .errors import ConfigError
from .keys import (
    DEFAULT_PROTOCOL_MAP,
    EXTENSION_KEYS,
    INTER_BROKER_PROTOCOL_VERSION,
    JVM_ONLY,
    KEYS,
    KEYS_LIST,
    LEADER_SELECTOR,
    NO_DIR_MOVES,
    NO_TIERED,
    ONE_LOOP,
    P_BROKER,
    P_METRICS,
    P_REPL,
    P_SECURITY,
    P_TXN,
    RACK_AWARE_SELECTOR,
    REPLICA_SELECTORS,
    SECURITY_PROTOCOLS,
    TOKEN_BUCKET,
    TOPIC_SYNONYMS,
    YAMMER_METERS,
)
from .listeners import Endpoint, parse_listeners, parse_protocol_map
from .loading import load_properties, parse_properties
from .schema import EXTENSION, KRAFT, STATUSES, ConfigKey, acc, ext, impl, rej
from .validators import (
    ACL_AUTHORIZER,
    AuthorizerClass,
    GzipLevel,
    HostIdentity,
    InterBrokerProtocol,
    OneOf,
    PrincipalList,
    Range,
    Unenforced,
    Validator,
    at_least,
)
from .value_types import (
    DOUBLE_MAX,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    SHORT_MAX,
    SHORT_MIN,
    TYPES,
    ConfigValue,
)
from .values import convert
from .zk_connect import ZkConnect, parse_zk_connect

__all__ = [
    "ACL_AUTHORIZER",
    "DEFAULT_PROTOCOL_MAP",
    "DOUBLE_MAX",
    "EXTENSION",
    "EXTENSION_KEYS",
    "INTER_BROKER_PROTOCOL_VERSION",
    "INT_MAX",
    "INT_MIN",
    "JVM_ONLY",
    "KEYS",
    "KEYS_LIST",
    "KRAFT",
    "LEADER_SELECTOR",
    "LONG_MAX",
    "LONG_MIN",
    "NO_DIR_MOVES",
    "NO_TIERED",
    "ONE_LOOP",
    "P_BROKER",
    "P_METRICS",
    "P_REPL",
    "P_SECURITY",
    "P_TXN",
    "RACK_AWARE_SELECTOR",
    "REPLICA_SELECTORS",
    "SECURITY_PROTOCOLS",
    "SHORT_MAX",
    "SHORT_MIN",
    "STATUSES",
    "TOKEN_BUCKET",
    "TOPIC_SYNONYMS",
    "TYPES",
    "YAMMER_METERS",
    "AuthorizerClass",
    "BrokerConfig",
    "ConfigError",
    "ConfigKey",
    "ConfigValue",
    "Endpoint",
    "GzipLevel",
    "HostIdentity",
    "InterBrokerProtocol",
    "OneOf",
    "PrincipalList",
    "Range",
    "Unenforced",
    "Validator",
    "ZkConnect",
    "acc",
    "at_least",
    "convert",
    "ext",
    "impl",
    "load_properties",
    "markdown_table",
    "parse_listeners",
    "parse_properties",
    "parse_protocol_map",
    "parse_zk_connect",
    "rej",
]
