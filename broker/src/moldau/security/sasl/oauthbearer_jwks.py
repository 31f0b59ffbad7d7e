"""Signed-JWT validation for OAUTHBEARER against a JWKS (KIP-768), as Kafka's
OAuthBearerValidatorCallbackHandler does it with jose4j; the signature and the standard
claims are checked by PyJWT.

A token passes when: it is a compact JWS whose `alg` is not `none`; a key of the JWKS fits
its header (`kid` when given, the key type of `alg`, `use` absent or `sig`, the key's `alg`
absent or equal) and verifies the signature; `exp` and `iat` are present, `exp` has not
passed and `nbf` (if any) has come, both within `sasl.oauthbearer.clock.skew.seconds`; its
`aud` holds one of `sasl.oauthbearer.expected.audience` (and, as jose4j, a token with an
`aud` is refused when no audience is expected); `iss` equals
`sasl.oauthbearer.expected.issuer` when that is set; the subject claim
(`sasl.oauthbearer.sub.claim.name`) is a non-blank string, the principal name. Every
refusal is `invalid_token` to the client.

The JWKS comes from `sasl.oauthbearer.jwks.endpoint.url`: a `file:` URL is read once at
startup (as Kafka 3.9 does); an http(s) one is fetched at startup (a failure stops the
broker) and then refreshed every `sasl.oauthbearer.jwks.endpoint.refresh.ms` on a
background thread, and sooner when a token names a key id the set lacks (at most once a
minute per id, as Kafka's RefreshingHttpsJwks)."""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol
from urllib.error import URLError

import jwt

from moldau.security.sasl.oauthbearer_token import OAuthBearerToken, TokenValidationError

log = logging.getLogger(
    "org.apache.kafka.common.security.oauthbearer.internals.secured.RefreshingHttpsJwks")

# the JWK key type each JWS algorithm family verifies with
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "HS": "oct", "Ed": "OKP"}
MISSING_KEY_ID_RETRY_MS = 60_000  # Kafka's MISSING_KEY_ID_CACHE_IN_FLIGHT_MS
MISSING_KEY_ID_MAX_ENTRIES = 16
MISSING_KEY_ID_MAX_LENGTH = 1000
HTTP_TIMEOUT_S = 10


class JwksError(ValueError):
    """A JWKS that cannot be had or read."""


# ---------------------------------------------------------------------------- key sets


class JwkSet:
    """The keys of one JWKS document; `select` picks the key for a token's header, as
    jose4j's VerificationJwkSelector does (the first fitting key)."""

    def __init__(self, keys: Sequence[Mapping[str, object]]) -> None:
        self.keys = [dict(k) for k in keys]
        self._prepared: dict[tuple[int, str], jwt.PyJWK] = {}

    @classmethod
    def parse(cls, text: bytes | str, where: str) -> JwkSet:
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise JwksError(f"the JWKS at {where} is not JSON: {exc}") from None
        keys = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(keys, list) or not all(isinstance(k, dict) for k in keys):
            raise JwksError(f"the JWKS at {where} has no \"keys\" array of JSON objects")
        return cls(keys)

    def key_ids(self) -> set[str]:
        return {str(k["kid"]) for k in self.keys if "kid" in k}

    def select(self, header: Mapping[str, object]) -> jwt.PyJWK | None:
        alg = str(header.get("alg", ""))
        kid = header.get("kid")
        wanted_type = _KEY_TYPES.get(alg[:2])
        for index, key in enumerate(self.keys):
            if kid is not None and key.get("kid") != kid:
                continue
            if key.get("kty") != wanted_type or key.get("use", "sig") != "sig":
                continue
            if key.get("alg", alg) != alg:
                continue
            prepared = self._prepare(index, alg)
            if prepared is not None:
                return prepared
        return None

    def _prepare(self, index: int, alg: str) -> jwt.PyJWK | None:
        cached = self._prepared.get((index, alg))
        if cached is None:
            try:
                cached = jwt.PyJWK(self.keys[index], algorithm=alg)
            except jwt.PyJWTError:
                return None  # a key this build cannot use (jose4j skips those too)
            self._prepared[(index, alg)] = cached
        return cached


