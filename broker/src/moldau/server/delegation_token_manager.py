"""Delegation tokens on a broker, as Kafka 3.9's DelegationTokenManagerZk runs them.

Tokens are enabled by `delegation.token.secret.key` (or its deprecated alias
`delegation.token.master.key`); without it every token request answers
DELEGATION_TOKEN_AUTH_DISABLED (61) and nothing touches ZooKeeper. With it, at startup the
broker creates `/delegation_token/{tokens,token_changes}`, loads every token into its cache
(security/delegation_tokens.py, which SCRAM `tokenauth=true` logins read) and follows the
change notifications, so a token created, renewed or expired on any broker (Moldau's or
Kafka's) applies here within a moment. The active controller removes expired tokens every
`delegation.token.expiry.check.interval.ms` (and at once when it becomes the controller).

The rules of create, renew, expire and describe are Kafka's (its DelegationTokenManager);
the handlers (handlers/delegation_tokens.py) check who may ask before calling them.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau import errors
from moldau.cluster.zk_client import ZooKeeperUnavailableError
from moldau.cluster.zk_token_ops import TOKEN_CHANGES_PATH
from moldau.security.delegation_tokens import (
    DelegationToken,
    DelegationTokenCache,
    TokenInformation,
    generate_token_id,
    token_hmac,
)

if TYPE_CHECKING:
    from moldau.cluster.controller import Controller
    from moldau.cluster.zk_async import AsyncZk
    from moldau.cluster.zk_client import WatchHandle
    from moldau.security.principal import KafkaPrincipal

    from .config import BrokerConfig

log = logging.getLogger("kafka.server.DelegationTokenManager")

SECRET_KEY = "delegation.token.secret.key"
SECRET_KEY_ALIAS = "delegation.token.master.key"  # deprecated
NO_TIMESTAMP = -1  # DelegationTokenManager.ErrorTimestamp
_SWEEP_POLL_S = 1.0  # how soon a new controller notices it must sweep


class TokenError(enum.IntEnum):
    """The error codes of the token APIs (Kafka's Errors)."""

    NONE = 0
    DELEGATION_TOKEN_AUTH_DISABLED = errors.DelegationTokenAuthDisabledError.code
    DELEGATION_TOKEN_NOT_FOUND = errors.DelegationTokenNotFoundError.code
    DELEGATION_TOKEN_OWNER_MISMATCH = errors.DelegationTokenOwnerMismatchError.code
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = errors.DelegationTokenRequestNotAllowedError.code
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = errors.DelegationTokenAuthorizationFailedError.code
    DELEGATION_TOKEN_EXPIRED = errors.DelegationTokenExpiredError.code
    INVALID_PRINCIPAL_TYPE = errors.InvalidPrincipalTypeError.code


@dataclass(frozen=True)
class TokenSettings:
    secret: str | None
    max_lifetime_ms: int  # delegation.token.max.lifetime.ms
    renew_time_ms: int  # delegation.token.expiry.time.ms: a new or renewed token's period
    check_interval_ms: int  # delegation.token.expiry.check.interval.ms

    @classmethod
    def from_config(cls, config: BrokerConfig) -> TokenSettings:
        secret = config[SECRET_KEY]
        return cls(secret=config[SECRET_KEY_ALIAS] if secret is None else secret,
                   max_lifetime_ms=config["delegation.token.max.lifetime.ms"],
                   renew_time_ms=config["delegation.token.expiry.time.ms"],
                   check_interval_ms=config["delegation.token.expiry.check.interval.ms"])

    @property
    def enabled(self) -> bool:
        """KafkaConfig.tokenAuthEnabled: a non-empty secret."""
        return bool(self.secret)


@dataclass(frozen=True)
class CreateResult:
    error: TokenError
    token: DelegationToken | None = None  # set when error is NONE


def _now_ms() -> int:
    return int(time.time() * 1000)


class DelegationTokenManager:
    def __init__(self, settings: TokenSettings, zk: AsyncZk, cache: DelegationTokenCache,
                 controller: Callable[[], Controller | None] = lambda: None,
                 clock: Callable[[], int] = _now_ms) -> None:
        self.settings = settings
        self.zk = zk
        self.cache = cache
        self.controller = controller  # the sweep runs while this broker's is active
        self.clock = clock
        self._lock = asyncio.Lock()  # one change at a time, as Kafka's lock.synchronized
        self._last_change: str | None = None  # the newest notification applied
        self._watch: WatchHandle | None = None
        self._sweeper: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def _hmac(self, token_id: str) -> bytes:
        assert self.settings.secret  # only reached with tokens enabled
        return token_hmac(token_id, self.settings.secret)

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Load the tokens and follow their changes (before the listeners open, so the
        first login already finds them); start the expiry sweep."""
        if not self.enabled:
            return
        zk = self.zk
        await zk.call(zk.client.create_delegation_token_paths)
        async with self._lock:
            tokens = await zk.call(zk.client.get_all_delegation_tokens)
            for info in tokens:
                self.cache.update(DelegationToken(info, self._hmac(info.token_id)))
        log.info("Loaded the delegation token cache: %d tokens", len(tokens))
        self._watch = await zk.watch_children(TOKEN_CHANGES_PATH, self._on_changes)
        self._sweeper = asyncio.ensure_future(self._sweep_while_controller())

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None

    async def _on_changes(self, _children: list[str]) -> None:
        """Kafka's TokenChangedNotificationHandler, for each new notification in order:
        the named token is read again, or dropped when its znode is gone."""
        zk = self.zk
        async with self._lock:
            try:
                changes = await zk.call(zk.client.read_token_changes, self._last_change)
                for change in changes:
                    info = await zk.call(zk.client.get_delegation_token, change.token_id)
                    if info is None:
                        self.cache.remove(change.token_id)
                    else:
                        self.cache.update(DelegationToken(info, self._hmac(info.token_id)))
                    self._last_change = change.seq_name
            except ZooKeeperUnavailableError as exc:  # the watch fires again once back
                log.error("Could not read delegation token change notifications: %s", exc)
            except ValueError as exc:  # a znode Kafka could not read either
                log.error("Skipping a delegation token change notification: %s", exc)

    # --- the token APIs ---------------------------------------------------------------------

    async def create(self, owner: KafkaPrincipal, requester: KafkaPrincipal,
                     renewers: Iterable[KafkaPrincipal], max_lifetime_ms: int) -> CreateResult:
        """A new token: its lifetime is the requested one capped by
        delegation.token.max.lifetime.ms (the config's when <= 0), and it expires after
        delegation.token.expiry.time.ms unless renewed."""
        if not self.enabled:
            return CreateResult(TokenError.DELEGATION_TOKEN_AUTH_DISABLED)
        async with self._lock:
            token_id = generate_token_id()
            issued = self.clock()
            cap = self.settings.max_lifetime_ms
            lifetime = cap if max_lifetime_ms <= 0 else min(max_lifetime_ms, cap)
            max_timestamp = issued + lifetime
            info = TokenInformation(
                token_id=token_id, owner=owner, token_requester=requester,
                renewers=tuple(renewers), issue_timestamp=issued, max_timestamp=max_timestamp,
                expiry_timestamp=min(max_timestamp, issued + self.settings.renew_time_ms))
            token = DelegationToken(info, self._hmac(token_id))
            await self._store(token)
        log.info("Created a delegation token: %s for owner: %s", token_id, owner)
        return CreateResult(TokenError.NONE, token)

    async def renew(self, principal: KafkaPrincipal, hmac: bytes,
                    renew_period_ms: int) -> tuple[TokenError, int]:
        """(error, the new expiry): now + the period (the config's when negative), capped
        by the token's max timestamp. Only the owner and the renewers may renew."""
        if not self.enabled:
            return TokenError.DELEGATION_TOKEN_AUTH_DISABLED, NO_TIMESTAMP
        async with self._lock:
            token = self.cache.token_for_hmac(hmac)
            if token is None:
                return TokenError.DELEGATION_TOKEN_NOT_FOUND, NO_TIMESTAMP
            now = self.clock()
            if not token.info.may_renew(principal):
                return TokenError.DELEGATION_TOKEN_OWNER_MISMATCH, NO_TIMESTAMP
            if token.info.expired(now):
                return TokenError.DELEGATION_TOKEN_EXPIRED, NO_TIMESTAMP
            period = self.settings.renew_time_ms if renew_period_ms < 0 else renew_period_ms
            expiry = min(token.info.max_timestamp, now + period)
            await self._store(DelegationToken(token.info.with_expiry(expiry), token.hmac))
        log.info("Delegation token renewed for token: %s for owner: %s",
                 token.info.token_id, token.info.owner)
        return TokenError.NONE, expiry

    async def expire(self, principal: KafkaPrincipal, hmac: bytes,
                     expiry_period_ms: int) -> tuple[TokenError, int]:
        """(error, the new expiry): a negative period removes the token now (even an
        expired one); otherwise it expires at now + the period, capped by its max
        timestamp. Only the owner and the renewers may expire it."""
        if not self.enabled:
            return TokenError.DELEGATION_TOKEN_AUTH_DISABLED, NO_TIMESTAMP
        async with self._lock:
            token = self.cache.token_for_hmac(hmac)
            if token is None:
                return TokenError.DELEGATION_TOKEN_NOT_FOUND, NO_TIMESTAMP
            info = token.info
            now = self.clock()
            if not info.may_renew(principal):
                return TokenError.DELEGATION_TOKEN_OWNER_MISMATCH, NO_TIMESTAMP
            if expiry_period_ms < 0:
                await self._remove(info.token_id)
                log.info("Token expired for token: %s for owner: %s", info.token_id, info.owner)
                return TokenError.NONE, now
            if info.expired(now):
                return TokenError.DELEGATION_TOKEN_EXPIRED, NO_TIMESTAMP
            expiry = min(info.max_timestamp, now + expiry_period_ms)
            await self._store(DelegationToken(info.with_expiry(expiry), token.hmac))
        log.info("Updated expiry time for token: %s for owner: %s", info.token_id, info.owner)
        return TokenError.NONE, expiry

    def describe(self, eligible: Callable[[TokenInformation], bool]) -> list[DelegationToken]:
        """The cached tokens `eligible` keeps (the handler's owner filter and ACLs)."""
        return [token for token in self.cache.tokens() if eligible(token.info)]

    # --- the expiry sweep --------------------------------------------------------------------

    async def expire_tokens(self) -> list[str]:
        """Kafka's expireTokens: remove every token past its expiry or max timestamp;
        returns their ids."""
        removed = []
        async with self._lock:
            now = self.clock()
            for token in self.cache.tokens():
                info = token.info
                if info.expired(now):
                    log.info("Delegation token expired for token: %s for owner: %s",
                             info.token_id, info.owner)
                    await self._remove(info.token_id)
                    removed.append(info.token_id)
        return removed

    def _active_controller(self) -> bool:
        controller = self.controller()
        return controller is not None and controller.active

    async def _sweep_while_controller(self) -> None:
        """The controller's token expiry scheduler: a sweep when this broker becomes the
        controller, then every check interval while it stays one."""
        interval_s = self.settings.check_interval_ms / 1000
        next_sweep: float | None = None  # monotonic time; None: not the controller
        while True:
            if not self._active_controller():
                next_sweep = None
            elif next_sweep is None or time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + interval_s
                try:
                    await self.expire_tokens()
                except ZooKeeperUnavailableError as exc:
                    log.error("Could not remove expired delegation tokens: %s", exc)
                except Exception:
                    log.exception("Error while removing expired delegation tokens")
            await asyncio.sleep(min(_SWEEP_POLL_S, interval_s))

    # --- ZooKeeper writes (under the lock) -----------------------------------------------------

    async def _store(self, token: DelegationToken) -> None:
        """Kafka's updateToken: the znode, this broker's cache, then the notification that
        makes the others read it."""
        zk = self.zk
        await zk.call(zk.client.set_or_create_delegation_token, token.info)
        self.cache.update(token)
        await zk.call(zk.client.create_token_change_notification, token.info.token_id)

    async def _remove(self, token_id: str) -> None:
        zk = self.zk
        await zk.call(zk.client.delete_delegation_token, token_id)
        self.cache.remove(token_id)
        await zk.call(zk.client.create_token_change_notification, token_id)
