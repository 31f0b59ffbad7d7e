"""Per-topic configuration: the broker's defaults with the overrides stored in
ZooKeeper (/config/topics/<topic>), kept current through /config/changes notifications
so a change applies without a restart (Kafka's TopicConfigHandler)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.storage.config import ConfigError, LogConfig

from .config import BrokerConfig

if TYPE_CHECKING:
    from moldau.cluster.zk_async import AsyncZk

log = logging.getLogger("kafka.server.ConfigHandler")


class TopicConfigs:
    def __init__(self, config: BrokerConfig) -> None:
        self.broker_config = config
        self.default: LogConfig = config.log_config()
        self.overrides: dict[str, dict[str, str]] = {}
        self._cache: dict[str, LogConfig] = {}

    async def load(self, zk: AsyncZk) -> None:
        """Read every topic's overrides once at startup (the logs load with them)."""
        for topic in await zk.call(zk.client.get_all_entity_names, "topics"):
            self.overrides[topic] = await zk.call(zk.client.get_entity_config, "topics", topic)
        self._cache.clear()

    def log_config(self, topic: str) -> LogConfig:
        config = self._cache.get(topic)
        if config is None:
            overrides = self.overrides.get(topic)
            config = self.default
            if overrides:
                try:
                    config = LogConfig.from_properties(dict(overrides), self.default)
                except ConfigError as exc:
                    log.error("Ignoring invalid overrides %s of topic %s: %s", overrides,
                              topic, exc)
            self._cache[topic] = config
        return config

    def set_overrides(self, topic: str, overrides: dict[str, str]) -> None:
        self.overrides[topic] = dict(overrides)
        self._cache.pop(topic, None)

    def forget(self, topic: str) -> None:
        self.overrides.pop(topic, None)
        self._cache.pop(topic, None)

    def set_broker_defaults(self, log_config: LogConfig) -> None:
        """The broker-level defaults changed (a dynamic log.* config): every topic without
        an override of a key follows the new default (Kafka's DynamicLogConfig)."""
        self.default = log_config
        self._cache.clear()
