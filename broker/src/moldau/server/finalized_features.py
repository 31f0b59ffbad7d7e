"""The broker's copy of the cluster's finalized features: /feature read by a watch, as
Kafka's FinalizedFeatureChangeListener keeps ZkMetadataCache's features. ApiVersions v3+
reports them with their epoch (the znode's version); -1 until the znode is read, and again
while it is absent or disabled."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.cluster.zk_features import ENABLED, UNKNOWN_EPOCH, FeatureZNode
from moldau.cluster.zk_paths import FEATURE_PATH

if TYPE_CHECKING:
    from kazoo.protocol.states import ZnodeStat

    from moldau.cluster.zk_async import AsyncZk
    from moldau.cluster.zk_client import WatchHandle

log = logging.getLogger("kafka.server.FinalizedFeatureChangeListener")


class FinalizedFeatures:
    def __init__(self) -> None:
        self.epoch = UNKNOWN_EPOCH
        self.features: dict[str, int] = {}  # name -> max version level
        self._watch: WatchHandle | None = None

    async def start(self, zk: AsyncZk) -> None:
        self._watch = await zk.watch_data(FEATURE_PATH, self.on_change)

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def on_change(self, data: bytes | None, stat: ZnodeStat | None) -> None:
        if data is None or stat is None:
            self._clear("absent")
            return
        try:
            node = FeatureZNode.decode(data)
        except ValueError as exc:  # Kafka fails its listener; the last good copy stays here
            log.error("Failed to process the feature ZK node: %s", exc)
            return
        if node.status != ENABLED:
            self._clear("disabled")
            return
        if stat.version < self.epoch:
            log.error("FinalizedFeatureCache update failed due to invalid epoch %d (the "
                      "existing one is %d)", stat.version, self.epoch)
            return
        self.epoch, self.features = stat.version, dict(node.features)
        log.info("Updated cache to finalized features %s at epoch %d", self.features, self.epoch)

    def _clear(self, why: str) -> None:
        if self.epoch != UNKNOWN_EPOCH:
            log.info("Cleared the finalized features: the feature ZK node is %s", why)
        self.epoch, self.features = UNKNOWN_EPOCH, {}
