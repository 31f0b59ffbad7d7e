"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40) and
DescribeDelegationToken (41), answered as Kafka 3.9's KafkaApis answers them in ZooKeeper
mode (KIP-48, KIP-373), on any broker; the rules of the tokens themselves are the
manager's (server/delegation_token_manager.py).

Token requests come only over an authenticated channel: on PLAINTEXT, on SSL without a
client certificate (principal ANONYMOUS) and from a connection a delegation token
authenticated, every one of them answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (64), before
anything else is checked. Creating a token for another owner needs CREATE_TOKENS on
`User:<owner>` (else 65), and every renewer must be a `User:` principal (else 67).
Describe shows a requester the tokens it owns, asked for or may renew, and the others only
with DESCRIBE on the token or DESCRIBE_TOKENS on its owner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.protocol.generated.create_delegation_token_response import (
    CreateDelegationTokenResponse,
)
from moldau.protocol.generated.describe_delegation_token_response import (
    DescribeDelegationTokenResponse,
)
from moldau.protocol.generated.expire_delegation_token_response import (
    ExpireDelegationTokenResponse,
)
from moldau.protocol.generated.renew_delegation_token_response import (
    RenewDelegationTokenResponse,
)
from moldau.security.acls import AclOperation, ResourceType
from moldau.security.delegation_tokens import (
    USER_TYPE,
    DelegationToken,
    TokenInformation,
    parse_principal,
)
from moldau.security.principal import ANONYMOUS, KafkaPrincipal

from ..delegation_token_manager import NO_TIMESTAMP, TokenError

if TYPE_CHECKING:
    from moldau.protocol.generated.create_delegation_token_request import (
        CreateDelegationTokenRequest,
    )
    from moldau.protocol.generated.describe_delegation_token_request import (
        DescribeDelegationTokenRequest,
    )
    from moldau.protocol.generated.expire_delegation_token_request import (
        ExpireDelegationTokenRequest,
    )
    from moldau.protocol.generated.renew_delegation_token_request import (
        RenewDelegationTokenRequest,
    )

    from ..delegation_token_manager import DelegationTokenManager
    from ..request_context import RequestContext

Described_ = DescribeDelegationTokenResponse.DescribedDelegationToken
Renewer_ = DescribeDelegationTokenResponse.DescribedDelegationTokenRenewer
REQUESTER_VERSION = 3  # the responses carry the token requester from v3 (KIP-373) on


def requester(ctx: RequestContext) -> KafkaPrincipal:
    return parse_principal(ctx.session.principal)


def token_requests_allowed(ctx: RequestContext) -> bool:
    """KafkaApis.allowTokenRequests: not from a token login, not on PLAINTEXT, not on SSL
    without a client certificate."""
    session = ctx.session
    if session.token_authenticated:
        return False
    protocol = session.security_protocol
    return not (protocol == "PLAINTEXT"
                or (protocol == "SSL" and session.principal == str(ANONYMOUS)))


class CreateDelegationTokenHandler:
    MIN_VERSION, MAX_VERSION = 0, 3

    def __init__(self, tokens: DelegationTokenManager | None) -> None:
        self.tokens = tokens  # None: a broker built without token support answers 61

    async def __call__(self, ctx: RequestContext, request: CreateDelegationTokenRequest
                       ) -> CreateDelegationTokenResponse:
        asker = requester(ctx)
        # v3 (KIP-373) may name an owner; without one the token is the requester's own
        owner = (KafkaPrincipal(request.owner_principal_name, request.owner_principal_type or "")
                 if request.owner_principal_name else asker)
        if not token_requests_allowed(ctx):
            error = TokenError.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        elif owner != asker and not ctx.authorize(AclOperation.CREATE_TOKENS,
                                                  ResourceType.USER, str(owner)):
            error = TokenError.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        else:
            renewers = [KafkaPrincipal(r.principal_name, r.principal_type)
                        for r in request.renewers]
            if any(r.type != USER_TYPE for r in renewers):
                error = TokenError.INVALID_PRINCIPAL_TYPE
            elif self.tokens is None:
                error = TokenError.DELEGATION_TOKEN_AUTH_DISABLED
            else:
                result = await self.tokens.create(owner, asker, renewers,
                                                  request.max_lifetime_ms)
                if result.token is not None:
                    return created(result.token, ctx.api_version)
                error = result.error
        return refused(error, owner, asker, ctx.api_version)


def created(token: DelegationToken, version: int) -> CreateDelegationTokenResponse:
    info = token.info
    response = CreateDelegationTokenResponse(
        error_code=0, principal_type=info.owner.type, principal_name=info.owner.name,
        issue_timestamp_ms=info.issue_timestamp, expiry_timestamp_ms=info.expiry_timestamp,
        max_timestamp_ms=info.max_timestamp, token_id=info.token_id, hmac=token.hmac)
    if version >= REQUESTER_VERSION:
        response.token_requester_principal_type = info.token_requester.type
        response.token_requester_principal_name = info.token_requester.name
    return response


