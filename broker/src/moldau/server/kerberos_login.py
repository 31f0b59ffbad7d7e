"""The broker's own Kerberos identity, from the keytab of its GSSAPI JAAS entry, as Kafka's
KerberosLogin keeps it.

A GSSAPI listener's entry is Krb5LoginModule with `useKeyTab=true`, `keyTab="<file>"` and
`principal="kafka/<host>@REALM"` (`storeKey=true` too, which the JDK needs to accept;
here the keytab serves both roles). The broker accepts clients with the principal's keys
in the keytab (the acceptor credentials; no KDC needed), and logs in at startup for a
TGT, as Kafka does (a keytab that does not match the KDC, or an unreachable KDC, stops
startup), which it needs as a client of the other brokers (inter-broker GSSAPI).

The TGT is refreshed from the keytab in a background thread, on Kafka's schedule: at a
random point between `sasl.kerberos.ticket.renew.window.factor` and that plus
`sasl.kerberos.ticket.renew.jitter` of its lifetime, never sooner than
`sasl.kerberos.min.time.before.relogin` from now unless the ticket would expire first.
Each login goes into a fresh in-memory credential cache, so a connection being set up
keeps the ticket it started with.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.security.kerberos_names import KerberosNameError, ShortNamer
from moldau.security.sasl.errors import SaslMechanismError
from moldau.security.sasl.gssapi import (
    GssapiUnavailable,
    Krb5LoginOptions,
    acceptor_credentials,
    default_realm,
    keytab_credentials,
)
from moldau.security.sasl.jaas import JaasEntry

from .config.errors import ConfigError

if TYPE_CHECKING:
    import gssapi

__all__ = ["KerberosLogin", "KerberosLoginError", "ListenerKerberos", "RenewalSettings",
           "listener_kerberos", "next_refresh", "use_krb5_conf"]

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


@dataclass(frozen=True)
class ListenerKerberos:
    """What a GSSAPI listener serves with: the broker's login, the principal-to-local
    rules, and the service name clients and the other brokers address it by."""

    login: KerberosLogin
    short_namer: ShortNamer
    service_name: str


SERVICE_NAME_KEY = "sasl.kerberos.service.name"
KRB5_CONF_PROPERTY = "java.security.krb5.conf"
RULES_KEY = "sasl.kerberos.principal.to.local.rules"
# a key's value for the listener being resolved (listener.name.<l>.<key> over <key>)
ListenerSetting = Callable[[str], object]


def listener_kerberos(entry: JaasEntry, jaas_key: str, setting: ListenerSetting,
                      logins: dict[tuple[str, str], KerberosLogin],
                      system_properties: Mapping[str, str]) -> ListenerKerberos:
    """A GSSAPI listener's Kerberos settings from its Krb5LoginModule entry (`jaas_key`
    names where it came from) and the `sasl.kerberos.*` keys; logs the broker in (one
    login per principal and keytab, shared through `logins`). `system_properties` are
    KAFKA_OPTS' -D options: `java.security.krb5.conf` names the krb5.conf to use.
    ConfigError, naming the key, for anything Moldau cannot serve with, as Kafka stops
    startup."""
    use_krb5_conf(system_properties)
    options = Krb5LoginOptions.from_jaas(entry.options)
    try:
        principal, keytab = options.keytab_login()
    except ValueError as exc:
        raise ConfigError(jaas_key, "[hidden]", str(exc)) from None
    service_name = _service_name(options, setting)
    rules = setting(RULES_KEY)
    try:
        short_namer = ShortNamer(default_realm(), _rule_list(rules))
    except KerberosNameError as exc:
        raise ConfigError(RULES_KEY, rules, str(exc)) from None
    except GssapiUnavailable as exc:
        raise ConfigError("sasl.enabled.mechanisms", "GSSAPI", str(exc)) from None
    login = logins.get((principal, keytab))
    if login is None:
        login = KerberosLogin(principal, keytab, RenewalSettings(
            float(str(setting("sasl.kerberos.ticket.renew.window.factor"))),
            float(str(setting("sasl.kerberos.ticket.renew.jitter"))),
            int(str(setting("sasl.kerberos.min.time.before.relogin"))) / 1000))
        try:
            login.login()
        except KerberosLoginError as exc:
            raise ConfigError(jaas_key, "[hidden]", f"Could not login: {exc}") from None
        login.start_refresh()
        logins[(principal, keytab)] = login
    return ListenerKerberos(login, short_namer, service_name)


def use_krb5_conf(system_properties: Mapping[str, str]) -> None:
    """`-Djava.security.krb5.conf=<file>` as the JVM takes it: this process's Kerberos
    library reads that file (KRB5_CONFIG) instead of /etc/krb5.conf."""
    path = system_properties.get(KRB5_CONF_PROPERTY)
    if path is None:
        return
    if not os.path.isfile(path):
        raise ConfigError("KAFKA_OPTS", f"-D{KRB5_CONF_PROPERTY}={path}",
                          "the Kerberos configuration file does not exist")
    os.environ["KRB5_CONFIG"] = path


def _service_name(options: Krb5LoginOptions, setting: ListenerSetting) -> str:
    """The JAAS entry's `serviceName` or `sasl.kerberos.service.name` (Kafka's
    KerberosLogin: both set must agree; neither set stops startup)."""
    configured = setting(SERVICE_NAME_KEY)
    in_jaas = options.service_name
    if in_jaas is not None and configured is not None and in_jaas != configured:
        raise ConfigError(SERVICE_NAME_KEY, configured, "Conflicting serviceName values found "
                          f"in JAAS and Kafka configs value in JAAS file {in_jaas}, value in "
                          f"Kafka config {configured}")
    name = in_jaas if in_jaas is not None else configured
    if not name:
        raise ConfigError(SERVICE_NAME_KEY, configured, "No serviceName defined in either "
                          "JAAS or Kafka config")
    return str(name)


def _rule_list(value: object) -> list[str]:
    """A LIST key's value (BrokerConfig gives a list; a bare string splits on commas)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    if value is None:
        return ["DEFAULT"]
    return [part.strip() for part in str(value).split(",") if part.strip()]
