"""The delegation token model without I/O: ids, the HMAC a client's password comes from,
who may see and renew a token, and the cache a SCRAM `tokenauth=true` login is checked
against (a whole SCRAM exchange with Moldau's client and server)."""

from __future__ import annotations

import base64
import re

import pytest

from moldau.security.delegation_tokens import (
    DelegationToken,
    DelegationTokenCache,
    TokenInformation,
    generate_token_id,
    parse_principal,
    token_hmac,
)
from moldau.security.principal import KafkaPrincipal
from moldau.security.sasl.errors import SaslMechanismError
from moldau.security.sasl.scram import ScramClient, ScramServer
from moldau.security.sasl.scram_credentials import MIN_ITERATIONS, ScramMechanism

ALICE, BOB, CAROL, ADMIN = (KafkaPrincipal(n) for n in ("alice", "bob", "carol", "admin"))
SECRET = "token-secret"


def info(token_id: str = "tok-1", *, owner: KafkaPrincipal = ALICE,
         requester: KafkaPrincipal = ADMIN, renewers: tuple[KafkaPrincipal, ...] = (BOB,),
         expiry: int = 2_000, max_ms: int = 3_000) -> TokenInformation:
    return TokenInformation(token_id, owner, requester, renewers, 1_000, max_ms, expiry)


def token(token_id: str = "tok-1", **kwargs: object) -> DelegationToken:
    return DelegationToken(info(token_id, **kwargs),  # type: ignore[arg-type]
                           token_hmac(token_id, SECRET))


def test_token_ids_are_kafkas_url_safe_base64_uuids() -> None:
    ids = {generate_token_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", i) for i in ids)


def test_the_hmac_is_hmac_sha512_of_the_id_keyed_with_the_secret() -> None:
    mac = token_hmac("tok-1", SECRET)
    assert len(mac) == 64
    # a fixed vector (openssl dgst -sha512 -hmac token-secret): any broker with the same
    # secret derives the same password
    assert base64.b64encode(mac).decode() == (
        "JRNJU7RflHLi+j0qCtgDisyYeGPgNv/pb4IZa1SJ5OZuUxLg2a5NdeVHHKvUJSufnMg5cvq4AYEy4Lp+"
        "H3YwNQ==")
    assert token_hmac("tok-1", "other") != mac
    with pytest.raises(ValueError, match="secret key is empty"):
        token_hmac("tok-1", "")


def test_principals_split_at_the_first_colon() -> None:
    assert parse_principal("User:alice") == ALICE
    assert parse_principal("User:CN=a:b") == KafkaPrincipal("CN=a:b", "User")
    assert parse_principal("Group:ops") == KafkaPrincipal("ops", "Group")
    with pytest.raises(ValueError, match="principalType:principalName but got alice"):
        parse_principal("alice")


def test_who_sees_and_who_renews_a_token() -> None:
    t = info()
    assert t.owner_or_renewer(ALICE) and t.owner_or_renewer(BOB)
    assert t.owner_or_renewer(ADMIN)  # the requester sees it (KIP-373) ...
    assert t.may_renew(ALICE) and t.may_renew(BOB)
    assert not t.may_renew(ADMIN)  # ... but may not renew it
    assert not t.owner_or_renewer(CAROL) and not t.may_renew(CAROL)


def test_a_token_expires_after_its_expiry_or_its_max_timestamp() -> None:
    assert not info(expiry=2_000, max_ms=3_000).expired(2_000)
    assert info(expiry=2_000, max_ms=3_000).expired(2_001)
    assert info(expiry=5_000, max_ms=3_000).expired(3_001)
    assert info().with_expiry(2_500).expiry_timestamp == 2_500


def test_the_cache_finds_tokens_by_id_and_hmac_and_forgets_removed_ones() -> None:
    cache = DelegationTokenCache()
    first, second = token("tok-1"), token("tok-2", owner=BOB)
    cache.update(first)
    cache.update(second)
    assert cache.token("tok-1") == first
    assert cache.token_for_hmac(second.hmac) == second
    assert [t.info.token_id for t in cache.tokens()] == ["tok-1", "tok-2"]
    renewed = DelegationToken(first.info.with_expiry(2_900), first.hmac)
    cache.update(renewed)
    assert cache.token_for_hmac(first.hmac) == renewed
    cache.remove("tok-1")
    assert cache.token("tok-1") is None and cache.token_for_hmac(first.hmac) is None
    cache.remove("tok-1")  # twice is fine
    assert cache.tokens() == [second]


def test_a_login_gets_the_owner_and_expiry_until_the_token_expires() -> None:
    cache = DelegationTokenCache()
    cache.update(token())
    login = cache.login(ScramMechanism.SCRAM_SHA_512, "tok-1", now_ms=1_500)
    assert login is not None
    assert login.owner == "alice" and login.expiry_timestamp_ms == 2_000
    assert login.credential.iterations == MIN_ITERATIONS
    assert cache.login(ScramMechanism.SCRAM_SHA_512, "tok-1", now_ms=2_001) is None
    assert cache.login(ScramMechanism.SCRAM_SHA_256, "unknown", now_ms=1_500) is None


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_a_scram_exchange_with_tokenauth_authenticates_as_the_owner(
        mechanism: ScramMechanism) -> None:
    cache = DelegationTokenCache()
    t = token()
    cache.update(t)
    server = ScramServer(mechanism, lambda _user: None,
                         tokens=lambda tid: cache.login(mechanism, tid, now_ms=1_500))
    client = ScramClient(mechanism, "tok-1", t.hmac_base64, extensions={"tokenauth": "true"})
    challenge = server.evaluate(client.initial_response())
    final = client.evaluate(challenge)
    assert final is not None
    client.evaluate(server.evaluate(final))
    assert server.complete and client.complete
    assert server.authorization_id == "alice" and server.token_authenticated
    assert server.credential_expiry_ms == 2_000


def test_a_wrong_hmac_or_an_unknown_token_fails_the_login() -> None:
    cache = DelegationTokenCache()
    cache.update(token())
    mechanism = ScramMechanism.SCRAM_SHA_256

    def server() -> ScramServer:
        return ScramServer(mechanism, lambda _user: None,
                           tokens=lambda tid: cache.login(mechanism, tid, now_ms=1_500))

    bad = ScramClient(mechanism, "tok-1", "not-the-hmac", extensions={"tokenauth": "true"})
    s = server()
    final = bad.evaluate(s.evaluate(bad.initial_response()))
    assert final is not None
    with pytest.raises(SaslMechanismError):
        s.evaluate(final)
    unknown = ScramClient(mechanism, "tok-9", "x", extensions={"tokenauth": "true"})
    with pytest.raises(SaslMechanismError, match="Invalid tokenId : tok-9"):
        server().evaluate(unknown.initial_response())
