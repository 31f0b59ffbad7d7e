"""ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69), the APIs of the new consumer
rebalance protocol (KIP-848), as Kafka 3.9 in ZooKeeper mode answers them.

Kafka 3.9 advertises v0 of both in ZooKeeper mode, but serves them only with the new group
coordinator (`group.coordinator.rebalance.protocols` containing `consumer`), which needs
KRaft. A ZooKeeper broker runs the classic coordinator, so KafkaApis answers at once with
UNSUPPORTED_VERSION, before any authorization: ConsumerGroupHeartbeat in the response's
error code (no message), ConsumerGroupDescribe in every group asked for. A Java consumer
with `group.protocol=consumer` fails with UnsupportedVersionException, as against Kafka;
the classic protocol (JoinGroup, SyncGroup, ...) is the one served (groups.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.errors import UnsupportedVersionError
from moldau.protocol.generated.consumer_group_describe_response import (
    ConsumerGroupDescribeResponse,
)
from moldau.protocol.generated.consumer_group_heartbeat_response import (
    ConsumerGroupHeartbeatResponse,
)

if TYPE_CHECKING:
    from moldau.protocol.generated.consumer_group_describe_request import (
        ConsumerGroupDescribeRequest,
    )
    from moldau.protocol.generated.consumer_group_heartbeat_request import (
        ConsumerGroupHeartbeatRequest,
    )

    from ..requests import RequestContext


class ConsumerGroupHeartbeatHandler:
    MIN_VERSION, MAX_VERSION = 0, 0

    def __call__(self, ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
                 ) -> ConsumerGroupHeartbeatResponse:
        return ConsumerGroupHeartbeatResponse(error_code=UnsupportedVersionError.code)


class ConsumerGroupDescribeHandler:
    MIN_VERSION, MAX_VERSION = 0, 0

    def __call__(self, ctx: RequestContext, request: ConsumerGroupDescribeRequest
                 ) -> ConsumerGroupDescribeResponse:
        return ConsumerGroupDescribeResponse(groups=[
            ConsumerGroupDescribeResponse.DescribedGroup(
                group_id=group_id, error_code=UnsupportedVersionError.code)
            for group_id in request.group_ids])
