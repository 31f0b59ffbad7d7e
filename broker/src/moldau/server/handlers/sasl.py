"""SaslHandshake (17) and SaslAuthenticate (36) once a connection is past authentication.

Before it, a SASL connection's authenticator answers them (server/sasl_authenticator.py).
After it, as in Kafka's KafkaApis: a SaslHandshake begins a re-authentication when the
session has a lifetime (KIP-368), and is otherwise refused with ILLEGAL_SASL_STATE (34),
as on a listener without SASL; a SaslAuthenticate is always refused with 34.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.errors import IllegalSaslStateError
from moldau.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse
from moldau.protocol.generated.sasl_handshake_response import SaslHandshakeResponse

if TYPE_CHECKING:
    from moldau.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
    from moldau.protocol.generated.sasl_handshake_request import SaslHandshakeRequest

    from ..request_context import RequestContext

ILLEGAL_SASL_STATE = IllegalSaslStateError.code


class SaslHandshakeHandler:
    MIN_VERSION, MAX_VERSION = 0, 1

    def __call__(self, ctx: RequestContext,
                 request: SaslHandshakeRequest) -> SaslHandshakeResponse:
        authenticator = ctx.conn.sasl
        if authenticator is not None:
            response = authenticator.begin_reauthentication(ctx.conn, request, ctx.api_version)
            if response is not None:
                return response
        return SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=[])


class SaslAuthenticateHandler:
    MIN_VERSION, MAX_VERSION = 0, 2

    def __call__(self, ctx: RequestContext,
                 request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
        return SaslAuthenticateResponse(
            error_code=ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication")
