"""The transaction APIs a producer (and a partition leader verifying a produce) asks the
transaction coordinator: AddPartitionsToTxn (24), AddOffsetsToTxn (25), EndTxn (26),
DescribeTransactions (65) and ListTransactions (66). InitProducerId is in
init_producer_id.py.

These authorize as Kafka 3.9's KafkaApis does and translate between the wire and
`moldau.coordinator.transaction`; the coordinator holds the behaviour. Requests below
version 2 of AddPartitionsToTxn, AddOffsetsToTxn and EndTxn get INVALID_PRODUCER_EPOCH
where newer ones get PRODUCER_FENCED, as their clients know only that code.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    InvalidProducerEpochError,
    InvalidRequestError,
    OperationNotAttemptedError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol.generated.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from moldau.protocol.generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnResponse,
)
from moldau.protocol.generated.describe_transactions_response import (
    DescribeTransactionsResponse,
)
from moldau.protocol.generated.end_txn_response import EndTxnResponse
from moldau.protocol.generated.list_transactions_response import ListTransactionsResponse
from moldau.security.acls import AclOperation, ResourceType

from .cluster_info import CLUSTER_NAME

if TYPE_CHECKING:
    from collections.abc import Awaitable, Iterable

    from moldau.coordinator.group.coordinator import GroupCoordinator
    from moldau.coordinator.transaction.coordinator import TransactionCoordinator
    from moldau.protocol.generated.add_offsets_to_txn_request import AddOffsetsToTxnRequest
    from moldau.protocol.generated.add_partitions_to_txn_request import (
        AddPartitionsToTxnRequest,
    )
    from moldau.protocol.generated.describe_transactions_request import (
        DescribeTransactionsRequest,
    )
    from moldau.protocol.generated.end_txn_request import EndTxnRequest
    from moldau.protocol.generated.list_transactions_request import ListTransactionsRequest

    from ..metadata_cache import MetadataCache
    from ..requests import RequestContext

log = logging.getLogger("kafka.server.KafkaApis")

TXN_ID_DENIED = TransactionalIdAuthorizationFailedError.code
TopicPartition = tuple[str, int]
OFFSETS_TOPIC = "__consumer_offsets"


def fenced_for(version: int, error: int, first_fenced_version: int = 2) -> int:
    """PRODUCER_FENCED for the versions that know it, INVALID_PRODUCER_EPOCH before."""
    if error == ProducerFencedError.code and version < first_fenced_version:
        return InvalidProducerEpochError.code
    return error


# --- AddPartitionsToTxn -------------------------------------------------------------------

class AddPartitionsToTxnHandler:
    """v0-3 come from producers, one transaction; v4+ from partition leaders (KIP-890),
    several transactions, each to add or, with VerifyOnly, to check."""

    MIN_VERSION, MAX_VERSION = 0, 5

    def __init__(self, coordinator: TransactionCoordinator, metadata: MetadataCache) -> None:
        self.coordinator = coordinator
        self.metadata = metadata

    def __call__(self, ctx: RequestContext, request: AddPartitionsToTxnRequest
                 ) -> Awaitable[AddPartitionsToTxnResponse]:
        return self._handle(ctx, request)

    async def _handle(self, ctx: RequestContext, request: AddPartitionsToTxnRequest
                      ) -> AddPartitionsToTxnResponse:
        version = ctx.api_version
        if version < 4:
            results = await self._transaction(
                ctx, version, request.v3_and_below_transactional_id,
                request.v3_and_below_producer_id, request.v3_and_below_producer_epoch,
                _partitions(request.v3_and_below_topics), verify_only=False)
            return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_by_topic(results))
        # newer versions come only from other brokers
        if not ctx.authorize(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME):
            raise ClusterAuthorizationFailedError("AddPartitionsToTxn v4+ is inter-broker")
        if any(t.transactional_id is None for t in request.transactions):
            raise InvalidRequestError("Transactional ID can not be null in request.")
        answered = []
        for txn in request.transactions:
            results = await self._transaction(
                ctx, version, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                _partitions(txn.topics), verify_only=txn.verify_only)
            answered.append(AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id, topic_results=_by_topic(results)))
        return AddPartitionsToTxnResponse(error_code=0, results_by_transaction=answered)

    async def _transaction(self, ctx: RequestContext, version: int, transactional_id: str,
                           producer_id: int, producer_epoch: int,
                           partitions: list[TopicPartition], verify_only: bool
                           ) -> dict[TopicPartition, int]:
        if version < 4 and not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                             transactional_id):
            return dict.fromkeys(partitions, TXN_ID_DENIED)
        if version < 4:
            # internal topics are never authorized here: AddOffsetsToTxn adds those
            writable = ctx.authorized(AclOperation.WRITE, ResourceType.TOPIC,
                                      [t for t, _ in partitions if t not in _INTERNAL])
        else:
            writable = {t for t, _ in partitions}
        failed: dict[TopicPartition, int] = {}
        for tp in partitions:
            if tp[0] not in writable:
                failed[tp] = TopicAuthorizationFailedError.code
            elif self.metadata.partition(*tp) is None:
                failed[tp] = UnknownTopicOrPartitionError.code
        if failed:
            # one bad partition fails the transaction's request: nothing is added
            return {tp: failed.get(tp, OperationNotAttemptedError.code) for tp in partitions}
        if verify_only:
            return self.coordinator.verify_partitions(transactional_id, producer_id,
                                                      producer_epoch, partitions)
        error = await self.coordinator.add_partitions(transactional_id, producer_id,
                                                      producer_epoch, partitions)
        return dict.fromkeys(partitions, fenced_for(version, error))


_INTERNAL = frozenset({OFFSETS_TOPIC, "__transaction_state"})


def _partitions(topics: Iterable[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]
                ) -> list[TopicPartition]:
    """The request's (topic, partition) pairs, each once, in request order."""
    return list(dict.fromkeys((t.name, p) for t in topics for p in t.partitions))


