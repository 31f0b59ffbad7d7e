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
"""

from __future__ import annotations

import base64
import decimal
import hashlib
import inspect
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from moldau.cluster import zk_data
from moldau.security.ssl_settings import RECONFIGURABLE_KEYS as TLS_STORE_KEYS
from moldau.security.ssl_settings import TlsConfigError
from moldau.storage.config import LogConfig

from .config import (
    KEYS,
    KEYS_LIST,
    TOPIC_SYNONYMS,
    BrokerConfig,
    ConfigError,
    ConfigKey,
    ConfigValue,
    convert,
)

if TYPE_CHECKING:
    from moldau.cluster.zk_async import AsyncZk
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.security.tls import TlsContextHolder
    from moldau.storage.log_manager import LogManager

    from .topic_configs import TopicConfigs

log = logging.getLogger("kafka.server.DynamicBrokerConfig")

# DescribeConfigs' ConfigSource ids
UNKNOWN = 0
TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DYNAMIC_BROKER_LOGGER_CONFIG = 6

DEFAULT_ENTITY = zk_data.DEFAULT_ENTITY  # "<default>"

# --------------------------------------------------------------------------- Kafka's sets

# SslConfigs.RECONFIGURABLE_CONFIGS: only per listener (listener.name.<l>.<key>)
DYNAMIC_SECURITY_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
# LogCleaner.RECONFIGURABLE_CONFIGS
LOG_CLEANER_CONFIGS = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "message.max.bytes", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.backoff.ms",
})
# DynamicLogConfig.ReconfigurableConfigs: the broker synonyms of the topic configs
# (ServerTopicConfigSynonyms), including the topic keys Moldau's LogConfig does not model.
DYNAMIC_LOG_CONFIGS = frozenset(TOPIC_SYNONYMS) - {"log.message.format.version"}
# DynamicThreadPool.RECONFIGURABLE_CONFIGS
THREAD_POOL_CONFIGS = frozenset({
    "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads",
})
# DynamicListenerConfig.ReconfigurableConfigs
LISTENER_CONFIGS = frozenset({
    "listeners", "listener.security.protocol.map", "principal.builder.class",
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate", "num.network.threads",
})
# SocketServer.ReconfigurableConfigs
SOCKET_SERVER_CONFIGS = frozenset({
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections",
    "max.connection.creation.rate",
})
# DynamicProducerStateManagerConfig
PRODUCER_STATE_CONFIGS = frozenset({
    "producer.id.expiration.ms", "transaction.partition.verification.enable",
})

ALL_DYNAMIC_CONFIGS = (DYNAMIC_SECURITY_CONFIGS | LOG_CLEANER_CONFIGS | DYNAMIC_LOG_CONFIGS
                       | THREAD_POOL_CONFIGS | {"metric.reporters"} | LISTENER_CONFIGS
                       | SOCKET_SERVER_CONFIGS | PRODUCER_STATE_CONFIGS | {"config.providers"})

CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({
    "max.connections", "max.connection.creation.rate", "num.network.threads"})
PER_BROKER_CONFIGS = (DYNAMIC_SECURITY_CONFIGS | LISTENER_CONFIGS) - CLUSTER_LEVEL_LISTENER_CONFIGS
LISTENER_MECHANISM_CONFIGS = ("sasl.jaas.config", "sasl.login.callback.handler.class",
                              "sasl.login.class", "sasl.server.callback.handler.class",
                              "connections.max.reauth.ms")
RELOADABLE_FILE_CONFIGS = ("ssl.keystore.location", "ssl.truststore.location")
# Broker quota configs: dynamic only (QuotaConfigs.brokerQuotaConfigs), not in server.properties
BROKER_QUOTA_CONFIGS = {"leader.replication.throttled.rate": "long",
                        "follower.replication.throttled.rate": "long",
                        "replica.alter.log.dirs.io.max.bytes.per.second": "long"}

DYNAMIC_PASSWORD_CONFIGS = tuple(sorted(
    n for n in ALL_DYNAMIC_CONFIGS if n in KEYS and KEYS[n].type == "password"))

LISTENER_CONFIG_RE = re.compile(r"^listener\.name\.([^.]*)\.(.*)$")
_RETENTION = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
_ROLL = ("log.roll.ms", "log.roll.hours")
_JITTER = ("log.roll.jitter.ms", "log.roll.jitter.hours")
_FLUSH = ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")

# topic config -> its primary broker synonym
TOPIC_TO_BROKER = {topic: broker for broker, topic in TOPIC_SYNONYMS.items()}


class DynamicConfigError(ValueError):
    """A dynamic config change Kafka would refuse (its ConfigException); the message is
    Kafka's."""


