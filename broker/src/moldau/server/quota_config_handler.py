"""Client quota configs on a broker (Kafka's ClientIdConfigHandler, UserConfigHandler and
IpConfigHandler feeding the quota managers): the quota keys of every `/config/users/...`,
`/config/clients/...` and `/config/ips/...` znode in the broker's ClientQuotaConfigs,
loaded before the listeners open and reloaded for each change notification of such an
entity, so a quota set or removed anywhere in the cluster applies without a restart.

Only the quota keys are kept (a user's SCRAM credentials are UserConfigs' business). A
value that is not a number, which only a hand-written znode can hold, is left out with a
warning rather than stopping the broker."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_quota_ops import parse_quota_entity_path

from .client_quota_configs import (
    CLIENT_QUOTA_KEYS,
    CONNECTION_CREATION_RATE,
    IP_QUOTA_KEYS,
    ClientQuotaConfigs,
    QuotaEntity,
)

if TYPE_CHECKING:
    from moldau.cluster.zk_async import AsyncZk

log = logging.getLogger("kafka.server.QuotaConfigHandler")


def quota_values(config: Mapping[str, str], keys: tuple[str, ...],
                 where: str) -> dict[str, float]:
    """The quota keys of a znode's config map, as numbers."""
    values: dict[str, float] = {}
    for key in keys:
        text = config.get(key)
        if text is None:
            continue
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if math.isnan(value):
            log.warning("Ignoring the non-numeric quota %s=%r of %s", key, text, where)
            continue
        values[key] = value
    return values


class QuotaConfigHandler:
    def __init__(self, zk: AsyncZk, quotas: ClientQuotaConfigs) -> None:
        self.zk = zk
        self.quotas = quotas

    async def load_all(self) -> None:
        """Every quota entity, before the listeners open (ZkConfigManager.startup)."""
        client = self.zk.client
        entities = await self.zk.call(client.get_all_quota_entity_configs)
        for (user, client_id), config in entities.items():
            self._set_client(user, client_id, config)
        ips = await self.zk.call(client.get_all_ip_quota_configs)
        for ip, config in ips.items():
            self._set_ip(ip, config)
        log.info("Loaded the client quotas of %d entities and %d addresses",
                 len(self.quotas.client_quotas()), len(self.quotas.ip_connection_rates()))

    async def on_config_change(self, entity_type: str, entity_name: str) -> None:
        """A ConfigChangeListener handler: `users` + `alice`, `alice/clients/app` or
        `<default>/clients/<default>`; `clients` + `app`; `ips` + `10.0.0.1`."""
        client = self.zk.client
        if entity_type == zd.ConfigType.IP:
            ip = zd.desanitize(entity_name)
            self._set_ip(ip, await self.zk.call(client.get_ip_quota_config, ip))
            return
        entity = parse_quota_entity_path(entity_type, entity_name)
        if entity is None:
            return
        config = await self.zk.call(client.get_quota_entity_config, *entity)
        self._set_client(*entity, config)

    def _set_client(self, user: str | None, client_id: str | None,
                    config: Mapping[str, str]) -> None:
        entity = QuotaEntity(user, client_id)
        values = quota_values(config, CLIENT_QUOTA_KEYS, str(entity))
        if values != self.quotas.client_quotas().get(entity, {}):
            log.info("Client quotas of %s: %s", entity, values or "none")
            self.quotas.set_client(entity, values)

    def _set_ip(self, ip: str, config: Mapping[str, str]) -> None:
        rate = quota_values(config, IP_QUOTA_KEYS, f"ip {ip}").get(CONNECTION_CREATION_RATE)
        if rate != self.quotas.ip_connection_rates().get(ip):
            log.info("Connection creation rate of ip %s: %s", ip, rate)
            self.quotas.set_ip(ip, rate)
