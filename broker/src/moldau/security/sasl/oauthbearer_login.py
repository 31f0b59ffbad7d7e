"""Where an OAUTHBEARER client gets its token, from Kafka's client properties or
librdkafka's, and the same login spelled for librdkafka.

Kafka's clients log in with OAuthBearerLoginModule. Without
`sasl.login.callback.handler.class` the token is an unsecured JWS made from the entry's
`unsecuredLogin*` options (oauthbearer_unsecured.py). With Kafka's
OAuthBearerLoginCallbackHandler there, the token comes from
`sasl.oauthbearer.token.endpoint.url`: an http(s) URL is an OAuth token endpoint asked with
the client-credentials grant (the entry's `clientId`, `clientSecret`, optional `scope`),
a `file:` URL names a file holding the token. `extension_<name>` options (or
`unsecuredLoginExtension_<name>` for unsecured tokens) are sent as SASL extensions.
librdkafka's `sasl.oauthbearer.config` (unsecured) and `sasl.oauthbearer.method=oidc`
settings are understood as the same two logins."""

from __future__ import annotations

import base64
import json
import ssl
import threading
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol
from urllib.error import HTTPError, URLError
from urllib.parse import quote_plus, unquote, urlencode, urlsplit

import jwt

from moldau.security.sasl.oauthbearer_config import jaas_tls_context
from moldau.security.sasl.oauthbearer_handlers import LOGIN_HANDLERS
from moldau.security.sasl.oauthbearer_messages import check_extensions
from moldau.security.sasl.oauthbearer_unsecured import (
    OAuthBearerConfigError,
    unsecured_login_extensions,
    unsecured_login_token,
)

TOKEN_ENDPOINT_URL = "sasl.oauthbearer.token.endpoint.url"
REFRESH_WINDOW_FACTOR = 0.8  # sasl.login.refresh.window.factor's default
HTTP_TIMEOUT_S = 10
_UNSECURED_PRINCIPAL = "unsecuredLoginStringClaim_"


class OAuthBearerLoginError(ConnectionError):
    """No token could be had from the token endpoint (or its file)."""


class OAuthBearerLogin(Protocol):
    @property
    def extensions(self) -> Mapping[str, str]:
        """The SASL extensions to send."""
        ...

    def token(self) -> str:
        """A current token (fetched or made as needed)."""
        ...


@dataclass(frozen=True)
class UnsecuredLogin:
    """Unsecured tokens made from OAuthBearerLoginModule options, a fresh one per
    exchange (they cost nothing to make)."""

    options: Mapping[str, str]
    extensions: Mapping[str, str] = field(default_factory=dict)

    def token(self) -> str:
        return unsecured_login_token(self.options)


class EndpointLogin:
    """Tokens from an OAuth token endpoint (client-credentials grant) or a file, kept
    until 80% of their lifetime has passed. The first call blocks on the network."""

    def __init__(self, url: str, client_id: str | None, client_secret: str | None,
                 scope: str | None, extensions: Mapping[str, str],
                 context: ssl.SSLContext | None = None, sub_claim: str = "sub") -> None:
        self.url = url
        self._client_id = client_id
        self._client_secret = client_secret
        self._scope = scope
        self.extensions: Mapping[str, str] = dict(extensions)
        self._context = context
        self._sub_claim = sub_claim
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0

    @property
    def client_id(self) -> str | None:
        return self._client_id

    @property
    def client_secret(self) -> str | None:
        return self._client_secret

    @property
    def scope(self) -> str | None:
        return self._scope

    def token(self) -> str:
        with self._lock:
            now = time.time()
            if self._token is None or now >= self._refresh_at:
                token = self._retrieve()
                expiry = _checked_expiry(token, self._sub_claim, self.url)
                self._token = token
                self._refresh_at = now + max(0.0, expiry - now) * REFRESH_WINDOW_FACTOR
            return self._token

    def _retrieve(self) -> str:
        parts = urlsplit(self.url)
        if parts.scheme.lower() == "file":
            try:
                with open(unquote(parts.path), encoding="utf-8") as fh:
                    return fh.read().strip()
            except OSError as exc:
                raise OAuthBearerLoginError(f"the token file of {TOKEN_ENDPOINT_URL} "
                                            f"cannot be read: {exc}") from None
        return fetch_access_token(self.url, self._client_id or "", self._client_secret or "",
                                  self._scope, self._context)


