"""Dynamic broker configuration (Kafka's DynamicBrokerConfig, ZooKeeper mode, KIP-226).

Broker keys may be changed without a restart at two levels, both stored in ZooKeeper:

* per broker: ``/config/brokers/<id>`` (AdminClient resource name = the broker id);
* cluster-wide default: ``/config/brokers/<default>`` (resource name ``""``).

The effective value of a key follows Kafka's precedence: per-broker dynamic > cluster
default dynamic > static (server.properties) > default. Setting a key at a level removes
its synonyms of the lower levels first (a dynamic ``log.retention.hours`` beats a static
``log.retention.ms``), as Kafka's ``overrideProps`` does. Topic overrides sit above all of
this for the topic keys (TopicConfigs).

Only the keys Kafka can change dynamically are accepted (``ALL_DYNAMIC_CONFIGS``); others
fail with Kafka's message ``Cannot update these configs dynamically: Set(...)``. Names that
are not Kafka broker keys are accepted as custom configs, as Kafka does. Listener-prefixed
keys (``listener.name.<l>.ssl.keystore.location``) are per-broker only; password values are
encrypted with ``password.encoder.secret`` before they reach ZooKeeper (Kafka's
EncryptingPasswordEncoder format) and refused when no secret is configured.

The broker calls ``load(zk)`` at startup and ``on_change(entity_type, entity_name)`` for
every /config/changes notification. Components follow changes through callbacks:
``on_log_defaults_change(fn(LogConfig))`` (the topic defaults moved, e.g. a dynamic
``log.retention.ms``), ``on_listener_ssl_change(fn(listener))`` (a listener's TLS settings
changed, or its key/trust store should be reloaded), ``on_config_change(fn(changed keys))``.

Listener TLS (certificate rotation without a restart): ``listener_ssl_settings(listener)``
is the complete ``ssl.*`` settings of a listener (server.properties < dynamic
``listener.name.<l>.ssl.*``) to pass to ``TlsContextHolder.reload``. As in Kafka
(SslFactory.validateReconfiguration runs inside DynamicBrokerConfig.validate), a per-broker
change is refused before anything reaches ZooKeeper when the listener's new stores do not
load or the new certificate changes the subject / SubjectAltNames: ``validate(props,
per_broker, tls_holders)`` checks against the listener's current TlsContextHolder.

This module gathers the names, which the broker and the config handlers import from
here; each job has its module:

- `dynamic_keys.py`: which keys are dynamic and at which level, synonyms, key types,
  DescribeConfigs' source ids;
- `dynamic_validation.py`: the checks of an update, and what a level read back drops;
- `password_encoder.py`: `PasswordEncoder` (Kafka's EncryptingPasswordEncoder);
- `dynamic_broker_config.py`: `DynamicBrokerConfig`, the live levels, effective values
  and change callbacks;
- `dynamic_log_defaults.py`: `apply_log_defaults`, new topic defaults on running logs;
- `config_rendering.py`: values as Kafka prints them (`render`, `java_double`);
- `dynamic_config_error.py`: `DynamicConfigError`.
"""

from __future__ import annotations

import logging

from .config_rendering import java_double, render, scala_set
from .dynamic_broker_config import DynamicBrokerConfig, Listener
from .dynamic_config_error import DynamicConfigError
from .dynamic_keys import (
    ALL_DYNAMIC_CONFIGS,
    BROKER_QUOTA_CONFIGS,
    CLUSTER_LEVEL_LISTENER_CONFIGS,
    DEFAULT_CONFIG,
    DEFAULT_ENTITY,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_BROKER_LOGGER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_LOG_CONFIGS,
    DYNAMIC_PASSWORD_CONFIGS,
    DYNAMIC_SECURITY_CONFIGS,
    LISTENER_CONFIG_RE,
    LISTENER_CONFIGS,
    LISTENER_MECHANISM_CONFIGS,
    LOG_CLEANER_CONFIGS,
    PER_BROKER_CONFIGS,
    PRODUCER_STATE_CONFIGS,
    RELOADABLE_FILE_CONFIGS,
    SOCKET_SERVER_CONFIGS,
    STATIC_BROKER_CONFIG,
    THREAD_POOL_CONFIGS,
    TOPIC_CONFIG,
    TOPIC_TO_BROKER,
    UNKNOWN,
    base_name,
    broker_config_synonyms,
    config_key,
    config_type,
    is_password_config,
    is_sensitive,
)
from .dynamic_log_defaults import apply_log_defaults
from .password_encoder import PasswordEncoder

# the same logger object the modules above use (logging.getLogger returns one per name)
log = logging.getLogger("kafka.server.DynamicBrokerConfig")

__all__ = [
    "ALL_DYNAMIC_CONFIGS",
    "BROKER_QUOTA_CONFIGS",
    "CLUSTER_LEVEL_LISTENER_CONFIGS",
    "DEFAULT_CONFIG",
    "DEFAULT_ENTITY",
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_BROKER_LOGGER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "DYNAMIC_LOG_CONFIGS",
    "DYNAMIC_PASSWORD_CONFIGS",
    "DYNAMIC_SECURITY_CONFIGS",
    "LISTENER_CONFIGS",
    "LISTENER_CONFIG_RE",
    "LISTENER_MECHANISM_CONFIGS",
    "LOG_CLEANER_CONFIGS",
    "PER_BROKER_CONFIGS",
    "PRODUCER_STATE_CONFIGS",
    "RELOADABLE_FILE_CONFIGS",
    "SOCKET_SERVER_CONFIGS",
    "STATIC_BROKER_CONFIG",
    "THREAD_POOL_CONFIGS",
    "TOPIC_CONFIG",
    "TOPIC_TO_BROKER",
    "UNKNOWN",
    "DynamicBrokerConfig",
    "DynamicConfigError",
    "Listener",
    "PasswordEncoder",
    "apply_log_defaults",
    "base_name",
    "broker_config_synonyms",
    "config_key",
    "config_type",
    "is_password_config",
    "is_sensitive",
    "java_double",
    "log",
    "render",
    "scala_set",
]
