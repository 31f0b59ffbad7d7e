"""Unsecured OAUTHBEARER tokens (a JWS with `"alg":"none"` and no signature), for
development and tests, as Kafka's defaults handle them: the broker validates them
(OAuthBearerUnsecuredValidatorCallbackHandler) and a client makes them from its JAAS
options (OAuthBearerUnsecuredLoginCallbackHandler). Parsed by hand, as Kafka does: there
is no signature to verify.

Broker JAAS options: `unsecuredValidatorPrincipalClaimName` (default `sub`),
`unsecuredValidatorScopeClaimName` (default `scope`), `unsecuredValidatorRequiredScope`
(space-separated) and `unsecuredValidatorAllowableClockSkewMs` (default 0). Client JAAS
options: `unsecuredLoginStringClaim_<claim>`, `unsecuredLoginNumberClaim_<claim>`,
`unsecuredLoginListClaim_<claim>` (the first character is the delimiter),
`unsecuredLoginExtension_<name>`, `unsecuredLoginPrincipalClaimName`,
`unsecuredLoginScopeClaimName` and `unsecuredLoginLifetimeSeconds` (default 3600)."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from moldau.security.sasl.oauthbearer_messages import check_extensions
from moldau.security.sasl.oauthbearer_token import (
    INSUFFICIENT_SCOPE,
    OAuthBearerToken,
    TokenValidationError,
    java_list,
)

# A claim value after Kafka's conversion of the JSON: a number, a string, or a list of
# strings (anything else becomes text, as Jackson's asText makes it).
Claim = int | float | str | list[str]

_SCOPE_ITEM = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")  # RFC 6749 §3.3 scope-token
_VALIDATOR_PREFIX = "unsecuredValidator"
_LOGIN_PREFIX = "unsecuredLogin"
_RESERVED_CLAIMS = ("iat", "exp")


class OAuthBearerConfigError(ValueError):
    """JAAS options (or broker settings) an OAUTHBEARER login or validator cannot use:
    Kafka's OAuthBearerConfigException, with the key it concerns."""

    def __init__(self, key: str, value: object, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.value = value
        self.message = message


def now_ms() -> int:
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------- parsing


def _java_round(value: float) -> int:
    """Java's Math.round: halves round up."""
    return math.floor(value + 0.5)


def _java_number_type(value: int | float) -> str:
    """The simple class name Jackson gives a JSON number (for error texts)."""
    if isinstance(value, float):
        return "Double"
    if -(2 ** 31) <= value < 2 ** 31:
        return "Integer"
    return "Long" if -(2 ** 63) <= value < 2 ** 63 else "BigInteger"


def _type_name(value: Claim) -> str:
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "ArrayList"
    return _java_number_type(value)


def _as_text(value: object) -> str:
    """Jackson's JsonNode.asText: strings as they are, numbers and booleans printed,
    null as "null", objects and arrays as ""."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return json.dumps(value)
    return ""


def _convert(value: object) -> Claim:
    if isinstance(value, list):
        return [_as_text(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return _as_text(value)


def decode_section(section: str) -> dict[str, Claim]:
    """One Base64URL section of a compact JWS as a JSON object's members."""
    try:
        raw = base64.b64decode(section + "=" * (-len(section) % 4), altchars=b"-_",
                               validate=True)
    except (binascii.Error, ValueError):
        raise TokenValidationError("malformed Base64 URL encoded value") from None
    try:
        parsed = json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        raise TokenValidationError("malformed JSON") from None
    if not isinstance(parsed, dict):
        raise TokenValidationError("malformed JSON")
    return {name: _convert(value) for name, value in parsed.items()}


def _claim_of_type(claims: Mapping[str, Claim], name: str, kind: type | tuple[type, ...],
                   kind_name: str) -> Claim | None:
    value = claims.get(name)
    if value is None or isinstance(value, kind):
        return value
    raise TokenValidationError(f"The '{name}' claim was not of type {kind_name}: "
                               f"{_type_name(value)}")


def _number_claim(claims: Mapping[str, Claim], name: str) -> int | float | None:
    value = _claim_of_type(claims, name, (int, float), "Number")
    assert value is None or isinstance(value, int | float)
    return value


def _scope(claims: Mapping[str, Claim], name: str) -> frozenset[str]:
    """A string scope claim is one scope (Kafka does not split it); a list claim is its
    non-blank members."""
    value = claims.get(name)
    if isinstance(value, str):
        return frozenset([value.strip()]) if value.strip() else frozenset()
    listed = _claim_of_type(claims, name, list, "List")
    assert listed is None or isinstance(listed, list)
    return frozenset(item.strip() for item in listed or () if item.strip())


@dataclass(frozen=True)
class UnsecuredJws:
    """A parsed unsecured JWS (Kafka's OAuthBearerUnsecuredJws)."""

    token: OAuthBearerToken
    claims: Mapping[str, Claim]
    issued_at: int | float | None
    expiration: int | float


def parse_unsecured_jws(value: str, principal_claim: str = "sub",
                        scope_claim: str = "scope") -> UnsecuredJws:
    """`value` as Kafka's OAuthBearerUnsecuredJws reads it; TokenValidationError when
    it is not an unsecured JWS with an `exp` and a principal claim."""
    if ".." in value:
        raise TokenValidationError("Malformed compact serialization contains '..'")
    sections = value.split(".")
    if len(sections) != 3:
        raise TokenValidationError("Unsecured JWS compact serializations must have 3 "
                                   "dot-separated Base64URL-encoded values")
    header = decode_section(sections[0])
    claims = decode_section(sections[1])
    if "alg" not in header:
        # Kafka trips over a null here and drops the connection; refusing the token is
        # what it means to do
        raise TokenValidationError("JWS header must have an Algorithm value")
    if header["alg"] != "none":
        raise TokenValidationError("Unsecured JWS must have 'none' for an algorithm")
    if sections[2]:
        raise TokenValidationError("Unsecured JWS must not contain a digital signature")
    scope = _scope(claims, scope_claim)
    expiration = _number_claim(claims, "exp")
    if expiration is None:
        raise TokenValidationError("No expiration time in JWT")
    principal = _claim_of_type(claims, principal_claim, str, "String")
    if not isinstance(principal, str) or not principal.strip():
        raise TokenValidationError(f"No principal name in JWT claim: {principal_claim}")
    issued_at = _number_claim(claims, "iat")
    start = None if issued_at is None else _java_round(issued_at * 1000)
    token = OAuthBearerToken(value, principal, scope, _java_round(expiration * 1000), start)
    return UnsecuredJws(token, claims, issued_at, expiration)


# ---------------------------------------------------------------------------- broker


def _claim_name_option(options: Mapping[str, str], key: str, default: str) -> str:
    value = options.get(key, "").strip()
    return value or default


def parse_scope(text: str, key: str) -> tuple[str, ...]:
    """A space-delimited scope (OAuthBearerScopeUtils.parseScope)."""
    items = tuple(item for item in text.split(" ") if item)
    for item in items:
        if not _SCOPE_ITEM.fullmatch(item):
            raise OAuthBearerConfigError(key, text, f"Invalid scope value: {item}")
    return items


@dataclass(frozen=True)
class UnsecuredValidatorOptions:
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0

    @classmethod
    def from_jaas_options(cls, options: Mapping[str, str]) -> UnsecuredValidatorOptions:
        """The `unsecuredValidator*` options of the listener's OAuthBearerLoginModule
        entry. Kafka reads them at each authentication; Moldau checks them at startup."""
        scope_key = f"{_VALIDATOR_PREFIX}RequiredScope"
        skew_key = f"{_VALIDATOR_PREFIX}AllowableClockSkewMs"
        skew_text = options.get(skew_key, "").strip()
        try:
            skew = int(skew_text) if skew_text else 0
        except ValueError:
            raise OAuthBearerConfigError(skew_key, skew_text,
                                         f'For input string: "{skew_text}"') from None
        if not -(2 ** 31) <= skew < 2 ** 31:
            raise OAuthBearerConfigError(skew_key, skew_text,
                                         f'For input string: "{skew_text}"')
        if skew < 0:
            raise OAuthBearerConfigError(
                skew_key, skew_text, f"Allowable clock skew millis must not be negative: "
                f"{skew_text}")
        return cls(_claim_name_option(options, f"{_VALIDATOR_PREFIX}PrincipalClaimName", "sub"),
                   _claim_name_option(options, f"{_VALIDATOR_PREFIX}ScopeClaimName", "scope"),
                   parse_scope(options.get(scope_key, "").strip(), scope_key), skew)


class UnsecuredJwsValidator:
    """The broker's default OAUTHBEARER validator."""

    def __init__(self, options: UnsecuredValidatorOptions,
                 clock_ms: Callable[[], int] = now_ms) -> None:
        self.options = options
        self._clock_ms = clock_ms

    def validate(self, token_value: str) -> OAuthBearerToken:
        options = self.options
        jws = parse_unsecured_jws(token_value, options.principal_claim, options.scope_claim)
        now, skew = self._clock_ms(), options.allowable_clock_skew_ms
        if jws.issued_at is not None and 1000 * jws.issued_at > now + skew:
            raise TokenValidationError(
                f"The Issued At value ({jws.issued_at:f} seconds) was after the indicated "
                f"time ({now} ms) plus allowable clock skew ({skew} ms)")
        if now - skew >= 1000 * jws.expiration:
            raise TokenValidationError(
                f"The indicated time ({now} ms) minus allowable clock skew ({skew} ms) was "
                f"on or after the Expiration Time value ({jws.expiration:f} seconds)")
        if jws.issued_at is not None and jws.expiration <= jws.issued_at:
            raise TokenValidationError(
                f"The Expiration Time time ({jws.expiration:f} seconds) was not after the "
                f"Issued At time ({jws.issued_at:f} seconds)")
        for required in options.required_scope:
            if required not in jws.token.scope:
                raise TokenValidationError(
                    f"The provided scope ({java_list(sorted(jws.token.scope))}) was missing a "
                    f"required scope ({required}).  All required scope elements: "
                    f"{java_list(options.required_scope)}", INSUFFICIENT_SCOPE,
                    java_list(options.required_scope))
        return jws.token


# ---------------------------------------------------------------------------- client


def _list_claim(text: str) -> list[str]:
    """`unsecuredLoginListClaim_*`: the first character delimits the rest; Java's split
    drops trailing empty items, and Kafka then adds one "" back when any item was empty
    at either end or between two delimiters."""
    if len(text) <= 1:
        return []
    delimiter, rest = text[0], text[1:]
    items = rest.split(delimiter)
    while items and items[-1] == "":
        items.pop()
    if rest.startswith(delimiter) or rest.endswith(delimiter) or delimiter * 2 in rest:
        items.append("")
    return items


def _claims_from_options(options: Mapping[str, str]) -> dict[str, object]:
    claims: dict[str, object] = {}
    kinds = (("StringClaim_", str), ("NumberClaim_", float), ("ListClaim_", _list_claim))
    for key, value in options.items():
        for infix, convert in kinds:
            prefix = _LOGIN_PREFIX + infix
            if not key.startswith(prefix) or len(key) == len(prefix):
                continue
            name = key[len(prefix):]
            if name in _RESERVED_CLAIMS:
                raise OAuthBearerConfigError(key, value,
                                             f"Cannot explicitly set the '{name}' claim")
            try:
                claims[name] = convert(value)
            except ValueError:
                raise OAuthBearerConfigError(key, value,
                                             f'For input string: "{value}"') from None
    return claims


def _b64url(data: dict[str, object]) -> str:
    text = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(text).rstrip(b"=").decode()


def unsecured_login_extensions(options: Mapping[str, str]) -> dict[str, str]:
    """The `unsecuredLoginExtension_<name>` options: the SASL extensions to send."""
    prefix = _LOGIN_PREFIX + "Extension_"
    extensions = {key[len(prefix):]: value for key, value in options.items()
                  if key.startswith(prefix)}
    try:
        check_extensions(extensions)
    except ValueError as exc:
        raise OAuthBearerConfigError(prefix + "*", None, str(exc)) from None
    return extensions


def unsecured_login_token(options: Mapping[str, str], now: int | None = None) -> str:
    """A fresh unsecured token from a client's OAuthBearerLoginModule options (Kafka's
    OAuthBearerUnsecuredLoginCallbackHandler); OAuthBearerConfigError when the options
    make no usable token (no principal claim, say)."""
    now = now_ms() if now is None else now
    principal_claim = _claim_name_option(options, f"{_LOGIN_PREFIX}PrincipalClaimName", "sub")
    scope_claim = _claim_name_option(options, f"{_LOGIN_PREFIX}ScopeClaimName", "scope")
    lifetime_key = f"{_LOGIN_PREFIX}LifetimeSeconds"
    lifetime_text = options.get(lifetime_key, "3600")
    try:
        lifetime = int(lifetime_text)
    except ValueError:
        raise OAuthBearerConfigError(lifetime_key, lifetime_text,
                                     f'For input string: "{lifetime_text}"') from None
    claims: dict[str, object] = {"exp": now / 1000 + lifetime, "iat": now / 1000}
    claims.update(_claims_from_options(options))
    token = f"{_b64url({'alg': 'none'})}.{_b64url(claims)}."
    try:
        parse_unsecured_jws(token, principal_claim, scope_claim)
    except TokenValidationError as exc:
        raise OAuthBearerConfigError(f"{_LOGIN_PREFIX}StringClaim_{principal_claim}", None,
                                     exc.reason) from None
    return token
