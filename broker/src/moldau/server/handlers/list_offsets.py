"""ListOffsets (API key 2): earliest, latest, max timestamp, and the first offset at or
after a timestamp; consumers never see past the high watermark (or the last stable offset
under read_committed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.errors import InvalidRequestError, KafkaError, TopicAuthorizationFailedError
from moldau.protocol.generated.list_offsets_response import ListOffsetsResponse
from moldau.security.acls import AclOperation, ResourceType
from moldau.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from moldau.storage.log_timestamps import LATEST_TIERED_TIMESTAMP

from .fetch import check_leader_epoch

if TYPE_CHECKING:
    from moldau.protocol.generated.list_offsets_request import ListOffsetsRequest
    from moldau.replication.replica_manager import ReplicaManager

    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext

Topic_ = ListOffsetsResponse.ListOffsetsTopicResponse
Partition_ = ListOffsetsResponse.ListOffsetsPartitionResponse
CONSUMER_REPLICA_ID = -1


class ListOffsetsHandler:
    # v8 adds EARLIEST_LOCAL (-4): the log start offset, as no segment is ever tiered here;
    # v9 adds LATEST_TIERED (-5): with no remote storage Kafka 3.9's UnifiedLog answers
    # offset -1, leader epoch -1 and no timestamp. Neither is checked against the version.
    MIN_VERSION, MAX_VERSION = 0, 9

    def __init__(self, metadata: MetadataCache, replica_manager: ReplicaManager) -> None:
        self.metadata = metadata
        self.replica_manager = replica_manager

    def __call__(self, ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
        rm = self.replica_manager
        metadata = self.metadata
        version = ctx.api_version
        isolation = request.isolation_level if version >= 2 else 0
        from_consumer = request.replica_id == CONSUMER_REPLICA_ID
        topics = []
        # the generated fields type their elements loosely: name what they are
        topic: ListOffsetsRequest.ListOffsetsTopic
        wanted: ListOffsetsRequest.ListOffsetsPartition
        for topic in request.topics:
            authorized = ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)
            partitions = []
            seen: set[int] = set()
            for wanted in topic.partitions:
                out = Partition_(partition_index=wanted.partition_index)
                try:
                    # authorization first: a denied topic's duplicates are not looked at
                    if not authorized:
                        raise TopicAuthorizationFailedError(topic.name)
                    if wanted.partition_index in seen and version >= 1:
                        raise InvalidRequestError("partition listed twice")
                    seen.add(wanted.partition_index)
                    partition = rm.leader_partition(
                        topic.name, wanted.partition_index,
                        metadata.partition(topic.name, wanted.partition_index) is not None)
                    check_leader_epoch(partition, wanted.current_leader_epoch)
                    plog = partition.log
                    bound = plog.fetch_upper_bound(isolation if from_consumer else None)
                    ts = wanted.timestamp
                    if ts == LATEST_TIMESTAMP:
                        found: tuple[int, int, int] | None = (
                            -1, bound, plog.epochs.epoch_for_offset(bound)
                            if bound < plog.log_end_offset else plog.epochs.latest_epoch)
                    elif ts == LATEST_TIERED_TIMESTAMP and version >= 1:
                        found = (-1, -1, -1)
                    elif ts == EARLIEST_TIMESTAMP or (ts < 0 and ts != MAX_TIMESTAMP):
                        found = plog.offset_for_timestamp(EARLIEST_TIMESTAMP)
                    else:
                        found = plog.offset_for_timestamp(ts)
                        if found is not None and found[1] >= bound:
                            found = None  # not yet visible to consumers
                    if version == 0:
                        offsets = [found[1]] if found is not None else []
                        out.old_style_offsets = offsets[: max(wanted.max_num_offsets, 0)]
                    elif found is not None:
                        out.timestamp, out.offset, epoch = found
                        if version >= 4:
                            out.leader_epoch = epoch if epoch is not None else -1
                except KafkaError as exc:
                    out.error_code = exc.code
                partitions.append(out)
            topics.append(Topic_(name=topic.name, partitions=partitions))
        return ListOffsetsResponse(topics=topics)
