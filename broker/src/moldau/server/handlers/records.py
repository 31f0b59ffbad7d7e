"""DeleteRecords (21) and OffsetForLeaderEpoch (23) (Kafka's ReplicaManager.deleteRecords,
Partition.deleteRecordsOnLeader and Partition.lastOffsetForLeaderEpoch)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.errors import (
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol.generated.delete_records_response import DeleteRecordsResponse
from moldau.protocol.generated.offset_for_leader_epoch_response import (
    OffsetForLeaderEpochResponse,
)
from moldau.replication.replica_manager import Partition
from moldau.security.acls import AclOperation, ResourceType
from moldau.storage.epoch_cache import UNDEFINED_OFFSET

from .fetch import check_leader_epoch

if TYPE_CHECKING:
    from moldau.protocol.generated.delete_records_request import DeleteRecordsRequest
    from moldau.protocol.generated.offset_for_leader_epoch_request import (
        OffsetForLeaderEpochRequest,
    )
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.storage.log_manager import LogManager

    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext

log = logging.getLogger("kafka.server.ReplicaManager")

CLUSTER_NAME = "kafka-cluster"
HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK
INVALID_LOW_WATERMARK = -1

DeleteTopic_ = DeleteRecordsResponse.DeleteRecordsTopicResult
DeletePartition_ = DeleteRecordsResponse.DeleteRecordsPartitionResult
EpochTopic_ = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEnd_ = OffsetForLeaderEpochResponse.EpochEndOffset


def _local_partition(rm: ReplicaManager, topic: str, index: int, known: bool,
                     current_leader_epoch: int = -1) -> Partition:
    """Partition.getLocalLog(fetchOnlyFromLeader=true): the epoch check first, then
    leadership and the log dir."""
    partition = rm.get_partition(topic, index)
    if partition is None:
        if known:
            raise NotLeaderOrFollowerError(f"this broker does not host {topic}-{index}")
        raise UnknownTopicOrPartitionError(f"this server does not host {topic}-{index}")
    check_leader_epoch(partition, current_leader_epoch)
    return rm.leader_partition(topic, index, known)


class DeleteRecordsHandler:
    MIN_VERSION, MAX_VERSION = 0, 2

    def __init__(self, metadata: MetadataCache, replica_manager: ReplicaManager,
                 log_manager: LogManager) -> None:
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.log_manager = log_manager

    def __call__(self, ctx: RequestContext,
                 request: DeleteRecordsRequest) -> DeleteRecordsResponse:
        metadata = self.metadata
        topics = []
        # the generated fields type their elements loosely: name what they are
        topic: DeleteRecordsRequest.DeleteRecordsTopic
        wanted: DeleteRecordsRequest.DeleteRecordsPartition
        for topic in request.topics:
            name = topic.name
            authorized = ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name)
            partitions = []
            for wanted in topic.partitions:
                out = DeletePartition_(partition_index=wanted.partition_index,
                                       low_watermark=INVALID_LOW_WATERMARK)
                try:
                    if not authorized:
                        raise TopicAuthorizationFailedError(name)
                    if metadata.partition(name, wanted.partition_index) is None:
                        raise UnknownTopicOrPartitionError(f"{name}-{wanted.partition_index}")
                    partition = _local_partition(self.replica_manager, name, wanted.partition_index,
                                                 True)
                    out.low_watermark = self._delete(partition, wanted.offset)
                except KafkaError as exc:
                    out.error_code = exc.code
                    log.debug("DeleteRecords on %s-%d failed: %s", name,
                              wanted.partition_index, exc)
                partitions.append(out)
            topics.append(DeleteTopic_(name=name, partitions=partitions))
        return DeleteRecordsResponse(topics=topics)

    def _delete(self, partition: Partition, offset: int) -> int:
        """Partition.deleteRecordsOnLeader: -1 means the high watermark; the log start
        moves to the offset (never past the high watermark) and the new low watermark is
        answered. While this broker is the only replica the low watermark is its own log
        start, so nothing has to wait for followers."""
        plog = partition.log
        if not plog.config.delete:
            raise PolicyViolationError(f"Records of partition {partition.name} can not be "
                                       "deleted due to the configured policy")
        target = plog.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0:
            raise OffsetOutOfRangeError(f"The offset {target} for partition {partition.name} "
                                        "is not valid")
        try:
            start = plog.delete_records(target)
        except OSError as exc:
            self.log_manager.handle_storage_error(plog, exc)
            raise KafkaStorageError(str(exc)) from exc
        log.info("Incremented log start offset of %s to %d due to client delete records "
                 "request", partition.name, start)
        return start


class OffsetForLeaderEpochHandler:
    MIN_VERSION, MAX_VERSION = 0, 4

    def __init__(self, metadata: MetadataCache, replica_manager: ReplicaManager) -> None:
        self.metadata = metadata
        self.replica_manager = replica_manager

    def __call__(self, ctx: RequestContext,
                 request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
        version = ctx.api_version
        metadata = self.metadata
        # KIP-320: followers hold CLUSTER_ACTION, consumers DESCRIBE on each topic; lacking
        # the first is no denial worth logging
        cluster_action = ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                       CLUSTER_NAME, log_if_denied=False)
        topics = []
        topic: OffsetForLeaderEpochRequest.OffsetForLeaderTopic
        wanted: OffsetForLeaderEpochRequest.OffsetForLeaderPartition
        for topic in request.topics:
            name = topic.topic
            authorized = cluster_action or ctx.authorize(AclOperation.DESCRIBE,
                                                         ResourceType.TOPIC, name)
            partitions = []
            for wanted in topic.partitions:
                out = EpochEnd_(partition=wanted.partition, error_code=0)
                try:
                    if not authorized:
                        raise TopicAuthorizationFailedError(name)
                    current = wanted.current_leader_epoch if version >= 2 else -1
                    partition = _local_partition(self.replica_manager, name, wanted.partition,
                                                 metadata.partition(name, wanted.partition)
                                                 is not None, current)
                    plog = partition.log
                    epoch, end = plog.epochs.end_offset_for(wanted.leader_epoch,
                                                            plog.log_end_offset)
                    if end != UNDEFINED_OFFSET:
                        out.leader_epoch, out.end_offset = epoch, end
                except KafkaError as exc:
                    out.error_code = exc.code
                partitions.append(out)
            topics.append(EpochTopic_(topic=name, partitions=partitions))
        return OffsetForLeaderEpochResponse(topics=topics)
