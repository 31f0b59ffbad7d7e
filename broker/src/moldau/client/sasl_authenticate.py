"""The client half of Kafka's SASL exchange over Kafka framing, as Kafka 3.9's
SaslClientAuthenticator runs it right after a connection (and its TLS handshake) is up:

1. ApiVersions v0 (always v0: a broker may take a request it cannot parse for a raw GSSAPI
   token), to learn the SaslHandshake and SaslAuthenticate versions the broker serves;
2. SaslHandshake (v1: tokens travel inside SaslAuthenticate) naming the mechanism;
3. SaslAuthenticate (the broker's highest version, at most 2) carrying the mechanism's
   tokens until the mechanism is complete and the broker has answered its last token.

The exchange itself is a generator that yields requests and takes their responses, so the
blocking driver (`authenticate`, for client/blocking.py) and the asyncio driver
(`authenticate_async`, for client/broker_connection.py) share every rule. Both return a
`SaslSession`: the session lifetime the broker granted in ms (0: the session does not
expire), from which `reauthentication_delay_s` picks when to authenticate again (KIP-368),
and the SaslAuthenticate version, which a re-authentication reuses: it starts with
SaslHandshake straight away, since a broker closes a connection whose session has expired
at any other request (ApiVersions included).
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from moldau.errors import default_message
from moldau.protocol._runtime import Message
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.api_versions_response import ApiVersionsResponse
from moldau.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse
from moldau.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from moldau.protocol.generated.sasl_handshake_response import SaslHandshakeResponse
from moldau.security.sasl.errors import SaslAuthenticationError, SaslMechanismError

if TYPE_CHECKING:
    from moldau.security.sasl.mechanism import SaslClient

__all__ = [
    "SaslAuthenticationFailed", "SaslMechanismNotEnabled", "SaslSession", "authenticate",
    "authenticate_async", "reauthentication_delay_s", "sasl_exchange",
]

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58
SASL_AUTHENTICATE_MAX_VERSION = 2  # the newest SaslAuthenticate Moldau's codec knows

# (api key, version, request body): what the exchange asks its driver to send
SaslRequest = tuple[int, int, Message]


@dataclass(frozen=True)
class SaslSession:
    """An authentication's outcome."""

    lifetime_ms: int  # the broker's SessionLifetimeMs; 0: the session does not expire
    authenticate_version: int  # the SaslAuthenticate version; a re-authentication's too


# Message: the response body to the request last yielded, decoded at its version
SaslExchange = Generator[SaslRequest, Message, SaslSession]
_Response = TypeVar("_Response", bound=Message)


