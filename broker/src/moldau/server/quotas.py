"""The quota stage of the request path: what a request counts against, and the recorder
the dispatcher asks after each handler for the throttle time (Kafka's ClientQuotaManager
family and KIP-219).

Kafka answers a client over its quota at once, with the throttle time in the response,
and then mutes the connection for that long: the client backs off and the broker spends
nothing on it meanwhile. The dispatcher does both (server/requests.py); the recorder only
measures and decides. `NoQuotas`, today's recorder, never throttles; the quota issue
replaces it with one that reads the quota configs.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from moldau.protocol._runtime import Message

    from .request_context import RequestContext


class Quota(enum.Enum):
    """Which quota a request counts against."""

    NORMAL = "normal"  # request time (and produce/fetch bytes) of the client
    EXEMPT = "exempt"  # inter-broker: recorded as exempt-request-time, never throttled
    CONTROLLER_MUTATION = "controller mutation"  # partitions created or deleted


class QuotaRecorder(Protocol):
    def record(self, ctx: RequestContext, quota: Quota, request: Message,
               response: Message | None, handler_ns: int) -> int:
        """Record a request the handler has answered (its handler time in ns; the bytes
        are in the request and response) and return the throttle time in ms, 0 when the
        client is within its quotas."""
        ...


class NoQuotas:
    """No quota configured anywhere: nothing to record, nobody throttled."""

    def record(self, ctx: RequestContext, quota: Quota, request: Message,
               response: Message | None, handler_ns: int) -> int:
        return 0
