"""The two kinds of SASL failure Kafka's SaslServerAuthenticator tells apart: one whose
text the client may read, and one it hides behind a fixed message (so that, e.g., a
SCRAM client cannot learn whether a user exists)."""

from __future__ import annotations


class SaslAuthenticationError(Exception):
    """Kafka's SaslAuthenticationException: the message reaches the client verbatim in
    the SaslAuthenticate error (58), e.g. "Authentication failed: Invalid username or
    password"."""


class SaslMechanismError(Exception):
    """Kafka's SaslException: any other failure. The message is for the broker's log;
    the client gets `generic_failure_message` instead."""


class SaslIllegalStateError(SaslMechanismError):
    """Kafka's IllegalSaslStateException: a token offered to a mechanism that has
    already completed or failed, or a result asked for before completion. A driver bug,
    never a client's credentials."""


def generic_failure_message(mechanism: str, reauthentication: bool = False) -> str:
    """The fixed text Kafka answers a `SaslMechanismError` with (SaslServerAuthenticator
    names only the phase and the mechanism)."""
    phase = "re-authentication" if reauthentication else "authentication"
    return (f"Authentication failed during {phase} due to invalid credentials with "
            f"SASL mechanism {mechanism}")
