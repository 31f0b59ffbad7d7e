"""The controller's side of what Kafka's brokers ask it: AlterPartition (a leader's ISR
change, sent by brokers at IBP 2.7 or later) and AllocateProducerIds (a block of producer
ids, IBP 3.0 or later). A broker that is not the active controller answers NOT_CONTROLLER,
and the asking broker looks for the controller again. Both need CLUSTER_ACTION on the
cluster; the rules are in cluster/broker_requests.py."""

from __future__ import annotations

from typing import TYPE_CHECKING
from uuid import UUID

from moldau.cluster.broker_requests import IsrChange
from moldau.cluster.controller_state import PartitionDecision
from moldau.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    NotControllerError,
    UnknownTopicIdError,
)
from moldau.protocol.generated.allocate_producer_ids_response import AllocateProducerIdsResponse
from moldau.protocol.generated.alter_partition_response import AlterPartitionResponse
from moldau.security.acls import AclOperation, ResourceType

from .cluster_info import CLUSTER_NAME
from .services import active_controller

if TYPE_CHECKING:
    from collections.abc import Callable

    from moldau.cluster.controller import Controller
    from moldau.protocol.generated.allocate_producer_ids_request import (
        AllocateProducerIdsRequest,
    )
    from moldau.protocol.generated.alter_partition_request import AlterPartitionRequest

    from ..requests import RequestContext

R = AlterPartitionResponse


class AlterPartitionHandler:
    MIN_VERSION, MAX_VERSION = 0, 3

    def __init__(self, controller: Callable[[], Controller | None]) -> None:
        self.controller = controller

    async def __call__(self, ctx: RequestContext,
                       request: AlterPartitionRequest) -> AlterPartitionResponse:
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return R(error_code=ClusterAuthorizationFailedError.code)
        controller = active_controller(self.controller)
        if controller is None:
            return R(error_code=NotControllerError.code)
        version = ctx.api_version
        by_id = version >= 2
        names = {t.topic_id: name for name, t in controller.topics.items()}
        changes: list[IsrChange] = []
        unknown: dict[UUID, list[int]] = {}  # topic ids the controller does not know
        for topic in request.topics:
            name = names.get(topic.topic_id) if by_id else topic.topic_name
            if name is None:
                unknown.setdefault(topic.topic_id, []).extend(
                    p.partition_index for p in topic.partitions)
                continue
            for p in topic.partitions:
                changes.append(_change(name, p, version))
        try:
            results = await controller.alter_partition(request.broker_id, request.broker_epoch,
                                                       changes, version)
        except KafkaError as exc:
            return R(error_code=exc.code)
        return self._response(by_id, changes, results, unknown, controller)

    @staticmethod
    def _response(by_id: bool, changes: list[IsrChange],
                  results: dict[tuple[str, int], PartitionDecision | KafkaError],
                  unknown: dict[UUID, list[int]], controller: Controller
                  ) -> AlterPartitionResponse:
        topics: dict[str, list[AlterPartitionResponse.PartitionData]] = {}
        for change in changes:
            result = results[(change.topic, change.partition)]
            if isinstance(result, KafkaError):
                data = R.PartitionData(partition_index=change.partition, error_code=result.code)
            else:
                data = R.PartitionData(
                    partition_index=change.partition, leader_id=result.leader,
                    leader_epoch=result.leader_epoch, isr=list(result.isr),
                    leader_recovery_state=result.leader_recovery_state,
                    partition_epoch=result.zk_version)
            topics.setdefault(change.topic, []).append(data)
        answered = []
        for name, partitions in topics.items():
            topic = controller.topics.get(name)
            topic_id = topic.topic_id if topic is not None and by_id else None
            answered.append(R.TopicData(topic_name=name, partitions=partitions)
                            if topic_id is None else
                            R.TopicData(topic_id=topic_id, partitions=partitions))
        for topic_id, indexes in unknown.items():
            answered.append(R.TopicData(topic_id=topic_id, partitions=[
                R.PartitionData(partition_index=i, error_code=UnknownTopicIdError.code)
                for i in indexes]))
        return R(error_code=0, topics=answered)


def _change(name: str, p: AlterPartitionRequest.PartitionData, version: int) -> IsrChange:
    if version >= 3:  # KIP-903: the members with the broker epochs the leader knows
        isr = [m.broker_id for m in p.new_isr_with_epochs]
        epochs = {m.broker_id: m.broker_epoch for m in p.new_isr_with_epochs}
    else:
        isr, epochs = list(p.new_isr), {}
    return IsrChange(name, p.partition_index, p.leader_epoch, isr, p.partition_epoch,
                     p.leader_recovery_state, epochs)


class AllocateProducerIdsHandler:
    MIN_VERSION, MAX_VERSION = 0, 0

    def __init__(self, controller: Callable[[], Controller | None]) -> None:
        self.controller = controller

    async def __call__(self, ctx: RequestContext,
                       request: AllocateProducerIdsRequest) -> AllocateProducerIdsResponse:
        A = AllocateProducerIdsResponse
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return A(error_code=ClusterAuthorizationFailedError.code)
        controller = active_controller(self.controller)
        if controller is None:
            return A(error_code=NotControllerError.code)
        try:
            first, count = await controller.allocate_producer_ids(request.broker_id,
                                                                  request.broker_epoch)
        except KafkaError as exc:
            return A(error_code=exc.code)
        return A(error_code=0, producer_id_start=first, producer_id_len=count)
