"""What a dynamic broker config update must pass (DynamicBrokerConfig.validate), and what
is dropped from one read back from ZooKeeper (fromPersistentProps).

An update of one level must name only dynamic keys (custom names pass), security keys
only behind a listener prefix, per-broker keys only at a broker's own level; each value
must parse as its key's type and pass its validator, and the merged levels must give a
valid broker configuration. A per-broker change of a listener's TLS settings must load
and keep the listener's certificate subject (SslFactory.validateReconfiguration). Kafka's
messages throughout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from moldau.security.ssl_settings import TlsConfigError

from .config import KEYS, BrokerConfig, ConfigError, ConfigValue, convert
from .config_rendering import scala_set
from .dynamic_config_error import DynamicConfigError
from .dynamic_keys import (
    BROKER_QUOTA_CONFIGS,
    RELOADABLE_FILE_CONFIGS,
    base_name,
    non_dynamic,
    per_broker_names,
    security_without_prefix,
)

if TYPE_CHECKING:
    from moldau.security.tls import TlsContextHolder

log = logging.getLogger("kafka.server.DynamicBrokerConfig")

# (listener, a proposed per-broker set or None for the current one) -> the listener's
# complete ssl.* settings (DynamicBrokerConfig.listener_ssl_settings)
ListenerSslSettings = Callable[[str, "Mapping[str, str] | None"], dict[str, ConfigValue]]


def validate_levels(props: Mapping[str, str], per_broker: bool) -> None:
    """The names and values of a new override set of one level, in Kafka's order of
    checks."""
    names = set(props)
    non_dynamic_names = non_dynamic(names)
    if non_dynamic_names:
        raise DynamicConfigError(f"Cannot update these configs dynamically: "
                                 f"{scala_set(non_dynamic_names)}")
    security = security_without_prefix(names)
    if security:
        raise DynamicConfigError("These security configs can be dynamically updated only "
                                 f"per-listener using the listener prefix: "
                                 f"{scala_set(security)}")
    for name, value in props.items():
        check_type(name, value)
    if not per_broker:
        broker_only = per_broker_names(names)
        if broker_only:
            raise DynamicConfigError("Cannot update these configs at default cluster "
                                     "level, broker id must be specified: "
                                     f"{scala_set(broker_only)}")


def validate_merged(merged: Mapping[str, str]) -> None:
    """The levels merged with the update give a valid broker configuration."""
    try:
        build_config(merged)
    except ConfigError as exc:
        raise DynamicConfigError(str(exc)) from None


def validate_listener_tls(props: Mapping[str, str],
                          tls_holders: Mapping[str, TlsContextHolder],
                          ssl_settings: ListenerSslSettings) -> None:
    """Kafka's SslFactory.validateReconfiguration for the proposed per-broker set
    `props`: every SSL listener whose TLS settings change, or whose key/trust store
    location `props` names (those files are reloaded), gets its new stores loaded and
    compared with the current certificate (TlsContextHolder.check) without switching.
    Raises DynamicConfigError naming the listener-prefixed key to fix."""
    for listener in sorted(tls_holders):
        settings = ssl_settings(listener, props)
        if (settings == ssl_settings(listener, None)
                and not names_listener_files(props, listener)):
            continue
        prefix = f"listener.name.{listener.lower()}."
        try:
            tls_holders[listener].check(settings)
        except TlsConfigError as exc:
            raise DynamicConfigError(f"Invalid dynamic configuration: {prefix}{exc.key}: "
                                     f"{exc.reason}") from None
        except (ValueError, OSError) as exc:
            raise DynamicConfigError(f"Invalid dynamic configuration: listener {listener}"
                                     f": {exc}") from None


def drop_unusable(props: dict[str, str], per_broker: bool) -> None:
    """Drop from `props` (read from ZooKeeper, passwords decoded), with Kafka's error
    logs, what cannot be applied from this level."""
    invalid = []
    for name, value in list(props.items()):
        try:
            check_type(name, value)
        except DynamicConfigError:
            invalid.append(name)
            del props[name]
    if invalid:
        level = "broker" if per_broker else "default cluster"
        log.error("Dynamic %s config contains invalid values in: %s, these configs will "
                  "be ignored", level, invalid)
    _drop(props, non_dynamic(props), "Non-dynamic configs will be ignored")
    _drop(props, security_without_prefix(props), "Security configs can be dynamically "
          "updated only using listener prefix, base configs will be ignored")
    if not per_broker:
        _drop(props, per_broker_names(props), "Per-broker configs defined at default "
              "cluster level will be ignored")


def _drop(props: dict[str, str], names: set[str], message: str) -> None:
    if names:
        for name in names:
            props.pop(name, None)
        log.error("%s: %s", message, scala_set(names))


def check_type(name: str, value: str | None) -> None:
    """DynamicConfig.Broker.validate: the value parses as the key's type and passes its
    validator (listener-prefixed names use their base key); custom names pass."""
    base = base_name(name)
    key = KEYS.get(base)
    if key is None:
        qtype = BROKER_QUOTA_CONFIGS.get(base)
        if qtype is not None:
            try:
                number = int(str(value).strip())
            except ValueError:
                raise DynamicConfigError(f"Invalid value {value} for configuration {base}: "
                                         "Not a number of type LONG") from None
            if number < 0:
                raise DynamicConfigError(f"Invalid value {value} for configuration {base}: "
                                         "Value must be at least 0")
        return
    try:
        typed = convert(key, value)
        if key.validator is not None:
            key.validator.check(base, typed)
    except ConfigError as exc:
        raise DynamicConfigError(str(exc)) from None


def names_listener_files(props: Iterable[str], listener: str) -> bool:
    """Whether `props` names the listener's key or trust store location."""
    prefix = f"listener.name.{listener.lower()}."
    return any(prefix + name in props for name in RELOADABLE_FILE_CONFIGS)


def build_config(props: Mapping[str, str]) -> BrokerConfig:
    """The BrokerConfig these string properties give (custom keys left out)."""
    known = {k: v for k, v in props.items() if k in KEYS}
    return BrokerConfig.from_properties(known)
