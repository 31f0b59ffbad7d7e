"""The Kerberos settings of a GSSAPI listener, from its JAAS entry and the
`sasl.kerberos.*` keys, and the broker's login from the entry's keytab.

A GSSAPI listener's entry is Krb5LoginModule with `useKeyTab=true`, `keyTab="<file>"` and
`principal="kafka/<host>@REALM"` (`storeKey=true` too, which the JDK needs to accept;
here the keytab serves both roles). The broker accepts clients with the principal's keys
in the keytab and logs in at startup for a TGT, as Kafka does (a keytab that does not
match the KDC, or an unreachable KDC, stops startup), which it needs as a client of the
other brokers (inter-broker GSSAPI). The login and its refresh schedule
(`sasl.kerberos.ticket.renew.window.factor`, `.ticket.renew.jitter`,
`.min.time.before.relogin`) are moldau.security.kerberos_login's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from moldau.security.kerberos_login import KerberosLogin, KerberosLoginError, RenewalSettings
from moldau.security.kerberos_names import KerberosNameError, ShortNamer
from moldau.security.sasl.gssapi import GssapiUnavailable, Krb5LoginOptions, default_realm
from moldau.security.sasl.jaas import JaasEntry

from .config.errors import ConfigError

__all__ = ["ListenerKerberos", "listener_kerberos", "use_krb5_conf"]


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