class KeySource(Protocol):
    def current(self) -> JwkSet: ...

    def missing(self, key_id: str) -> None:
        """A token named a key id the current set lacks."""
        ...


@dataclass(frozen=True)
class FileJwks:
    """A `file:` JWKS, read once (Kafka 3.9's JwksFileVerificationKeyResolver)."""

    keys: JwkSet

    @classmethod
    def load(cls, path: str) -> FileJwks:
        try:
            with open(path, "rb") as fh:
                return cls(JwkSet.parse(fh.read(), path))
        except OSError as exc:
            raise JwksError(f"the JWKS file {path} cannot be read: {exc}") from None

    def current(self) -> JwkSet:
        return self.keys

    def missing(self, key_id: str) -> None:
        pass  # nothing to refresh: Kafka reads the file only at startup too


def fetch_jwks(url: str, context: ssl.SSLContext | None) -> JwkSet:
    try:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S,
                                    context=context) as answer:
            return JwkSet.parse(answer.read(), url)
    except (URLError, OSError, ValueError) as exc:
        if isinstance(exc, JwksError):
            raise
        raise JwksError(f"the JWKS at {url} cannot be fetched: {exc}") from None


class RefreshingHttpJwks:
    """An http(s) JWKS: fetched now, then refreshed on a daemon thread so that no
    authentication waits on the network (Kafka's RefreshingHttpsJwks)."""

    def __init__(self, url: str, refresh_ms: int, retry_backoff_ms: int,
                 retry_backoff_max_ms: int, context: ssl.SSLContext | None,
                 fetch: Callable[[str, ssl.SSLContext | None], JwkSet] = fetch_jwks) -> None:
        self.url = url
        self._fetch = fetch
        self._context = context
        self._refresh_s = max(refresh_ms, 1) / 1000
        self._backoff_ms = retry_backoff_ms
        self._backoff_max_ms = retry_backoff_max_ms
        self._keys = fetch(url, context)  # a failure here stops the broker, as in Kafka
        self._missing: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"jwks-refresh {url}",
                                        daemon=True)
        self._thread.start()

    def current(self) -> JwkSet:
        return self._keys

    def missing(self, key_id: str) -> None:
        if len(key_id) > MISSING_KEY_ID_MAX_LENGTH:
            log.warning("Key ID %s (trimmed to first %d characters out of %d total) was too "
                        "long to cache", key_id[:MISSING_KEY_ID_MAX_LENGTH],
                        MISSING_KEY_ID_MAX_LENGTH, len(key_id))
            return
        now = time.monotonic()
        with self._lock:
            next_check = self._missing.get(key_id)
            if next_check is not None and next_check > now:
                return
            self._missing[key_id] = now + MISSING_KEY_ID_RETRY_MS / 1000
            self._missing.move_to_end(key_id)
            while len(self._missing) > MISSING_KEY_ID_MAX_ENTRIES:
                self._missing.popitem(last=False)
        self._wake.set()

    def close(self) -> None:
        self._stopped.set()
        self._wake.set()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(self._refresh_s)
            self._wake.clear()
            if not self._stopped.is_set():
                self.refresh()

    def refresh(self) -> None:
        """One refresh, retried with doubling backoff within retry.backoff.max.ms; the
        old keys stay when every attempt fails."""
        backoff, waited = self._backoff_ms, 0
        while True:
            try:
                keys = self._fetch(self.url, self._context)
            except JwksError as exc:
                if waited + backoff > self._backoff_max_ms or self._stopped.is_set():
                    log.warning("OAuth JWKS refresh of %s encountered an error; not updating "
                                "local JWKS cache: %s", self.url, exc)
                    return
                time.sleep(backoff / 1000)
                waited, backoff = waited + backoff, backoff * 2
                continue
            with self._lock:
                for key_id in keys.key_ids():
                    self._missing.pop(key_id, None)
            self._keys = keys
            log.info("OAuth JWKS refresh of %s complete", self.url)
            return


