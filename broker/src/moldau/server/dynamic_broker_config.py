"""The live dynamic broker configuration (Kafka's DynamicBrokerConfig, ZooKeeper mode).

It holds the two dynamic levels read from ZooKeeper (per broker, cluster default) over
the static configuration, follows /config/changes, answers the effective value of a key
and its synonyms (DescribeConfigs), the complete TLS settings of a listener, and calls the
components that follow changes back: the topic defaults (`on_log_defaults_change`), a
listener's TLS settings or store files (`on_listener_ssl_change`), any changed key
(`on_config_change`). The key table is in dynamic_keys.py, the checks of an update in
dynamic_validation.py, password encryption in password_encoder.py.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from moldau.security.ssl_settings import RECONFIGURABLE_KEYS as TLS_STORE_KEYS
from moldau.storage.config import LogConfig

from .config import KEYS, KEYS_LIST, BrokerConfig, ConfigError, ConfigValue
from .config_rendering import render
from .connection_limit_configs import check_listener_limits
from .dynamic_config_error import DynamicConfigError
from .dynamic_keys import (
    ALL_DYNAMIC_CONFIGS,
    DEFAULT_CONFIG,
    DEFAULT_ENTITY,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    LISTENER_CONFIG_RE,
    RELOADABLE_FILE_CONFIGS,
    STATIC_BROKER_CONFIG,
    TOPIC_TO_BROKER,
    broker_config_synonyms,
    is_password_config,
    is_sensitive,
)
from .dynamic_validation import (
    build_config,
    drop_unusable,
    validate_levels,
    validate_listener_tls,
    validate_merged,
)
from .password_encoder import PasswordEncoder

if TYPE_CHECKING:
    from moldau.cluster.zk_async import AsyncZk
    from moldau.security.tls import TlsContextHolder

log = logging.getLogger("kafka.server.DynamicBrokerConfig")

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
        drop_unusable(out, per_broker)
        return out

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
        validate_levels(props, per_broker)
        if per_broker:
            merged = self._merge(self.default_props, props)
        else:
            merged = self._merge(props, self.broker_props)
        validate_merged(merged)
        check_listener_limits((e.listener for e in self.static.listeners),
                              self._lookup(self._merged), self._lookup(merged))
        if per_broker and tls_holders:
            self.validate_listener_tls(props, tls_holders)

    def _lookup(self, merged: Mapping[str, str]) -> Callable[[str], object]:
        """A value by name from merged levels, then the static listener overrides and
        Kafka's defaults."""
        def lookup(name: str) -> object:
            for level in (merged, self.static.listener_overrides, self.default_values):
                if name in level:
                    return level[name]
            return None
        return lookup

    def validate_listener_tls(self, props: Mapping[str, str],
                              tls_holders: Mapping[str, TlsContextHolder]) -> None:
        """Kafka's SslFactory.validateReconfiguration for the proposed per-broker set
        `props`: every SSL listener whose TLS settings change, or whose key/trust store
        location `props` names (those files are reloaded), gets its new stores loaded and
        compared with the current certificate (TlsContextHolder.check) without switching.
        Raises DynamicConfigError naming the listener-prefixed key to fix."""
        validate_listener_tls(props, tls_holders, self.listener_ssl_settings)

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
            new = build_config(merged)
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


def _raw(name: str, value: object) -> str | None:
    return render(name, value)


async def _fire(listeners: list[Listener], *args: object) -> None:
    for fn in list(listeners):
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("Dynamic config callback %r failed", fn)
