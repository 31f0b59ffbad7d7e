"""Produce (API key 0): validate and append each partition's batches on the leader.

acks=0 gets no response (an error closes the connection, so the client notices), acks=1
is answered after the leader's append, acks=all once the ISR has the records, i.e. when
the high watermark passes them, or with REQUEST_TIMED_OUT after timeout_ms.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from moldau.errors import (
    InvalidRecordError,
    InvalidRequiredAcksError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
)
from moldau.protocol.errors import ProtocolError
from moldau.protocol.generated.produce_response import ProduceResponse
from moldau.protocol.records import first_batch_is_transactional
from moldau.replication.replica_manager import Partition
from moldau.security.acls import AclOperation, ResourceType

from ..metadata_cache import INTERNAL_TOPICS
from ..txn_verification import Verification, produce_error, transactions_to_verify

if TYPE_CHECKING:
    from collections.abc import Awaitable, Mapping

    from moldau.protocol.generated.produce_request import ProduceRequest
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.storage.log_manager import LogManager
    from moldau.storage.validation import AppendInfo

    from ..broker_metrics import BrokerTopicStats, DelayedOperations, NoTopicStats
    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext
    from ..txn_verification import TxnVerifier

log = logging.getLogger("kafka.server.KafkaApis")

PartitionResponse = ProduceResponse.PartitionProduceResponse
TopicResponse = ProduceResponse.TopicProduceResponse


class ProduceHandler:
    MIN_VERSION, MAX_VERSION = 0, 11

    def __init__(self, appends: ProduceAppends, verifier: TxnVerifier | None = None) -> None:
        self.appends = appends
        self.verifier = verifier  # KIP-890 part 1; None: transactions are not verified

    def __call__(self, ctx: RequestContext, request: ProduceRequest
                 ) -> ProduceResponse | Awaitable[ProduceResponse | None] | None:
        if has_transactional_records(request):
            # Kafka refuses the whole request (every partition answers 53) before it looks
            # at any topic; a transactional batch without a transactional id is refused too
            txn_id = request.transactional_id
            if txn_id is None or not ctx.authorize(AclOperation.WRITE,
                                                   ResourceType.TRANSACTIONAL_ID, txn_id):
                raise TransactionalIdAuthorizationFailedError(
                    f"not authorized to write as transactional id {txn_id}")
        authorized = [ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, topic_data.name)
                      for topic_data in request.topic_data]
        verifier = self.verifier
        if (request.transactional_id is None or verifier is None or not verifier.enabled()
                or request.acks not in (-1, 0, 1)):
            return self._produce(ctx, request, authorized, None)
        asks = transactions_to_verify(request, authorized, self.appends.replica_manager,
                                      verifier.guards)
        if asks.partitions:
            return self._verify_then_produce(ctx, request, authorized, verifier, asks)
        return self._produce(ctx, request, authorized, asks)

    async def _verify_then_produce(self, ctx: RequestContext, request: ProduceRequest,
                                   authorized: list[bool], verifier: TxnVerifier,
                                   asks: Verification) -> ProduceResponse | None:
        """Ask the transaction coordinator first (KIP-890 part 1), then produce: a
        partition it did not confirm answers its error and appends nothing."""
        assert request.transactional_id is not None
        unverified = await verifier.verify(request.transactional_id, asks.producer_id,
                                           asks.producer_epoch, asks.partitions,
                                           ctx.api_version)
        asks.errors = {tp: produce_error(code) for tp, code in unverified.items()}
        try:
            result = self._produce(ctx, request, authorized, asks)
        finally:  # appended or refused: the guards have served
            for (topic, index), guard in asks.guards.items():
                verifier.guards.release(topic, index, asks.producer_id, guard)
        if result is not None and not isinstance(result, ProduceResponse):
            return await result  # acks=all
        return result

    def _produce(self, ctx: RequestContext, request: ProduceRequest, authorized: list[bool],
                 verification: Verification | None
                 ) -> ProduceResponse | Awaitable[ProduceResponse] | None:
        """Validate and append each partition's records. verification: what the
        transaction coordinator said of the partitions it was asked about (None: not
        verifying)."""
        acks = request.acks
        version = ctx.api_version
        appends = self.appends
        responses = []
        waiting: list[tuple[Partition, int]] = []  # acks=all: (partition, offset needed)
        failed = False
        bad_acks = acks not in (-1, 0, 1)
        # the generated fields type their elements loosely: name what they are
        topic_data: ProduceRequest.TopicProduceData
        data: ProduceRequest.PartitionProduceData
        for topic_data, topic_authorized in zip(request.topic_data, authorized, strict=True):
            name = topic_data.name
            partition_responses = []
            for data in topic_data.partition_data:
                response = PartitionResponse(index=data.index)
                partition = None
                try:
                    if bad_acks:
                        raise InvalidRequiredAcksError(f"acks={acks} is not -1, 0 or 1")
                    if not topic_authorized:
                        raise TopicAuthorizationFailedError(name)
                    if name in INTERNAL_TOPICS:
                        # only the coordinators write there (Kafka's internal topic guard)
                        raise InvalidTopicError(f"Cannot append to internal topic {name}")
                    partition = appends.leading(name, data.index)
                    plog = partition.log
                    if acks == -1:
                        min_isr = plog.config.min_insync_replicas
                        if len(partition.state.isr) < min_isr:
                            raise NotEnoughReplicasError(
                                f"the ISR of {partition.name} has {len(partition.state.isr)} "
                                f"replicas, fewer than min.insync.replicas={min_isr}")
                    records = data.records
                    if records is None:
                        raise InvalidRecordError("the produce request has null records")
                    if verification is not None:
                        verification.check(name, data.index, records, plog)
                    info = plog.append_as_leader(records, partition.state.leader_epoch)
                    appends.after_append(name, partition, info, len(records))
                    response.base_offset = info.first_offset
                    if version >= 2:
                        response.log_append_time_ms = info.log_append_time
                    if version >= 5:
                        response.log_start_offset = plog.log_start_offset
                    if acks == -1 and plog.high_watermark <= info.last_offset:
                        waiting.append((partition, info.last_offset + 1))
                    partition_responses.append(response)
                    continue
                except (KafkaError, ProtocolError) as exc:
                    failed = True
                    appends.fail_partition(response, exc, name, version, partition,
                                           len(data.records or b""))
                partition_responses.append(response)
            responses.append(TopicResponse(name=name, partition_responses=partition_responses))
        if acks == 0:
            if failed:
                # no response carries the error: closing the connection is how Kafka tells
                raise ProtocolError("an acks=0 produce request failed; closing the connection")
            return None
        answer = ProduceResponse(responses=responses)
        if waiting:
            return self._await_replication(answer, waiting, request.timeout_ms)
        return answer

    async def _await_replication(self, response: ProduceResponse,
                                 waiting: list[tuple[Partition, int]],
                                 timeout_ms: int) -> ProduceResponse:
        errors = await self.appends.await_replication(waiting, timeout_ms)
        if errors:
            for topic in response.responses:
                for pr in topic.partition_responses:
                    pr.error_code = errors.get((topic.name, pr.index), pr.error_code)
        return response


def has_transactional_records(request: ProduceRequest) -> bool:
    """Whether the first batch of any partition is transactional (Kafka's
    RequestUtils.hasTransactionalRecords looks at each partition's first batch only)."""
    data: ProduceRequest.PartitionProduceData
    for topic_data in request.topic_data:
        for data in topic_data.partition_data:
            if first_batch_is_transactional(data.records):
                return True
    return False


class ProduceAppends:
    """What both Produce paths (this handler and produce_fast.py) do around a leader's
    append: find the partition this broker leads, account for the append or its
    failure, and wait for the ISR (acks=all)."""

    def __init__(self, metadata: MetadataCache, replica_manager: ReplicaManager,
                 log_manager: LogManager, topic_stats: BrokerTopicStats | NoTopicStats,
                 purgatory: Mapping[str, DelayedOperations]) -> None:
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.log_manager = log_manager
        self.topic_stats = topic_stats
        self.produce_purgatory = purgatory["Produce"]

    def leading(self, topic: str, index: int) -> Partition:
        """The partition, if this broker leads it (Kafka answers NOT_LEADER_OR_FOLLOWER
        only for a partition the metadata knows; one beyond the topic's count is unknown)."""
        return self.replica_manager.leading(topic, index, self.metadata)

    def after_append(self, topic: str, partition: Partition, info: AppendInfo,
                     nbytes: int) -> None:
        """What follows a leader's append of a produced batch: the topic's metrics, the
        high watermark, and the requests waiting on the partition."""
        self.topic_stats.produced(topic, info.record_count, nbytes)
        partition.maybe_increment_high_watermark()
        partition.appended()

    def fail_partition(self, response: PartitionResponse, exc: KafkaError | ProtocolError,
                       topic: str, version: int, partition: Partition | None,
                       nbytes: int) -> None:
        """A partition's append failed: its response carries the error, the topic's metrics
        count it, and a storage error takes the log dir offline (the controller then moves
        leadership away). partition is None when the topic or partition is unknown."""
        malformed = isinstance(exc, ProtocolError)
        error = InvalidRecordError(str(exc)) if isinstance(exc, ProtocolError) else exc
        response.error_code = error.code
        response.base_offset = -1  # Kafka's INVALID_OFFSET: nothing was appended
        if version >= 8:
            response.error_message = str(error) or None
        if error.record_errors and version >= 8:
            # KIP-467: the client fails the records named and retries the others
            response.record_errors = [
                ProduceResponse.BatchIndexAndErrorMessage(
                    batch_index=index, batch_index_error_message=message)
                for index, message in error.record_errors]
        elif isinstance(error, InvalidRecordError) and version >= 8:
            response.record_errors = [
                ProduceResponse.BatchIndexAndErrorMessage(
                    batch_index=0, batch_index_error_message=str(error))]
        elif isinstance(error, KafkaStorageError):
            log.error("Error appending to %s-%d: %s", topic, response.index, error)
        log.debug("Produce to %s-%d failed: %s", topic, response.index, error)
        if partition is None:
            return
        stats = self.topic_stats  # a known topic: it has metrics
        if not malformed:
            stats.mark("FailedProduceRequestsPerSec", topic)
        if isinstance(error, RecordTooLargeError | RecordBatchTooLargeError):
            stats.mark("BytesRejectedPerSec", topic, nbytes)
        if isinstance(error, KafkaStorageError):
            self.log_manager.handle_storage_error(partition.log, error)
        stats.mark("TotalProduceRequestsPerSec", topic)  # (a successful append counts it too)

    async def await_replication(self, waiting: list[tuple[Partition, int]],
                                timeout_ms: int) -> dict[tuple[str, int], int]:
        """acks=all: wait until each partition's high watermark reaches its offset, or
        timeout_ms; the error code of each (topic, partition) that did not make it."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        rm = self.replica_manager
        epochs = {id(p): p.leader_epoch for p, _ in waiting}

        def moved(p: Partition) -> bool:
            """Leadership moved since the append (Kafka's DelayedProduce answers
            NOT_LEADER_OR_FOLLOWER at once): this broker's high watermark no longer says
            whether the records are committed, and the new leader may truncate them."""
            return (not p.is_leader or p.leader_epoch != epochs[id(p)]
                    or rm.get_partition(p.topic, p.index) is not p)

        with self.produce_purgatory.waiting(len(waiting)):
            while True:
                left = [(p, o) for p, o in waiting if p.log.high_watermark < o and not moved(p)]
                remaining = deadline - time.monotonic()
                if not left or remaining <= 0:
                    break
                await rm.wait_for_change([p for p, _ in left], remaining)
        errors: dict[tuple[str, int], int] = {}
        for p, o in waiting:
            if p.log.high_watermark < o:
                unconfirmed = NotLeaderOrFollowerError if moved(p) else RequestTimedOutError
                errors[(p.topic, p.index)] = unconfirmed.code
            elif len(p.state.isr) < p.log.config.min_insync_replicas:
                # replicated, but the ISR shrank below the minimum meanwhile (Kafka's
                # checkEnoughReplicasReachOffset)
                errors[(p.topic, p.index)] = NotEnoughReplicasAfterAppendError.code
        return errors