# ---------------------------------------------------------------------------- validation


@dataclass(frozen=True)
class JwtValidatorSettings:
    expected_audiences: tuple[str, ...] = ()
    expected_issuer: str | None = None
    clock_skew_s: int = 30
    scope_claim: str = "scope"
    sub_claim: str = "sub"


_PYJWT_OPTIONS: jwt.types.Options = {
    "require": ["exp", "iat"],
    "verify_iat": False,  # jose4j only requires it; it does not compare it with the clock
    "verify_sub": False,  # the subject claim is checked below, under its configured name
    "verify_jti": False,
}


def _numeric(claims: Mapping[str, object], name: str) -> int:
    """A NumericDate claim in whole seconds (jose4j truncates fractions)."""
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TokenValidationError(f"Could not extract the '{name}' claim from the access "
                                   "token")
    return int(value)


def _trimmed(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TokenValidationError(f"{name} value must be non-null, non-empty, and "
                                   "non-whitespace")
    return value.strip()


def _scopes(name: str, value: object) -> frozenset[str]:
    listed = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    scopes: set[str] = set()
    for item in listed:
        scope = _trimmed(name, item)
        if scope in scopes:
            raise TokenValidationError(f"{name} value must not contain duplicates - {scope} "
                                       "already present")
        scopes.add(scope)
    return frozenset(scopes)


class JwtValidator:
    """The broker's OAUTHBEARER validator when the listener names Kafka's
    OAuthBearerValidatorCallbackHandler."""

    def __init__(self, keys: KeySource, settings: JwtValidatorSettings) -> None:
        self.keys = keys
        self.settings = settings

    def validate(self, token_value: str) -> OAuthBearerToken:
        token_value = token_value.strip()
        if token_value.count(".") != 2:
            raise TokenValidationError("Malformed JWT provided; expected three sections "
                                       "(header, payload, and signature)")
        try:
            header = jwt.get_unverified_header(token_value)
        except jwt.PyJWTError as exc:
            raise TokenValidationError(f"Could not validate the access token: {exc}") from None
        if header.get("alg") in (None, "none"):
            raise TokenValidationError("Could not validate the access token: an unsecured "
                                       "JWS (alg none) is not accepted")
        key = self.keys.current().select(header)
        if key is None:
            kid = header.get("kid")
            if isinstance(kid, str):
                self.keys.missing(kid)
            raise TokenValidationError("Could not validate the access token: unable to find "
                                       f"a suitable verification key for JWS header {header}")
        settings = self.settings
        try:
            claims = jwt.decode(
                token_value, key=key, algorithms=[key.algorithm_name], options=_PYJWT_OPTIONS,
                audience=list(settings.expected_audiences) or None,
                issuer=settings.expected_issuer, leeway=settings.clock_skew_s)
        except jwt.PyJWTError as exc:
            raise TokenValidationError(f"Could not validate the access token: {exc}") from None
        expiration_ms = _numeric(claims, "exp") * 1000
        issued_at_ms = _numeric(claims, "iat") * 1000
        if expiration_ms < 0:
            raise TokenValidationError(f'exp value must be non-negative; value given was '
                                       f'"{expiration_ms}"')
        if issued_at_ms < 0:
            raise TokenValidationError(f'iat value must be null or non-negative; value given '
                                       f'was "{issued_at_ms}"')
        subject = _trimmed(settings.sub_claim, claims.get(settings.sub_claim))
        scope = _scopes(settings.scope_claim, claims.get(settings.scope_claim))
        return OAuthBearerToken(token_value, subject, scope, expiration_ms, issued_at_ms)
