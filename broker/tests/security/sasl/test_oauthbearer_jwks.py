"""Signed-JWT validation against a JWKS (KIP-768): the rules of Kafka's
ValidatorAccessTokenValidator (jose4j) with keys made here, and the JWKS sources (a
`file:` JWKS read once, an http one refreshed in the background)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from moldau.security.sasl.oauthbearer_jwks import (
    FileJwks,
    JwksError,
    JwkSet,
    JwtValidator,
    JwtValidatorSettings,
    RefreshingHttpJwks,
    fetch_jwks,
)
from moldau.security.sasl.oauthbearer_token import TokenValidationError

AUD, ISS = "kafka", "https://issuer.example"


@pytest.fixture(scope="module")
def keys() -> dict[str, Any]:
    return {"rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "other": rsa.generate_private_key(public_exponent=65537, key_size=2048),
            "ec": ec.generate_private_key(ec.SECP256R1())}


def jwk(private: Any, kid: str, **extra: str) -> dict[str, Any]:
    algorithm = (jwt.algorithms.RSAAlgorithm if isinstance(private, rsa.RSAPrivateKey)
                 else jwt.algorithms.ECAlgorithm)
    return {**json.loads(algorithm.to_jwk(private.public_key())), "kid": kid, **extra}


@pytest.fixture(scope="module")
def jwks(keys) -> dict[str, Any]:
    return {"keys": [{"kty": "weird", "kid": "skipped"}, jwk(keys["rsa"], "r1", use="sig"),
                     jwk(keys["ec"], "e1", alg="ES256"), jwk(keys["other"], "enc", use="enc")]}


class Keys:
    """A fixed key source that records the key ids it was told are missing."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.keys = JwkSet(document["keys"])
        self.missed: list[str] = []

    def current(self) -> JwkSet:
        return self.keys

    def missing(self, key_id: str) -> None:
        self.missed.append(key_id)


def make_validator(jwks: dict[str, Any], **settings: Any) -> JwtValidator:
    base: dict[str, Any] = {"expected_audiences": (AUD,), "expected_issuer": ISS}
    return JwtValidator(Keys(jwks), JwtValidatorSettings(**{**base, **settings}))


def sign(private: Any, kid: str | None = "r1", algorithm: str = "RS256", drop: tuple = (),
         **claims: Any) -> str:
    now = int(time.time())
    body = {"sub": "alice", "iat": now, "exp": now + 600, "aud": AUD, "iss": ISS, **claims}
    for name in drop:
        body.pop(name)
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(body, private, algorithm=algorithm, headers=headers)


def test_a_good_token(keys, jwks) -> None:
    now = int(time.time())
    token = make_validator(jwks).validate(
        sign(keys["rsa"], scope=["read", " write "], iat=now - 5, exp=now + 100))
    assert token.principal_name == "alice"
    assert token.scope == frozenset({"read", "write"})
    assert (token.lifetime_ms, token.start_time_ms) == ((now + 100) * 1000, (now - 5) * 1000)


def test_other_algorithms_and_a_token_without_kid(keys, jwks) -> None:
    validator = make_validator(jwks)
    assert validator.validate(sign(keys["ec"], "e1", "ES256")).principal_name == "alice"
    # no kid: the first key of the right type that is for signing
    assert validator.validate(sign(keys["rsa"], None, "PS256")).principal_name == "alice"


def test_claim_names_and_audience_lists(keys, jwks) -> None:
    validator = make_validator(jwks, sub_claim="email", scope_claim="roles",
                               expected_audiences=("x", AUD))
    token = validator.validate(sign(keys["rsa"], email=" a@b ", roles="admin", aud=["y", AUD]))
    assert (token.principal_name, token.scope) == ("a@b", frozenset({"admin"}))


def test_an_audience_is_refused_when_none_is_expected_as_jose4j_does(keys, jwks) -> None:
    validator = make_validator(jwks, expected_audiences=(), expected_issuer=None)
    with pytest.raises(TokenValidationError):
        validator.validate(sign(keys["rsa"]))
    assert validator.validate(sign(keys["rsa"], drop=("aud", "iss"))).principal_name == "alice"


def test_clock_skew_allows_a_just_expired_token(keys, jwks) -> None:
    token = sign(keys["rsa"], exp=int(time.time()) - 10)
    assert make_validator(jwks).validate(token)  # default skew 30 s
    with pytest.raises(TokenValidationError):
        make_validator(jwks, clock_skew_s=0).validate(token)


