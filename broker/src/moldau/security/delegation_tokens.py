"""Delegation tokens (KIP-48) without I/O: the token, its HMAC, and the broker's cache of
tokens that SCRAM logins with `tokenauth=true` are checked against.

A token is an id (22 characters of URL-safe base64 of a random UUID) and the
HMAC-SHA512 of that id keyed with `delegation.token.secret.key`. A client logs in with
SCRAM as user <token id>, password base64(HMAC), so every broker with the same secret
derives the same password from the id alone: ZooKeeper stores only the token's
information, never its HMAC. The cache holds, per token, that information, its HMAC and a
SCRAM credential per mechanism (4096 iterations, as Kafka derives them).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import uuid
from dataclasses import dataclass

from moldau.security.principal import KafkaPrincipal
from moldau.security.sasl.scram import DelegationTokenCredential
from moldau.security.sasl.scram_credentials import (
    MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    derive_credential,
)

USER_TYPE = "User"  # KafkaPrincipal.USER_TYPE: the only type a renewer may have
# The key of Session.attributes telling whether a delegation token authenticated the
# connection (SCRAM with tokenauth=true); such a connection may not manage tokens.


def parse_principal(text: str) -> KafkaPrincipal:
    """SecurityUtils.parseKafkaPrincipal: `Type:name`, split at the first colon."""
    kind, sep, name = text.partition(":")
    if not sep:
        raise ValueError("expected a string in format principalType:principalName but got "
                         f"{text}")
    return KafkaPrincipal(name, kind)


def generate_token_id() -> str:
    """CoreUtils.generateUuidAsBase64: a random UUID's 16 bytes, URL-safe base64 without
    padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def token_hmac(token_id: str, secret: str) -> bytes:
    """HMAC-SHA512 of the token id's UTF-8 bytes, keyed with the secret's UTF-8 bytes."""
    if not secret:  # Java's HMAC refuses an empty key; tokens are disabled without one
        raise ValueError("the delegation token secret key is empty")
    return hmac.new(secret.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


@dataclass(frozen=True)
class TokenInformation:
    """What ZooKeeper keeps of a token (Kafka's TokenInformation): the token requester is
    who asked for it, the owner whom it authenticates as (KIP-373: they differ when one
    user creates a token for another)."""

    token_id: str
    owner: KafkaPrincipal
    token_requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp: int
    max_timestamp: int
    expiry_timestamp: int

    def owner_or_renewer(self, principal: KafkaPrincipal) -> bool:
        """Who sees the token in a describe without any ACL: its owner, its requester and
        its renewers."""
        return principal in (self.owner, self.token_requester) or principal in self.renewers

    def may_renew(self, principal: KafkaPrincipal) -> bool:
        """Who may renew or expire it: its owner and its renewers (not the requester, as
        Kafka's DelegationTokenManager.allowedToRenew)."""
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_timestamp < now_ms or self.expiry_timestamp < now_ms

    def with_expiry(self, expiry_timestamp: int) -> TokenInformation:
        return dataclasses.replace(self, expiry_timestamp=expiry_timestamp)


@dataclass(frozen=True)
class DelegationToken:
    info: TokenInformation
    hmac: bytes

    @property
    def hmac_base64(self) -> str:
        """The SCRAM password of the token, and what the tools print as its HMAC."""
        return base64.b64encode(self.hmac).decode("ascii")


@dataclass(frozen=True)
class _CachedToken:
    token: DelegationToken
    credentials: dict[ScramMechanism, ScramCredential]


class DelegationTokenCache:
    """The tokens this broker knows (Kafka's DelegationTokenCache), by id and by HMAC.
    It lives on the broker's event loop, like the SCRAM credential cache: no locks."""

    def __init__(self) -> None:
        self._by_id: dict[str, _CachedToken] = {}
        self._id_by_hmac: dict[bytes, str] = {}

    def update(self, token: DelegationToken) -> None:
        """Put a new token, or a token's new expiry. The SCRAM credentials are derived
        once per token (a fresh salt each, as Kafka) and kept across renewals."""
        token_id = token.info.token_id
        cached = self._by_id.get(token_id)
        if cached is not None and cached.token.hmac == token.hmac:
            credentials = cached.credentials
        else:
            password = token.hmac_base64
            credentials = {m: derive_credential(m, password, MIN_ITERATIONS)
                           for m in ScramMechanism}
        if cached is not None:
            self._id_by_hmac.pop(cached.token.hmac, None)
        self._by_id[token_id] = _CachedToken(token, credentials)
        self._id_by_hmac[token.hmac] = token_id

    def remove(self, token_id: str) -> None:
        cached = self._by_id.pop(token_id, None)
        if cached is not None:
            self._id_by_hmac.pop(cached.token.hmac, None)

    def token(self, token_id: str) -> DelegationToken | None:
        cached = self._by_id.get(token_id)
        return None if cached is None else cached.token

    def token_for_hmac(self, token_hmac: bytes) -> DelegationToken | None:
        token_id = self._id_by_hmac.get(token_hmac)
        return None if token_id is None else self.token(token_id)

    def tokens(self) -> list[DelegationToken]:
        """Every token, in the order they were first cached."""
        return [cached.token for cached in self._by_id.values()]

    def login(self, mechanism: ScramMechanism, token_id: str,
              now_ms: int) -> DelegationTokenCredential | None:
        """What a SCRAM `tokenauth=true` login as `token_id` is checked against; None for
        an unknown token and for an expired one (Kafka lets an expired token log in until
        the controller's expiry sweep removes it; Moldau refuses it at once)."""
        cached = self._by_id.get(token_id)
        if cached is None or cached.token.info.expired(now_ms):
            return None
        info = cached.token.info
        # the principal of a token login is User:<the owner's name>, as Kafka's
        return DelegationTokenCredential(owner=info.owner.name,
                                         credential=cached.credentials[mechanism],
                                         expiry_timestamp_ms=info.expiry_timestamp)
