"""Config change notifications (Kafka's ZkNodeChangeNotificationListener on
/config/changes): every broker reads each new `config_change_<seq>` znode once, in order,
and hands (entity type, entity name) to its handlers, which reload that entity's config
from /config/<type>/<name>. One listener serves every entity type: topics, brokers, users,
clients and ips."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import ZooKeeperUnavailableError

log = logging.getLogger("kafka.common.ZkNodeChangeNotificationListener")

Handler = Callable[[str, str], "Awaitable[None] | None"]


class ConfigChangeListener:
    def __init__(self, zk: AsyncZk) -> None:
        self.zk = zk
        self.handlers: list[Handler] = []
        self.last_seen: str | None = None
        self._lock = asyncio.Lock()

    def add_handler(self, handler: Handler) -> None:
        self.handlers.append(handler)

    async def start(self) -> None:
        await self.zk.watch_children("/config/changes", self._on_children)

    async def _on_children(self, _children: list[str]) -> None:
        async with self._lock:  # one pass at a time, in order
            try:
                changes = await self.zk.call(self.zk.client.read_change_notifications,
                                             self.last_seen)
            except ZooKeeperUnavailableError as exc:
                # the watch fires again once the connection is back
                log.error("Could not read config change notifications: %s", exc)
                return
            for change in changes:
                self.last_seen = change.seq_name
                for handler in self.handlers:
                    try:
                        result = handler(change.entity_type, change.entity_name)
                        if inspect.isawaitable(result):
                            await result
                    except ZooKeeperUnavailableError as exc:  # an outage: no traceback
                        log.error("Could not process config change %s for %s/%s: %s",
                                  change.seq_name, change.entity_type, change.entity_name, exc)
                    except Exception:
                        log.exception("Error processing config change %s for %s/%s",
                                      change.seq_name, change.entity_type, change.entity_name)