class SaslAuthenticationFailed(ConnectionError):
    """The broker refused the authentication, or the exchange could not go on; the
    message is the broker's ErrorMessage when it sent one (Kafka's client does the same).
    A ConnectionError: the connection is unusable, and the inter-broker loops that
    reconnect (with their backoff) on one retry it, as Kafka's brokers do."""

    def __init__(self, message: str, error_code: int = SASL_AUTHENTICATION_FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = error_code


class SaslMechanismNotEnabled(SaslAuthenticationFailed):
    """SaslHandshake answered UNSUPPORTED_SASL_MECHANISM: the broker's listener does not
    enable the client's mechanism; `enabled` is the list it does enable."""

    def __init__(self, mechanism: str, enabled: list[str]) -> None:
        super().__init__(f"Client SASL mechanism '{mechanism}' not enabled in the server, "
                         f"enabled mechanisms are {_java_list(enabled)}",
                         UNSUPPORTED_SASL_MECHANISM)
        self.mechanism = mechanism
        self.enabled = enabled


def _java_list(items: list[str]) -> str:
    """A list as Java's List.toString prints it, as Kafka's messages show lists."""
    return "[" + ", ".join(items) + "]"


def sasl_exchange(client: SaslClient, authenticate_version: int | None = None
                  ) -> SaslExchange:
    """The whole exchange for one mechanism client. `authenticate_version` given (a
    re-authentication: the version of the first authentication), ApiVersions is skipped."""
    if authenticate_version is None:
        authenticate_version = yield from _negotiate_versions()
    yield from _handshake(client.mechanism)
    token = _mechanism_step(client, None)
    while token is not None:
        answer = _expect(SaslAuthenticateResponse, (yield (
            ApiKey.SASL_AUTHENTICATE, authenticate_version,
            SaslAuthenticateRequest(auth_bytes=token))))
        if answer.error_code:
            raise SaslAuthenticationFailed(
                answer.error_message or default_message(answer.error_code)
                or f"SASL authentication failed with error code {answer.error_code}",
                answer.error_code)
        session = SaslSession(int(answer.session_lifetime_ms), authenticate_version)
        if client.complete:
            # the mechanism finished with the token just sent (PLAIN's only one): the
            # broker's answer to it was the last step
            return session
        token = _mechanism_step(client, bytes(answer.auth_bytes))
        if token is None and client.complete:
            return session  # e.g. SCRAM, once the server's signature checks out
    raise SaslAuthenticationFailed(
        f"SASL mechanism {client.mechanism} has nothing to send to the broker but has not "
        "completed the authentication")


def _negotiate_versions() -> Generator[SaslRequest, Message, int]:
    """ApiVersions v0; the SaslAuthenticate version to use."""
    answer = _expect(ApiVersionsResponse, (yield (ApiKey.API_VERSIONS, 0,
                                                  ApiVersionsRequest())))
    if answer.error_code:
        raise SaslAuthenticationFailed(
            "the broker refused ApiVersions before SASL authentication: "
            + (default_message(answer.error_code) or f"error code {answer.error_code}"),
            answer.error_code)
    served = {k.api_key: k.max_version for k in answer.api_keys}
    handshake = served.get(ApiKey.SASL_HANDSHAKE)
    authenticate_max = served.get(ApiKey.SASL_AUTHENTICATE)
    if handshake is None or handshake < 1 or authenticate_max is None:
        # SaslHandshake v0 means raw SASL tokens without Kafka headers (Kafka before 1.0)
        raise SaslAuthenticationFailed(
            "the broker does not serve SaslHandshake v1 and SaslAuthenticate (Kafka 1.0 or "
            "later), which Moldau's SASL client needs")
    return min(authenticate_max, SASL_AUTHENTICATE_MAX_VERSION)


def _handshake(mechanism: str) -> Generator[SaslRequest, Message, None]:
    answer = _expect(SaslHandshakeResponse, (yield (
        ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism))))
    enabled = list(answer.mechanisms)
    if answer.error_code == UNSUPPORTED_SASL_MECHANISM:
        raise SaslMechanismNotEnabled(mechanism, enabled)
    if answer.error_code == ILLEGAL_SASL_STATE:
        # what a listener that is not a SASL one answers (Kafka's KafkaApis)
        raise SaslAuthenticationFailed(
            f"Unexpected handshake request with client mechanism {mechanism}, enabled "
            f"mechanisms are {_java_list(enabled)}", ILLEGAL_SASL_STATE)
    if answer.error_code:
        raise SaslAuthenticationFailed(
            f"Unknown error code {answer.error_code}, client mechanism is {mechanism}, "
            f"enabled mechanisms are {_java_list(enabled)}", answer.error_code)


def _mechanism_step(client: SaslClient, challenge: bytes | None) -> bytes | None:
    """The mechanism's initial response (challenge None) or its answer to a challenge;
    its errors (a bad server signature, a malformed challenge) become
    SaslAuthenticationFailed, as Kafka's client fails the connection."""
    try:
        return client.initial_response() if challenge is None else client.evaluate(challenge)
    except (SaslAuthenticationError, SaslMechanismError) as exc:
        raise SaslAuthenticationFailed(
            f"SASL {client.mechanism} authentication failed: the broker's answer did not "
            f"check out ({exc})") from exc


def _expect(kind: type[_Response], response: Message) -> _Response:
    """The response, checked to be the class the request asked for (a driver error else)."""
    if not isinstance(response, kind):
        raise TypeError(f"SASL exchange expected {kind.__name__}, got "
                        f"{type(response).__name__}")
    return response


def authenticate(request: Callable[[int, int, Message], Message], client: SaslClient,
                 authenticate_version: int | None = None) -> SaslSession:
    """Run the exchange with a blocking `request(api_key, version, body) -> response`
    (`authenticate_version`: see sasl_exchange). Raises SaslAuthenticationFailed."""
    exchange = sasl_exchange(client, authenticate_version)
    try:
        sent = next(exchange)
        while True:
            sent = exchange.send(request(*sent))
    except StopIteration as done:
        session: SaslSession = done.value
        return session


async def authenticate_async(request: Callable[[int, int, Message], Awaitable[Message]],
                             client: SaslClient,
                             authenticate_version: int | None = None) -> SaslSession:
    """authenticate() for an asyncio connection's `request` coroutine."""
    exchange = sasl_exchange(client, authenticate_version)
    try:
        sent = next(exchange)
        while True:
            sent = exchange.send(await request(*sent))
    except StopIteration as done:
        session: SaslSession = done.value
        return session


def reauthentication_delay_s(session_lifetime_ms: int) -> float | None:
    """When to authenticate again, in seconds from the start of an authentication (the
    callers count from there, which errs early): at a random point between 85% and 95% of
    the session lifetime, as Kafka's client does (the margin covers latency and clock
    drift, the jitter spreads many connections' renewals). None when the session does not
    expire."""
    if session_lifetime_ms <= 0:
        return None
    return session_lifetime_ms * random.uniform(0.85, 0.95) / 1000
