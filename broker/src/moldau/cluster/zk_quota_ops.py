"""KafkaZkClient's operations on client quota entities: reads of `/config/users/<u>`,
`/config/users/<u>/clients/<c>`, `/config/clients/<c>` and `/config/ips/<ip>`, and their
compare-and-set writes with Kafka's change notifications.

Names are given and returned desanitized, `<default>` (zk_data.DEFAULT_ENTITY) naming the
default user, client id or address in any position; in ZooKeeper they are Kafka's
Sanitizer form (URL-encoding). A user's znode also holds its SCRAM credentials, so every
write goes through zk_user_ops.update_config_map, the one writer of config maps that
several writers share: a quota write never erases a credential, nor the reverse. An
entity whose map becomes empty loses its znode unless it has child entities (a user with
client-id quotas); the change notification is written either way.

Each function is a method of KafkaZkClient, which binds it in its class body (zk_client.py);
it takes the ZkSession it runs on and uses its generic operations (zk_session.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_user_ops import update_config_map

if TYPE_CHECKING:
    from moldau.cluster.zk_session import ZkSession

# ZooKeeper's child type of a user's client-id entities (`users/<u>/clients/<c>`)
CLIENTS = zd.ConfigType.CLIENT

# (user, client id): either may be None (the entity has no such part), not both
QuotaEntityName = tuple[str | None, str | None]
ConfigChange = Callable[[dict[str, str]], dict[str, str]]


def znode_name(name: str) -> str:
    """An entity name as its znode is named: Kafka's Sanitizer form, except `<default>`."""
    return name if name == zd.DEFAULT_ENTITY else zd.sanitize(name)


def quota_entity_path(user: str | None, client_id: str | None) -> str:
    """The sanitized path below /config of a user, a client id or a user's client id
    (`users/alice`, `users/alice/clients/app-1`, `clients/<default>`)."""
    if user is not None and client_id is not None:
        return f"{zd.ConfigType.USER}/{znode_name(user)}/{CLIENTS}/{znode_name(client_id)}"
    if user is not None:
        return f"{zd.ConfigType.USER}/{znode_name(user)}"
    if client_id is not None:
        return f"{zd.ConfigType.CLIENT}/{znode_name(client_id)}"
    raise ValueError("a quota entity names a user, a client id or both")


def ip_entity_path(ip: str) -> str:
    return f"{zd.ConfigType.IP}/{znode_name(ip)}"


def parse_quota_entity_path(entity_type: str, entity_name: str) -> QuotaEntityName | None:
    """The entity of a change notification (`users` + `alice/clients/app`), desanitized;
    None when it names no user or client-id entity."""
    parts = entity_name.split("/")
    if entity_type == zd.ConfigType.USER and len(parts) == 1:
        return zd.desanitize(parts[0]), None
    if entity_type == zd.ConfigType.USER and len(parts) == 3 and parts[1] == CLIENTS:
        return zd.desanitize(parts[0]), zd.desanitize(parts[2])
    if entity_type == zd.ConfigType.CLIENT and len(parts) == 1:
        return None, zd.desanitize(parts[0])
    return None


def get_quota_entity_config(self: ZkSession, user: str | None,
                            client_id: str | None) -> dict[str, str]:
    """The whole config map of one entity ({} when it has none): a user's credentials
    included, which the caller leaves out."""
    found = self.get(f"{zd.CONFIG_PATH}/{quota_entity_path(user, client_id)}")
    return zd.decode_entity_config(found[0]) if found else {}


def get_ip_quota_config(self: ZkSession, ip: str) -> dict[str, str]:
    found = self.get(f"{zd.CONFIG_PATH}/{ip_entity_path(ip)}")
    return zd.decode_entity_config(found[0]) if found else {}


def get_all_quota_entity_configs(self: ZkSession) -> dict[QuotaEntityName, dict[str, str]]:
    """Every user, user's client id and client id znode's config map (empty ones too),
    by desanitized entity; AdminZkClient.fetchAllEntityConfigs and
    fetchAllChildEntityConfigs in one pipelined read."""
    entities: list[QuotaEntityName] = []
    users = self.get_children(zd.config_entity_type_path(zd.ConfigType.USER))
    for user in users:
        entities.append((zd.desanitize(user), None))
        children = self.get_children(
            f"{zd.config_entity_path(zd.ConfigType.USER, user)}/{CLIENTS}")
        entities += [(zd.desanitize(user), zd.desanitize(c)) for c in children]
    clients = self.get_children(zd.config_entity_type_path(zd.ConfigType.CLIENT))
    entities += [(None, zd.desanitize(c)) for c in clients]
    found = self._get_many([f"{zd.CONFIG_PATH}/{quota_entity_path(*e)}" for e in entities])
    return {entity: zd.decode_entity_config(item[0]) if item else {}
            for entity, item in zip(entities, found, strict=True)}


def get_all_ip_quota_configs(self: ZkSession) -> dict[str, dict[str, str]]:
    """Every `/config/ips` znode's config map, by desanitized address (or `<default>`)."""
    names = self.get_children(zd.config_entity_type_path(zd.ConfigType.IP))
    found = self._get_many([zd.config_entity_path(zd.ConfigType.IP, n) for n in names])
    return {zd.desanitize(name): zd.decode_entity_config(item[0]) if item else {}
            for name, item in zip(names, found, strict=True)}


def update_quota_entity_config(self: ZkSession, user: str | None, client_id: str | None,
                               change: ConfigChange) -> str:
    """Apply `change` to one entity's config map (compare-and-set, as update_user_config:
    `change` may be called more than once and an exception from it writes nothing), drop
    the znode if the map becomes empty and it has no children, then write the change
    notification (`users/alice/clients/app-1`); returns its sequence name."""
    return update_config_map(self, quota_entity_path(user, client_id), change,
                             drop_if_empty=True)


def update_ip_quota_config(self: ZkSession, ip: str, change: ConfigChange) -> str:
    """As update_quota_entity_config, for `/config/ips/<ip>`."""
    return update_config_map(self, ip_entity_path(ip), change, drop_if_empty=True)
