"""UpdateFeatures (API key 57) as a ZooKeeper-mode Kafka 3.9 broker answers it: ALTER on the
cluster, then only the active controller takes it (NOT_CONTROLLER elsewhere); each update
is checked against /feature (cluster/feature_updates.py) and the refused ones are listed
with INVALID_REQUEST and Kafka's reason. The rare valid update (deleting a feature finalized
by hand) is written to /feature with a conditional set, unless validate_only (v1) asks for
the checks alone."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.cluster import feature_updates
from moldau.cluster.zk_features import ENABLED, FeatureZNode
from moldau.cluster.zk_json import scala_mutable_order
from moldau.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    NotControllerError,
)
from moldau.protocol.generated.update_features_response import UpdateFeaturesResponse
from moldau.security.acls import AclOperation, ResourceType

from .cluster_info import CLUSTER_NAME
from .services import active_controller

if TYPE_CHECKING:
    from collections.abc import Callable

    from moldau.cluster.controller import Controller
    from moldau.cluster.zk_async import AsyncZk
    from moldau.protocol.generated.update_features_request import UpdateFeaturesRequest

    from ..requests import RequestContext

log = logging.getLogger("kafka.controller.KafkaController")
R = UpdateFeaturesResponse


class UpdateFeaturesHandler:
    MIN_VERSION, MAX_VERSION = 0, 1

    def __init__(self, controller: Callable[[], Controller | None], zk: AsyncZk,
                 znode_version: int) -> None:
        self.controller = controller
        self.zk = zk
        self.znode_version = znode_version  # /feature's format for this IBP

    async def __call__(self, ctx: RequestContext,
                       request: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
        if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            return R(error_code=ClusterAuthorizationFailedError.code,
                     error_message=ClusterAuthorizationFailedError.default_message)
        if active_controller(self.controller) is None:
            return R(error_code=NotControllerError.code,
                     error_message=NotControllerError.default_message)
        version = ctx.api_version
        updates = [feature_updates.FeatureUpdate(
            u.feature, u.max_version_level,
            feature_updates.upgrade_type(version, u.allow_downgrade, u.upgrade_type))
            for u in request.feature_updates]
        zk = self.zk
        found = await zk.call(zk.client.get_features)
        existing = found[0].features if found and found[0].status == ENABLED else {}
        target, refused = feature_updates.plan(updates, existing)
        if target != existing and not (version >= 1 and request.validate_only):
            node = FeatureZNode(self.znode_version, ENABLED, target)
            written = found is not None and await zk.call(zk.client.write_features, node,
                                                          found[1]) is not None
            if not written:  # /feature moved (or vanished) since we read it
                for update in updates:
                    refused.setdefault(update.feature, "Could not apply finalized feature "
                                       "updates because /feature changed concurrently.")
            else:
                log.info("Updated the finalized features to %s", target)
        order = scala_mutable_order(tuple(refused), 16)  # Kafka's mutable.Map of errors
        return R(error_code=0, error_message=None, results=[
            R.UpdatableFeatureResult(feature=name, error_code=InvalidRequestError.code,
                                     error_message=refused[name]) for name in order])