def fetch_access_token(url: str, client_id: str, client_secret: str, scope: str | None,
                       context: ssl.SSLContext | None) -> str:
    """The access token of a client-credentials request, formatted as Kafka's
    HttpAccessTokenRetriever formats it."""
    body = {"grant_type": "client_credentials"}
    if scope and scope.strip():
        body["scope"] = scope.strip()
    credentials = f"{quote_plus(client_id)}:{quote_plus(client_secret)}".encode()
    request = urllib.request.Request(url, data=urlencode(body).encode(), method="POST", headers={
        "Authorization": "Basic " + base64.b64encode(credentials).decode(),
        "Accept": "application/json", "Cache-Control": "no-cache",
        "Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S,
                                    context=context) as answer:
            text = answer.read()
    except HTTPError as exc:
        raise OAuthBearerLoginError(f"The token endpoint {url} answered HTTP {exc.code}: "
                                    f"{exc.read()[:200]!r}") from None
    except (URLError, OSError) as exc:
        raise OAuthBearerLoginError(f"The token endpoint {url} cannot be reached: {exc}") \
            from None
    try:
        token = json.loads(text).get("access_token")
    except (ValueError, AttributeError):
        token = None
    if not isinstance(token, str) or not token.strip():
        raise OAuthBearerLoginError(f"The token endpoint {url} response access_token value "
                                    "must be non-null")
    return token.strip()


def _checked_expiry(token: str, sub_claim: str, where: str) -> float:
    """The token's `exp` in epoch seconds, once it has one and a subject, as Kafka's
    client checks a retrieved token (without its signature, which the broker checks)."""
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise OAuthBearerLoginError(f"the token from {where} is not a JWT: {exc}") from None
    expiry = claims.get("exp")
    if isinstance(expiry, bool) or not isinstance(expiry, int | float):
        raise OAuthBearerLoginError(f"the token from {where}: exp value must be non-null")
    subject = claims.get(sub_claim)
    if not isinstance(subject, str) or not subject.strip():
        raise OAuthBearerLoginError(f"the token from {where}: {sub_claim} value must be "
                                    "non-null, non-empty, and non-whitespace")
    return float(expiry)


def _extensions(options: Mapping[str, str], prefix: str) -> dict[str, str]:
    extensions = {k[len(prefix):]: v for k, v in options.items() if k.startswith(prefix)}
    try:
        check_extensions(extensions)
    except ValueError as exc:
        raise OAuthBearerConfigError(prefix + "*", None, str(exc)) from None
    return extensions


def login_from_jaas(options: Mapping[str, str], login_handler: str | None,
                    settings: Mapping[str, str]) -> OAuthBearerLogin:
    """The login an OAuthBearerLoginModule entry (its options) makes with a client's
    `sasl.login.callback.handler.class` and `sasl.oauthbearer.*` settings."""
    if login_handler is None:
        # made once now, so that options that make no token fail when read
        unsecured_login_token(options)
        return UnsecuredLogin(dict(options), unsecured_login_extensions(options))
    if login_handler not in LOGIN_HANDLERS:
        raise OAuthBearerConfigError("sasl.login.callback.handler.class", login_handler,
                                     f"Moldau's clients cannot run the login callback handler "
                                     f"{login_handler}; they run {LOGIN_HANDLERS[0]}")
    url = settings.get(TOKEN_ENDPOINT_URL, "").strip()
    if not url:
        raise OAuthBearerConfigError(TOKEN_ENDPOINT_URL, None, f"The OAuth configuration "
                                     f"option {TOKEN_ENDPOINT_URL} is required by "
                                     f"{login_handler}")
    scheme = urlsplit(url).scheme.lower()
    if scheme not in ("http", "https", "file"):
        raise OAuthBearerConfigError(TOKEN_ENDPOINT_URL, url, f"The OAuth configuration option "
                                     f"{TOKEN_ENDPOINT_URL} contains a URL ({url}) with an "
                                     "invalid protocol; only \"http\", \"https\", and \"file\" "
                                     "protocol are supported")
    if scheme != "file":
        for option in ("clientId", "clientSecret"):
            if not options.get(option, "").strip():
                raise OAuthBearerConfigError(option, None, f"The OAuth configuration option "
                                             f"{option} value must be non-null")
    sub_claim = settings.get("sasl.oauthbearer.sub.claim.name", "sub").strip() or "sub"
    return EndpointLogin(url, options.get("clientId"), options.get("clientSecret"),
                         options.get("scope"), _extensions(options, "extension_"),
                         jaas_tls_context(options) if scheme == "https" else None, sub_claim)


# ---------------------------------------------------------------------------- librdkafka

# librdkafka's sasl.oauthbearer.config names -> the unsecuredLogin option each one is
_LIBRDKAFKA_UNSECURED = {"principalClaimName": "unsecuredLoginPrincipalClaimName",
                         "scopeClaimName": "unsecuredLoginScopeClaimName",
                         "lifeSeconds": "unsecuredLoginLifetimeSeconds"}


def login_from_librdkafka(settings: Mapping[str, str]) -> OAuthBearerLogin | None:
    """librdkafka's OAUTHBEARER settings as a login; None when there are none."""
    if settings.get("sasl.oauthbearer.method", "").strip().lower() == "oidc":
        extensions = dict(item.split("=", 1) for item in
                          settings.get("sasl.oauthbearer.extensions", "").split(",")
                          if "=" in item)
        url = settings.get(TOKEN_ENDPOINT_URL, "").strip()
        if not url:
            raise OAuthBearerConfigError(TOKEN_ENDPOINT_URL, None, "sasl.oauthbearer.method=oidc "
                                         f"needs {TOKEN_ENDPOINT_URL}")
        return EndpointLogin(url,
                             settings.get("sasl.oauthbearer.client.id"),
                             settings.get("sasl.oauthbearer.client.secret"),
                             settings.get("sasl.oauthbearer.scope"), extensions)
    text = settings.get("sasl.oauthbearer.config")
    if text is None:
        return None
    options: dict[str, str] = {}
    scope: list[str] = []
    principal = None
    for item in text.split():
        name, _, value = item.partition("=")
        if name == "principal":
            principal = value
        elif name == "scope":
            scope = [s for s in value.split(",") if s]
        elif name.startswith("extension_"):
            options["unsecuredLoginExtension_" + name[len("extension_"):]] = value
        elif name in _LIBRDKAFKA_UNSECURED:
            options[_LIBRDKAFKA_UNSECURED[name]] = value
        else:
            raise OAuthBearerConfigError("sasl.oauthbearer.config", text,
                                         f"unknown sasl.oauthbearer.config item '{name}'")
    if principal is None:
        raise OAuthBearerConfigError("sasl.oauthbearer.config", text,
                                     "sasl.oauthbearer.config must name the principal= ")
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    options[_UNSECURED_PRINCIPAL + principal_claim] = principal
    if scope:
        scope_claim = options.get("unsecuredLoginScopeClaimName", "scope")
        options["unsecuredLoginListClaim_" + scope_claim] = "," + ",".join(scope)
    return login_from_jaas(options, None, {})


def librdkafka_oauthbearer(login: OAuthBearerLogin) -> dict[str, str]:
    """The librdkafka settings that log in as `login` does."""
    if isinstance(login, EndpointLogin):
        if urlsplit(login.url).scheme.lower() == "file":
            raise OAuthBearerConfigError(TOKEN_ENDPOINT_URL, login.url,
                                         "librdkafka cannot read its token from a file: give "
                                         f"{TOKEN_ENDPOINT_URL} an http(s) token endpoint")
        out = {"sasl.oauthbearer.method": "oidc", TOKEN_ENDPOINT_URL: login.url,
               "sasl.oauthbearer.client.id": login.client_id or "",
               "sasl.oauthbearer.client.secret": login.client_secret or ""}
        if login.scope:
            out["sasl.oauthbearer.scope"] = login.scope
        if login.extensions:
            out["sasl.oauthbearer.extensions"] = ",".join(
                f"{k}={v}" for k, v in login.extensions.items())
        return out
    assert isinstance(login, UnsecuredLogin)
    return {"enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": _unsecured_config(login.options)}


def _unsecured_config(options: Mapping[str, str]) -> str:
    """OAuthBearerLoginModule's unsecured options as librdkafka's
    `sasl.oauthbearer.config` (space-separated name=value items)."""
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "").strip() or "sub"
    scope_claim = options.get("unsecuredLoginScopeClaimName", "").strip() or "scope"
    items = [f"principal={options.get(_UNSECURED_PRINCIPAL + principal_claim, '')}"]
    if principal_claim != "sub":
        items.append(f"principalClaimName={principal_claim}")
    for key, value in options.items():
        if key in ("unsecuredLoginPrincipalClaimName", _UNSECURED_PRINCIPAL + principal_claim):
            continue
        if key == "unsecuredLoginScopeClaimName":
            items.append(f"scopeClaimName={scope_claim}")
        elif key == "unsecuredLoginLifetimeSeconds":
            items.append(f"lifeSeconds={value}")
        elif key.startswith("unsecuredLoginExtension_"):
            items.append(f"extension_{key[len('unsecuredLoginExtension_'):]}={value}")
        elif key in ("unsecuredLoginListClaim_" + scope_claim, _UNSECURED_PRINCIPAL + scope_claim):
            scopes = ([value] if key.startswith(_UNSECURED_PRINCIPAL)
                      else [s for s in value[1:].split(value[:1]) if s] if value else [])
            if scopes:
                items.append("scope=" + ",".join(scopes))
        elif key.startswith("unsecuredLogin"):
            raise OAuthBearerConfigError(key, value, f"librdkafka's unsecured tokens cannot "
                                         f"carry {key}: it makes only the principal, scope, "
                                         "lifetime and extensions")
    for item in items:
        if any(c.isspace() for c in item):
            raise OAuthBearerConfigError("sasl.jaas.config", "[hidden]",
                                         f"librdkafka's sasl.oauthbearer.config cannot carry "
                                         f"a value with spaces ({item})")
    return " ".join(items)
