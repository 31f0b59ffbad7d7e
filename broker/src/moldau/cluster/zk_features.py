"""/feature: the cluster's finalized features (KIP-584) in ZooKeeper mode, as Kafka 3.9 keeps
them.

The controller enables feature versioning when it is elected (IBP 2.7 or later, which is
every IBP Moldau runs): it creates /feature as `{"features":{},"version":2,"status":1}`
(version 1 below IBP 3.3-IV0, whose features also carry a min_version_level), or turns a
disabled one on. Every broker reads the znode into its finalized features and their epoch
(the znode's version), which ApiVersions v3+ reports. A ZooKeeper-mode Kafka broker
supports no feature at all (its BrokerFeatures are empty), so UpdateFeatures can only delete
a finalized feature that somebody wrote into the znode: every other update is refused per
feature (`feature_updates`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kazoo.exceptions import BadVersionError, NodeExistsError

from .zk_json import json_bytes, ordered, scala_immutable_order, scala_mutable_order
from .zk_paths import FEATURE_PATH

if TYPE_CHECKING:
    from .zk_session import ZkSession

DISABLED, ENABLED = 0, 1
V1, V2 = 1, 2  # V2 (IBP 3.3-IV0 and later) drops min_version_level
MAX_KEY, MIN_KEY = "max_version_level", "min_version_level"
UNKNOWN_EPOCH = -1  # ApiVersions' finalized_features_epoch before /feature is read


@dataclass(frozen=True)
class FeatureZNode:
    version: int
    status: int
    features: dict[str, int] = field(default_factory=dict)  # name -> max version level

    def encode(self) -> bytes:
        """FeatureZNode.encode: a Scala mutable.Map of three keys (8 slots), each feature a
        two-entry Map (max before min) in an immutable Map of features."""
        levels = {name: ({MAX_KEY: v, MIN_KEY: v} if self.version == V1 else {MAX_KEY: v})
                  for name, v in self.features.items()}
        obj = {"version": self.version, "status": self.status,
               "features": ordered(levels, scala_immutable_order(tuple(levels)))}
        return json_bytes(ordered(obj, scala_mutable_order(tuple(obj), 8)))

    @classmethod
    def decode(cls, data: bytes) -> FeatureZNode:
        """FeatureZNode.decode, with its messages for what it refuses (ValueError)."""
        text = data.decode("utf-8", "replace")
        try:
            obj = json.loads(data)
        except ValueError as exc:
            raise ValueError(f"Failed to parse feature information: {text}") from exc
        version = obj.get("version") if isinstance(obj, dict) else None
        if not isinstance(version, int) or not V1 <= version <= V2:
            raise ValueError(f"Unsupported version: {version} of feature information: {text}")
        status = obj.get("status")
        if status is None:
            raise ValueError(f"Status can not be absent in feature information: {text}")
        if status not in (DISABLED, ENABLED):
            raise ValueError(f"Malformed status: Some({status}) found in feature "
                             f"information: {text}")
        raw = obj.get("features")
        if not isinstance(raw, dict):
            raise ValueError(f"Features map can not be absent in: {text}")
        features: dict[str, int] = {}
        for name, levels in raw.items():
            if version == V1 and MIN_KEY not in levels:
                raise ValueError(f"{MIN_KEY} absent in [{levels}]")
            if MAX_KEY not in levels:
                raise ValueError(f"{MAX_KEY} absent in [{levels}]")
            if levels[MAX_KEY] < 1:
                raise ValueError(f"Expected maxValue >= 1, but received maxValue: "
                                 f"{levels[MAX_KEY]}")
            features[name] = int(levels[MAX_KEY])
        return cls(version, status, features)


def znode_version(ibp_at_least_3_3: bool) -> int:
    """The format of /feature an IBP writes (the caller knows the IBP; cluster/ does not)."""
    return V2 if ibp_at_least_3_3 else V1


def enable_feature_versioning(self: ZkSession, version: int) -> int:
    """KafkaController.enableFeatureVersioning, at election: create /feature enabled and
    empty in format `version`, or enable a disabled one (keeping an enabled one's
    features). Returns the znode's version: the finalized features' epoch."""
    found = self.get(FEATURE_PATH)
    if found is None:
        node = FeatureZNode(version, ENABLED, {})
        try:
            self._call(self._client().create, FEATURE_PATH, node.encode())
            return 0
        except NodeExistsError:  # another controller just did; read what it wrote
            found = self.get(FEATURE_PATH)
            assert found is not None
    data, stat = found
    existing = FeatureZNode.decode(data)
    # a disabled znode's features are dropped, as Kafka's (which warns about them)
    features = existing.features if existing.status == ENABLED else {}
    wanted = FeatureZNode(version, ENABLED, features)
    if wanted == existing:
        return stat.version
    return self._call(self._client().set, FEATURE_PATH, wanted.encode(), stat.version).version


def write_features(self: ZkSession, node: FeatureZNode, expected_version: int) -> int | None:
    """Replace /feature's content if it is still at expected_version: its new version, or
    None when it moved under us."""
    try:
        return self._call(self._client().set, FEATURE_PATH, node.encode(),
                          expected_version).version
    except BadVersionError:
        return None


def get_features(self: ZkSession) -> tuple[FeatureZNode, int] | None:
    """/feature and its version, or None when no controller has created it yet."""
    found = self.get(FEATURE_PATH)
    return (FeatureZNode.decode(found[0]), found[1].version) if found else None
