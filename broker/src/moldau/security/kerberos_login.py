"""A Kerberos identity logged in from a keytab and kept fresh, as Kafka's KerberosLogin
(and ZooKeeper's client Login, on the same schedule) keeps it.

`login()` checks that the keytab holds the principal's keys (the acceptor credentials a
server needs; no KDC contact) and fetches a TGT from the KDC with them (the initiator
credentials a client needs): a keytab the KDC refuses, or an unreachable KDC, fails there.
The TGT is refreshed from the keytab in a background thread at a random point between
the renew window factor and that plus the jitter of its lifetime, never sooner than the
minimum time before a re-login unless the ticket would expire first. Each login goes into
a fresh in-memory credential cache, so a connection being set up keeps the ticket it
started with. Users: the broker's GSSAPI listeners (moldau.server.kerberos_login) and its
ZooKeeper client (moldau.cluster.zk_kerberos).
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.security.sasl.errors import SaslMechanismError
from moldau.security.sasl.gssapi import acceptor_credentials, keytab_credentials

if TYPE_CHECKING:
    import gssapi

__all__ = ["KerberosLogin", "KerberosLoginError", "RenewalSettings", "next_refresh"]

log = logging.getLogger("org.apache.kafka.common.security.kerberos.KerberosLogin")

RETRY_DELAY_S = 10.0  # Kafka waits this long before its one retry of a failed re-login
_cache_numbers = itertools.count(1)


class KerberosLoginError(Exception):
    """The broker cannot log in from its keytab; the message names the principal, the
    keytab and Kerberos' reason."""


@dataclass(frozen=True)
class RenewalSettings:
    """sasl.kerberos.ticket.renew.window.factor, .ticket.renew.jitter and
    .min.time.before.relogin (in seconds here)."""

    window_factor: float = 0.8
    jitter: float = 0.05
    min_relogin_s: float = 60.0


def next_refresh(start: float, end: float, now: float, settings: RenewalSettings,
                 draw: Callable[[], float] = random.random) -> float:
    """When to log in again for a TGT valid from `start` to `end` (epoch seconds; `draw`
    gives the jitter's random fraction): Kafka's schedule."""
    proposed = start + (end - start) * (settings.window_factor + settings.jitter * draw())
    if proposed > end or now + settings.min_relogin_s > end:
        return now  # the ticket would expire before the next allowed refresh
    return max(proposed, now + settings.min_relogin_s)


@dataclass
class _Tgt:
    credentials: gssapi.Credentials
    start: float
    end: float


class KerberosLogin:
    """One principal's login from one keytab. `login()` once at startup (raises
    KerberosLoginError), then `start_refresh()`; `acceptor` and `initiator()` give the
    current credentials."""

    def __init__(self, principal: str, keytab: str, settings: RenewalSettings,
                 clock: Callable[[], float] = time.time) -> None:
        self.principal = principal
        self.keytab = keytab
        self.settings = settings
        self._clock = clock
        self._tgt: _Tgt | None = None
        self._acceptor: gssapi.Credentials | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def login(self) -> None:
        if not os.path.isfile(self.keytab):
            raise KerberosLoginError(f"keyTab {self.keytab} of principal {self.principal} "
                                     "is not a readable file")
        try:
            self._acceptor = acceptor_credentials(self.principal, self.keytab)
        except SaslMechanismError as exc:
            raise KerberosLoginError(str(exc)) from None
        self._tgt = self._fetch_tgt()

    def _fetch_tgt(self) -> _Tgt:
        started = self._clock()
        ccache = f"MEMORY:moldau-{os.getpid()}-{next(_cache_numbers)}"
        try:
            credentials = keytab_credentials(self.principal, self.keytab, ccache)
        except SaslMechanismError as exc:
            raise KerberosLoginError(str(exc)) from None
        lifetime = credentials.lifetime
        end = started + (lifetime if lifetime is not None else 365 * 86400)
        log.info("[Principal=%s]: TGT valid for %.0f s from the keytab %s", self.principal,
                 end - started, self.keytab)
        return _Tgt(credentials, started, end)

    @property
    def acceptor(self) -> gssapi.Credentials:
        if self._acceptor is None:
            raise KerberosLoginError(f"{self.principal} has not logged in")
        return self._acceptor

    def initiator(self) -> gssapi.Credentials:
        """The current TGT's credentials (for connections to the other brokers)."""
        if self._tgt is None:
            raise KerberosLoginError(f"{self.principal} has not logged in")
        return self._tgt.credentials

    # --- refresh -------------------------------------------------------------------------

    def start_refresh(self) -> None:
        """Keep the TGT fresh in a daemon thread (it dies with the broker, as Kafka's)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._refresh_loop, daemon=True,
                name=f"kafka-kerberos-refresh-thread-{self.principal}")
            self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _refresh_loop(self) -> None:
        while not self._stop.is_set():
            tgt = self._tgt
            assert tgt is not None
            now = self._clock()
            due = next_refresh(tgt.start, tgt.end, now, self.settings)
            log.info("[Principal=%s]: TGT refresh sleeping until %s", self.principal,
                     time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(due)))
            if self._stop.wait(max(0.0, due - now)):
                return
            if not self.refresh_now():
                return

    def refresh_now(self) -> bool:
        """Log in again (one retry after RETRY_DELAY_S, as Kafka); False when both failed
        (the refresh stops, as Kafka's thread exits; the old TGT serves until it ends)."""
        for attempt in range(2):
            try:
                self._tgt = self._fetch_tgt()
                return True
            except KerberosLoginError as exc:
                if attempt == 0:
                    log.warning("[Principal=%s]: re-login failed, retrying in %.0f s: %s",
                                self.principal, RETRY_DELAY_S, exc)
                    if self._stop.wait(RETRY_DELAY_S):
                        return False
                else:
                    log.error("[Principal=%s]: Failed to refresh TGT: refresh thread "
                              "exiting now. %s", self.principal, exc)
        return False
