"""Unsecured OAUTHBEARER tokens: the broker's default validator (Kafka's
OAuthBearerUnsecuredValidatorCallbackHandler rules and texts) and the client's token
maker (OAuthBearerUnsecuredLoginCallbackHandler options)."""

from __future__ import annotations

import base64
import json

import pytest

from moldau.security.sasl.oauthbearer_token import TokenValidationError
from moldau.security.sasl.oauthbearer_unsecured import (
    OAuthBearerConfigError,
    UnsecuredJwsValidator,
    UnsecuredValidatorOptions,
    parse_unsecured_jws,
    unsecured_login_extensions,
    unsecured_login_token,
)

NOW_MS = 1_700_000_000_000
NOW_S = NOW_MS // 1000


def b64(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def jws(claims: dict[str, object], header: dict[str, object] | None = None,
        signature: str = "") -> str:
    return f"{b64(header or {'alg': 'none'})}.{b64(claims)}.{signature}"


def validator(**options: str) -> UnsecuredJwsValidator:
    return UnsecuredJwsValidator(UnsecuredValidatorOptions.from_jaas_options(options),
                                 clock_ms=lambda: NOW_MS)


GOOD = {"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600, "scope": ["a", " b ", ""]}


def test_a_good_token() -> None:
    token = validator().validate(jws(GOOD))
    assert token.principal_name == "alice"
    assert token.scope == frozenset({"a", "b"})
    assert token.lifetime_ms == (NOW_S + 3600) * 1000
    assert token.start_time_ms == (NOW_S - 10) * 1000


def test_fractional_seconds_round_as_java_does() -> None:
    token = validator().validate(jws({"sub": "a", "exp": NOW_S + 1.0005}))
    assert token.lifetime_ms == (NOW_S + 1) * 1000 + 1  # Math.round(x.5) rounds up
    assert token.start_time_ms is None


@pytest.mark.parametrize("token, reason", [
    ("a..b", "Malformed compact serialization contains '..'"),
    ("a.b", "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded "
            "values"),
    ("a.b.c.d", "Unsecured JWS compact serializations must have 3 dot-separated "
                "Base64URL-encoded values"),
    ("#.e30.", "malformed Base64 URL encoded value"),
    (f"{b64({'alg': 'none'})}.bm90IGpzb24.", "malformed JSON"),
    (f"{b64({'alg': 'none'})}.{b64([1, 2])}.", "malformed JSON"),
    (jws(GOOD, {"typ": "JWT"}), "JWS header must have an Algorithm value"),
    (jws(GOOD, {"alg": "RS256"}), "Unsecured JWS must have 'none' for an algorithm"),
    (jws(GOOD, signature="c2ln"), "Unsecured JWS must not contain a digital signature"),
    (jws({"sub": "a"}), "No expiration time in JWT"),
    (jws({"sub": "a", "exp": "tomorrow"}), "The 'exp' claim was not of type Number: String"),
    (jws({"exp": NOW_S + 60}), "No principal name in JWT claim: sub"),
    (jws({"sub": "  ", "exp": NOW_S + 60}), "No principal name in JWT claim: sub"),
    (jws({"sub": 42, "exp": NOW_S + 60}), "The 'sub' claim was not of type String: Integer"),
    (jws({"sub": "a", "exp": NOW_S + 60, "scope": 7}),
     "The 'scope' claim was not of type List: Integer"),
    (jws({"sub": "a", "exp": NOW_S + 60, "iat": "x"}),
     "The 'iat' claim was not of type Number: String"),
    (jws({"sub": "a", "exp": NOW_S - 1}),
     f"The indicated time ({NOW_MS} ms) minus allowable clock skew (0 ms) was on or after the "
     f"Expiration Time value ({NOW_S - 1:f} seconds)"),
    (jws({"sub": "a", "exp": NOW_S + 60, "iat": NOW_S + 5}),
     f"The Issued At value ({NOW_S + 5:f} seconds) was after the indicated time ({NOW_MS} ms) "
     "plus allowable clock skew (0 ms)"),
    (jws({"sub": "a", "exp": NOW_S - 20, "iat": NOW_S - 10}),
     f"The indicated time ({NOW_MS} ms) minus allowable clock skew (0 ms) was on or after the "
     f"Expiration Time value ({NOW_S - 20:f} seconds)"),
])
def test_refused_tokens_are_invalid_token(token: str, reason: str) -> None:
    with pytest.raises(TokenValidationError) as raised:
        validator().validate(token)
    assert (raised.value.status, raised.value.scope, raised.value.reason) == \
        ("invalid_token", None, reason)


def test_exp_must_follow_iat() -> None:
    with pytest.raises(TokenValidationError, match="was not after the Issued At time"):
        validator(unsecuredValidatorAllowableClockSkewMs="100000").validate(
            jws({"sub": "a", "exp": NOW_S + 10, "iat": NOW_S + 20}))


def test_clock_skew_option() -> None:
    expired = jws({"sub": "a", "exp": NOW_S - 1, "iat": NOW_S - 100})
    early = jws({"sub": "a", "exp": NOW_S + 100, "iat": NOW_S + 2})
    for token in (expired, early):
        assert validator(unsecuredValidatorAllowableClockSkewMs="5000").validate(token)
        with pytest.raises(TokenValidationError):
            validator(unsecuredValidatorAllowableClockSkewMs="500").validate(token)


def test_required_scope_missing_is_insufficient_scope_with_the_java_list() -> None:
    with pytest.raises(TokenValidationError) as raised:
        validator(unsecuredValidatorRequiredScope=" a  c ").validate(jws(GOOD))
    error = raised.value
    assert (error.status, error.scope) == ("insufficient_scope", "[a, c]")
    assert error.reason == ("The provided scope ([a, b]) was missing a required scope (c).  "
                            "All required scope elements: [a, c]")
    assert validator(unsecuredValidatorRequiredScope="b a").validate(jws(GOOD))


def test_a_string_scope_claim_is_one_scope_and_claim_names_are_options() -> None:
    token = jws({"user": "bob", "exp": NOW_S + 60, "roles": " read write "})
    checked = validator(unsecuredValidatorPrincipalClaimName=" user ",
                        unsecuredValidatorScopeClaimName="roles").validate(token)
    assert (checked.principal_name, checked.scope) == ("bob", frozenset({"read write"}))


@pytest.mark.parametrize("options, key, message", [
    ({"unsecuredValidatorAllowableClockSkewMs": "-1"}, "unsecuredValidatorAllowableClockSkewMs",
     "Allowable clock skew millis must not be negative: -1"),
    ({"unsecuredValidatorAllowableClockSkewMs": "soon"},
     "unsecuredValidatorAllowableClockSkewMs", 'For input string: "soon"'),
    ({"unsecuredValidatorRequiredScope": "ok bad\"scope"}, "unsecuredValidatorRequiredScope",
     'Invalid scope value: bad"scope'),
])
def test_bad_validator_options_are_config_errors(options: dict[str, str], key: str,
                                                 message: str) -> None:
    with pytest.raises(OAuthBearerConfigError) as raised:
        UnsecuredValidatorOptions.from_jaas_options(options)
    assert (raised.value.key, raised.value.message) == (key, message)


# ---------------------------------------------------------------------------- client


def test_login_token_from_options() -> None:
    token = unsecured_login_token({
        "unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginNumberClaim_level": "3",
        "unsecuredLoginListClaim_scope": "|read|write", "unsecuredLoginLifetimeSeconds": "60",
        "unsecuredLoginExtension_traceId": "ignored here"}, now=NOW_MS)
    parsed = parse_unsecured_jws(token)
    assert parsed.claims == {"exp": NOW_S + 60, "iat": NOW_S, "sub": "alice", "level": 3.0,
                             "scope": ["read", "write"]}
    assert token.endswith(".") and "=" not in token
    assert validator().validate(token).principal_name == "alice"


@pytest.mark.parametrize("text, items", [
    (",a,b", ["a", "b"]), ("|a||b|", ["a", "", "b", ""]), (",", []), ("", []),
    (".x.y", ["x", "y"]),
])
def test_list_claims_split_as_java_splits_them(text: str, items: list[str]) -> None:
    token = unsecured_login_token({"unsecuredLoginStringClaim_sub": "a",
                                   "unsecuredLoginListClaim_l": text}, now=NOW_MS)
    assert parse_unsecured_jws(token).claims["l"] == items


def test_custom_principal_and_scope_claims() -> None:
    token = unsecured_login_token({"unsecuredLoginPrincipalClaimName": "user",
                                   "unsecuredLoginStringClaim_user": "bob"}, now=NOW_MS)
    assert parse_unsecured_jws(token, "user").token.principal_name == "bob"


@pytest.mark.parametrize("options, key, message", [
    ({}, "unsecuredLoginStringClaim_sub", "No principal name in JWT claim: sub"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_exp": "1"},
     "unsecuredLoginNumberClaim_exp", "Cannot explicitly set the 'exp' claim"),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginLifetimeSeconds": "1h"},
     "unsecuredLoginLifetimeSeconds", 'For input string: "1h"'),
    ({"unsecuredLoginStringClaim_sub": "a", "unsecuredLoginNumberClaim_n": "many"},
     "unsecuredLoginNumberClaim_n", 'For input string: "many"'),
])
def test_options_that_make_no_token(options: dict[str, str], key: str, message: str) -> None:
    with pytest.raises(OAuthBearerConfigError) as raised:
        unsecured_login_token(options, now=NOW_MS)
    assert (raised.value.key, raised.value.message) == (key, message)


def test_login_extensions() -> None:
    assert unsecured_login_extensions({"unsecuredLoginExtension_traceId": "1",
                                       "unsecuredLoginStringClaim_sub": "a"}) == {"traceId": "1"}
    with pytest.raises(OAuthBearerConfigError, match="Extension name auth is invalid"):
        unsecured_login_extensions({"unsecuredLoginExtension_auth": "x"})
