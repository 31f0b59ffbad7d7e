"""/feature's JSON as Kafka 3.9 writes it, and the controller's checks of UpdateFeatures in
ZooKeeper mode (a broker that supports no feature)."""

from __future__ import annotations

import pytest

from moldau.cluster.feature_updates import (
    NOT_SUPPORTED,
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureUpdate,
    plan,
    upgrade_type,
)
from moldau.cluster.zk_features import DISABLED, ENABLED, V1, V2, FeatureZNode


def test_the_znode_reads_as_kafka_writes_it() -> None:
    assert FeatureZNode(V2, ENABLED, {}).encode() == b'{"features":{},"version":2,"status":1}'
    assert FeatureZNode(V1, ENABLED, {"f": 3}).encode() == (
        b'{"features":{"f":{"max_version_level":3,"min_version_level":3}},'
        b'"version":1,"status":1}')
    for node in (FeatureZNode(V2, DISABLED, {"a": 1, "b": 2}), FeatureZNode(V1, ENABLED, {})):
        assert FeatureZNode.decode(node.encode()) == node


@pytest.mark.parametrize("data,message", [
    (b"{", "Failed to parse feature information: {"),
    (b'{"version":3,"status":1,"features":{}}', "Unsupported version: 3"),
    (b'{"version":2,"features":{}}', "Status can not be absent"),
    (b'{"version":2,"status":7,"features":{}}', "Malformed status: Some(7)"),
    (b'{"version":2,"status":1}', "Features map can not be absent"),
    (b'{"version":1,"status":1,"features":{"f":{"max_version_level":1}}}',
     "min_version_level absent"),
    (b'{"version":2,"status":1,"features":{"f":{"max_version_level":0}}}',
     "Expected maxValue >= 1, but received maxValue: 0"),
])
def test_a_malformed_znode_is_refused_with_kafkas_reason(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        FeatureZNode.decode(data)


def test_every_upgrade_is_unsupported_and_a_missing_feature_cannot_be_deleted() -> None:
    target, refused = plan([FeatureUpdate("metadata.version", 21, UPGRADE),
                            FeatureUpdate("group.version", 0, SAFE_DOWNGRADE),
                            FeatureUpdate("kraft.version", 0, UNSAFE_DOWNGRADE)], {})
    assert target == {}
    assert refused == {"metadata.version": NOT_SUPPORTED,
                       "group.version": "Can not delete non-existing finalized feature.",
                       "kraft.version": "Can not delete non-existing finalized feature."}


def test_a_feature_finalized_by_hand_can_only_be_deleted() -> None:
    existing = {"f": 2}
    assert plan([FeatureUpdate("f", 0, SAFE_DOWNGRADE)], existing) == ({}, {})
    cases = {
        FeatureUpdate("f", 2, UPGRADE):
            "Can not upgrade a finalized feature from existing maxVersionLevel:2 to the "
            "same value.",
        FeatureUpdate("f", 2, SAFE_DOWNGRADE):
            "Can not downgrade a finalized feature from existing maxVersionLevel:2 to the "
            "same value.",
        FeatureUpdate("f", 1, UPGRADE):
            "Can not downgrade finalized feature from existing maxVersionLevel:2 to provided "
            "maxVersionLevel:1 without setting the downgradeType to SAFE in the request.",
        FeatureUpdate("f", 3, SAFE_DOWNGRADE):
            "When the downgradeType is set to SAFE in the request, the provided "
            "maxVersionLevel:3 can not be greater than existing maxVersionLevel:2.",
        FeatureUpdate("f", 3, UPGRADE): NOT_SUPPORTED,
        FeatureUpdate("f", 1, SAFE_DOWNGRADE): NOT_SUPPORTED,
        FeatureUpdate("f", 0, UPGRADE):
            "Can not provide maxVersionLevel: 0 less than 1 without setting the SAFE "
            "downgradeType in the request.",
        FeatureUpdate("", 1, UPGRADE): "Feature name can not be empty.",
        FeatureUpdate("f", 1, 0): "Received unknown upgrade type.",
    }
    for update, why in cases.items():
        assert plan([update], existing) == (existing, {update.feature: why}), update


def test_v0_says_allow_downgrade_and_v1_names_the_type() -> None:
    assert upgrade_type(0, True, UPGRADE) == SAFE_DOWNGRADE
    assert upgrade_type(0, False, UNSAFE_DOWNGRADE) == UPGRADE
    assert upgrade_type(1, True, UNSAFE_DOWNGRADE) == UNSAFE_DOWNGRADE
