"""Which OAUTHBEARER validator a broker listener runs, from its settings, as Kafka's
SaslChannelBuilder picks the server callback handler:

* no `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class` (or Kafka's
  OAuthBearerUnsecuredValidatorCallbackHandler named there): unsecured tokens, with the
  `unsecuredValidator*` options of the listener's OAuthBearerLoginModule entry;
* Kafka's OAuthBearerValidatorCallbackHandler (3.9 also still knows it under the
  deprecated `...oauthbearer.secured` package): signed JWTs against the JWKS of
  `sasl.oauthbearer.jwks.endpoint.url` (KIP-768), with the other `sasl.oauthbearer.*`
  settings. Any other class is refused by the key table before this runs.

Settings are looked up by the caller (`Setting`), which knows Kafka's listener and
mechanism prefixes; errors are OAuthBearerConfigError naming the key."""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Mapping
from urllib.parse import unquote, urlsplit

from moldau.security.sasl.oauthbearer_handlers import (
    JWKS_VALIDATOR_HANDLER,
    JWKS_VALIDATOR_HANDLERS,
    SERVER_CALLBACK_HANDLERS,
    UNSECURED_VALIDATOR_HANDLER,
)
from moldau.security.sasl.oauthbearer_jwks import (
    FileJwks,
    JwksError,
    JwtValidator,
    JwtValidatorSettings,
    KeySource,
    RefreshingHttpJwks,
)
from moldau.security.sasl.oauthbearer_token import TokenValidator
from moldau.security.sasl.oauthbearer_unsecured import (
    OAuthBearerConfigError,
    UnsecuredJwsValidator,
    UnsecuredValidatorOptions,
)
from moldau.security.ssl_settings import TlsConfigError
from moldau.security.tls import build_client_context

JWKS_URL = "sasl.oauthbearer.jwks.endpoint.url"
URL_SCHEMES = ("http", "https", "file")

# a broker key -> (the name it was found under, its typed value, None when unset)
Setting = Callable[[str], tuple[str, object]]


def server_token_validator(handler: str | None, jaas_options: Mapping[str, str],
                           setting: Setting) -> TokenValidator:
    """The validator of a listener's OAUTHBEARER exchanges. Reads a `file:` JWKS or
    fetches an http(s) one now, so that a JWKS that cannot be had stops startup."""
    if handler is None or handler == UNSECURED_VALIDATOR_HANDLER:
        return UnsecuredJwsValidator(UnsecuredValidatorOptions.from_jaas_options(jaas_options))
    if handler in JWKS_VALIDATOR_HANDLERS:
        return JwtValidator(_key_source(jaas_options, setting), _validator_settings(setting))
    raise OAuthBearerConfigError("sasl.server.callback.handler.class", handler,
                                 f"Moldau cannot run the server callback handler {handler}; "
                                 f"it runs {', '.join(SERVER_CALLBACK_HANDLERS)}")


def _text(setting: Setting, key: str) -> tuple[str, str | None]:
    name, value = setting(key)
    return name, None if value is None else str(value)


def _claim_name(setting: Setting, key: str, default: str) -> str:
    name, value = _text(setting, key)
    if value is None:
        return default
    if not value.strip():
        raise OAuthBearerConfigError(name, value, f"{default} value must be non-null, "
                                     "non-empty, and non-whitespace")
    return value.strip()


def _int(setting: Setting, key: str, default: int, minimum: int) -> int:
    name, value = setting(key)
    if value is None:
        return default
    assert isinstance(value, int), value  # typed by the broker's key table
    if value < minimum:
        raise OAuthBearerConfigError(name, value, f"The OAuth configuration option {key} "
                                     f"value must be at least {minimum}")
    return value


def _validator_settings(setting: Setting) -> JwtValidatorSettings:
    _, audiences = setting("sasl.oauthbearer.expected.audience")
    audience_list = audiences if isinstance(audiences, list) else []
    _, issuer = _text(setting, "sasl.oauthbearer.expected.issuer")
    return JwtValidatorSettings(
        tuple(str(a).strip() for a in audience_list if str(a).strip()),
        issuer.strip() if issuer is not None and issuer.strip() else None,
        _int(setting, "sasl.oauthbearer.clock.skew.seconds", 30, 0),
        _claim_name(setting, "sasl.oauthbearer.scope.claim.name", "scope"),
        _claim_name(setting, "sasl.oauthbearer.sub.claim.name", "sub"))


def _key_source(jaas_options: Mapping[str, str], setting: Setting) -> KeySource:
    name, url = _text(setting, JWKS_URL)
    if url is None or not url.strip():
        raise OAuthBearerConfigError(name, url, f"The OAuth configuration option {JWKS_URL} "
                                     f"is required by {JWKS_VALIDATOR_HANDLER}")
    url = url.strip()
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if not scheme:
        raise OAuthBearerConfigError(name, url, f"The OAuth configuration option {JWKS_URL} "
                                     f"contains a URL ({url}) that is missing the protocol")
    if scheme not in URL_SCHEMES:
        raise OAuthBearerConfigError(
            name, url, f"The OAuth configuration option {JWKS_URL} contains a URL ({url}) "
            f"that contains an invalid protocol ({scheme}); only \"http\", \"https\", and "
            "\"file\" protocol are supported")
    try:
        if scheme == "file":
            return FileJwks.load(_existing_file(name, url, unquote(parts.path)))
        return RefreshingHttpJwks(
            url, _int(setting, "sasl.oauthbearer.jwks.endpoint.refresh.ms", 3_600_000, 0),
            _int(setting, "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", 100, 0),
            _int(setting, "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", 10_000, 0),
            jaas_tls_context(jaas_options) if scheme == "https" else None)
    except JwksError as exc:
        raise OAuthBearerConfigError(name, url, str(exc)) from None


def _existing_file(key: str, url: str, path: str) -> str:
    if not os.path.exists(path):
        raise OAuthBearerConfigError(key, url, f"The OAuth configuration option {JWKS_URL} "
                                     f"contains a file ({path}) that doesn't exist")
    if not os.path.isfile(path):
        raise OAuthBearerConfigError(key, url, f"The OAuth configuration option {JWKS_URL} "
                                     f"contains a file ({path}) that is not a file")
    return path


def jaas_tls_context(options: Mapping[str, str]) -> ssl.SSLContext | None:
    """The TLS settings of an https JWKS or token endpoint: the `ssl.*` options of the
    JAAS entry when it has any (Kafka's JaasOptionsUtils), else the system's defaults."""
    settings = {k: v for k, v in options.items() if k.startswith("ssl.")}
    if not settings:
        return None
    try:
        return build_client_context(settings)
    except (TlsConfigError, OSError) as exc:
        raise OAuthBearerConfigError(
            next(iter(settings)), "[hidden]",
            f"the ssl.* options of the OAuthBearerLoginModule entry do not load: {exc}") from None
