"""KafkaZkClient's operations on configs: the overrides of /config/<type>/<name> and the
/config/changes notifications that make every broker apply them (AdminZkClient and
ZkNodeChangeNotificationListener).

Each function is a method of KafkaZkClient, which binds it in its class body (zk_client.py);
it takes the ZkSession it runs on and uses its generic operations (zk_session.py).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kazoo.exceptions import NoNodeError

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_data import ConfigChangeNotification
from moldau.cluster.zk_session import WatchHandle

if TYPE_CHECKING:
    from moldau.cluster.zk_session import ZkSession

# The logger of the ZooKeeper client, whichever of its modules logs.
log = logging.getLogger("moldau.cluster.zk_client")

# ZkNodeChangeNotificationListener's changeExpirationMs: notifications older than this go.
CONFIG_CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def get_entity_config(self: ZkSession, entity_type: str, name: str) -> dict[str, str]:
    """The overrides of /config/<type>/<name> ({} when there are none)."""
    found = self.get(zd.config_entity_path(entity_type, name))
    return zd.decode_entity_config(found[0]) if found else {}


def set_entity_config(self: ZkSession, entity_type: str, name: str,
                      config: Mapping[str, str]) -> str:
    """AdminZkClient.changeConfigs: write the whole override set (an empty dict removes
    every override), then a change notification so every broker applies it. Returns the
    notification's sequence name."""
    self._set_or_create(zd.config_entity_path(entity_type, name),
                        zd.encode_entity_config(config))
    return create_config_change_notification(self, f"{entity_type}/{name}")


def create_config_change_notification(self: ZkSession, entity_path: str) -> str:
    zk = self._client()
    data = zd.encode_config_change(entity_path)
    while True:
        try:
            created = self._call(zk.create, zd.CONFIG_CHANGE_CREATE_PATH, data, sequence=True)
            return created.rsplit("/", 1)[1]
        except NoNodeError:
            self.ensure_path(zd.CONFIG_CHANGES_PATH)


def delete_entity_config(self: ZkSession, entity_type: str, name: str) -> None:
    """Remove /config/<type>/<name> (topic deletion does this; for overrides of live
    entities Kafka writes an empty config with set_entity_config instead)."""
    self.delete_recursive(zd.config_entity_path(entity_type, name))


def get_all_entity_names(self: ZkSession, entity_type: str) -> list[str]:
    return self.get_children(zd.config_entity_type_path(entity_type))


def read_change_notifications(
    self: ZkSession,
    after: str | None = None,
    purge: bool = True,
    max_age_ms: int = CONFIG_CHANGE_EXPIRATION_MS,
) -> list[ConfigChangeNotification]:
    """The config change notifications after sequence name `after` (all when None), in
    order. Like ZkNodeChangeNotificationListener it also deletes notifications older than
    15 minutes (ZooKeeper ctime), unless purge is False."""
    names = [c for c in self.get_children(zd.CONFIG_CHANGES_PATH)
             if c.startswith(zd.CONFIG_CHANGE_PREFIX)]
    names.sort(key=zd.sequence_number)
    found = self._get_many([zd.config_change_path(n) for n in names])
    out: list[ConfigChangeNotification] = []
    expired: list[str] = []
    now_ms = time.time() * 1000
    for name, item in zip(names, found, strict=True):
        if item is None:
            continue
        data, stat = item
        if after is None or zd.sequence_number(name) > zd.sequence_number(after):
            try:
                entity_type, entity_name = zd.decode_config_change(data)
            except (ValueError, KeyError):
                log.warning("ignoring malformed config change notification %s: %r",
                            name, data)
            else:
                out.append(ConfigChangeNotification(name, entity_type, entity_name))
        if purge and now_ms - stat.ctime > max_age_ms:
            expired.append(name)
    for name in expired:
        with contextlib.suppress(NoNodeError):  # another broker purged it first
            self._call(self._client().delete, zd.config_change_path(name))
    return out


def watch_config_changes(self: ZkSession, fn: Callable[[list[str]], object]) -> WatchHandle:
    """fn(children of /config/changes) now and on every change (kazoo's thread)."""
    return self.watch_children(zd.CONFIG_CHANGES_PATH, fn)
