"""What every OAUTHBEARER token validator hands the SASL server: the validated token, or
the RFC 7628 error the server answers with (Kafka's OAuthBearerToken and the error side of
its OAuthBearerValidatorCallback)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

INVALID_TOKEN = "invalid_token"
INSUFFICIENT_SCOPE = "insufficient_scope"


@dataclass(frozen=True)
class OAuthBearerToken:
    """A validated bearer token."""

    value: str  # the compact serialization the client sent
    principal_name: str  # the principal is User:<this>
    scope: frozenset[str]
    lifetime_ms: int  # epoch ms of the token's `exp`: the credential's end
    start_time_ms: int | None  # epoch ms of `iat`, when the token has one


class TokenValidationError(Exception):
    """A token the validator refuses. `status` (and `scope`, `openid_configuration`) go
    to the client in the server's JSON error; `reason` only to the broker's log, since
    Kafka tells a client no more than the status."""

    def __init__(self, reason: str, status: str = INVALID_TOKEN, scope: str | None = None,
                 openid_configuration: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.scope = scope
        self.openid_configuration = openid_configuration


class TokenValidator(Protocol):
    """Kafka's server callback handler for OAUTHBEARER: the unsecured JWS validator or
    the signed-JWT (JWKS) validator of KIP-768."""

    def validate(self, token_value: str) -> OAuthBearerToken:
        """The token, or TokenValidationError."""
        ...


def java_list(items: list[str] | tuple[str, ...]) -> str:
    """A list as Java's List.toString prints it (Kafka puts it in error texts)."""
    return "[" + ", ".join(items) + "]"
