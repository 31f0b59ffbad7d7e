"""Delegation tokens on a broker: the manager's rules (Kafka's DelegationTokenManager:
lifetimes, who may renew or expire, expired and unknown tokens, the controller's sweep)
and the four handlers' checks (the channel, CREATE_TOKENS for another owner, renewer
types, describe's filter), on an in-memory token store; then two managers on two real
ZooKeeper sessions, one following the other's change notifications."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from moldau.cluster.zk_async import AsyncZk
from moldau.cluster.zk_client import KafkaZkClient, WatchHandle
from moldau.cluster.zk_ensemble import ZooKeeperEnsemble
from moldau.cluster.zk_token_ops import TokenChange
from moldau.protocol.generated.create_delegation_token_request import (
    CreateDelegationTokenRequest,
)
from moldau.protocol.generated.describe_delegation_token_request import (
    DescribeDelegationTokenRequest,
)
from moldau.protocol.generated.expire_delegation_token_request import (
    ExpireDelegationTokenRequest,
)
from moldau.protocol.generated.renew_delegation_token_request import (
    RenewDelegationTokenRequest,
)
from moldau.security.acls import AclOperation, ResourceType
from moldau.security.delegation_tokens import (
    DelegationTokenCache,
    TokenInformation,
)
from moldau.security.principal import KafkaPrincipal
from moldau.server.delegation_token_manager import (
    DelegationTokenManager,
    TokenSettings,
)
from moldau.server.handlers.delegation_tokens import (
    CreateDelegationTokenHandler,
    DescribeDelegationTokenHandler,
    ExpireDelegationTokenHandler,
    RenewDelegationTokenHandler,
)
from moldau.server.session import Session

ALICE, BOB, CAROL, ADMIN = (KafkaPrincipal(n) for n in ("alice", "bob", "carol", "admin"))
HOUR, DAY = 3_600_000, 86_400_000
SETTINGS = TokenSettings("secret", max_lifetime_ms=7 * DAY, renew_time_ms=DAY,
                         check_interval_ms=HOUR)
T0 = 1_700_000_000_000


# --- an in-memory token store behind the AsyncZk interface -----------------------------------


class MemoryTokens:
    """The KafkaZkClient token operations the manager calls, in memory."""

    def __init__(self) -> None:
        self.tokens: dict[str, TokenInformation] = {}
        self.changes: list[str] = []

    def create_delegation_token_paths(self) -> None:
        pass

    def get_all_delegation_tokens(self) -> list[TokenInformation]:
        return list(self.tokens.values())

    def get_delegation_token(self, token_id: str) -> TokenInformation | None:
        return self.tokens.get(token_id)

    def set_or_create_delegation_token(self, info: TokenInformation) -> None:
        self.tokens[info.token_id] = info

    def delete_delegation_token(self, token_id: str) -> None:
        self.tokens.pop(token_id, None)

    def create_token_change_notification(self, token_id: str) -> str:
        self.changes.append(token_id)
        return f"token_change_{len(self.changes):010d}"

    def read_token_changes(self, after: str | None = None) -> list[TokenChange]:
        start = 0 if after is None else int(after[-10:])
        return [TokenChange(f"token_change_{i + 1:010d}", t)
                for i, t in enumerate(self.changes) if i + 1 > start]


class MemoryZk:
    def __init__(self) -> None:
        self.client = MemoryTokens()

    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return fn(*args)

    async def watch_children(self, path: str, _callback: object) -> WatchHandle:
        return WatchHandle(path)


@dataclass
class Clock:
    now: int = T0

    def __call__(self) -> int:
        return self.now


@dataclass
class Controller:
    active: bool = False


def manager(settings: TokenSettings = SETTINGS, clock: Clock | None = None,
            controller: Controller | None = None) -> DelegationTokenManager:
    return DelegationTokenManager(settings, MemoryZk(), DelegationTokenCache(),  # type: ignore[arg-type]
                                  lambda: controller, clock or Clock())  # type: ignore[arg-type,return-value]


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


# --- the manager's rules -----------------------------------------------------------------


def test_without_a_secret_every_operation_answers_61() -> None:
    disabled = manager(TokenSettings(None, 1, 1, 1))
    assert not disabled.enabled
    run(disabled.start())  # nothing to load, nothing watched
    assert run(disabled.create(ALICE, ALICE, [], -1)).error == 61
    assert run(disabled.renew(ALICE, b"x", -1)) == (61, -1)
    assert run(disabled.expire(ALICE, b"x", -1)) == (61, -1)
    assert not TokenSettings("", 1, 1, 1).enabled


def test_the_alias_key_is_read_when_the_secret_key_is_unset() -> None:
    from moldau.server.config import BrokerConfig

    base = {"zookeeper.connect": "zk:2181"}
    assert TokenSettings.from_config(BrokerConfig.from_properties(base)).secret is None
    alias = BrokerConfig.from_properties({**base, "delegation.token.master.key": "old"})
    assert TokenSettings.from_config(alias).secret == "old"
    both = BrokerConfig.from_properties({**base, "delegation.token.master.key": "old",
                                         "delegation.token.secret.key": "new"})
    settings = TokenSettings.from_config(both)
    assert settings.secret == "new" and settings.enabled
    assert (settings.max_lifetime_ms, settings.renew_time_ms, settings.check_interval_ms) == (
        7 * DAY, DAY, HOUR)


def test_create_takes_the_default_lifetimes_and_caps_the_asked_one() -> None:
    m = manager()
    result = run(m.create(ALICE, ADMIN, [BOB], -1))
    assert result.error == 0 and result.token is not None
    info = result.token.info
    assert (info.issue_timestamp, info.expiry_timestamp, info.max_timestamp) == (
        T0, T0 + DAY, T0 + 7 * DAY)
    assert (info.owner, info.token_requester, info.renewers) == (ALICE, ADMIN, (BOB,))
    assert m.zk.client.tokens[info.token_id] == info  # type: ignore[attr-defined]
    assert m.zk.client.changes == [info.token_id]  # type: ignore[attr-defined]
    assert m.cache.token_for_hmac(result.token.hmac) == result.token
    short = run(m.create(ALICE, ALICE, [], HOUR)).token.info
    assert (short.expiry_timestamp, short.max_timestamp) == (T0 + HOUR, T0 + HOUR)
    capped = run(m.create(ALICE, ALICE, [], 30 * DAY)).token.info
    assert capped.max_timestamp == T0 + 7 * DAY


def test_renew_is_for_the_owner_and_renewers_of_a_live_token() -> None:
    clock = Clock()
    m = manager(clock=clock)
    token = run(m.create(ALICE, ADMIN, [BOB], -1)).token
    clock.now += HOUR
    assert run(m.renew(ALICE, token.hmac, -1)) == (0, T0 + HOUR + DAY)
    assert run(m.renew(BOB, token.hmac, 2 * HOUR)) == (0, T0 + 3 * HOUR)
    assert m.zk.client.tokens[token.info.token_id].expiry_timestamp == T0 + 3 * HOUR  # type: ignore[attr-defined]
    assert run(m.renew(ADMIN, token.hmac, -1)) == (63, -1)  # the requester may not
    assert run(m.renew(ALICE, b"unknown", -1)) == (62, -1)
    assert run(m.renew(ALICE, token.hmac, 30 * DAY))[1] == T0 + 7 * DAY  # capped
    clock.now = T0 + 7 * DAY + 1
    assert run(m.renew(ALICE, token.hmac, -1)) == (66, -1)


def test_expire_now_removes_and_a_period_moves_the_expiry() -> None:
    clock = Clock()
    m = manager(clock=clock)
    token = run(m.create(ALICE, ALICE, [BOB], -1)).token
    assert run(m.expire(CAROL, token.hmac, -1)) == (63, -1)
    assert run(m.expire(BOB, token.hmac, HOUR)) == (0, T0 + HOUR)
    clock.now += 2 * HOUR
    assert run(m.expire(ALICE, token.hmac, HOUR)) == (66, -1)  # past its expiry
    assert run(m.expire(ALICE, token.hmac, -1)) == (0, clock.now)  # removed all the same
    assert m.cache.tokens() == [] and m.zk.client.tokens == {}  # type: ignore[attr-defined]
    assert run(m.expire(ALICE, token.hmac, -1)) == (62, -1)


def test_the_sweep_runs_on_the_active_controller_only() -> None:
    clock, controller = Clock(), Controller()
    m = manager(TokenSettings("secret", 7 * DAY, DAY, check_interval_ms=50), clock,
                controller)
    old = run(m.create(ALICE, ALICE, [], HOUR)).token.info.token_id
    young = run(m.create(ALICE, ALICE, [], -1)).token.info.token_id

    async def scenario() -> list[str]:
        await m.start()
        clock.now += 2 * HOUR
        await asyncio.sleep(0.2)  # not the controller: nothing goes
        assert [t.info.token_id for t in m.cache.tokens()] == [old, young]
        controller.active = True
        for _ in range(100):
            await asyncio.sleep(0.02)
            if len(m.cache.tokens()) == 1:
                break
        await m.stop()
        return [t.info.token_id for t in m.cache.tokens()]

    assert run(scenario()) == [young]
    assert list(m.zk.client.tokens) == [young]  # type: ignore[attr-defined]
    assert m.zk.client.changes[-1] == old  # type: ignore[attr-defined]


def test_start_loads_the_stored_tokens() -> None:
    first = manager()
    token = run(first.create(ALICE, ALICE, [], -1)).token
    second = DelegationTokenManager(SETTINGS, first.zk, DelegationTokenCache())
    run(second.start())
    run(second.stop())
    assert second.cache.token_for_hmac(token.hmac) == token  # same secret: same HMAC


# --- the handlers' checks ------------------------------------------------------------------


@dataclass
class Context:
    """The part of a RequestContext the token handlers use."""

    session: Session
    allowed: set[tuple[AclOperation, ResourceType, str]] = field(default_factory=set)
    asked: list[tuple[AclOperation, ResourceType, str]] = field(default_factory=list)
    api_version: int = 3

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str,
                  **_kwargs: object) -> bool:
        self.asked.append((operation, resource_type, name))
        return (operation, resource_type, name) in self.allowed


def ctx(principal: str = "User:alice", protocol: str = "SASL_PLAINTEXT",
        token_login: bool = False, **kwargs: Any) -> Context:
    session = Session(principal=principal, security_protocol=protocol)
    if token_login:
        session.token_authenticated = True
    return Context(session, **kwargs)


def create(m: DelegationTokenManager | None, context: Context, **fields: Any) -> Any:
    return run(CreateDelegationTokenHandler(m)(context,  # type: ignore[arg-type]
                                               CreateDelegationTokenRequest(**fields)))


@pytest.mark.parametrize("principal,protocol,token_login,allowed", [
    ("User:alice", "SASL_PLAINTEXT", False, True),
    ("User:alice", "SASL_SSL", False, True),
    ("User:CN=client", "SSL", False, True),  # two-way TLS
    ("User:ANONYMOUS", "PLAINTEXT", False, False),
    ("User:ANONYMOUS", "SSL", False, False),  # one-way TLS
    ("User:alice", "SASL_PLAINTEXT", True, False),  # a token login
])
def test_token_requests_need_an_authenticated_channel(principal: str, protocol: str,
                                                      token_login: bool, allowed: bool) -> None:
    m = manager()
    context = ctx(principal, protocol, token_login)
    answer = create(m, context, max_lifetime_ms=-1)
    assert answer.error_code == (0 if allowed else 64)
    renew = run(RenewDelegationTokenHandler(m)(context,  # type: ignore[arg-type]
                                               RenewDelegationTokenRequest(hmac=b"x")))
    assert renew.error_code == (62 if allowed else 64)
    expire = run(ExpireDelegationTokenHandler(m)(context,  # type: ignore[arg-type]
                                                 ExpireDelegationTokenRequest(hmac=b"x")))
    assert expire.error_code == (62 if allowed else 64)
    described = run(DescribeDelegationTokenHandler(m)(context,  # type: ignore[arg-type]
                                                      DescribeDelegationTokenRequest()))
    assert described.error_code == (0 if allowed else 64)
    if not allowed:
        assert (answer.principal_name, answer.token_id, answer.max_timestamp_ms) == (
            principal.split(":", 1)[1], "", -1)


def test_a_broker_without_tokens_answers_61_after_the_channel_check() -> None:
    disabled = manager(TokenSettings(None, 1, 1, 1))
    for m in (disabled, None):
        assert create(m, ctx(), max_lifetime_ms=-1).error_code == 61
        assert create(m, ctx(protocol="PLAINTEXT"), max_lifetime_ms=-1).error_code == 64
        described = run(DescribeDelegationTokenHandler(m)(ctx(),  # type: ignore[arg-type]
                                                          DescribeDelegationTokenRequest()))
        assert described.error_code == 61
    renew = run(RenewDelegationTokenHandler(None)(ctx(),  # type: ignore[arg-type]
                                                  RenewDelegationTokenRequest(hmac=b"x")))
    assert (renew.error_code, renew.expiry_timestamp_ms) == (61, -1)


def test_a_token_for_another_owner_needs_create_tokens_on_that_user() -> None:
    m = manager()
    denied = ctx("User:bob")
    answer = create(m, denied, owner_principal_type="User", owner_principal_name="carol",
                    max_lifetime_ms=-1)
    assert answer.error_code == 65
    assert denied.asked == [(AclOperation.CREATE_TOKENS, ResourceType.USER, "User:carol")]
    assert (answer.principal_name, answer.token_requester_principal_name) == ("carol", "bob")
    allowed = ctx("User:bob", allowed={(AclOperation.CREATE_TOKENS, ResourceType.USER,
                                        "User:carol")})
    answer = create(m, allowed, owner_principal_type="User", owner_principal_name="carol",
                    max_lifetime_ms=-1)
    assert answer.error_code == 0
    assert (answer.principal_name, answer.token_requester_principal_name) == ("carol", "bob")
    own = ctx("User:bob")
    assert create(m, own, owner_principal_type="User", owner_principal_name="bob",
                  max_lifetime_ms=-1).error_code == 0
    assert own.asked == []  # one's own token needs no ACL


def test_renewers_must_be_users() -> None:
    R = CreateDelegationTokenRequest.CreatableRenewers
    answer = create(manager(), ctx(), max_lifetime_ms=-1,
                    renewers=[R(principal_type="User", principal_name="bob"),
                              R(principal_type="Group", principal_name="ops")])
    assert answer.error_code == 67


def test_describe_shows_own_tokens_and_the_others_with_an_acl() -> None:
    m = manager()
    alices = run(m.create(ALICE, ALICE, [BOB], -1)).token.info.token_id
    carols = run(m.create(CAROL, ADMIN, [], -1)).token.info.token_id

    def describe(context: Context, owners: list[KafkaPrincipal] | None = None) -> list[str]:
        Owner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
        request = DescribeDelegationTokenRequest(owners=None if owners is None else [
            Owner(principal_type=o.type, principal_name=o.name) for o in owners])
        answer = run(DescribeDelegationTokenHandler(m)(context,  # type: ignore[arg-type]
                                                       request))
        assert answer.error_code == 0
        return [t.token_id for t in answer.tokens]

    assert describe(ctx("User:alice")) == [alices]
    assert describe(ctx("User:bob")) == [alices]  # a renewer
    assert describe(ctx("User:admin")) == [carols]  # the requester
    assert describe(ctx("User:dave")) == []
    token_acl = ctx("User:dave", allowed={(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN,
                                           carols)})
    assert describe(token_acl) == [carols]
    owner_acl = ctx("User:dave", allowed={(AclOperation.DESCRIBE_TOKENS, ResourceType.USER,
                                           "User:alice")})
    assert describe(owner_acl) == [alices]
    assert describe(ctx("User:alice"), owners=[]) == []  # an empty list asks for nothing
    assert describe(ctx("User:admin"), owners=[BOB]) == []  # bob's: alice's, not admin's
    assert describe(ctx("User:bob"), owners=[BOB]) == [alices]


def test_a_described_token_carries_its_requester_and_renewers() -> None:
    m = manager()
    token = run(m.create(CAROL, ADMIN, [BOB], -1)).token
    answer = run(DescribeDelegationTokenHandler(m)(ctx("User:admin"),  # type: ignore[arg-type]
                                                   DescribeDelegationTokenRequest(owners=None)))
    [described] = answer.tokens
    assert (described.principal_name, described.token_requester_principal_name) == (
        "carol", "admin")
    assert [(r.principal_type, r.principal_name) for r in described.renewers] == [
        ("User", "bob")]
    assert described.hmac == token.hmac
    assert (described.issue_timestamp, described.expiry_timestamp,
            described.max_timestamp) == (T0, T0 + DAY, T0 + 7 * DAY)


# --- two brokers' managers on real ZooKeeper ------------------------------------------------


@pytest.fixture
def two_sessions(zk_ensemble: ZooKeeperEnsemble, zk_chroot: str
                 ) -> Iterator[tuple[KafkaZkClient, KafkaZkClient]]:
    clients = [KafkaZkClient(zk_ensemble.connect_string, zk_chroot, 6000, 15000)
               for _ in range(2)]
    for client in clients:
        client.start()
    yield clients[0], clients[1]
    for client in clients:
        client.close()


def test_a_token_created_on_one_broker_reaches_the_other(
        two_sessions: tuple[KafkaZkClient, KafkaZkClient]) -> None:
    async def scenario() -> None:
        zks = [AsyncZk(c) for c in two_sessions]
        first, second = (DelegationTokenManager(SETTINGS, z, DelegationTokenCache())
                         for z in zks)
        await first.start()
        await second.start()
        try:
            token = (await first.create(ALICE, ALICE, [], -1)).token
            assert token is not None
            assert await wait_until(lambda: second.cache.token_for_hmac(token.hmac) == token)
            error, expiry = await first.renew(ALICE, token.hmac, HOUR)
            assert error == 0
            assert await wait_until(lambda: second.cache.token(token.info.token_id)
                                    .info.expiry_timestamp == expiry)  # type: ignore[union-attr]
            assert (await second.expire(ALICE, token.hmac, -1))[0] == 0
            assert await wait_until(lambda: first.cache.tokens() == [])
        finally:
            await first.stop()
            await second.stop()
            for z in zks:
                z._executor.shutdown(wait=False)

    run(scenario())


async def wait_until(check: Callable[[], bool], timeout: float = 3.0) -> bool:
    """Within a second or two of the change, as the notification arrives."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.02)
    return check()