# --------------------------------------------------------------------------- helpers


def broker_config_synonyms(name: str, match_listener_override: bool) -> list[str]:
    """DynamicBrokerConfig.brokerConfigSynonyms: the names that set the same config, in
    precedence order."""
    for group in (_ROLL, _JITTER, _RETENTION):
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":
        return list(_FLUSH)
    match = LISTENER_CONFIG_RE.match(name)
    if match and match_listener_override:
        base = match.group(2)
        mechanism = next((c for c in LISTENER_MECHANISM_CONFIGS if base.endswith(c)), None)
        return [name, mechanism or base]
    return [name]


def base_name(name: str) -> str:
    """listener.name.<l>.<key> -> <key>; other names unchanged."""
    match = LISTENER_CONFIG_RE.match(name)
    return match.group(2) if match else name


def config_key(name: str) -> ConfigKey | None:
    """The broker ConfigKey of a name (listener-prefixed names use their base key)."""
    return KEYS.get(name) or KEYS.get(base_name(name))


def config_type(name: str) -> str | None:
    key = config_key(name)
    if key is not None:
        return key.type
    return BROKER_QUOTA_CONFIGS.get(name)


def is_sensitive(name: str) -> bool:
    """KafkaConfig.maybeSensitive: passwords (and unknown types) are never shown."""
    t = config_type(name)
    return t == "password"


def is_password_config(name: str) -> bool:
    """DynamicBrokerConfig.isPasswordConfig: stored encrypted in ZooKeeper."""
    return any(name.endswith(p) for p in DYNAMIC_PASSWORD_CONFIGS)


def java_double(value: float) -> str:
    """Java's Double.toString, which Kafka's config rendering uses."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "." in text else text + ".0"
    # shortest round-trip digits, in Java's d.dddE<n> form
    sign, digits, exponent = decimal.Decimal(repr(float(value))).as_tuple()
    text = "".join(str(d) for d in digits).rstrip("0") or "0"
    power = len(digits) - 1 + int(exponent)
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


def render(name: str, value: object) -> str | None:
    """A typed value as Kafka's ConfigDef.convertToString renders it (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    if isinstance(value, float):
        return java_double(value)
    return str(value)


def scala_set(names: Iterable[str]) -> str:
    return "Set(" + ", ".join(sorted(names)) + ")"


# --------------------------------------------------------------------------- passwords


