"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka's ScramSaslServer and
ScramSaslClient run them.

Kafka hides almost every server failure behind its generic message
(SaslMechanismError): a malformed message, an unknown user or token, too few stored
iterations, a wrong nonce or proof. Only an authorization id that differs from the user
name is a SaslAuthenticationError, and only once the user is known to exist."""

from __future__ import annotations

import dataclasses
import enum
import hmac
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from moldau.security.sasl.errors import (
    SaslAuthenticationError,
    SaslIllegalStateError,
    SaslMechanismError,
)
from moldau.security.sasl.scram_credentials import (
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    random_nonce,
)
from moldau.security.sasl.scram_messages import (
    EXTENSION_NAME,
    EXTENSION_VALUE,
    ClientFinalMessage,
    ClientFirstMessage,
    ServerFinalMessage,
    ServerFirstMessage,
    auth_message,
    sasl_name,
    username_from_sasl_name,
)

# What a Kafka client sends as the channel binding: base64 of the gs2 header "n,,".
GS2_HEADER_NO_BINDING = b"n,,"


@dataclass(frozen=True)
class DelegationTokenCredential:
    """What a SCRAM login with `tokenauth=true` authenticates against: the token's SCRAM
    credential (the token id is the user name), its owner and its expiry."""

    owner: str
    credential: ScramCredential
    expiry_timestamp_ms: int


def _xor(first: bytes, second: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(first, second, strict=True))


class _ServerState(enum.Enum):
    RECEIVE_CLIENT_FIRST_MESSAGE = enum.auto()
    RECEIVE_CLIENT_FINAL_MESSAGE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


class ScramServer:
    """The broker's side. `credentials(user)` is the user's stored credential for this
    mechanism, None when it has none; `tokens(token_id)` the delegation token (None
    refuses every `tokenauth=true` login). `nonce` fixes the server nonce (tests)."""

    def __init__(self, mechanism: ScramMechanism,
                 credentials: Callable[[str], ScramCredential | None], *,
                 tokens: Callable[[str], DelegationTokenCredential | None] | None = None,
                 nonce: str | None = None) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._credentials = credentials
        self._tokens = tokens
        self._fixed_nonce = nonce
        self._state = _ServerState.RECEIVE_CLIENT_FIRST_MESSAGE
        self._client_first: ClientFirstMessage | None = None
        self._server_first: ServerFirstMessage | None = None
        self._credential: ScramCredential | None = None
        self._authorization_id = ""
        self._token_expiry_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state is _ServerState.RECEIVE_CLIENT_FIRST_MESSAGE:
                return self._receive_client_first(token)
            if self._state is _ServerState.RECEIVE_CLIENT_FINAL_MESSAGE:
                return self._receive_client_final(token)
            raise SaslIllegalStateError(
                f"Unexpected challenge in Sasl server state {self._state.name}")
        except (SaslAuthenticationError, SaslMechanismError):
            self._forget_credentials()
            self._state = _ServerState.FAILED
            raise

    def _receive_client_first(self, token: bytes) -> bytes:
        client_first = ClientFirstMessage.parse(token)
        # Kafka ignores extensions it does not know; it only reads `tokenauth`.
        server_nonce = self._fixed_nonce if self._fixed_nonce is not None else random_nonce()
        try:
            username = username_from_sasl_name(client_first.sasl_name)
            credential = self._look_up(username, client_first.token_auth)
        except (SaslAuthenticationError, SaslMechanismError):
            raise
        except Exception as exc:
            raise SaslMechanismError(
                "Authentication failed: Credentials could not be obtained") from exc
        if credential is None:
            raise SaslMechanismError("Authentication failed: Invalid user credentials")
        # Kafka compares the authzid as sent (still escaped) with the unescaped name.
        if client_first.authorization_id and client_first.authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslMechanismError(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self._scram.name}")
        self._client_first = client_first
        self._credential = credential
        self._server_first = ServerFirstMessage(nonce=client_first.nonce + server_nonce,
                                                salt=credential.salt,
                                                iterations=credential.iterations)
        self._state = _ServerState.RECEIVE_CLIENT_FINAL_MESSAGE
        return self._server_first.to_bytes()

    def _look_up(self, username: str, token_auth: bool) -> ScramCredential | None:
        if not token_auth:
            self._authorization_id = username
            return self._credentials(username)
        token = self._tokens(username) if self._tokens is not None else None
        if token is None:
            raise SaslMechanismError(f"Token Authentication failed: Invalid tokenId : {username}")
        self._authorization_id = token.owner
        self._token_expiry_ms = token.expiry_timestamp_ms
        return token.credential

    def _receive_client_final(self, token: bytes) -> bytes:
        assert self._client_first and self._server_first and self._credential
        client_final = ClientFinalMessage.parse(token)
        # Kafka checks only the end: librdkafka before 2.1 repeats the client nonce in
        # front of the combined one (its proof covers the repeated form, as ours does)
        if not client_final.nonce.endswith(self._server_first.nonce):
            raise SaslMechanismError("Invalid client nonce in the final client message.")
        message = auth_message(self._client_first, self._server_first, client_final)
        client_signature = self._scram.hmac(self._credential.stored_key, message)
        if len(client_final.proof) != len(client_signature):
            # Kafka's xor throws here (and closes without an answer); we refuse it as a
            # bad proof, which answers with the generic message.
            raise SaslMechanismError("Invalid client credentials: proof of the wrong length")
        client_key = _xor(client_signature, client_final.proof)
        if not hmac.compare_digest(self._scram.hash(client_key), self._credential.stored_key):
            raise SaslMechanismError("Invalid client credentials")
        server_signature = self._scram.hmac(self._credential.server_key, message)
        self._forget_credentials()
        self._state = _ServerState.COMPLETE
        return ServerFinalMessage(signature=server_signature).to_bytes()

    def _forget_credentials(self) -> None:
        self._credential = None
        self._server_first = None

    @property
    def complete(self) -> bool:
        return self._state is _ServerState.COMPLETE

    @property
    def authorization_id(self) -> str:
        """The user name, or for a delegation token its owner."""
        if not self.complete:
            raise SaslIllegalStateError("Authentication exchange has not completed")
        return self._authorization_id

    @property
    def token_authenticated(self) -> bool:
        """False until the exchange completes."""
        return (self.complete and self._client_first is not None
                and self._client_first.token_auth)

    @property
    def credential_expiry_ms(self) -> int | None:
        """The delegation token's expiry; None until the exchange completes."""
        return self._token_expiry_ms if self.complete else None