@pytest.mark.parametrize("case", [
    "expired", "not before", "wrong key", "wrong audience", "wrong issuer", "no issuer",
    "no iat", "no exp", "no sub", "blank sub", "number sub", "duplicate scope", "alg none",
    "encryption key", "hmac", "malformed", "two sections",
])
def test_refusals(keys, jwks, case: str) -> None:
    now = int(time.time())
    token = {
        "expired": lambda: sign(keys["rsa"], exp=now - 31),
        "not before": lambda: sign(keys["rsa"], nbf=now + 120),
        "wrong key": lambda: sign(keys["other"]),
        "wrong audience": lambda: sign(keys["rsa"], aud="elsewhere"),
        "wrong issuer": lambda: sign(keys["rsa"], iss="https://evil.example"),
        "no issuer": lambda: sign(keys["rsa"], drop=("iss",)),
        "no iat": lambda: sign(keys["rsa"], drop=("iat",)),
        "no exp": lambda: sign(keys["rsa"], drop=("exp",)),
        "no sub": lambda: sign(keys["rsa"], drop=("sub",)),
        "blank sub": lambda: sign(keys["rsa"], sub=" "),
        "number sub": lambda: sign(keys["rsa"], sub=7),
        "duplicate scope": lambda: sign(keys["rsa"], scope=["a", "a "]),
        "alg none": lambda: jwt.encode({"sub": "a", "exp": now + 60, "iat": now}, None,
                                       algorithm="none"),
        "encryption key": lambda: sign(keys["other"], "enc"),
        "hmac": lambda: sign(b"a secret that is long enough for hs256", "r1", "HS256"),
        "malformed": lambda: "not.a.jwt",
        "two sections": lambda: "abc.def",
    }[case]()
    with pytest.raises(TokenValidationError) as raised:
        make_validator(jwks).validate(token)
    assert raised.value.status == "invalid_token" and raised.value.scope is None


def test_an_unknown_key_id_asks_the_source_for_a_refresh(keys, jwks) -> None:
    validator = make_validator(jwks)
    with pytest.raises(TokenValidationError, match="suitable verification key"):
        validator.validate(sign(keys["rsa"], "r2"))
    assert isinstance(validator.keys, Keys) and validator.keys.missed == ["r2"]


# ---------------------------------------------------------------------------- sources


def test_file_jwks(tmp_path: Path, jwks) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(jwks))
    assert FileJwks.load(str(path)).current().key_ids() == {"skipped", "r1", "e1", "enc"}
    with pytest.raises(JwksError, match="cannot be read"):
        FileJwks.load(str(tmp_path / "missing.json"))
    path.write_text("{")
    with pytest.raises(JwksError, match="is not JSON"):
        FileJwks.load(str(path))
    path.write_text('{"key": []}')
    with pytest.raises(JwksError, match='has no "keys" array'):
        FileJwks.load(str(path))


class Fetcher:
    def __init__(self, documents: list[dict[str, Any] | Exception]) -> None:
        self.documents = documents
        self.calls = 0

    def __call__(self, url: str, context: object) -> JwkSet:
        document = self.documents[min(self.calls, len(self.documents) - 1)]
        self.calls += 1
        if isinstance(document, Exception):
            raise document
        return JwkSet(document["keys"])


def _eventually(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_http_jwks_refreshes_at_once_for_an_unknown_kid_then_waits(keys) -> None:
    before = {"keys": [jwk(keys["rsa"], "r1")]}
    after = {"keys": [jwk(keys["rsa"], "r1"), jwk(keys["other"], "r2")]}
    fetcher = Fetcher([before, after])
    source = RefreshingHttpJwks("https://idp.example/jwks", 3_600_000, 1, 10, None, fetcher)
    try:
        assert source.current().key_ids() == {"r1"} and fetcher.calls == 1
        source.missing("r2")
        _eventually(lambda: source.current().key_ids() == {"r1", "r2"})
        source.missing("r3")  # another id: another refresh
        _eventually(lambda: fetcher.calls == 3)
        source.missing("r3")  # the same id within a minute: no refresh
        time.sleep(0.2)
        assert fetcher.calls == 3
    finally:
        source.close()


def test_http_jwks_keeps_its_keys_when_a_refresh_fails(keys) -> None:
    fetcher = Fetcher([{"keys": [jwk(keys["rsa"], "r1")]}, JwksError("down")])
    source = RefreshingHttpJwks("https://idp.example/jwks", 3_600_000, 1, 5, None, fetcher)
    try:
        source.refresh()  # retried with backoff within 5 ms, then given up
        assert fetcher.calls >= 3 and source.current().key_ids() == {"r1"}
    finally:
        source.close()
    with pytest.raises(JwksError, match="down"):
        RefreshingHttpJwks("https://idp.example/jwks", 1000, 1, 5, None,
                           Fetcher([JwksError("down")]))


@pytest.fixture
def jwks_server(jwks) -> Iterator[str]:
    body = json.dumps(jwks).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status = 200 if self.path == "/jwks" else 404
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if status == 200 else b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_fetch_jwks_over_http(jwks_server) -> None:
    assert "r1" in fetch_jwks(f"{jwks_server}/jwks", None).key_ids()
    with pytest.raises(JwksError, match="cannot be fetched"):
        fetch_jwks(f"{jwks_server}/missing", None)