def refused(error: TokenError, owner: KafkaPrincipal, asker: KafkaPrincipal,
            version: int) -> CreateDelegationTokenResponse:
    """CreateDelegationTokenResponse.prepareResponse for an error: the owner and (v3+) the
    requester, no token, every timestamp -1."""
    response = CreateDelegationTokenResponse(
        error_code=error, principal_type=owner.type, principal_name=owner.name,
        issue_timestamp_ms=NO_TIMESTAMP, expiry_timestamp_ms=NO_TIMESTAMP,
        max_timestamp_ms=NO_TIMESTAMP, token_id="", hmac=b"")
    if version >= REQUESTER_VERSION:
        response.token_requester_principal_type = asker.type
        response.token_requester_principal_name = asker.name
    return response


class RenewDelegationTokenHandler:
    MIN_VERSION, MAX_VERSION = 0, 2

    def __init__(self, tokens: DelegationTokenManager | None) -> None:
        self.tokens = tokens

    async def __call__(self, ctx: RequestContext, request: RenewDelegationTokenRequest
                       ) -> RenewDelegationTokenResponse:
        if not token_requests_allowed(ctx):
            error, expiry = TokenError.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, NO_TIMESTAMP
        elif self.tokens is None:
            error, expiry = TokenError.DELEGATION_TOKEN_AUTH_DISABLED, NO_TIMESTAMP
        else:
            error, expiry = await self.tokens.renew(requester(ctx), bytes(request.hmac),
                                                    request.renew_period_ms)
        return RenewDelegationTokenResponse(error_code=error, expiry_timestamp_ms=expiry)


class ExpireDelegationTokenHandler:
    MIN_VERSION, MAX_VERSION = 0, 2

    def __init__(self, tokens: DelegationTokenManager | None) -> None:
        self.tokens = tokens

    async def __call__(self, ctx: RequestContext, request: ExpireDelegationTokenRequest
                       ) -> ExpireDelegationTokenResponse:
        if not token_requests_allowed(ctx):
            error, expiry = TokenError.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, NO_TIMESTAMP
        elif self.tokens is None:
            error, expiry = TokenError.DELEGATION_TOKEN_AUTH_DISABLED, NO_TIMESTAMP
        else:
            error, expiry = await self.tokens.expire(requester(ctx), bytes(request.hmac),
                                                     request.expiry_time_period_ms)
        return ExpireDelegationTokenResponse(error_code=error, expiry_timestamp_ms=expiry)


class DescribeDelegationTokenHandler:
    MIN_VERSION, MAX_VERSION = 0, 3

    def __init__(self, tokens: DelegationTokenManager | None) -> None:
        self.tokens = tokens

    async def __call__(self, ctx: RequestContext, request: DescribeDelegationTokenRequest
                       ) -> DescribeDelegationTokenResponse:
        if not token_requests_allowed(ctx):
            return DescribeDelegationTokenResponse(
                error_code=TokenError.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, tokens=[])
        if self.tokens is None or not self.tokens.enabled:
            return DescribeDelegationTokenResponse(
                error_code=TokenError.DELEGATION_TOKEN_AUTH_DISABLED, tokens=[])
        if request.owners is not None and not request.owners:
            # an empty owner list (not a null one) asks for nothing, as in Kafka
            return DescribeDelegationTokenResponse(error_code=0, tokens=[])
        owners = (None if request.owners is None else
                  [KafkaPrincipal(o.principal_name, o.principal_type) for o in request.owners])
        asker = requester(ctx)

        def eligible(info: TokenInformation) -> bool:
            """DelegationTokenManager.filterToken."""
            if owners is not None and not any(info.owner_or_renewer(o) for o in owners):
                return False
            if info.owner_or_renewer(asker):
                return True
            return (ctx.authorize(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN,
                                  info.token_id)
                    or ctx.authorize(AclOperation.DESCRIBE_TOKENS, ResourceType.USER,
                                     str(info.owner)))

        return DescribeDelegationTokenResponse(error_code=0, tokens=[
            described(t, ctx.api_version) for t in self.tokens.describe(eligible)])


def described(token: DelegationToken, version: int) -> Described_:
    info = token.info
    entry = Described_(
        principal_type=info.owner.type, principal_name=info.owner.name,
        issue_timestamp=info.issue_timestamp, expiry_timestamp=info.expiry_timestamp,
        max_timestamp=info.max_timestamp, token_id=info.token_id, hmac=token.hmac,
        renewers=[Renewer_(principal_type=r.type, principal_name=r.name)
                  for r in info.renewers])
    if version >= REQUESTER_VERSION:
        entry.token_requester_principal_type = info.token_requester.type
        entry.token_requester_principal_name = info.token_requester.name
    return entry
