"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer and the JDK's PLAIN client speak it.

The client's single message is `[authzid] NUL authcid NUL passwd` in UTF-8; the server
answers with an empty challenge. Every server failure is a SaslAuthenticationError, so
its text reaches the client."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from moldau.security.sasl.errors import SaslAuthenticationError, SaslIllegalStateError
from moldau.security.sasl.mechanism import NamedOnCompletion

PLAIN_MECHANISM = "PLAIN"
_NUL = "\x00"
# Kafka splits into at most four pieces, so "a\0b\0c\0d\0e" counts as 4 tokens, not 5.
_MAX_COUNTED_TOKENS = 4


def _split_message(message: str) -> list[str]:
    tokens = message.split(_NUL, _MAX_COUNTED_TOKENS - 1)[:_MAX_COUNTED_TOKENS]
    if len(tokens) != 3:
        raise SaslAuthenticationError(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
    return tokens


def _passwords_equal(given: str, expected: str) -> bool:
    # Constant time over the UTF-8 bytes, as Kafka compares the char arrays.
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                               expected.encode("utf-8", "surrogatepass"))


class PlainServer(NamedOnCompletion):
    """The broker's side; `users` maps a user name to its password (the JAAS
    `user_<name>="<password>"` options of the listener's PlainLoginModule entry)."""

    mechanism = PLAIN_MECHANISM

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None
        self._failed = False

    def evaluate(self, token: bytes) -> bytes:
        if self._authorization_id is not None or self._failed:
            # Kafka's authenticator never offers a second token; refusing one keeps a
            # faulty driver from turning one exchange into a password-guessing loop.
            raise SaslIllegalStateError("The SASL/PLAIN exchange is already over")
        try:
            self._authorization_id = self._authenticate(token)
        except SaslAuthenticationError:
            self._failed = True
            raise
        return b""

    def _authenticate(self, token: bytes) -> str:
        # Java decodes malformed UTF-8 to U+FFFD rather than failing; so do we.
        authorization_id, username, password = _split_message(
            token.decode("utf-8", "replace"))
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        if expected is None or not _passwords_equal(password, expected):
            raise SaslAuthenticationError(
                "Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is "
                "different from username")
        return username

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None



class PlainClient:
    """The client's side: the whole exchange is the initial response."""

    mechanism = PLAIN_MECHANISM

    def __init__(self, username: str, password: str, authorization_id: str = "") -> None:
        for what, value in (("username", username), ("password", password),
                            ("authorization id", authorization_id)):
            if _NUL in value:
                raise ValueError(f"SASL/PLAIN {what} must not contain a NUL character")
        self._message = f"{authorization_id}{_NUL}{username}{_NUL}{password}".encode()
        self._sent = False

    def initial_response(self) -> bytes:
        if self._sent:
            raise SaslIllegalStateError("PLAIN authentication already completed")
        self._sent = True
        return self._message

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The server's empty answer to the initial response needs no reply."""
        if not self._sent:
            return self.initial_response()
        if challenge:
            raise SaslIllegalStateError(
                "Unexpected non-empty challenge after the SASL/PLAIN response")
        return None

    @property
    def complete(self) -> bool:
        return self._sent
