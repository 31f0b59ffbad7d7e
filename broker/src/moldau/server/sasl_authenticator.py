"""One SASL connection's authentication, as Kafka's SaslServerAuthenticator runs it.

Until a connection on a SASL listener has authenticated, the dispatcher hands each of its
frames here (`Connection.authenticating`), before any other stage. Allowed, in order: an
ApiVersions (once, before the handshake), a SaslHandshake naming an enabled mechanism,
then the mechanism's tokens: inside SaslAuthenticate requests after a v1 handshake, or as
raw size-prefixed frames after a v0 one. Anything else closes the connection without a
response; a request of another API during the token exchange gets its own response with
ILLEGAL_SASL_STATE (34) first. A failed authentication answers SASL_AUTHENTICATION_FAILED
(58) with Kafka's message and closes after `connection.failed.authentication.delay.ms`,
the connection muted meanwhile. Frames before authentication are capped at
`sasl.server.max.receive.size`.

Re-authentication (KIP-368): with `connections.max.reauth.ms` set, a session lasts that
long (the final SaslAuthenticate response says so to v1+ clients). A SaslHandshake on an
authenticated connection (the SaslHandshake handler calls `begin_reauthentication`)
starts the same exchange again, which must end with the same principal; a connection
still unauthenticated when its session ends is closed at its next request.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

from moldau.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from moldau.protocol._runtime import Message
from moldau.protocol.errors import ProtocolError, UnsupportedVersionError
from moldau.protocol.framing import frame as size_prefixed
from moldau.protocol.generated.api import APIS, ApiKey
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from moldau.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse
from moldau.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from moldau.protocol.generated.sasl_handshake_response import SaslHandshakeResponse
from moldau.protocol.headers import decode_request, unsupported_api_versions_response
from moldau.security.credential_cache import ScramCredentialCache
from moldau.security.delegation_tokens import DelegationTokenCache
from moldau.security.sasl.errors import (
    SaslAuthenticationError,
    SaslMechanismError,
    generic_failure_message,
)
from moldau.security.sasl.gssapi import GSSAPI_MECHANISM, GssapiServer
from moldau.security.sasl.jaas import plain_users
from moldau.security.sasl.mechanism import SaslServer
from moldau.security.sasl.oauthbearer import OAUTHBEARER_MECHANISM, OAuthBearerServer
from moldau.security.sasl.plain import PlainServer
from moldau.security.sasl.scram import ScramServer
from moldau.security.sasl.scram_credentials import ScramMechanism

from .error_responses import error_response
from .responses import Parts, encode_response_parts
from .sasl_listeners import SaslListener

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("org.apache.kafka.common.network.Selector")

UNSUPPORTED_SASL_MECHANISM = UnsupportedSaslMechanismError.code
ILLEGAL_SASL_STATE = IllegalSaslStateError.code
SASL_AUTHENTICATION_FAILED = SaslAuthenticationFailedError.code
MIN_REAUTH_INTERVAL_NS = 1_000_000_000  # Kafka ignores a re-authentication sooner than this
FAILED_MUTE = "authentication failed"

# (connection, decoded header, body, arrival ns) -> what the dispatcher's stages answer
Serve = Callable[["Connection", RequestHeader, Message, int],
                 "Parts | Awaitable[Parts | None] | None"]


class State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "the first request: ApiVersions or SaslHandshake"
    HANDSHAKE = "SaslHandshake, after ApiVersions"
    AUTHENTICATE = "the mechanism's tokens"
    COMPLETE = "authenticated"
    EXPIRED = "the session ended: only a re-authentication may follow"
    FAILED = "failed: the connection is closing"


class MechanismServers:
    """A fresh mechanism server per exchange: PLAIN against its JAAS entry's `user_*`
    options, SCRAM against the credentials in ZooKeeper (the broker's cache), OAUTHBEARER
    with the listener's token validator (unsecured or JWKS, from sasl_listeners.py),
    GSSAPI with the listener's keytab and principal-to-local rules."""

    def __init__(self, listener: SaslListener, credentials: ScramCredentialCache,
                 tokens: DelegationTokenCache | None = None) -> None:
        """tokens: the delegation tokens SCRAM `tokenauth=true` logins are checked
        against (None: every such login fails, as on a broker without tokens)."""
        self._plain_users = ({} if "PLAIN" not in listener.logins
                             else plain_users(listener.logins["PLAIN"]))
        self._credentials = credentials
        self._tokens = tokens
        self._oauthbearer = listener.oauthbearer
        self._kerberos = listener.kerberos

    def new(self, mechanism: str) -> SaslServer:
        if mechanism == OAUTHBEARER_MECHANISM:
            assert self._oauthbearer is not None  # resolved with the listener's settings
            return OAuthBearerServer(self._oauthbearer)
        if mechanism == GSSAPI_MECHANISM:
            assert self._kerberos is not None  # the keytab login and the to-local rules
            return GssapiServer(self._kerberos.login.acceptor, self._kerberos.short_namer)
        scram = ScramMechanism.by_name(mechanism)
        if scram is not None:
            cache, tokens = self._credentials, self._tokens
            return ScramServer(scram, lambda user: cache.get(scram, user), tokens=(
                None if tokens is None else
                lambda token_id: tokens.login(scram, token_id, int(time.time() * 1000))))
        return PlainServer(self._plain_users)


class AuthenticationStats:
    """socket-server-metrics' authentication counts of one listener."""

    def __init__(self) -> None:
        self.counts = {name: 0 for name in (
            "successful-authentication", "failed-authentication",
            "successful-reauthentication", "failed-reauthentication",
            "successful-authentication-no-reauth", "expired-connections-killed")}
        self._events: dict[str, list[float]] = {name: [] for name in self.counts}
        self.reauth_latency_ms: list[float] = []

    def record(self, name: str) -> None:
        self.counts[name] += 1
        events = self._events[name]
        now = time.monotonic()
        events.append(now)
        if len(events) > 64 and now - events[0] > 60:
            del events[:len(events) // 2]

    def attributes(self) -> dict[str, object]:
        """Kafka's names: a `-total` and a `-rate` (events per second over the last
        30 s, Kafka's default sample window) per count."""
        now = time.monotonic()
        out: dict[str, object] = {}
        for name, count in self.counts.items():
            if name == "expired-connections-killed":
                out["expired-connections-killed-count"] = count
                continue
            out[f"{name}-total"] = count
            if name != "successful-authentication-no-reauth":
                recent = sum(1 for t in self._events[name] if now - t <= 30)
                out[f"{name}-rate"] = recent / 30
        latencies = self.reauth_latency_ms
        out["reauthentication-latency-avg"] = (sum(latencies) / len(latencies)
                                               if latencies else float("nan"))
        out["reauthentication-latency-max"] = max(latencies) if latencies else float("nan")
        return out


class SaslGate:
    """What a SASL listener's connections authenticate with; called with each new
    connection of the listener, it gives the connection its authenticator."""

    def __init__(self, listener: SaslListener, servers: MechanismServers, serve: Serve,
                 advertised: Callable[[], dict[int, tuple[int, int]]]) -> None:
        self.listener = listener
        self.servers = servers
        self.serve = serve
        self.advertised = advertised
        self.stats = AuthenticationStats()

    def __call__(self, conn: Connection) -> None:
        SaslAuthenticator(self).start(conn)


def authentication_beans(gates: Mapping[str, SaslGate]) -> dict[str, dict[str, object]]:
    """The authentication attributes of each SASL listener's socket-server-metrics."""
    return {f"kafka.server:type=socket-server-metrics,listener={name},networkProcessor=0":
            gate.stats.attributes() for name, gate in gates.items()}


class SaslAuthenticator:
    """One connection's SASL state (Kafka's SaslServerAuthenticator)."""

    def __init__(self, gate: SaslGate) -> None:
        self.listener = gate.listener
        self._servers = gate.servers
        self._serve = gate.serve
        self._advertised = gate.advertised
        self.stats = gate.stats
        self.state = State.HANDSHAKE_OR_VERSIONS
        self.mechanism = ""
        self._server: SaslServer | None = None
        self._raw = False  # tokens without Kafka headers (after SaslHandshake v0)
        self._reauth_capable = False  # the client sent SaslAuthenticate v1+
        self._principal = ""  # of the first authentication: a re-authentication keeps it
        self._reauth_started_ns = 0
        self._expiry: asyncio.TimerHandle | None = None
        self._bad_mechanism = ""  # a re-authentication's handshake named another mechanism

    def start(self, conn: Connection) -> None:
        """A new connection: it authenticates before anything else."""
        conn.sasl = self
        conn.authenticating = self
        conn.session.authenticated = False
        conn.reader.max_frame_size = self.listener.max_receive_size

    def closed(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None

    # --- frames before (re)authentication ------------------------------------------------

    def receive(self, conn: Connection, frame: bytearray,
                received: int) -> Parts | Awaitable[Parts | None] | None:
        if self._raw:
            return self._raw_token(conn, bytes(frame))
        try:
            header, body = decode_request(frame)
        except UnsupportedVersionError as exc:
            probe = getattr(exc, "header", None)
            if (probe is not None and probe.request_api_key == ApiKey.API_VERSIONS
                    and self.state is State.HANDSHAKE_OR_VERSIONS):
                return [unsupported_api_versions_response(probe.correlation_id,
                                                          self._advertised())]
            raise ProtocolError(f"{exc} during SASL authentication") from None
        except ProtocolError as exc:
            # a 0.9 client's raw GSSAPI token, or no Kafka request at all
            raise ProtocolError(f"Unexpected non-Kafka request during SASL authentication "
                                f"({exc}); Moldau serves {', '.join(self.listener.mechanisms)}"
                                " after a SaslHandshake") from None
        key = header.request_api_key
        state = self.state
        if state is State.EXPIRED:
            if key == ApiKey.SASL_HANDSHAKE:
                assert isinstance(body, SaslHandshakeRequest)
                started = self.begin_reauthentication(conn, body, header.request_api_version)
                assert started is not None  # an expired session may always begin one
                return self._respond(header, started)
            self.stats.record("expired-connections-killed")
            raise ProtocolError("its authentication session expired")
        if state is State.HANDSHAKE_OR_VERSIONS and key == ApiKey.API_VERSIONS:
            self.state = State.HANDSHAKE
            return self._serve(conn, header, body, received)
        if state in (State.HANDSHAKE_OR_VERSIONS, State.HANDSHAKE):
            if key != ApiKey.SASL_HANDSHAKE:
                raise ProtocolError(f"Unexpected Kafka request of type {APIS[key].name} "
                                    "during SASL handshake.")
            assert isinstance(body, SaslHandshakeRequest)
            return self._handshake(conn, header, body)
        if state is State.AUTHENTICATE:
            if key == ApiKey.SASL_AUTHENTICATE:
                assert isinstance(body, SaslAuthenticateRequest)
                return self._authenticate(conn, header, body)
            message = (f"Unexpected Kafka request of type {APIS[key].name} during SASL "
                       "authentication.")
            response = error_response(key, header.request_api_version, body, ILLEGAL_SASL_STATE)
            return self._fail(conn, message, self._respond(header, response))
        raise ProtocolError(f"{APIS[key].name} in SASL state {state.name}")

    def _handshake(self, conn: Connection, header: RequestHeader,
                   request: SaslHandshakeRequest) -> Parts:
        mechanism = request.mechanism
        if mechanism not in self.listener.mechanisms:
            return self._respond(header, self._refused_mechanism(conn, mechanism))
        self._begin(mechanism)
        self._raw = header.request_api_version == 0
        return self._respond(header, SaslHandshakeResponse(
            error_code=0, mechanisms=list(self.listener.mechanisms)))

    def _refused_mechanism(self, conn: Connection, mechanism: str) -> SaslHandshakeResponse:
        """UNSUPPORTED_SASL_MECHANISM with the enabled list; the connection then closes."""
        self._fail(conn, f"Unsupported SASL mechanism {mechanism}", None)
        return SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM,
                                     mechanisms=list(self.listener.mechanisms))

    def _begin(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self._server = self._servers.new(mechanism)
        self.state = State.AUTHENTICATE

    # --- tokens --------------------------------------------------------------------------

    def _evaluate(self, token: bytes) -> tuple[bytes | None, str]:
        """(the challenge or None for no answer, "") or (None, the failure message for the
        client)."""
        if self._bad_mechanism:
            return None, self._bad_mechanism
        server = self._server
        assert server is not None
        try:
            return server.evaluate(token), ""
        except SaslAuthenticationError as exc:
            return None, str(exc)
        except SaslMechanismError as exc:
            log.debug("SASL %s failure: %s", self.mechanism, exc)
            return None, generic_failure_message(self.mechanism,
                                                 reauthentication=bool(self._principal))

    def _authenticate(self, conn: Connection, header: RequestHeader,
                      request: SaslAuthenticateRequest) -> Parts:
        if header.request_api_version >= 1:
            self._reauth_capable = True
        challenge, failure = self._evaluate(request.auth_bytes)
        if failure:
            response = SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED,
                                                error_message=failure)
            return self._fail(conn, failure, self._respond(header, response))
        # every SaslAuthenticate is answered, with empty bytes when the mechanism has none
        response = SaslAuthenticateResponse(error_code=0, auth_bytes=challenge or b"")
        assert self._server is not None
        if self._server.complete:
            failure = self._complete(conn)
            if failure:
                response = SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED,
                                                    error_message=failure)
                return self._fail(conn, failure, self._respond(header, response))
            response.session_lifetime_ms = self._session_lifetime_ms
        return self._respond(header, response)

    def _raw_token(self, conn: Connection, token: bytes) -> Parts | None:
        """After SaslHandshake v0: size-prefixed tokens both ways; a failure can only
        close the connection."""
        challenge, failure = self._evaluate(token)
        if failure:
            self._fail(conn, failure, None)
            return None
        assert self._server is not None
        if self._server.complete:
            failure = self._complete(conn)
            if failure:
                self._fail(conn, failure, None)
                return None
        return None if challenge is None else [size_prefixed(challenge)]

    # --- the outcome ---------------------------------------------------------------------

    _session_lifetime_ms = 0

    def _complete(self, conn: Connection) -> str:
        """The exchange succeeded: the connection is served as its principal. A
        re-authentication must keep the principal; returns the failure, or ""."""
        server = self._server
        assert server is not None
        principal = f"User:{server.authorization_id}"
        reauthenticating = bool(self._principal)
        if reauthenticating and principal != self._principal:
            return ("Cannot change principals during re-authentication from "
                    f"{self._principal.replace(':', '.', 1)}: {principal.replace(':', '.', 1)}")
        self._principal = principal
        self.state = State.COMPLETE
        self._raw = False
        conn.session.principal = principal
        conn.session.authenticated = True
        conn.session.token_authenticated = server.token_authenticated
        conn.authenticating = None
        conn.reader.max_frame_size = conn.server.max_request_size
        lifetime = self._lifetime_ms(server)
        # a session ends when connections.max.reauth.ms says, or when its credential does
        # (even at once: a token accepted within the clock skew after its exp)
        ends = bool(lifetime) or server.credential_expiry_ms is not None
        self._session_lifetime_ms = lifetime if self._reauth_capable else 0
        if reauthenticating:
            self.stats.record("successful-reauthentication")
            self.stats.reauth_latency_ms.append(
                (time.monotonic_ns() - self._reauth_started_ns) / 1e6)
        else:
            self.stats.record("successful-authentication")
            if not ends:
                self.stats.record("successful-authentication-no-reauth")
        self._arm_expiry(conn, lifetime if ends else None)
        return ""

    def _lifetime_ms(self, server: SaslServer) -> int:
        """connections.max.reauth.ms, or less when the credential ends sooner."""
        limit = self.listener.reauth_ms.get(self.mechanism, 0)
        expiry = server.credential_expiry_ms
        if expiry is not None:
            remaining = max(0, expiry - int(time.time() * 1000))
            limit = min(limit, remaining) if limit else remaining
        return limit

    def _arm_expiry(self, conn: Connection, lifetime_ms: int | None) -> None:
        """End the session after `lifetime_ms` (None: it never ends)."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        if lifetime_ms is not None:
            self._expiry = asyncio.get_running_loop().call_later(
                lifetime_ms / 1000, self._expired, conn)

    def _expired(self, conn: Connection) -> None:
        """The session ended without a re-authentication: the next request must begin
        one (a SaslHandshake), or the connection closes."""
        self._expiry = None
        if not conn.closed and self.state is State.COMPLETE:
            self.state = State.EXPIRED
            conn.authenticating = self

    def begin_reauthentication(self, conn: Connection, request: SaslHandshakeRequest,
                               version: int) -> SaslHandshakeResponse | None:
        """A SaslHandshake on an authenticated connection: the start of a
        re-authentication when the session has an end and the last one began at least a
        second ago; None otherwise (the handshake is then answered with 34)."""
        if self.state is State.COMPLETE and self._expiry is None:
            return None  # no session lifetime: nothing to re-authenticate
        now = time.monotonic_ns()
        if self.state is State.COMPLETE and now - self._reauth_started_ns < MIN_REAUTH_INTERVAL_NS:
            return None
        enabled = list(self.listener.mechanisms)
        self._reauth_started_ns = now
        conn.authenticating = self
        if request.mechanism not in enabled:
            return self._refused_mechanism(conn, request.mechanism)
        if request.mechanism != self.mechanism:
            # Kafka answers the handshake and fails the next token, so that the failure
            # counts as a failed re-authentication
            self._bad_mechanism = (f"SASL mechanism '{request.mechanism}' requested by "
                                   "client is not supported for re-authentication of "
                                   f"mechanism '{self.mechanism}'")
            self.state = State.AUTHENTICATE
            self._raw = version == 0
            return SaslHandshakeResponse(error_code=0, mechanisms=enabled)
        self._begin(request.mechanism)
        self._raw = version == 0
        return SaslHandshakeResponse(error_code=0, mechanisms=enabled)

    def _fail(self, conn: Connection, message: str, parts: Parts | None) -> Parts:
        """Answer (when there is an answer), then close after the failure delay, reading
        nothing more meanwhile."""
        if self.state is not State.FAILED:
            self.stats.record("failed-reauthentication" if self._principal
                              else "failed-authentication")
        self.state = State.FAILED
        conn.authenticating = self
        log.info("Failed authentication with /%s (channelId=%s) (%s)",
                 conn.session.client_address, conn.id, message)
        conn.mute(FAILED_MUTE)
        delay = self.listener.failed_delay_ms / 1000
        asyncio.get_running_loop().call_later(delay, conn.close,
                                              f"authentication failed: {message}")
        return parts or []

    @staticmethod
    def _respond(header: RequestHeader, response: Message) -> Parts:
        return encode_response_parts(header.correlation_id, header.request_api_key,
                                     header.request_api_version, response)