def _by_topic(results: dict[TopicPartition, int]
              ) -> list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]:
    R = AddPartitionsToTxnResponse
    topics: dict[str, list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, partition), error in results.items():
        topics.setdefault(topic, []).append(R.AddPartitionsToTxnPartitionResult(
            partition_index=partition, partition_error_code=error))
    return [R.AddPartitionsToTxnTopicResult(name=name, results_by_partition=rows)
            for name, rows in topics.items()]


# --- AddOffsetsToTxn ----------------------------------------------------------------------

class AddOffsetsToTxnHandler:
    """Adds the group's __consumer_offsets partition to the transaction."""

    MIN_VERSION, MAX_VERSION = 0, 4

    def __init__(self, coordinator: TransactionCoordinator,
                 group_coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator
        self.group_coordinator = group_coordinator

    def __call__(self, ctx: RequestContext, request: AddOffsetsToTxnRequest
                 ) -> Awaitable[AddOffsetsToTxnResponse]:
        return self._handle(ctx, request)

    async def _handle(self, ctx: RequestContext, request: AddOffsetsToTxnRequest
                      ) -> AddOffsetsToTxnResponse:
        tid, group_id = request.transactional_id, request.group_id
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return AddOffsetsToTxnResponse(error_code=TXN_ID_DENIED)
        if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
            return AddOffsetsToTxnResponse(error_code=GroupAuthorizationFailedError.code)
        partition = (OFFSETS_TOPIC, self.group_coordinator.partition_of(group_id))
        error = await self.coordinator.add_partitions(tid, request.producer_id,
                                                      request.producer_epoch, [partition])
        return AddOffsetsToTxnResponse(error_code=fenced_for(ctx.api_version, error))


# --- EndTxn -------------------------------------------------------------------------------

class EndTxnHandler:
    MIN_VERSION, MAX_VERSION = 0, 4

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    def __call__(self, ctx: RequestContext, request: EndTxnRequest) -> Awaitable[EndTxnResponse]:
        return self._handle(ctx, request)

    async def _handle(self, ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
        tid = request.transactional_id
        if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return EndTxnResponse(error_code=TXN_ID_DENIED)
        error = await self.coordinator.end_transaction(tid, request.producer_id,
                                                       request.producer_epoch, request.committed)
        return EndTxnResponse(error_code=fenced_for(ctx.api_version, error))


# --- DescribeTransactions, ListTransactions -------------------------------------------------

class DescribeTransactionsHandler:
    MIN_VERSION, MAX_VERSION = 0, 0

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    def __call__(self, ctx: RequestContext, request: DescribeTransactionsRequest
                 ) -> DescribeTransactionsResponse:
        return DescribeTransactionsResponse(
            transaction_states=[self._describe(ctx, tid) for tid in request.transactional_ids])

    def _describe(self, ctx: RequestContext, tid: str
                  ) -> DescribeTransactionsResponse.TransactionState:
        D = DescribeTransactionsResponse
        state = D.TransactionState(transactional_id=tid, transaction_state="",
                                   transaction_timeout_ms=0, transaction_start_time_ms=0,
                                   producer_id=0, producer_epoch=0, topics=[])
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            state.error_code = TXN_ID_DENIED
            return state
        found = self.coordinator.describe(tid)
        state.error_code = found.error
        metadata = found.metadata
        if metadata is None:
            return state
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(metadata.topic_partitions):
            by_topic.setdefault(topic, []).append(partition)
        state.transaction_state = metadata.state.display_name
        state.transaction_timeout_ms = metadata.txn_timeout_ms
        state.transaction_start_time_ms = metadata.txn_start_timestamp
        state.producer_id = metadata.producer_id
        state.producer_epoch = metadata.producer_epoch
        # only the topics the requester may describe
        state.topics = [D.TopicData(topic=topic, partitions=partitions)
                        for topic, partitions in by_topic.items()
                        if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)]
        return state


class ListTransactionsHandler:
    MIN_VERSION, MAX_VERSION = 0, 1

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator = coordinator

    def __call__(self, ctx: RequestContext, request: ListTransactionsRequest
                 ) -> ListTransactionsResponse:
        duration = request.duration_filter if ctx.api_version >= 1 else -1
        found = self.coordinator.list_transactions(request.producer_id_filters,
                                                   request.state_filters, duration)
        L = ListTransactionsResponse
        # ids the requester may not describe are left out, without an error
        return L(error_code=found.error, unknown_state_filters=found.unknown_state_filters,
                 transaction_states=[
                     L.TransactionState(transactional_id=t.transactional_id,
                                        producer_id=t.producer_id, transaction_state=t.state)
                     for t in found.transactions
                     if ctx.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                      t.transactional_id, log_if_denied=False)])
