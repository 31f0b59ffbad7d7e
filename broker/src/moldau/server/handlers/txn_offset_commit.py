"""TxnOffsetCommit (28), v0-4: a transactional producer's offsets for a consumer group,
sent to the group's coordinator (Kafka 3.9's KafkaApis.handleTxnOffsetCommitRequest and
GroupCoordinator.handleTxnCommitOffsets). The coordinator keeps them pending until the
transaction's marker reaches the group's `__consumer_offsets` partition
(moldau.coordinator.group.txn_commits).

Authorization: TransactionalId WRITE and Group READ for the whole request (53, 30), Topic
READ per topic (29); an unknown topic or partition answers 3. As in Kafka 3.9, the
producer's first commit to the offsets partition in a transaction is verified with the
transaction coordinator first (KIP-890 part 1, server/txn_verification.py): the append
only happens if the coordinator confirms the partition is in the transaction and no
marker ended it meanwhile."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from moldau.coordinator.group.offsets_log import OFFSETS_TOPIC
from moldau.coordinator.group.records import OffsetAndMetadata
from moldau.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    InvalidCommitOffsetSizeError,
    InvalidFetchSizeError,
    InvalidTxnStateError,
    KafkaError,
    KafkaStorageError,
    NetworkExceptionError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol.generated.txn_offset_commit_response import TxnOffsetCommitResponse
from moldau.security.acls import AclOperation, ResourceType

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from moldau.coordinator.group.coordinator import GroupCoordinator
    from moldau.protocol.generated.txn_offset_commit_request import TxnOffsetCommitRequest

    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext
    from ..txn_verification import TxnVerifier

TopicPartition = tuple[str, int]

# Kafka's GroupMetadataManager.maybeConvertOffsetCommitError, for a verification's answer
_VERIFICATION_ERRORS = {
    # retriable without a coordinator lookup, which older clients expect
    NetworkExceptionError.code: CoordinatorLoadInProgressError.code,
    UnknownTopicOrPartitionError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasAfterAppendError.code: CoordinatorNotAvailableError.code,
    NotLeaderOrFollowerError.code: NotCoordinatorError.code,
    KafkaStorageError.code: NotCoordinatorError.code,
    RecordTooLargeError.code: InvalidCommitOffsetSizeError.code,
    RecordBatchTooLargeError.code: InvalidCommitOffsetSizeError.code,
    InvalidFetchSizeError.code: InvalidCommitOffsetSizeError.code,
}
# TRANSACTION_ABORTABLE reaches v4 clients only; the verifier maps it by Produce version
_PRODUCE_VERSION_WITH_ABORTABLE, _PRODUCE_VERSION_WITHOUT = 11, 10


class TxnOffsetCommitHandler:
    MIN_VERSION, MAX_VERSION = 0, 4

    def __init__(self, coordinator: GroupCoordinator, metadata: MetadataCache,
                 verifier: TxnVerifier | None = None) -> None:
        self.coordinator = coordinator
        self.metadata = metadata
        self.verifier = verifier  # KIP-890 part 1; None: commits are not verified

    def __call__(self, ctx: RequestContext,
                 request: TxnOffsetCommitRequest) -> Awaitable[TxnOffsetCommitResponse]:
        return self._commit(ctx, request)

    async def _commit(self, ctx: RequestContext,
                      request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
        version = ctx.api_version
        requested = [(t.name, p.partition_index) for t in request.topics
                     for p in t.partitions]
        # the transactional id, then the group, each for the whole request
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                             request.transactional_id):
            return _response(dict.fromkeys(requested,
                                           TransactionalIdAuthorizationFailedError.code))
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, request.group_id):
            return _response(dict.fromkeys(requested, GroupAuthorizationFailedError.code))
        now = int(time.time() * 1000)
        # Kafka's answer lists the refused partitions first, then the coordinator's
        errors: dict[TopicPartition, int] = {}
        wanted: dict[TopicPartition, OffsetAndMetadata] = {}
        topic: TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        p: TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
        for topic in request.topics:
            allowed = ctx.authorize(AclOperation.READ, ResourceType.TOPIC, topic.name)
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if not allowed:
                    errors[tp] = TopicAuthorizationFailedError.code
                elif self.metadata.partition(*tp) is None:
                    errors[tp] = UnknownTopicOrPartitionError.code
                else:
                    wanted[tp] = OffsetAndMetadata(
                        p.committed_offset,
                        p.committed_leader_epoch if version >= 2 else -1,
                        p.committed_metadata or "", now)
        if wanted:
            errors.update(await self._commit_wanted(request, version, wanted))
        return _response(errors)

    async def _commit_wanted(self, request: TxnOffsetCommitRequest, version: int,
                             wanted: dict[TopicPartition, OffsetAndMetadata]
                             ) -> dict[TopicPartition, int]:
        group_id, producer_id = request.group_id, request.producer_id
        partition = self.coordinator.partition_of(group_id)
        verifier = self.verifier
        guard = None
        try:
            self.coordinator.check_group(group_id)  # Kafka's validateGroupStatus first
            if (verifier is not None and verifier.enabled()
                    and not self.coordinator.in_transaction(group_id, producer_id)):
                guard = verifier.guards.start(OFFSETS_TOPIC, partition, producer_id)
                unverified = await verifier.verify(
                    request.transactional_id, producer_id, request.producer_epoch,
                    [(OFFSETS_TOPIC, partition)],
                    _PRODUCE_VERSION_WITH_ABORTABLE if version >= 4
                    else _PRODUCE_VERSION_WITHOUT)
                code = unverified.get((OFFSETS_TOPIC, partition), 0)
                if code:
                    return dict.fromkeys(wanted, _VERIFICATION_ERRORS.get(code, code))
                # a marker written while the coordinator answered ended what it confirmed
                if (not verifier.guards.holds(OFFSETS_TOPIC, partition, producer_id, guard)
                        and not self.coordinator.in_transaction(group_id, producer_id)):
                    raise InvalidTxnStateError("Record was not part of an ongoing transaction")
            # nothing yields between here and the append: the guard holds for it
            return await self.coordinator.commit_transactional_offsets(
                group_id, producer_id, request.producer_epoch,
                request.member_id if version >= 3 else "",
                request.group_instance_id if version >= 3 else None,
                request.generation_id if version >= 3 else -1, wanted)
        except KafkaError as exc:
            return dict.fromkeys(wanted, exc.code)
        finally:
            if verifier is not None and guard is not None:
                verifier.guards.release(OFFSETS_TOPIC, partition, producer_id, guard)


def _response(errors: dict[TopicPartition, int]) -> TxnOffsetCommitResponse:
    topics: dict[str, list[TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition]] = {}
    for (name, index), error in errors.items():
        topics.setdefault(name, []).append(
            TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                partition_index=index, error_code=error))
    return TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name=name, partitions=parts)
        for name, parts in topics.items()])
