"""Finalized features in ZooKeeper mode (KIP-584), as a Kafka 3.9 broker keeps them: the
controller creates /feature at its election, ApiVersions v3+ reports its epoch, and
UpdateFeatures refuses every update per feature but the deletion of a feature written into
/feature by hand. One real broker process and a ZooKeeper session on its chroot."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from moldau.cluster.feature_updates import NOT_SUPPORTED
from moldau.cluster.zk_client import KafkaZkClient
from moldau.cluster.zk_features import ENABLED, V2, FeatureZNode
from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.update_features_request import UpdateFeaturesRequest
from moldau.server.handlers.update_features import UpdateFeaturesHandler

from .raw import connect, wait_until

U = UpdateFeaturesRequest
INVALID_REQUEST, NOT_CONTROLLER = 42, 41


@pytest.fixture(scope="module")
def zk(broker: BrokerProcess) -> Iterator[KafkaZkClient]:
    hosts, chroot = broker.zookeeper_connect.split("/", 1)
    client = KafkaZkClient(hosts, "/" + chroot)
    client.start()
    yield client
    client.close()


def _features(broker: BrokerProcess) -> tuple[int, dict[str, int]]:
    with connect(broker) as conn:
        answer = conn.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="moldau-tests", client_software_version="1"))
    assert answer.supported_features == []  # a ZooKeeper-mode broker supports none
    return answer.finalized_features_epoch, {
        f.name: f.max_version_level for f in answer.finalized_features}


def _update(broker: BrokerProcess, version: int, updates: list[U.FeatureUpdateKey],
            validate_only: bool = False) -> Any:
    request = U(timeout_ms=10_000, feature_updates=updates)
    if version >= 1:
        request.validate_only = validate_only
    with connect(broker) as conn:
        return conn.request(ApiKey.UPDATE_FEATURES, version, request)


def test_the_controller_enables_feature_versioning_and_updates_are_refused(
        broker: BrokerProcess, zk: KafkaZkClient) -> None:
    found = wait_until(zk.get_features)
    assert found == (FeatureZNode(V2, ENABLED, {}), 0), found
    assert zk.get("/feature")[0] == b'{"features":{},"version":2,"status":1}'
    assert _features(broker) == (0, {})
    for version in (0, 1):
        deletion = (U.FeatureUpdateKey(feature="group.version", max_version_level=0,
                                       allow_downgrade=True) if version == 0 else
                    U.FeatureUpdateKey(feature="group.version", max_version_level=0,
                                       upgrade_type=2))
        answer = _update(broker, version, [
            U.FeatureUpdateKey(feature="metadata.version", max_version_level=21), deletion])
        assert (answer.error_code, answer.error_message) == (0, None), answer
        assert {r.feature: (r.error_code, r.error_message) for r in answer.results} == {
            "metadata.version": (INVALID_REQUEST, NOT_SUPPORTED),
            "group.version": (INVALID_REQUEST,
                              "Can not delete non-existing finalized feature.")}
        empty = _update(broker, version, [])
        assert (empty.error_code, empty.results) == (0, [])
    assert zk.get_features() == (FeatureZNode(V2, ENABLED, {}), 0)  # nothing written


def test_a_feature_finalized_by_hand_is_reported_and_can_be_deleted(
        broker: BrokerProcess, zk: KafkaZkClient) -> None:
    _node, version = wait_until(zk.get_features)
    version = zk.write_features(FeatureZNode(V2, ENABLED, {"hand.made": 2}), version)
    assert version is not None
    assert wait_until(lambda: _features(broker) == (version, {"hand.made": 2}))
    delete = U.FeatureUpdateKey(feature="hand.made", max_version_level=0, upgrade_type=2)
    checked = _update(broker, 1, [delete], validate_only=True)
    assert (checked.error_code, checked.results) == (0, [])
    assert zk.get_features() == (FeatureZNode(V2, ENABLED, {"hand.made": 2}), version)
    same = _update(broker, 1, [U.FeatureUpdateKey(feature="hand.made", max_version_level=2)])
    assert [r.error_message for r in same.results] == [
        "Can not upgrade a finalized feature from existing maxVersionLevel:2 to the same "
        "value."]
    done = _update(broker, 1, [delete])
    assert (done.error_code, done.results) == (0, [])
    assert zk.get_features() == (FeatureZNode(V2, ENABLED, {}), version + 1)
    assert wait_until(lambda: _features(broker) == (version + 1, {}))


def test_only_the_active_controller_takes_updates() -> None:
    """A broker that is not the controller answers NOT_CONTROLLER with its message, before
    touching ZooKeeper (no session here: it would fail if it did)."""
    ctx = SimpleNamespace(api_version=1, authorize=lambda *_: True)
    handler = UpdateFeaturesHandler(lambda: None, zk=None, znode_version=V2)  # type: ignore[arg-type]
    answer = asyncio.run(handler(ctx, U(feature_updates=[  # type: ignore[arg-type]
        U.FeatureUpdateKey(feature="f", max_version_level=1)])))
    assert (answer.error_code, answer.error_message, answer.results) == (
        NOT_CONTROLLER, "This is not the correct controller for this cluster.", [])
