"""InitProducerId (API key 22) for idempotent producers: a producer id from this broker's
block of ids (allocated in ZooKeeper, /latest_producer_id_block), epoch 0; a producer that
passes its current id and epoch (v3+) gets its epoch bumped. Transactional ids are refused
until transactions exist."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.errors import InvalidRequestError
from moldau.protocol.messages.init_producer_id_response import InitProducerIdResponse

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from moldau.protocol.messages.init_producer_id_request import InitProducerIdRequest

    from ..producer_ids import ProducerIdManager
    from ..requests import RequestContext

log = logging.getLogger("kafka.coordinator.transaction.TransactionCoordinator")
INVALID_REQUEST = InvalidRequestError.code
MAX_EPOCH = 32767


class InitProducerIdHandler:
    MIN_VERSION, MAX_VERSION = 0, 5

    def __init__(self, producer_ids: ProducerIdManager) -> None:
        self.producer_ids = producer_ids

    def __call__(self, ctx: RequestContext, request: InitProducerIdRequest
                 ) -> InitProducerIdResponse | Awaitable[InitProducerIdResponse]:
        if request.transactional_id is not None:
            log.warning("Refusing InitProducerId for transactional id %r from %s: "
                        "transactions are not supported yet", request.transactional_id,
                        ctx.client_id)
            return InitProducerIdResponse(error_code=INVALID_REQUEST)
        ctx.authorize("IDEMPOTENT_WRITE", "CLUSTER", "kafka-cluster")
        if request.producer_id >= 0 and 0 <= request.producer_epoch < MAX_EPOCH - 1:
            # KIP-360: an idempotent producer bumps its epoch to reset its sequences
            return InitProducerIdResponse(error_code=0, producer_id=request.producer_id,
                                          producer_epoch=request.producer_epoch + 1)
        return self._new_id()

    async def _new_id(self) -> InitProducerIdResponse:
        producer_id = await self.producer_ids.next_id()
        return InitProducerIdResponse(error_code=0, producer_id=producer_id, producer_epoch=0)
