"""What the broker's authenticator and Moldau's clients drive: one SASL exchange, sans
I/O. A server consumes the client's tokens and yields challenges; a client the reverse."""

from __future__ import annotations

from typing import Protocol

from .errors import SaslIllegalStateError


class SaslServer(Protocol):
    """One server-side exchange (javax.security.sasl.SaslServer as Kafka uses it).

    `evaluate` raises SaslAuthenticationError (its text goes to the client) or
    SaslMechanismError (the client gets the generic text); after either the exchange is
    dead."""

    mechanism: str

    def evaluate(self, token: bytes) -> bytes | None:
        """The challenge to send for the client's token: b"" an empty one (PLAIN's), None
        nothing at all (GSSAPI's last step; after a SaslHandshake v0 no frame goes out,
        inside SaslAuthenticate the answer carries empty bytes)."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """Valid once complete: the principal name (the principal is User:<this>)."""
        ...

    @property
    def token_authenticated(self) -> bool:
        """Whether a delegation token authenticated the client (SCRAM tokenauth=true)."""
        ...

    @property
    def credential_expiry_ms(self) -> int | None:
        """Epoch ms at which the credential ends (tokens, OAUTHBEARER), else None."""
        ...


class SaslClient(Protocol):
    """One client-side exchange. Every mechanism here sends an initial response."""

    mechanism: str

    def initial_response(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next token for the server's challenge, None when nothing is to be sent."""
        ...

    @property
    def complete(self) -> bool: ...


class NamedOnCompletion:
    """The identity half of a mechanism server whose exchange ends in a name and no more
    (PLAIN, GSSAPI): a subclass sets `_authorization_id` when it completes."""

    _authorization_id: str | None = None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise SaslIllegalStateError("Authentication exchange has not completed")
        return self._authorization_id

    @property
    def token_authenticated(self) -> bool:
        return False

    @property
    def credential_expiry_ms(self) -> int | None:
        return None  # the credential does not end the session (Kafka keeps no expiry)
