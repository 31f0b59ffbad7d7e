"""KafkaZkClient's operations on user configs: the one owner of writes to
`/config/users/<sanitized user>`.

A user's `config` map holds its SCRAM credentials (one key per mechanism) and its quotas
(producer_byte_rate, ...), written by different requests and tools. Every write is a
read-modify-write with a compare-and-set on the znode version, so two writers of
different keys of the same user never erase each other's (Kafka itself rewrites the whole
map without a version check; the map it writes is the same).

Each function is a method of KafkaZkClient, which binds it in its class body (zk_client.py);
it takes the ZkSession it runs on and uses its generic operations (zk_session.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_config_ops import create_config_change_notification

if TYPE_CHECKING:
    from moldau.cluster.zk_session import ZkSession


def _user_entity_name(user: str) -> str:
    """The znode name of a user: Kafka's Sanitizer form, except the default user entity
    `<default>` (ConfigEntityName.DEFAULT), which Kafka writes as it is."""
    return user if user == zd.DEFAULT_ENTITY else zd.sanitize(user)


def get_user_config(self: ZkSession, user: str) -> dict[str, str]:
    """The config map of a user ({} when it has none); `<default>` is the default user."""
    found = self.get(zd.config_entity_path(zd.ConfigType.USER, _user_entity_name(user)))
    return zd.decode_entity_config(found[0]) if found else {}


def get_all_user_configs(self: ZkSession) -> dict[str, dict[str, str]]:
    """Every user znode's config map, by desanitized user name (`<default>` included)."""
    names = self.get_children(zd.config_entity_type_path(zd.ConfigType.USER))
    found = self._get_many([zd.config_entity_path(zd.ConfigType.USER, n) for n in names])
    return {zd.desanitize(name): zd.decode_entity_config(item[0]) if item else {}
            for name, item in zip(names, found, strict=True)}


def update_user_config(self: ZkSession, user: str,
                       change: Callable[[dict[str, str]], dict[str, str]]) -> str:
    """Apply `change` to the user's config map and write the result back, then the change
    notification `users/<sanitized user>` every broker applies; returns the notification's
    sequence name.

    `change` gets a copy of the current map (empty when the znode is missing) and returns
    the new one. The write succeeds only if nobody wrote the znode since it was read:
    otherwise the map is read again and `change` is called again, so it must depend on
    nothing but the map it is given. An exception from `change` writes nothing."""
    entity_path = f"{zd.ConfigType.USER}/{_user_entity_name(user)}"
    return update_config_map(self, entity_path, change)


def update_config_map(self: ZkSession, entity_path: str,
                      change: Callable[[dict[str, str]], dict[str, str]],
                      drop_if_empty: bool = False) -> str:
    """The compare-and-set write of `/config/<entity_path>` behind update_user_config, for
    any config entity whose keys several writers share (a user's znode: credentials and
    quotas; zk_quota_ops writes the quota entities through it). `entity_path` is the
    sanitized path below /config (`users/alice`, `users/alice/clients/app`). With
    `drop_if_empty`, a map that becomes empty removes the znode when it has no children
    (AdminZkClient's cleanup of quota entities); the notification is written either way.
    Returns the notification's sequence name."""
    path = f"{zd.CONFIG_PATH}/{entity_path}"
    zk = self._client()
    while True:
        found = self.get(path)
        current = zd.decode_entity_config(found[0]) if found else {}
        wanted = change(dict(current))
        data = zd.encode_entity_config(wanted)
        expected = -1 if found is None else found[1].version
        if drop_if_empty and not wanted and (found is None or _dropped(self, path, expected)):
            break
        try:
            if found is None:
                self.ensure_parents(path)
                self._call(zk.create, path, data, self._acl(path))
            else:
                self._call(zk.set, path, data, version=expected)
            break
        except (BadVersionError, NodeExistsError, NoNodeError):
            if _landed(self, path, data, expected):
                break
            continue  # another writer came first (or deleted the znode): read again
    return create_config_change_notification(self, entity_path)


def _dropped(self: ZkSession, path: str, expected: int) -> bool:
    """Delete the znode of an emptied entity if nobody wrote it since it was read and it
    has no child entities; False leaves it to the caller to write the empty map (a child
    exists) or to read again (a concurrent write: BadVersion is retried by the set)."""
    try:
        self._call(self._client().delete, path, version=expected)
    except NoNodeError:
        return True
    except (NotEmptyError, BadVersionError):
        return False
    return True


def _landed(self: ZkSession, path: str, data: bytes, expected: int) -> bool:
    """Whether our own write is the one that moved the version: a write retried after a
    lost connection is refused when its first attempt got through, and then must count
    as done (its change notification still to write), not be redone."""
    found = self.get(path)
    return found is not None and found[1].version == expected + 1 and found[0] == data
