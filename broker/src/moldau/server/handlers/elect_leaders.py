"""ElectLeaders (43): preferred or unclean leader elections on request, run by the
controller (kafka-leader-election.sh, AdminClient.electLeaders). Another broker answers
NOT_CONTROLLER for every partition, and the client asks the controller."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.errors import (
    ClusterAuthorizationFailedError,
    ElectionNotNeededError,
    NotControllerError,
)
from moldau.protocol.generated.elect_leaders_response import ElectLeadersResponse
from moldau.security.acls import AclOperation, ResourceType

from .cluster_info import CLUSTER_NAME
from .services import active_controller

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from moldau.cluster.controller import Controller
    from moldau.errors import KafkaError
    from moldau.protocol.generated.elect_leaders_request import ElectLeadersRequest

    from ..requests import RequestContext

PREFERRED, UNCLEAN = 0, 1
Result_ = ElectLeadersResponse.ReplicaElectionResult
Partition_ = ElectLeadersResponse.PartitionResult


class ElectLeadersHandler:
    MIN_VERSION, MAX_VERSION = 0, 2

    def __init__(self, controller: Callable[[], Controller | None]) -> None:
        self.controller = controller

    async def __call__(self, ctx: RequestContext,
                       request: ElectLeadersRequest) -> ElectLeadersResponse:
        version = ctx.api_version
        wanted = (None if request.topic_partitions is None else
                  [(t.topic, p) for t in request.topic_partitions for p in t.partitions])
        if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
            return self._answer(version, wanted or [], {}, ClusterAuthorizationFailedError.code)
        controller = active_controller(self.controller)
        if controller is None:
            error = NotControllerError("this broker is not the controller")
            return self._answer(version, wanted or [], dict.fromkeys(wanted or [], error), 0)
        election = request.election_type if version >= 1 else PREFERRED
        results = await controller.elect_leaders(wanted, preferred=election == PREFERRED)
        if wanted is None:
            # as Kafka: an election of every partition answers only for the partitions
            # that had one or failed, not for those whose leader was already right
            results = {tp: error for tp, error in results.items()
                       if error is None or error.code != ElectionNotNeededError.code}
        return self._answer(version, list(results), results, 0)

    @staticmethod
    def _answer(version: int, partitions: list[tuple[str, int]],
                results: Mapping[tuple[str, int], KafkaError | None],
                code: int) -> ElectLeadersResponse:
        by_topic: dict[str, list[Partition_]] = {}
        for topic, index in partitions:
            error = results.get((topic, index))
            by_topic.setdefault(topic, []).append(Partition_(
                partition_id=index,
                error_code=error.code if error is not None else code,
                error_message=str(error) if error is not None else None))
        response = ElectLeadersResponse(replica_election_results=[
            Result_(topic=t, partition_result=ps) for t, ps in by_topic.items()])
        if version >= 1:
            response.error_code = code
        return response
