"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), served by the
controller (kafka-reassign-partitions.sh, AdminClient.alterPartitionReassignments).
Another broker answers NOT_CONTROLLER and the client asks the controller; the moves
themselves run in `moldau.cluster.reassignment`."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.cluster import host_domains
from moldau.errors import ClusterAuthorizationFailedError, KafkaError, NotControllerError
from moldau.protocol.generated.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
)
from moldau.protocol.generated.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)
from moldau.security.acls import AclOperation, ResourceType

from .cluster_info import CLUSTER_NAME
from .services import active_controller

if TYPE_CHECKING:
    from collections.abc import Callable

    from moldau.cluster.controller import Controller
    from moldau.protocol.generated.alter_partition_reassignments_request import (
        AlterPartitionReassignmentsRequest,
    )
    from moldau.protocol.generated.list_partition_reassignments_request import (
        ListPartitionReassignmentsRequest,
    )

    from ..requests import RequestContext

Alter_ = AlterPartitionReassignmentsResponse
List_ = ListPartitionReassignmentsResponse

log = logging.getLogger("kafka.controller")


class _ReassignmentHandler:
    def __init__(self, controller: Callable[[], Controller | None]) -> None:
        self.controller = controller

    def serving(self, ctx: RequestContext, operation: AclOperation) -> Controller | KafkaError:
        """The active controller, or why this broker cannot serve the request. A denial
        raises, as Kafka's authorizeClusterOperation: the request's generic error response
        (error_responses.py) then answers it, every partition of it included."""
        if not ctx.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME):
            raise ClusterAuthorizationFailedError("Cluster authorization failed.")
        controller = active_controller(self.controller)
        if controller is None:
            return NotControllerError("This is not the correct controller for this cluster.")
        return controller


class AlterPartitionReassignmentsHandler(_ReassignmentHandler):
    MIN_VERSION, MAX_VERSION = 0, 0

    async def __call__(self, ctx: RequestContext,
                       request: AlterPartitionReassignmentsRequest) -> Alter_:
        controller = self.serving(ctx, AclOperation.ALTER)
        if isinstance(controller, KafkaError):
            return Alter_(error_code=controller.code, error_message=str(controller))
        wanted = {(t.name, p.partition_index): (None if p.replicas is None else list(p.replicas))
                  for t in request.topics for p in t.partitions}
        try:
            results = await controller.alter_reassignments(wanted)
        except NotControllerError as exc:  # the controller moved while we asked
            return Alter_(error_code=exc.code, error_message=str(exc))
        # Accepted as Kafka accepts it; two replicas on one server get a warning.
        hosts = host_domains.hosts_of(controller.live_brokers.values())
        for (topic, index), replicas in wanted.items():
            if replicas is not None and results.get((topic, index)) is None:
                host_domains.warn_explicit(log, topic, {index: replicas}, hosts)
        by_topic: dict[str, list[Alter_.ReassignablePartitionResponse]] = {}
        for (topic, index), error in results.items():
            by_topic.setdefault(topic, []).append(Alter_.ReassignablePartitionResponse(
                partition_index=index, error_code=error.code if error else 0,
                # an error without a message goes as null (the client shows its default)
                error_message=(str(error) or None) if error else None))
        return Alter_(error_message=None, responses=[
            Alter_.ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])


class ListPartitionReassignmentsHandler(_ReassignmentHandler):
    MIN_VERSION, MAX_VERSION = 0, 0

    def __call__(self, ctx: RequestContext,
                 request: ListPartitionReassignmentsRequest) -> List_:
        controller = self.serving(ctx, AclOperation.DESCRIBE)
        if isinstance(controller, KafkaError):
            return List_(error_code=controller.code, error_message=str(controller))
        wanted = (None if request.topics is None else
                  [(t.name, i) for t in request.topics for i in t.partition_indexes])
        by_topic: dict[str, list[List_.OngoingPartitionReassignment]] = {}
        for (topic, index), move in sorted(controller.reassigner.ongoing(wanted)
                                           .items()):
            by_topic.setdefault(topic, []).append(List_.OngoingPartitionReassignment(
                partition_index=index, replicas=move.replicas, adding_replicas=move.adding,
                removing_replicas=move.removing))
        return List_(error_message=None, topics=[
            List_.OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])
