"""The request handlers, one module per API family, and their registration."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .api_versions import ApiVersionsHandler
from .cluster_info import DescribeClusterHandler, DescribeLogDirsHandler
from .configs import AlterConfigsHandler, DescribeConfigsHandler, IncrementalAlterConfigsHandler
from .controller_requests import (
    ControlledShutdownHandler,
    LeaderAndIsrHandler,
    StopReplicaHandler,
    UpdateMetadataHandler,
)
from .elect_leaders import ElectLeadersHandler
from .fetch import FetchHandler
from .groups import (
    DeleteGroupsHandler,
    DescribeGroupsHandler,
    FindCoordinatorHandler,
    HeartbeatHandler,
    JoinGroupHandler,
    LeaveGroupHandler,
    ListGroupsHandler,
    OffsetCommitHandler,
    OffsetDeleteHandler,
    OffsetFetchHandler,
    SyncGroupHandler,
)
from .init_producer_id import InitProducerIdHandler
from .list_offsets import ListOffsetsHandler
from .metadata import MetadataHandler
from .produce import ProduceHandler
from .produce_fast import FastProduce
from .reassignments import AlterPartitionReassignmentsHandler, ListPartitionReassignmentsHandler
from .records import DeleteRecordsHandler, OffsetForLeaderEpochHandler
from .topics import CreatePartitionsHandler, CreateTopicsHandler, DeleteTopicsHandler

if TYPE_CHECKING:
    from ..broker import Broker
    from ..requests import RequestDispatcher

# API key -> handler class (each declares the versions it serves)
HANDLERS = {
    0: ProduceHandler,
    1: FetchHandler,
    2: ListOffsetsHandler,
    3: MetadataHandler,
    4: LeaderAndIsrHandler,
    5: StopReplicaHandler,
    6: UpdateMetadataHandler,
    7: ControlledShutdownHandler,
    8: OffsetCommitHandler,
    9: OffsetFetchHandler,
    10: FindCoordinatorHandler,
    11: JoinGroupHandler,
    12: HeartbeatHandler,
    13: LeaveGroupHandler,
    14: SyncGroupHandler,
    15: DescribeGroupsHandler,
    16: ListGroupsHandler,
    18: ApiVersionsHandler,
    22: InitProducerIdHandler,
    19: CreateTopicsHandler,
    20: DeleteTopicsHandler,
    21: DeleteRecordsHandler,
    23: OffsetForLeaderEpochHandler,
    32: DescribeConfigsHandler,
    33: AlterConfigsHandler,
    35: DescribeLogDirsHandler,
    42: DeleteGroupsHandler,
    43: ElectLeadersHandler,
    47: OffsetDeleteHandler,
    37: CreatePartitionsHandler,
    44: IncrementalAlterConfigsHandler,
    45: AlterPartitionReassignmentsHandler,
    46: ListPartitionReassignmentsHandler,
    60: DescribeClusterHandler,
}


def register_handlers(dispatcher: RequestDispatcher, broker: Broker) -> None:
    for api_key, cls in HANDLERS.items():
        dispatcher.register(api_key, cls(broker), cls.MIN_VERSION, cls.MAX_VERSION)
    dispatcher.fast_produce = FastProduce(broker, dispatcher)
