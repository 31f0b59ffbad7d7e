"""User configs on a broker (Kafka's UserConfigHandler): the SCRAM credentials of
`/config/users/<user>` in the credential cache, loaded at startup and reloaded for each
`users/...` change notification, so a credential added, changed or deleted anywhere in the
cluster applies on every broker without a restart."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.cluster import zk_data as zd

if TYPE_CHECKING:
    from moldau.cluster.zk_async import AsyncZk
    from moldau.security.credential_cache import ScramCredentialCache

log = logging.getLogger("kafka.server.UserConfigHandler")


class UserConfigs:
    def __init__(self, zk: AsyncZk, cache: ScramCredentialCache) -> None:
        self.zk = zk
        self.cache = cache

    async def load_all(self) -> None:
        """Every user's credentials, before the listeners open (ZkConfigManager.startup)."""
        configs = await self.zk.call(self.zk.client.get_all_user_configs)
        for user, config in configs.items():
            if user != zd.DEFAULT_ENTITY:
                self.cache.update_user(user, config)
        log.info("Loaded the SCRAM credentials of %d users", len(configs))

    async def on_config_change(self, entity_type: str, entity_name: str) -> None:
        """A ConfigChangeListener handler. `entity_name` is the notification's sanitized
        path below the type: `alice` or `alice/clients/app`; only a plain user (not the
        `<default>` user, not a user's client) carries credentials."""
        if entity_type != zd.ConfigType.USER or "/" in entity_name:
            return
        if entity_name == zd.DEFAULT_ENTITY:
            return
        user = zd.desanitize(entity_name)
        config = await self.zk.call(self.zk.client.get_user_config, user)
        self.cache.update_user(user, config)