class _ClientState(enum.Enum):
    SEND_CLIENT_FIRST_MESSAGE = enum.auto()
    RECEIVE_SERVER_FIRST_MESSAGE = enum.auto()
    RECEIVE_SERVER_FINAL_MESSAGE = enum.auto()
    COMPLETE = enum.auto()
    FAILED = enum.auto()


class ScramClient:
    """The client's side, as Kafka's ScramSaslClient (a Kafka client never sends an
    authorization id). `extensions` are SCRAM extensions such as {"tokenauth": "true"}
    for a delegation token; `nonce` fixes the client nonce (tests)."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str,
                 extensions: Mapping[str, str] | None = None, *,
                 nonce: str | None = None) -> None:
        extensions = dict(extensions or {})
        for key, value in extensions.items():
            if not EXTENSION_NAME.fullmatch(key):
                raise ValueError(f"Invalid SCRAM extension name {key!r}: letters only")
            if not EXTENSION_VALUE.fullmatch(value):
                raise ValueError(f"Invalid SCRAM extension value {value!r} for {key!r}: "
                                 "non-empty ASCII without ','")
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._password = password
        self._client_first = ClientFirstMessage(
            sasl_name=sasl_name(username),
            nonce=nonce if nonce is not None else random_nonce(),
            extensions=extensions)
        self._state = _ClientState.SEND_CLIENT_FIRST_MESSAGE
        self._server_first: ServerFirstMessage | None = None
        self._client_final: ClientFinalMessage | None = None
        self._salted_password = b""

    def initial_response(self) -> bytes:
        return self._run(self._send_client_first)

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._state is _ClientState.SEND_CLIENT_FIRST_MESSAGE:
            if challenge:
                self._state = _ClientState.FAILED
                raise SaslMechanismError("Expected empty challenge")
            return self.initial_response()
        if self._state is _ClientState.RECEIVE_SERVER_FIRST_MESSAGE:
            return self._run(lambda: self._receive_server_first(challenge))
        if self._state is _ClientState.RECEIVE_SERVER_FINAL_MESSAGE:
            self._run(lambda: self._receive_server_final(challenge))
            return None
        raise SaslIllegalStateError(
            f"Unexpected challenge in Sasl client state {self._state.name}")

    def _run(self, step: Callable[[], bytes]) -> bytes:
        try:
            return step()
        except SaslIllegalStateError:
            raise  # a driver's mistake leaves the exchange as it was (as in Kafka)
        except SaslMechanismError:
            self._state = _ClientState.FAILED
            raise

    def _send_client_first(self) -> bytes:
        if self._state is not _ClientState.SEND_CLIENT_FIRST_MESSAGE:
            raise SaslIllegalStateError(
                f"Unexpected initial response in Sasl client state {self._state.name}")
        self._state = _ClientState.RECEIVE_SERVER_FIRST_MESSAGE
        return self._client_first.to_bytes()

    def _receive_server_first(self, challenge: bytes) -> bytes:
        server_first = ServerFirstMessage.parse(challenge)
        if not server_first.nonce.startswith(self._client_first.nonce):
            raise SaslMechanismError("Invalid server nonce: does not start with client nonce")
        if server_first.iterations < MIN_ITERATIONS:
            raise SaslMechanismError(
                f"Requested iterations {server_first.iterations} is less than the minimum "
                f"{MIN_ITERATIONS} for {self._scram.name}")
        self._salted_password = self._scram.salted_password(
            self._password, server_first.salt, server_first.iterations)
        unsigned = ClientFinalMessage(channel_binding=GS2_HEADER_NO_BINDING,
                                      nonce=server_first.nonce, proof=b"")
        message = auth_message(self._client_first, server_first, unsigned)
        client_key = self._scram.client_key(self._salted_password)
        client_signature = self._scram.hmac(self._scram.hash(client_key), message)
        self._server_first = server_first
        self._client_final = dataclasses.replace(unsigned,
                                                 proof=_xor(client_key, client_signature))
        self._state = _ClientState.RECEIVE_SERVER_FINAL_MESSAGE
        return self._client_final.to_bytes()

    def _receive_server_final(self, challenge: bytes) -> bytes:
        assert self._server_first and self._client_final
        server_final = ServerFinalMessage.parse(challenge)
        if server_final.error is not None:
            raise SaslMechanismError(f"Sasl authentication using {self._scram.name} "
                                     f"failed with error: {server_final.error}")
        message = auth_message(self._client_first, self._server_first, self._client_final)
        expected = self._scram.hmac(self._scram.server_key(self._salted_password), message)
        if not hmac.compare_digest(server_final.signature or b"", expected):
            raise SaslMechanismError("Invalid server signature in server final message")
        self._state = _ClientState.COMPLETE
        return b""

    @property
    def complete(self) -> bool:
        return self._state is _ClientState.COMPLETE