class PasswordEncoder:
    """Kafka's EncryptingPasswordEncoder: PBKDF2 (HmacSHA512) key from the secret and a
    random 256-byte salt, AES/CBC/PKCS5Padding with a random IV; stored as a CSV map
    ``keyFactoryAlgorithm:..,cipherAlgorithm:..,keyLength:..,salt:..,iterations:..,
    encryptedPassword:..,passwordLength:..,initializationVector:..``."""

    def __init__(self, secret: str, key_factory_algorithm: str | None = None,
                 cipher_algorithm: str = "AES/CBC/PKCS5Padding", key_length: int = 128,
                 iterations: int = 4096) -> None:
        self.secret = secret
        self.key_factory_algorithm = key_factory_algorithm or "PBKDF2WithHmacSHA512"
        self.cipher_algorithm = cipher_algorithm
        self.key_length = key_length
        self.iterations = iterations

    @staticmethod
    def _digest(key_factory: str) -> str:
        digests = {"PBKDF2WithHmacSHA512": "sha512", "PBKDF2WithHmacSHA256": "sha256",
                   "PBKDF2WithHmacSHA1": "sha1"}
        if key_factory not in digests:
            raise DynamicConfigError(f"Unsupported password encoder key factory {key_factory}")
        return digests[key_factory]

    def _key(self, key_factory: str, salt: bytes, iterations: int, key_length: int) -> bytes:
        return hashlib.pbkdf2_hmac(self._digest(key_factory), self.secret.encode(), salt,
                                   iterations, key_length // 8)

    @staticmethod
    def _check_cipher(cipher: str) -> None:
        if cipher != "AES/CBC/PKCS5Padding":
            raise DynamicConfigError(f"Unsupported password encoder cipher {cipher}")

    def encode(self, password: str) -> str:
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        self._check_cipher(self.cipher_algorithm)
        salt = os.urandom(256)
        iv = os.urandom(16)
        key = self._key(self.key_factory_algorithm, salt, self.iterations, self.key_length)
        padder = padding.PKCS7(128).padder()
        data = padder.update(password.encode()) + padder.finalize()
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        encrypted = encryptor.update(data) + encryptor.finalize()
        b64 = base64.b64encode
        fields = {
            "keyFactoryAlgorithm": self.key_factory_algorithm,
            "cipherAlgorithm": self.cipher_algorithm,
            "keyLength": str(self.key_length),
            "salt": b64(salt).decode(),
            "iterations": str(self.iterations),
            "encryptedPassword": b64(encrypted).decode(),
            "passwordLength": str(len(password)),
            "initializationVector": b64(iv).decode(),
        }
        return ",".join(f"{k}:{v}" for k, v in fields.items())

    def decode(self, encoded: str) -> str:
        from cryptography.hazmat.primitives import padding
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        try:
            params = dict(item.split(":", 1) for item in encoded.split(","))
            self._check_cipher(params["cipherAlgorithm"])
            salt = base64.b64decode(params["salt"])
            iv = base64.b64decode(params["initializationVector"])
            key = self._key(params.get("keyFactoryAlgorithm") or self.key_factory_algorithm,
                            salt, int(params["iterations"]), int(params["keyLength"]))
            decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
            padded = decryptor.update(base64.b64decode(params["encryptedPassword"]))
            padded += decryptor.finalize()
            unpadder = padding.PKCS7(128).unpadder()
            password = (unpadder.update(padded) + unpadder.finalize()).decode()
        except Exception as exc:
            raise DynamicConfigError("Password could not be decoded") from exc
        if len(password) != int(params["passwordLength"]):
            raise DynamicConfigError("Password could not be decoded, sanity check of length "
                                     "failed")
        return password


# --------------------------------------------------------------------------- the class


# a change callback; what it returns is awaited when awaitable, else dropped
Listener = Callable[..., object]


class DynamicBrokerConfig:
    def __init__(self, static: BrokerConfig, broker_id: int | None = None) -> None:
        self.static = static
        self.broker_id = static.broker_id if broker_id is None else broker_id
        # what server.properties set (as strings) and Kafka's defaults (as strings)
        self.static_props: dict[str, str] = {}
        for name in static.explicit:
            text = _raw(name, static.values.get(name))
            if text is not None:
                self.static_props[name] = text
        self.default_values: dict[str, str] = {}
        for key in KEYS_LIST:
            if key.status != "rejected":
                text = _raw(key.name, key.default)
                if text is not None:
                    self.default_values[key.name] = text
        self.broker_props: dict[str, str] = {}  # /config/brokers/<id> (passwords decoded)
        self.default_props: dict[str, str] = {}  # /config/brokers/<default>
        self.current: BrokerConfig = static
        self._merged: dict[str, str] = dict(self.static_props)
        self._zk: AsyncZk | None = None
        self._log_config: LogConfig = static.log_config()
        self._log_listeners: list[Listener] = []
        self._ssl_listeners: list[Listener] = []
        self._change_listeners: list[Listener] = []
        self.encoder: PasswordEncoder | None = None
        secret = static.get("password.encoder.secret")
        if secret:
            self.encoder = PasswordEncoder(
                secret, static.get("password.encoder.keyfactory.algorithm"),
                static.get("password.encoder.cipher.algorithm") or "AES/CBC/PKCS5Padding",
                static.get("password.encoder.key.length") or 128,
                static.get("password.encoder.iterations") or 4096)
        old_secret = static.get("password.encoder.old.secret")
        self.old_encoder = PasswordEncoder(old_secret) if old_secret else None

    # --- callbacks -------------------------------------------------------------------

    def on_log_defaults_change(self, fn: Callable[[LogConfig], object]) -> None:
        """fn(new broker-level LogConfig) when a dynamic log.* key changes the topic defaults."""
        self._log_listeners.append(fn)

    def on_listener_ssl_change(self, fn: Callable[[str], object]) -> None:
        """fn(listener name, upper case) when that listener's dynamic TLS settings changed,
        or a per-broker AlterConfigs named its key/trust store again (reload the files)."""
        self._ssl_listeners.append(fn)

    def on_config_change(self, fn: Callable[[set[str]], object]) -> None:
        """fn(names whose effective value changed) after every applied change."""
        self._change_listeners.append(fn)

    # --- loading and notifications -----------------------------------------------------

    async def load(self, zk: AsyncZk) -> None:
        """Read /config/brokers/<default> and /config/brokers/<id> (startup); `zk` is kept
        for the notifications."""
        self._zk = zk
        default = await zk.call(zk.client.get_entity_config, "brokers", DEFAULT_ENTITY)
        per_broker = await zk.call(zk.client.get_entity_config, "brokers", str(self.broker_id))
        self.default_props = self.from_persistent(default, per_broker=False)
        self.broker_props = self.from_persistent(per_broker, per_broker=True)
        await self._recompute(notify=False)
        if default or per_broker:
            log.info("Dynamic broker configs loaded: cluster default %s, broker %d %s",
                     sorted(self.default_props), self.broker_id, sorted(self.broker_props))

    async def on_change(self, entity_type: str, entity_name: str,
                        zk: AsyncZk | None = None) -> None:
        """A /config/changes notification (BrokerConfigHandler.processConfigChanges)."""
        if entity_type != "brokers":
            return
        if zk is None:
            zk = self._zk
        if zk is None:
            raise RuntimeError("bind() the ZooKeeper client before config changes arrive")
        if entity_name == DEFAULT_ENTITY:
            raw = await zk.call(zk.client.get_entity_config, "brokers", DEFAULT_ENTITY)
            log.info("Processing override for entityPath: brokers/%s with config: %s",
                     entity_name, self._loggable(raw))
            self.default_props = self.from_persistent(raw, per_broker=False)
        elif entity_name == str(self.broker_id):
            raw = await zk.call(zk.client.get_entity_config, "brokers", entity_name)
            log.info("Processing override for entityPath: brokers/%s with config: %s",
                     entity_name, self._loggable(raw))
            self.broker_props = self.from_persistent(raw, per_broker=True)
        else:
            return
        await self._recompute(notify=True)

    def bind(self, zk: AsyncZk) -> None:
        """Remember the AsyncZk so on_change(entity_type, name) needs no zk argument."""
        self._zk = zk

    def from_persistent(self, props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        """Kafka's fromPersistentProps: decode passwords and drop (with an error log) what
        cannot be applied from this level."""
        out = dict(props)
        for name in list(out):
            if is_password_config(name):
                try:
                    out[name] = self.decode_password(out[name])
                except DynamicConfigError as exc:
                    log.error("Dynamic password config %s could not be decoded, ignoring: %s",
                              name, exc)
                    del out[name]
        invalid = []
        for name, value in list(out.items()):
            try:
                _check_type(name, value)
            except DynamicConfigError:
                invalid.append(name)
                del out[name]
        if invalid:
            level = "broker" if per_broker else "default cluster"
            log.error("Dynamic %s config contains invalid values in: %s, these configs will "
                      "be ignored", level, invalid)
        self._drop(out, _non_dynamic(out), "Non-dynamic configs will be ignored")
        self._drop(out, _security_without_prefix(out), "Security configs can be dynamically "
                   "updated only using listener prefix, base configs will be ignored")
        if not per_broker:
            self._drop(out, _per_broker(out), "Per-broker configs defined at default cluster "
                       "level will be ignored")
        return out

    @staticmethod
    def _drop(props: dict[str, str], names: set[str], message: str) -> None:
        if names:
            for name in names:
                props.pop(name, None)
            log.error("%s: %s", message, scala_set(names))

    def decode_password(self, value: str) -> str:
        for encoder in (self.encoder, self.old_encoder):
            if encoder is None:
                continue
            try:
                return encoder.decode(value)
            except DynamicConfigError:
                continue
        if self.encoder is None and self.old_encoder is None:
            raise DynamicConfigError("Password encoder secret not configured")
        raise DynamicConfigError("Password could not be decoded")

    def to_persistent(self, props: Mapping[str, str], per_broker: bool) -> dict[str, str]:
        """Kafka's toPersistentProps: passwords encrypted (per broker only)."""
        out = dict(props)
        for name, value in props.items():
            if is_password_config(name) and value is not None:
                if not per_broker:
                    raise DynamicConfigError("Password config can be defined only at broker "
                                             "level")
                if self.encoder is None:
                    raise DynamicConfigError("Password encoder secret not configured")
                out[name] = self.encoder.encode(value)
        return out

    # --- validation ----------------------------------------------------------------------

    def validate(self, props: Mapping[str, str], per_broker: bool,
                 tls_holders: Mapping[str, TlsContextHolder] | None = None) -> None:
        """DynamicBrokerConfig.validate: the new override set of one level must be dynamic,
        well typed, allowed at that level and give a valid broker configuration; with
        `tls_holders` (listener name -> TlsContextHolder, the broker's `tls_holders`) the
        new TLS settings of those listeners must load and fit the current certificate."""
        names = set(props)
        non_dynamic = _non_dynamic(names)
        if non_dynamic:
            raise DynamicConfigError(f"Cannot update these configs dynamically: "
                                     f"{scala_set(non_dynamic)}")
        security = _security_without_prefix(names)
        if security:
            raise DynamicConfigError("These security configs can be dynamically updated only "
                                     f"per-listener using the listener prefix: "
                                     f"{scala_set(security)}")
        for name, value in props.items():
            _check_type(name, value)
        if not per_broker:
            per_broker_names = _per_broker(names)
            if per_broker_names:
                raise DynamicConfigError("Cannot update these configs at default cluster "
                                         "level, broker id must be specified: "
                                         f"{scala_set(per_broker_names)}")
        if per_broker:
            merged = self._merge(self.default_props, props)
        else:
            merged = self._merge(props, self.broker_props)
        try:
            _build(merged)
        except ConfigError as exc:
            raise DynamicConfigError(str(exc)) from None
        if per_broker and tls_holders:
            self.validate_listener_tls(props, tls_holders)

    def validate_listener_tls(self, props: Mapping[str, str],
                              tls_holders: Mapping[str, TlsContextHolder]) -> None:
        """Kafka's SslFactory.validateReconfiguration for the proposed per-broker set
        `props`: every SSL listener whose TLS settings change, or whose key/trust store
        location `props` names (those files are reloaded), gets its new stores loaded and
        compared with the current certificate (TlsContextHolder.check) without switching.
        Raises DynamicConfigError naming the listener-prefixed key to fix."""
        for listener in sorted(tls_holders):
            settings = self.listener_ssl_settings(listener, props)
            if (settings == self.listener_ssl_settings(listener)
                    and not _names_listener_files(props, listener)):
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

    def listener_ssl_settings(self, listener: str,
                              per_broker_props: Mapping[str, str] | None = None
                              ) -> dict[str, ConfigValue]:
        """The complete `ssl.*` settings of a listener, for TlsContextHolder: static
        (server.properties, `listener.name.<l>.ssl.*` applied) < the dynamic
        `listener.name.<l>.ssl.*` overrides (passwords decoded) of `per_broker_props` (a
        proposed per-broker set) or else the current ones. The store keys neither sets are
        None, so a reload also drops a dynamic key that was deleted (TlsContextHolder.reload
        keeps the value of a key the settings leave out)."""
        dynamic = self.broker_props if per_broker_props is None else per_broker_props
        prefix = f"listener.name.{listener.lower()}."
        out: dict[str, ConfigValue] = dict.fromkeys(TLS_STORE_KEYS)
        out.update(self.static.listener_settings(listener))
        for level in (self.default_props, dynamic):
            for name, value in level.items():
                if name.startswith(prefix) and name[len(prefix):].startswith("ssl."):
                    out[name[len(prefix):]] = value
        return out

    # --- effective values --------------------------------------------------------------

    def _merge(self, default: Mapping[str, str], per_broker: Mapping[str, str]) -> dict[str, str]:
        props = dict(self.static_props)
        for level in (default, per_broker):
            for name, value in level.items():
                for synonym in broker_config_synonyms(name, match_listener_override=False):
                    props.pop(synonym, None)
                props[name] = value
        return props

    def merged_props(self) -> dict[str, str]:
        """static < dynamic default < dynamic per-broker, as strings (custom keys too)."""
        return self._merge(self.default_props, self.broker_props)

    async def _recompute(self, notify: bool) -> None:
        merged = self.merged_props()
        try:
            new = _build(merged)
        except ConfigError as exc:
            log.error("Dynamic broker configs could not be applied, keeping the previous "
                      "configuration: %s", exc)
            return
        old = self.current
        old_merged = self._merged
        self.current = new
        self._merged = merged
        changed = {k for k in set(old.values) | set(new.values)
                   if old.values.get(k) != new.values.get(k)}
        changed |= {k for k in set(old_merged) | set(merged)
                    if k not in KEYS and old_merged.get(k) != merged.get(k)}
        # KafkaConfig.updateCurrentConfig: code reading broker.config[key] at use time sees
        # the dynamic value (only dynamic keys ever change here)
        for name in ALL_DYNAMIC_CONFIGS:
            if name in new.values and name in self.static.values:
                self.static.values[name] = new.values[name]
        if changed:
            log.info("Dynamic broker config changed: %s",
                     ", ".join(f"{k}={'[hidden]' if is_sensitive(k) else self.effective(k)}"
                               for k in sorted(changed)))
        log_config = new.log_config()
        log_changed = log_config != self._log_config
        self._log_config = log_config
        if not notify:
            return
        if log_changed:
            await _fire(self._log_listeners, log_config)
        for listener in sorted(self._changed_listeners(changed)):
            await _fire(self._ssl_listeners, listener)
        if changed:
            await _fire(self._change_listeners, changed)

    @staticmethod
    def _changed_listeners(changed: Iterable[str]) -> set[str]:
        out = set()
        for name in changed:
            match = LISTENER_CONFIG_RE.match(name)
            if match and match.group(2).startswith("ssl."):
                out.add(match.group(1).upper())
        return out

    async def reload_listener_files(self, props: Mapping[str, str]) -> None:
        """Kafka's reloadUpdatedFilesWithoutConfigChange: a per-broker AlterConfigs naming a
        listener's keystore/truststore location reloads the files when the listener's
        settings stay the same (a file replaced in place); a listener whose settings
        change is reloaded when the change is applied."""
        listeners = set()
        for name in props:
            match = LISTENER_CONFIG_RE.match(name)
            if match and match.group(2) in RELOADABLE_FILE_CONFIGS:
                listener = match.group(1).upper()
                # reloadOnly: a listener whose settings change is reloaded by the change
                # itself (after the write), not here with its old settings
                if (self.listener_ssl_settings(listener, props)
                        == self.listener_ssl_settings(listener)):
                    listeners.add(listener)
        for listener in sorted(listeners):
            await _fire(self._ssl_listeners, listener)

    def log_config(self) -> LogConfig:
        """The broker-level topic defaults with the dynamic values applied."""
        return self._log_config

    def effective(self, name: str) -> Any:  # Any: typed per key, as BrokerConfig.values
        """The effective value of a key (typed for Kafka keys, a string for custom and
        listener-prefixed keys, None when unset)."""
        if name in self.current.values:
            return self.current.values[name]
        return self._merged.get(name)

    def effective_string(self, name: str) -> str | None:
        return render(name, self.effective(name))

    def listener_overrides(self, listener: str) -> dict[str, str]:
        """The dynamic `listener.name.<listener>.*` settings, by base name (decoded)."""
        prefix = f"listener.name.{listener.lower()}."
        return {k[len(prefix):]: v for k, v in self.merged_props().items()
                if k.startswith(prefix)}

    def synonyms(self, name: str, per_broker: bool = True) -> list[tuple[str, str, int]]:
        """(name, value, source) in precedence order, as ConfigHelper.configSynonyms: every
        synonym set at each level (per-broker dynamic, cluster default dynamic, static,
        default), from the asked name on."""
        names = broker_config_synonyms(name, match_listener_override=True)
        return self._synonyms(name, names, per_broker)

    def _synonyms(self, name: str, names: list[str], per_broker: bool
                  ) -> list[tuple[str, str, int]]:
        found: list[tuple[str, str, int]] = []
        for level, source in ((self.broker_props, DYNAMIC_BROKER_CONFIG),
                              (self.default_props, DYNAMIC_DEFAULT_BROKER_CONFIG),
                              (self.static_props, STATIC_BROKER_CONFIG),
                              (self.default_values, DEFAULT_CONFIG)):
            for n in names:
                if n in level:
                    found.append((n, level[n], source))
        # from the name on (ConfigHelper's dropWhile): listener overrides and other keys
        # before it are not its own
        start = next((i for i, s in enumerate(found) if s[0] == name), len(found))
        found = found[start:]
        if not per_broker:
            found = [s for s in found if s[2] == DYNAMIC_DEFAULT_BROKER_CONFIG]
        return found

    def topic_synonyms(self, topic_key: str) -> list[tuple[str, str, int]]:
        """The broker-level synonyms of a topic config (below the topic override)."""
        broker_key = TOPIC_TO_BROKER.get(topic_key)
        if broker_key is None:
            return []
        # From the broker key on, as Kafka's configSynonyms drops what comes before it: a
        # topic's retention.ms with nothing set reports no synonym at all, since only
        # log.retention.hours has a default (the same for segment.ms, segment.jitter.ms
        # and flush.ms)
        return self._synonyms(broker_key, broker_config_synonyms(broker_key, True), True)

    def source(self, name: str) -> int:
        found = self.synonyms(name)
        return found[0][2] if found else DEFAULT_CONFIG

    def dynamic_props(self, per_broker: bool) -> dict[str, str]:
        return dict(self.broker_props if per_broker else self.default_props)

    @staticmethod
    def _loggable(props: Mapping[str, str]) -> dict[str, str]:
        return {k: ("[hidden]" if is_password_config(k) or is_sensitive(k) else v)
                for k, v in props.items()}


# --------------------------------------------------------------------------- internals


def _raw(name: str, value: object) -> str | None:
    return render(name, value)


def _check_type(name: str, value: str | None) -> None:
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


def _names_listener_files(props: Iterable[str], listener: str) -> bool:
    """Whether `props` names the listener's key or trust store location."""
    prefix = f"listener.name.{listener.lower()}."
    return any(prefix + name in props for name in RELOADABLE_FILE_CONFIGS)


def _non_dynamic(names: Iterable[str]) -> set[str]:
    """Kafka broker keys that cannot change without a restart (custom names can)."""
    return {n for n in names if n in KEYS and n not in ALL_DYNAMIC_CONFIGS}


def _security_without_prefix(names: Iterable[str]) -> set[str]:
    return {n for n in names if n in DYNAMIC_SECURITY_CONFIGS}


def _per_broker(names: Iterable[str]) -> set[str]:
    out = set()
    for name in names:
        if name in PER_BROKER_CONFIGS:
            out.add(name)
        match = LISTENER_CONFIG_RE.match(name)
        if match and match.group(2) not in CLUSTER_LEVEL_LISTENER_CONFIGS:
            out.add(name)
    return out


def _build(props: Mapping[str, str]) -> BrokerConfig:
    """The BrokerConfig these string properties give (custom keys left out)."""
    known = {k: v for k, v in props.items() if k in KEYS}
    return BrokerConfig.from_properties(known)


async def _fire(listeners: list[Listener], *args: object) -> None:
    for fn in list(listeners):
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("Dynamic config callback %r failed", fn)


def apply_log_defaults(log_config: LogConfig, topic_configs: TopicConfigs,
                       log_manager: LogManager | None,
                       replica_manager: ReplicaManager | None) -> None:
    """What a change of the broker-level topic defaults does to a running broker (Kafka's
    DynamicLogConfig.reconfigure): new logs and every topic without an override of a key
    follow the new default at once. The managers are None before the broker opened its
    logs."""
    topic_configs.set_broker_defaults(log_config)
    if log_manager is not None:
        log_manager.default_log_config = log_config
    if replica_manager is not None:
        for (topic, _index), partition in replica_manager.partitions.items():
            partition.log.config = topic_configs.log_config(topic)
