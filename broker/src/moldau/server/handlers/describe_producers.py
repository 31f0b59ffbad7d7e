"""DescribeProducers (API key 61, KIP-664): the producers a partition's replica on this
broker knows (Kafka's handleDescribeProducersRequest and Partition.activeProducerState):
each one's epoch, last sequence and timestamp, the epoch of the coordinator that wrote
its last marker, and the first offset of its open transaction (-1 if none). Any replica
answers, the leader or a follower (kafka-transactions.sh describe-producers --broker-id);
find-hanging and abort --start-offset read it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.errors import (
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol.generated.describe_producers_response import DescribeProducersResponse
from moldau.security.acls import AclOperation, ResourceType

from ..topic_names import validate_topic_name

if TYPE_CHECKING:
    from moldau.protocol.generated.describe_producers_request import DescribeProducersRequest
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.storage.log import PartitionLog

    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = DescribeProducersResponse.PartitionResponse
ProducerState = DescribeProducersResponse.ProducerState


class DescribeProducersHandler:
    MIN_VERSION, MAX_VERSION = 0, 0

    def __init__(self, metadata: MetadataCache, replica_manager: ReplicaManager) -> None:
        self.metadata = metadata
        self.replica_manager = replica_manager

    def __call__(self, ctx: RequestContext,
                 request: DescribeProducersRequest) -> DescribeProducersResponse:
        topics = []
        topic: DescribeProducersRequest.TopicRequest
        for topic in request.topics:
            name = topic.name
            # a topic-wide error carries Kafka's message for it (its ApiError)
            topic_error: KafkaError | None = None
            try:
                validate_topic_name(name)
                if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, name):
                    raise TopicAuthorizationFailedError(
                        TopicAuthorizationFailedError.default_message)
                if name not in self.metadata.topics:
                    raise UnknownTopicOrPartitionError(
                        UnknownTopicOrPartitionError.default_message)
            except KafkaError as exc:
                topic_error = exc
            partitions = []
            for index in topic.partition_indexes:
                if topic_error is not None:
                    partitions.append(PartitionResponse(
                        partition_index=index, error_code=topic_error.code,
                        error_message=str(topic_error) or None))
                    continue
                partitions.append(self._partition(name, index))
            topics.append(TopicResponse(name=name, partitions=partitions))
        return DescribeProducersResponse(topics=topics)

    def _partition(self, topic: str, index: int) -> PartitionResponse:
        out = PartitionResponse(partition_index=index)
        try:
            plog = self._local_log(topic, index)
        except KafkaError as exc:
            out.error_code = exc.code
            return out
        out.active_producers = producer_states(plog)
        return out

    def _local_log(self, topic: str, index: int) -> PartitionLog:
        """The replica's log, leader or follower (Kafka's getPartitionOrError)."""
        rm = self.replica_manager
        partition = rm.get_partition(topic, index)
        if partition is None:
            if self.metadata.partition(topic, index) is not None:
                raise NotLeaderOrFollowerError(f"this broker does not host {topic}-{index}")
            raise UnknownTopicOrPartitionError(f"this server does not host {topic}-{index}")
        if rm.log_manager.logs.get((topic, index)) is not partition.log:
            raise KafkaStorageError(f"the log dir of {partition.name} is offline")
        return partition.log


def producer_states(plog: PartitionLog) -> list[DescribeProducersResponse.ProducerState]:
    """Every producer the partition's producer state holds, by producer id."""
    return [ProducerState(producer_id=entry.producer_id, producer_epoch=entry.epoch,
                          last_sequence=entry.last_seq, last_timestamp=entry.last_timestamp,
                          coordinator_epoch=entry.coordinator_epoch,
                          current_txn_start_offset=entry.current_txn_first_offset)
            for _, entry in sorted(plog.producer_state.producers.items())]
