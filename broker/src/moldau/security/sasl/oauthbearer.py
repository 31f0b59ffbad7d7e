"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer and OAuthBearerSaslClient
run it.

The client sends its bearer token (and any SASL extensions) in one message. The server
hands the token to its validator (oauthbearer_unsecured.py by default, oauthbearer_jwks.py
for signed JWTs): a valid token completes the exchange with an empty answer, its principal
name the authorization id and its `exp` the end of the credential (the session lifetime).
A refused token is answered *successfully* with a JSON error (`{"status":"invalid_token"}`);
the client replies with a lone 0x01, and the server then fails with that JSON as the
SaslAuthenticationError text (error 58). Every extension is accepted, as both of Kafka's
validators accept them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from moldau.security.sasl.errors import (
    SaslAuthenticationError,
    SaslIllegalStateError,
    SaslMechanismError,
)
from moldau.security.sasl.oauthbearer_messages import (
    CONTROL_A,
    ClientInitialResponse,
    error_json,
    parse_client_initial_response,
)
from moldau.security.sasl.oauthbearer_token import (
    OAuthBearerToken,
    TokenValidationError,
    TokenValidator,
)

OAUTHBEARER_MECHANISM = "OAUTHBEARER"
INTERNAL_ERROR = "Authentication could not be performed due to an internal error on the server"

log = logging.getLogger("org.apache.kafka.common.security.oauthbearer.internals."
                        "OAuthBearerSaslServer")


class OAuthBearerServer:
    """The broker's side of one exchange."""

    mechanism = OAUTHBEARER_MECHANISM

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._token: OAuthBearerToken | None = None
        self._error: str | None = None  # the JSON error sent; a lone 0x01 must follow
        self._failed = False
        self.extensions: Mapping[str, str] = {}

    def evaluate(self, token: bytes) -> bytes:
        if self._token is not None or self._failed:
            raise SaslIllegalStateError("The SASL/OAUTHBEARER exchange is already over")
        try:
            return self._evaluate(token)
        except (SaslAuthenticationError, SaslMechanismError):
            self._failed = True
            raise

    def _evaluate(self, message: bytes) -> bytes:
        if message == CONTROL_A and self._error is not None:
            raise SaslAuthenticationError(self._error)
        # anything else starts over, as in Kafka: a client may offer another token
        self._error = None
        response = parse_client_initial_response(message)
        try:
            token = self._validator.validate(response.token)
        except TokenValidationError as exc:
            log.debug("Token refused (%s): %s", exc.status, exc.reason)
            self._error = error_json(exc.status, exc.scope, exc.openid_configuration)
            return self._error.encode()
        except Exception as exc:
            # a validator bug must fail this exchange only, as Kafka turns a callback
            # handler's IOException into a SaslException (the generic text)
            log.exception("OAUTHBEARER token validation failed unexpectedly")
            raise SaslMechanismError(f"{INTERNAL_ERROR}: {exc}") from exc
        authzid = response.authorization_id
        if authzid and authzid != token.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({token.principal_name})")
        self.extensions = dict(response.extensions)
        self._token = token
        log.debug("Successfully authenticate User=%s", token.principal_name)
        return b""

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def token(self) -> OAuthBearerToken:
        if self._token is None:
            raise SaslIllegalStateError("Authentication exchange has not completed")
        return self._token

    @property
    def authorization_id(self) -> str:
        return self.token.principal_name

    @property
    def token_authenticated(self) -> bool:
        return False

    @property
    def credential_expiry_ms(self) -> int | None:
        return self.token.lifetime_ms


class OAuthBearerClient:
    """The client's side: `token` gives the bearer token to send (called once per
    exchange, so each connection and re-authentication sends a current one)."""

    mechanism = OAUTHBEARER_MECHANISM

    def __init__(self, token: Callable[[], str], extensions: Mapping[str, str] | None = None,
                 authorization_id: str = "") -> None:
        self._token = token
        self._extensions = dict(extensions or {})
        self._authorization_id = authorization_id
        self._sent = False
        self._complete = False
        self.error: str | None = None  # the server's JSON error, once it sent one

    def initial_response(self) -> bytes:
        if self._sent:
            raise SaslIllegalStateError("OAUTHBEARER initial response already sent")
        try:
            message = ClientInitialResponse(self._token(), self._authorization_id,
                                            self._extensions).encode()
        except ValueError as exc:
            raise SaslMechanismError(str(exc)) from None
        self._sent = True
        return message

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The server's empty answer completes the exchange; a JSON error is answered
        with 0x01, after which the server fails the authentication with it."""
        if not self._sent:
            return self.initial_response()
        if self.error is not None:
            raise SaslAuthenticationError(
                f"Server sent a message after the OAUTHBEARER error {self.error}")
        if challenge:
            self.error = challenge.decode("utf-8", "replace")
            return CONTROL_A
        self._complete = True
        return None

    @property
    def complete(self) -> bool:
        return self._complete
