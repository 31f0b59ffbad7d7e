"""Signed OAUTHBEARER tokens on the ACL pair's SASL_SSL listener (KIP-768): Kafka's
`OAuthBearerValidatorCallbackHandler` on both brokers, checking RS256 JWTs against a JWKS
file the lab writes (`<lab>/acl-oauth/jwks.json`), with an expected audience and issuer.

Kafka's client reads its token from a file (`sasl.oauthbearer.token.endpoint.url=file:...`
with Kafka's `OAuthBearerLoginCallbackHandler`). The lab signs them with PyJWT: alice's and
bob's good ones, and refused ones (signed by a key the JWKS does not hold, for another
audience, from another issuer). Their header's and claims' encoding has no `-` or `_`:
Kafka 3.9.1's client decodes a token it reads with the plain Base64 alphabet (KAFKA-17089)
and refuses such a one before it connects ("malformed Base64 URL encoded value").
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from compat.acl_setup import OAUTHBEARER_LOGIN_MODULE

OAUTH_DIR = "acl-oauth"  # under the lab's directory
AUDIENCE = "kafka"
ISSUER = "https://idp.lab.example"
KEY_ID = "lab"
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
LIFETIME_S = 4 * 3600  # longer than any lab run
# token name -> (subject, what differs from a good token)
TOKENS: Mapping[str, tuple[str, Mapping[str, str]]] = {
    "alice": ("alice", {}),
    "bob": ("bob", {}),
    "alice-foreign-key": ("alice", {"key": "foreign"}),
    "alice-other-audience": ("alice", {"aud": "not-kafka"}),
    "alice-other-issuer": ("alice", {"iss": "https://elsewhere.example"}),
}


def _unpadded_b64_safe(token: str) -> bool:
    header, payload, _ = token.split(".")
    return not any(c in header + payload for c in "-_")


def _sign(subject: str, changes: Mapping[str, str], keys: Mapping[str, Any]) -> str:
    # Base64 of ASCII text has a '-' or '_' (62, 63) only where the third byte of a group
    # of three is '>', '?', '~' or DEL: these claims have none
    now = int(time.time())
    claims: dict[str, Any] = {"sub": subject, "iat": now, "exp": now + LIFETIME_S,
                              "aud": changes.get("aud", AUDIENCE),
                              "iss": changes.get("iss", ISSUER)}
    token = jwt.encode(claims, keys[changes.get("key", "lab")], algorithm="RS256",
                       headers={"kid": KEY_ID})
    if not _unpadded_b64_safe(token):
        raise RuntimeError(f"the token for {subject} {dict(changes)} has '-' or '_'")
    return token


@dataclass(frozen=True)
class LabOAuth:
    """The JWKS and the token files under `directory`; `create` writes them."""

    directory: Path

    @property
    def jwks(self) -> Path:
        return self.directory / "jwks.json"

    def token(self, name: str) -> Path:
        return self.directory / f"{name}.jwt"

    @classmethod
    def create(cls, directory: Path) -> LabOAuth:
        directory.mkdir(parents=True, exist_ok=True)
        oauth = cls(directory)
        keys = {name: rsa.generate_private_key(public_exponent=65537, key_size=2048)
                for name in ("lab", "foreign")}
        jwk = json.loads(RSAAlgorithm.to_jwk(keys["lab"].public_key()))
        oauth.jwks.write_text(json.dumps(
            {"keys": [{**jwk, "kid": KEY_ID, "use": "sig", "alg": "RS256"}]}))
        for name, (subject, changes) in TOKENS.items():
            oauth.token(name).write_text(_sign(subject, changes, keys))
        return oauth

    def broker_properties(self, listener: str) -> dict[str, str]:
        """OAUTHBEARER with signed tokens on `listener` (whose mechanisms the caller
        lists), the validator's settings broker-wide."""
        prefix = f"listener.name.{listener.lower()}.oauthbearer."
        return {prefix + "sasl.jaas.config": f"{OAUTHBEARER_LOGIN_MODULE} required;",
                prefix + "sasl.server.callback.handler.class": VALIDATOR,
                "sasl.oauthbearer.jwks.endpoint.url": self.jwks.as_uri(),
                "sasl.oauthbearer.expected.audience": AUDIENCE,
                "sasl.oauthbearer.expected.issuer": ISSUER}

    def client_properties(self, token: str) -> dict[str, str]:
        """A Java client's OAUTHBEARER login with one of the token files (TLS settings
        and the security protocol are the caller's)."""
        return {"sasl.mechanism": "OAUTHBEARER",
                "sasl.jaas.config": f"{OAUTHBEARER_LOGIN_MODULE} required;",
                "sasl.login.callback.handler.class": LOGIN_HANDLER,
                "sasl.oauthbearer.token.endpoint.url": self.token(token).as_uri()}
