"""Envelope (58): a request forwarded, wrapped with its principal, by a broker to the
controller. Kafka 3.9 in ZooKeeper mode advertises v0 but forwards only while migrating to
KRaft (`zookeeper.metadata.migration.enable`), which Moldau does not do; so, as
KafkaApis.handleEnvelope does when forwarding is not enabled, an Envelope from anyone
closes its connection without an answer (logged at INFO), before any authorization.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from moldau.protocol.errors import ProtocolError

if TYPE_CHECKING:
    from moldau.protocol.generated.envelope_request import EnvelopeRequest
    from moldau.protocol.generated.envelope_response import EnvelopeResponse

    from ..requests import RequestContext

log = logging.getLogger("kafka.server.KafkaApis")


class EnvelopeHandler:
    MIN_VERSION, MAX_VERSION = 0, 0

    def __call__(self, ctx: RequestContext, request: EnvelopeRequest) -> EnvelopeResponse:
        log.info("Closing connection from client %s on listener %s because it sent an "
                 "`Envelope` request even though forwarding has not been enabled",
                 ctx.client_id, ctx.listener)
        raise ProtocolError("an Envelope request while forwarding is not enabled; "
                            "closing the connection")
