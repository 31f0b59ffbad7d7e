"""WriteTxnMarkers (API key 27) on a partition leader (Kafka's
handleWriteTxnMarkersRequest): the transaction coordinator, or kafka-transactions.sh
abort, has a COMMIT or ABORT marker written into each partition of a transaction.

Per marker and partition: a partition this broker does not host is
UNKNOWN_TOPIC_OR_PARTITION, one it follows NOT_LEADER_OR_FOLLOWER; the leader appends the
control batch as the coordinator (never as a client), where the producer state refuses a
marker of an older producer epoch (INVALID_PRODUCER_EPOCH) or from an older coordinator
(TRANSACTION_COORDINATOR_FENCED); every partition is answered once the ISR has its
marker (acks=all, within request.timeout.ms). A marker replicated into a
`__consumer_offsets` partition then settles the producer's pending transactional offsets
there (the group coordinator).

The coordinator epoch is not checked against anything but the partition's producer state:
the tool's abort of a hanging transaction sends the producer's own coordinator epoch from
DescribeProducers (0 when it had none), which passes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    NotEnoughReplicasError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol.generated.write_txn_markers_response import WriteTxnMarkersResponse
from moldau.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_control_batch
from moldau.security.acls import AclOperation, ResourceType

from .cluster_info import CLUSTER_NAME

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from moldau.coordinator.group.coordinator import GroupCoordinator
    from moldau.protocol.generated.write_txn_markers_request import WriteTxnMarkersRequest
    from moldau.replication.replica_manager import Partition

    from ..config import BrokerConfig
    from ..requests import RequestContext
    from ..txn_verification import TxnVerifier
    from .produce import ProduceAppends

log = logging.getLogger("kafka.server.KafkaApis")

OFFSETS_TOPIC = "__consumer_offsets"
MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
PartitionResult = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult
# producer id -> topic -> partition -> error code (Kafka answers by producer id)
Errors = dict[int, dict[str, dict[int, int]]]


class WriteTxnMarkersHandler:
    MIN_VERSION, MAX_VERSION = 0, 1

    def __init__(self, config: BrokerConfig, appends: ProduceAppends,
                 group_coordinator: GroupCoordinator,
                 verifier: TxnVerifier | None = None) -> None:
        self.config = config
        self.appends = appends
        self.group_coordinator = group_coordinator
        self.verifier = verifier  # its guards are dropped by markers; None: not verifying

    def __call__(self, ctx: RequestContext, request: WriteTxnMarkersRequest
                 ) -> WriteTxnMarkersResponse | Awaitable[WriteTxnMarkersResponse]:
        # ALTER on the cluster (an operator's tool) or CLUSTER_ACTION (a broker); only the
        # second's denial is logged, as Kafka does
        if not (ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME,
                              log_if_denied=False)
                or ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                                 CLUSTER_NAME)):
            return _answer(_every(request, ClusterAuthorizationFailedError.code))
        errors: Errors = {}
        waiting: list[tuple[Partition, int]] = []  # acks=all: (partition, offset needed)
        appended: list[tuple[int, str, int]] = []  # (producer id, topic, partition) waiting
        # (partition index, producer id, commit) of __consumer_offsets markers written
        offsets_markers: list[tuple[int, int, bool]] = []
        marker: WriteTxnMarkersRequest.WritableTxnMarker
        topic: WriteTxnMarkersRequest.WritableTxnMarkerTopic
        for marker in request.markers:
            by_topic = errors.setdefault(marker.producer_id, {})
            commit = bool(marker.transaction_result)
            for topic in marker.topics:
                codes = by_topic.setdefault(topic.name, {})
                for index in topic.partition_indexes:
                    try:
                        partition, needed = self._append(marker, topic.name, index)
                    except KafkaError as exc:
                        codes[index] = exc.code
                        log.debug("WriteTxnMarkers for producer %d to %s-%d failed: %s",
                                  marker.producer_id, topic.name, index, exc)
                        continue
                    codes[index] = 0
                    if needed is not None:
                        waiting.append((partition, needed))
                        appended.append((marker.producer_id, topic.name, index))
                    if topic.name == OFFSETS_TOPIC:
                        offsets_markers.append((index, marker.producer_id, commit))
        if not waiting:
            self._settle_offsets(errors, offsets_markers)
            return _answer(errors)
        return self._after_replication(errors, waiting, appended, offsets_markers)

    def _append(self, marker: WriteTxnMarkersRequest.WritableTxnMarker, topic: str,
                index: int) -> tuple[Partition, int | None]:
        """Append the marker to the partition this broker leads; the partition and the
        offset its high watermark must reach (None: reached already)."""
        rm = self.appends.replica_manager
        if rm.get_partition(topic, index) is None:  # Kafka: not an online partition here
            raise UnknownTopicOrPartitionError(f"this server does not host {topic}-{index}")
        partition = rm.leader_partition(topic, index, True)
        plog = partition.log
        min_isr = plog.config.min_insync_replicas
        if len(partition.state.isr) < min_isr:
            raise NotEnoughReplicasError(
                f"the ISR of {partition.name} has {len(partition.state.isr)} replicas, fewer "
                f"than min.insync.replicas={min_isr}")
        batch = build_control_batch(
            CONTROL_COMMIT if marker.transaction_result else CONTROL_ABORT,
            producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
            coordinator_epoch=marker.coordinator_epoch)
        info = plog.append_as_leader(batch, partition.leader_epoch, from_client=False)
        self.appends.after_append(topic, partition, info, len(batch))
        if self.verifier is not None:
            # a verification of this producer under way confirmed the transaction now over
            self.verifier.guards.clear(topic, index, marker.producer_id)
        needed = info.last_offset + 1
        return partition, (needed if plog.high_watermark < needed else None)

    async def _after_replication(self, errors: Errors, waiting: list[tuple[Partition, int]],
                                 appended: list[tuple[int, str, int]],
                                 offsets_markers: list[tuple[int, int, bool]]
                                 ) -> WriteTxnMarkersResponse:
        failed = await self.appends.await_replication(waiting,
                                                      self.config["request.timeout.ms"])
        for producer_id, topic, index in appended:
            code = failed.get((topic, index))
            if code:
                errors[producer_id][topic][index] = code
        self._settle_offsets(errors, offsets_markers)
        return _answer(errors)

    def _settle_offsets(self, errors: Errors,
                        offsets_markers: list[tuple[int, int, bool]]) -> None:
        """The group coordinator materialises (COMMIT) or drops (ABORT) the pending
        offsets of each __consumer_offsets marker the ISR has (Kafka calls it once the
        marker's append completed without error)."""
        for index, producer_id, commit in offsets_markers:
            if errors[producer_id][OFFSETS_TOPIC].get(index) == 0:
                self.group_coordinator.on_transaction_marker(index, producer_id, commit)


def _every(request: WriteTxnMarkersRequest, code: int) -> Errors:
    """Every partition of the request with one error."""
    errors: Errors = {}
    for marker in request.markers:
        by_topic = errors.setdefault(marker.producer_id, {})
        for topic in marker.topics:
            codes = by_topic.setdefault(topic.name, {})
            for index in topic.partition_indexes:
                codes[index] = code
    return errors


def _answer(errors: Errors) -> WriteTxnMarkersResponse:
    return WriteTxnMarkersResponse(markers=[
        MarkerResult(producer_id=producer_id, topics=[
            TopicResult(name=name, partitions=[
                PartitionResult(partition_index=index, error_code=code)
                for index, code in codes.items()])
            for name, codes in by_topic.items()])
        for producer_id, by_topic in errors.items()])
