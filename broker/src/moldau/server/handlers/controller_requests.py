"""The controller's requests to a broker (LeaderAndIsr, UpdateMetadata, StopReplica) and the
broker's ControlledShutdown request to the controller.

A request from a controller older than the newest one this broker has heard from gets
STALE_CONTROLLER_EPOCH; one addressed to an earlier registration of this broker (its
broker epoch is the czxid of /brokers/ids/<id>) gets STALE_BROKER_EPOCH, as in Kafka.
All of them need CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    NotControllerError,
    StaleBrokerEpochError,
    StaleControllerEpochError,
)
from moldau.protocol.generated.controlled_shutdown_response import ControlledShutdownResponse
from moldau.protocol.generated.leader_and_isr_response import LeaderAndIsrResponse
from moldau.protocol.generated.stop_replica_response import StopReplicaResponse
from moldau.protocol.generated.update_metadata_response import UpdateMetadataResponse
from moldau.security.acls import AclOperation, ResourceType
from moldau.server.controller_channel import (
    decisions_from_leader_and_isr,
    read_stop_replica,
    read_update_metadata,
)

from .cluster_info import CLUSTER_NAME
from .services import active_controller

if TYPE_CHECKING:
    from collections.abc import Callable
    from uuid import UUID

    from moldau.cluster.controller import Controller, PartitionDecision
    from moldau.protocol.generated.controlled_shutdown_request import ControlledShutdownRequest
    from moldau.protocol.generated.leader_and_isr_request import LeaderAndIsrRequest
    from moldau.protocol.generated.stop_replica_request import StopReplicaRequest
    from moldau.protocol.generated.update_metadata_request import UpdateMetadataRequest

    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext
    from .services import BrokerState, PartitionStates

state_change_log = logging.getLogger("state.change.logger")


class _ControlRequest:
    def __init__(self, state: BrokerState, metadata: MetadataCache,
                 partition_states: PartitionStates) -> None:
        self.state = state
        self.metadata = metadata
        self.partition_states = partition_states

    def check(self, ctx: RequestContext,
              request: LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest) -> None:
        """Raise the error the whole request gets, if any."""
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            raise ClusterAuthorizationFailedError("CLUSTER_ACTION is not allowed")
        state = self.state
        if request.controller_epoch < state.controller_epoch_seen:
            state_change_log.warning(
                "Ignoring a request from controller %d with epoch %d: the latest known "
                "controller epoch is %d", request.controller_id, request.controller_epoch,
                state.controller_epoch_seen)
            raise StaleControllerEpochError(f"controller epoch {request.controller_epoch}")
        epoch = request.broker_epoch  # -1 from a version without it
        if epoch != -1 and epoch < state.broker_epoch:
            raise StaleBrokerEpochError(f"broker epoch {epoch} < {state.broker_epoch}")
        state.controller_epoch_seen = request.controller_epoch


class LeaderAndIsrHandler(_ControlRequest):
    MIN_VERSION, MAX_VERSION = 0, 7

    async def __call__(self, ctx: RequestContext,
                       request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        version = ctx.api_version
        decisions = decisions_from_leader_and_isr(request, version,
                                                  self.metadata.topic_id)
        try:
            self.check(ctx, request)
        except KafkaError as exc:
            return self._response(version, decisions, exc.code, {})
        await self.partition_states.load_topic_overrides({d.topic for d in decisions})
        errors = await self.partition_states.apply_leader_and_isr(decisions)
        return self._response(version, decisions, 0, errors)

    @staticmethod
    def _response(version: int, decisions: list[PartitionDecision], code: int,
                  errors: dict[tuple[str, int], int]) -> LeaderAndIsrResponse:
        R = LeaderAndIsrResponse
        if version < 5:
            return R(error_code=code, partition_errors=[R.LeaderAndIsrPartitionError(
                topic_name=d.topic, partition_index=d.partition,
                error_code=errors.get((d.topic, d.partition), code)) for d in decisions])
        by_topic: dict[UUID, list[LeaderAndIsrResponse.LeaderAndIsrPartitionError]] = {}
        for d in decisions:
            by_topic.setdefault(d.topic_id, []).append(R.LeaderAndIsrPartitionError(
                partition_index=d.partition,
                error_code=errors.get((d.topic, d.partition), code)))
        return R(error_code=code, topics=[R.LeaderAndIsrTopicError(topic_id=t, partition_errors=p)
                                          for t, p in by_topic.items()])


class UpdateMetadataHandler(_ControlRequest):
    MIN_VERSION, MAX_VERSION = 0, 8

    def __call__(self, ctx: RequestContext,
                 request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        try:
            self.check(ctx, request)
        except KafkaError as exc:
            return UpdateMetadataResponse(error_code=exc.code)
        live, decisions, deleted = read_update_metadata(request, ctx.api_version,
                                                        self.metadata.topic_id)
        self.metadata.controller_id = request.controller_id
        self.partition_states.apply_update_metadata(live, decisions, deleted)
        return UpdateMetadataResponse(error_code=0)


class StopReplicaHandler(_ControlRequest):
    MIN_VERSION, MAX_VERSION = 0, 4

    async def __call__(self, ctx: RequestContext,
                       request: StopReplicaRequest) -> StopReplicaResponse:
        groups = read_stop_replica(request, ctx.api_version)
        code = 0
        try:
            self.check(ctx, request)
        except KafkaError as exc:
            code = exc.code
        else:
            for delete, partitions in groups.items():
                if partitions:
                    await self.partition_states.apply_stop_replica(partitions, delete)
        R = StopReplicaResponse
        return R(error_code=code, partition_errors=[
            R.StopReplicaPartitionError(topic_name=t, partition_index=i, error_code=code)
            for partitions in groups.values() for t, i in partitions])


class ControlledShutdownHandler:
    """The controller's side: move leadership off the broker that is shutting down."""

    MIN_VERSION, MAX_VERSION = 0, 3

    def __init__(self, controller: Callable[[], Controller | None]) -> None:
        self.controller = controller

    async def __call__(self, ctx: RequestContext,
                       request: ControlledShutdownRequest) -> ControlledShutdownResponse:
        R = ControlledShutdownResponse
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            return R(error_code=ClusterAuthorizationFailedError.code, remaining_partitions=[])
        controller = active_controller(self.controller)
        if controller is None:
            return R(error_code=NotControllerError.code, remaining_partitions=[])
        epoch = request.broker_epoch if ctx.api_version >= 2 else -1
        try:
            remaining = await controller.controlled_shutdown(request.broker_id, epoch)
        except KafkaError as exc:
            return R(error_code=exc.code, remaining_partitions=[])
        return R(error_code=0, remaining_partitions=[
            R.RemainingPartition(topic_name=t, partition_index=i) for t, i in remaining])
