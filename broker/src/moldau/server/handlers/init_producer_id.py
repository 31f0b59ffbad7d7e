"""InitProducerId (API key 22). Idempotent producers: a producer id from this broker's
block of ids (allocated in ZooKeeper, /latest_producer_id_block), epoch 0; a producer that
passes its current id and epoch (v3+) gets its epoch bumped. Transactional producers
(WRITE on the transactional id): the transaction coordinator's answer, with
INVALID_PRODUCER_EPOCH instead of PRODUCER_FENCED below v4, as KafkaApis does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.errors import (
    ClusterAuthorizationFailedError,
    InvalidProducerEpochError,
    InvalidRequestError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
)
from moldau.protocol.generated.init_producer_id_response import InitProducerIdResponse
from moldau.security.acls import AclOperation, ResourceType

from .cluster_info import CLUSTER_NAME

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from moldau.coordinator.transaction.coordinator import TransactionCoordinator
    from moldau.protocol.generated.init_producer_id_request import InitProducerIdRequest

    from ..producer_ids import ProducerIdManager
    from ..requests import RequestContext

INVALID_REQUEST = InvalidRequestError.code
CLUSTER_AUTHORIZATION_FAILED = ClusterAuthorizationFailedError.code
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = TransactionalIdAuthorizationFailedError.code
MAX_EPOCH = 32767


class InitProducerIdHandler:
    MIN_VERSION, MAX_VERSION = 0, 5

    def __init__(self, producer_ids: ProducerIdManager,
                 transactions: TransactionCoordinator) -> None:
        self.producer_ids = producer_ids
        self.transactions = transactions

    def __call__(self, ctx: RequestContext, request: InitProducerIdRequest
                 ) -> InitProducerIdResponse | Awaitable[InitProducerIdResponse]:
        txn_id = request.transactional_id
        if txn_id is not None:
            if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
                return InitProducerIdResponse(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                              producer_id=-1, producer_epoch=-1)
            return self._transactional(ctx.api_version, request)
        # an idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE on any topic
        # (Kafka 3.x; the first check is not logged as a denial when the second passes)
        if not (ctx.authorize(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME,
                              log_if_denied=False)
                or ctx.authorize_by_resource_type(AclOperation.WRITE, ResourceType.TOPIC)):
            return InitProducerIdResponse(error_code=CLUSTER_AUTHORIZATION_FAILED,
                                          producer_id=-1, producer_epoch=-1)
        if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
            # KIP-360: an idempotent producer bumps its epoch to reset its sequences
            return InitProducerIdResponse(error_code=0, producer_id=request.producer_id,
                                          producer_epoch=request.producer_epoch + 1)
        return self._new_id()

    async def _transactional(self, version: int, request: InitProducerIdRequest
                             ) -> InitProducerIdResponse:
        pid, epoch = request.producer_id, request.producer_epoch
        if pid == -1 and epoch == -1:
            expected = None
        elif pid == -1 or epoch == -1:  # one without the other
            return InitProducerIdResponse(error_code=INVALID_REQUEST, producer_id=-1,
                                          producer_epoch=-1)
        else:
            expected = (pid, epoch)
        assert request.transactional_id is not None
        result = await self.transactions.init_producer_id(
            request.transactional_id, request.transaction_timeout_ms, expected)
        error = result.error
        if error == ProducerFencedError.code and version < 4:
            error = InvalidProducerEpochError.code  # older clients know only that one
        return InitProducerIdResponse(error_code=error, producer_id=result.producer_id,
                                      producer_epoch=result.producer_epoch)

    async def _new_id(self) -> InitProducerIdResponse:
        producer_id = await self.producer_ids.next_id()
        return InitProducerIdResponse(error_code=0, producer_id=producer_id, producer_epoch=0)
