"""The SASL settings of each SASL_PLAINTEXT and SASL_SSL listener, resolved once at
startup as Kafka's SaslChannelBuilder resolves them, so that a setting Moldau cannot honour
stops the broker with a message naming it instead of being ignored.

Per listener: the enabled mechanisms (`listener.name.<l>.sasl.enabled.mechanisms`, else
`sasl.enabled.mechanisms`); per mechanism, its JAAS login entry: the property
`listener.name.<l>.<mechanism>.sasl.jaas.config` (exactly one login module), else the JAAS
file named by `-Djava.security.auth.login.config=` in KAFKA_OPTS, section
`<l>.KafkaServer`, else `KafkaServer`; and `connections.max.reauth.ms` (with its listener
and mechanism prefixes). The inter-broker listener's entry also holds the username and
password this broker authenticates with towards the others.

OAUTHBEARER also resolves its token validator here (security/sasl/oauthbearer_config.py):
Kafka's unsecured one by default, with the `unsecuredValidator*` options of the entry, or
the signed-JWT one when `listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`
names Kafka's OAuthBearerValidatorCallbackHandler, with the `sasl.oauthbearer.*` settings
(each also as `listener.name.<l>.<key>` and `listener.name.<l>.oauthbearer.<key>`). A JWKS
that cannot be read stops startup.

GSSAPI logs the broker in from its Krb5LoginModule entry's keytab here, and reads the
`sasl.kerberos.*` keys (server/kerberos_login.py); a failed login stops startup.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from moldau.security.kerberos_login import KerberosLogin
from moldau.security.sasl.gssapi import GSSAPI_MECHANISM, GssapiClient
from moldau.security.sasl.jaas import (
    JAVA_LOGIN_CONFIG_PARAM,
    KRB5_LOGIN_MODULE,
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasEntry,
    JaasError,
    check_login_modules,
    client_credentials,
    disallowed_login_modules,
    find_context,
    jaas_file_from_kafka_opts,
    load_jaas_file,
    parse_jaas_config,
    system_properties_from_kafka_opts,
)
from moldau.security.sasl.mechanism import SaslClient
from moldau.security.sasl.oauthbearer import OAUTHBEARER_MECHANISM, OAuthBearerClient
from moldau.security.sasl.oauthbearer_config import Setting, server_token_validator
from moldau.security.sasl.oauthbearer_login import login_from_jaas
from moldau.security.sasl.oauthbearer_token import TokenValidator
from moldau.security.sasl.oauthbearer_unsecured import (
    OAuthBearerConfigError,
    UnsecuredJwsValidator,
)
from moldau.security.sasl.plain import PlainClient
from moldau.security.sasl.scram import ScramClient
from moldau.security.sasl.scram_credentials import SCRAM_MECHANISM_NAMES, ScramMechanism

from .config import BrokerConfig, ConfigValue
from .config.errors import ConfigError
from .kerberos_login import ListenerKerberos, listener_kerberos

# the mechanisms Moldau's broker serves, and the login module each one's JAAS entry names
LOGIN_MODULES = {"PLAIN": PLAIN_LOGIN_MODULE,
                 **{name: SCRAM_LOGIN_MODULE for name in SCRAM_MECHANISM_NAMES},
                 OAUTHBEARER_MECHANISM: OAUTHBEARER_LOGIN_MODULE,
                 GSSAPI_MECHANISM: KRB5_LOGIN_MODULE}
NOT_YET: dict[str, str] = {}  # Kafka's mechanisms Moldau does not serve yet: none
CALLBACK_HANDLER_KEY = "sasl.server.callback.handler.class"
SERVER_SECTION = "KafkaServer"


@dataclass(frozen=True)
class SaslListener:
    """What a SASL listener's connections authenticate with."""

    name: str
    mechanisms: tuple[str, ...]
    logins: Mapping[str, JaasEntry]  # mechanism -> the JAAS entry of its login module
    reauth_ms: Mapping[str, int]  # mechanism -> connections.max.reauth.ms (0: never)
    max_receive_size: int  # sasl.server.max.receive.size: frames before authentication
    failed_delay_ms: int  # connection.failed.authentication.delay.ms
    oauthbearer: TokenValidator | None = None  # with OAUTHBEARER enabled: its validator
    kerberos: ListenerKerberos | None = None  # with GSSAPI enabled: keytab login, rules


def listener_value(config: BrokerConfig, listener: str, key: str) -> ConfigValue:
    """A key's value for one listener: `listener.name.<l>.<key>` over `<key>`."""
    prefixed = f"listener.name.{listener.lower()}.{key}"
    if prefixed in config.listener_overrides:
        return config.listener_overrides[prefixed]
    return config.values.get(key)


def sasl_listeners(config: BrokerConfig, kafka_opts: str) -> dict[str, SaslListener]:
    """Every SASL listener's settings (by listener name); ConfigError for any that
    Moldau cannot honour, naming the key."""
    jaas_path = jaas_file_from_kafka_opts(kafka_opts)
    disallowed = disallowed_login_modules(system_properties_from_kafka_opts(kafka_opts))
    jaas_file: dict[str, list[JaasEntry]] | None = None
    if jaas_path is not None:
        try:
            jaas_file = load_jaas_file(jaas_path)
        except (JaasError, OSError) as exc:
            raise ConfigError("KAFKA_OPTS", f"-D{JAVA_LOGIN_CONFIG_PARAM}={jaas_path}",
                              f"the JAAS file does not load: {exc}") from None
    _refuse_global_callback_handler(config)
    found: dict[str, SaslListener] = {}
    kerberos_logins: dict[tuple[str, str], KerberosLogin] = {}  # one per principal+keytab
    for endpoint in config.listeners:
        if not endpoint.security_protocol.startswith("SASL_"):
            continue
        name = endpoint.listener
        mechanisms = _mechanisms(config, name)
        logins = {}
        for mechanism in mechanisms:
            logins[mechanism] = _login_entry(config, name, mechanism, jaas_file, jaas_path,
                                             disallowed)
            _callback_handler(config, name, mechanism)
        reauth = {m: _reauth_ms(config, name, m) for m in mechanisms}
        validator = (_oauthbearer_validator(config, name, logins[OAUTHBEARER_MECHANISM])
                     if OAUTHBEARER_MECHANISM in logins else None)
        kerberos = (listener_kerberos(
            logins[GSSAPI_MECHANISM], _jaas_key(name, GSSAPI_MECHANISM),
            functools.partial(listener_value, config, name), kerberos_logins,
            system_properties_from_kafka_opts(kafka_opts))
            if GSSAPI_MECHANISM in logins else None)
        found[name] = SaslListener(
            name, mechanisms, logins, reauth,
            _int(listener_value(config, name, "sasl.server.max.receive.size")),
            int(config.values["connection.failed.authentication.delay.ms"]), validator,
            kerberos)
    return found


def _mechanisms(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    key = "sasl.enabled.mechanisms"
    value = listener_value(config, listener, key)
    items = value if isinstance(value, list) else str(value or "").split(",")
    names = tuple(m.strip().upper() for m in items if m.strip())
    shown = (f"listener.name.{listener.lower()}.{key}"
             if f"listener.name.{listener.lower()}.{key}" in config.listener_overrides else key)
    if not names:
        raise ConfigError(shown, value, f"listener {listener} is a SASL listener: at least "
                          "one mechanism must be enabled")
    for mechanism in names:
        if mechanism in NOT_YET:
            raise ConfigError(shown, ",".join(names), f"{NOT_YET[mechanism]} is not supported "
                              f"by Moldau yet (enable {', '.join(LOGIN_MODULES)}); Kafka's "
                              f"default for {key} is GSSAPI, so a SASL listener must set it")
        if mechanism not in LOGIN_MODULES:
            raise ConfigError(shown, ",".join(names), f"unknown SASL mechanism {mechanism} "
                              f"(Moldau serves {', '.join(LOGIN_MODULES)})")
    return names


def _jaas_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def _login_entry(config: BrokerConfig, listener: str, mechanism: str,
                 jaas_file: Mapping[str, list[JaasEntry]] | None,
                 jaas_path: str | None, disallowed: Sequence[str]) -> JaasEntry:
    """The JAAS entry that serves `mechanism` on `listener` (Kafka's
    JaasContext.loadServerContext, then the entry of the mechanism's login module).
    Every login module of the context is checked against the disallowed ones first."""
    key = _jaas_key(listener, mechanism)
    module = LOGIN_MODULES[mechanism]
    text = config.listener_overrides.get(key)
    if text is not None:
        try:
            entries = parse_jaas_config(str(text))
        except JaasError as exc:
            raise ConfigError(key, "[hidden]", str(exc)) from None
        if not entries:
            raise ConfigError(key, "[hidden]", "JAAS config property does not contain any "
                              "login modules")
        if len(entries) != 1:
            raise ConfigError(key, "[hidden]", f"JAAS config property contains {len(entries)} "
                              "login modules, should be 1 module")
        _check_allowed(key, entries, disallowed)
        if entries[0].login_module != module:
            raise ConfigError(key, "[hidden]", f"{mechanism} needs {module}, not "
                              f"{entries[0].login_module}")
        return entries[0]
    try:
        _, section = find_context(jaas_file or {}, SERVER_SECTION, listener, jaas_path)
    except JaasError as exc:
        raise ConfigError(key, None, str(exc)) from None
    _check_allowed(key, section, disallowed)
    for entry in section:
        if entry.login_module == module:
            return entry
    raise ConfigError(key, None, f"the JAAS section for listener {listener} in {jaas_path} has "
                      f"no {module} entry, which {mechanism} needs")


def _check_allowed(key: str, entries: Sequence[JaasEntry], disallowed: Sequence[str]) -> None:
    try:
        check_login_modules(entries, disallowed)
    except JaasError as exc:
        raise ConfigError(key, "[hidden]", str(exc)) from None


def _refuse_global_callback_handler(config: BrokerConfig) -> None:
    """Kafka reads a server callback handler only per listener and mechanism, so a bare
    `sasl.server.callback.handler.class` would be ignored: refuse it instead."""
    handler = config.values.get(CALLBACK_HANDLER_KEY)
    if handler is not None:
        raise ConfigError(CALLBACK_HANDLER_KEY, handler, "Kafka ignores a server callback "
                          "handler without a listener and mechanism prefix; set "
                          f"listener.name.<listener>.oauthbearer.{CALLBACK_HANDLER_KEY}")


def _callback_handler(config: BrokerConfig, listener: str, mechanism: str) -> str | None:
    """`listener.name.<l>.<mechanism>.sasl.server.callback.handler.class`: the key table
    admits only Kafka's OAUTHBEARER validators, so any other mechanism is refused."""
    key = f"listener.name.{listener.lower()}.{mechanism.lower()}.{CALLBACK_HANDLER_KEY}"
    handler = config.listener_overrides.get(key)
    if handler is None:
        return None
    if mechanism != OAUTHBEARER_MECHANISM:
        raise ConfigError(key, handler, f"{handler} validates OAUTHBEARER tokens; Moldau "
                          f"runs no custom server callback handler for {mechanism}")
    return str(handler)


def _oauthbearer_setting(config: BrokerConfig, listener: str) -> Setting:
    """A `sasl.oauthbearer.*` key for the OAUTHBEARER validator of one listener:
    `listener.name.<l>.oauthbearer.<key>`, else `listener.name.<l>.<key>`, else `<key>`."""
    prefix = f"listener.name.{listener.lower()}."

    def setting(key: str) -> tuple[str, object]:
        for name in (f"{prefix}{OAUTHBEARER_MECHANISM.lower()}.{key}", f"{prefix}{key}"):
            if name in config.listener_overrides:
                return name, config.listener_overrides[name]
        return key, config.values.get(key)

    return setting


def _oauthbearer_validator(config: BrokerConfig, listener: str,
                           login: JaasEntry) -> TokenValidator:
    try:
        return server_token_validator(
            _callback_handler(config, listener, OAUTHBEARER_MECHANISM), login.options,
            _oauthbearer_setting(config, listener))
    except OAuthBearerConfigError as exc:
        if exc.key.startswith(("sasl.", "listener.name.")):
            raise ConfigError(exc.key, exc.value, exc.message) from None
        # an option of the JAAS entry: name the entry's key, not the secret-bearing value
        raise ConfigError(_jaas_key(listener, OAUTHBEARER_MECHANISM), "[hidden]",
                          f"{exc.key}: {exc.message}") from None


def _reauth_ms(config: BrokerConfig, listener: str, mechanism: str) -> int:
    prefix = f"listener.name.{listener.lower()}."
    for key in (f"{prefix}{mechanism.lower()}.connections.max.reauth.ms",
                f"{prefix}connections.max.reauth.ms"):
        if key in config.listener_overrides:
            return _int(config.listener_overrides[key])
    return _int(config.values["connections.max.reauth.ms"])


def _int(value: ConfigValue) -> int:
    """A value of an int or long key (converted and validated by BrokerConfig)."""
    assert isinstance(value, int), value
    return value


def inter_broker_sasl(config: BrokerConfig, listeners: Mapping[str, SaslListener],
                      listener_name: str | None = None) -> Callable[[], SaslClient] | None:
    """How this broker authenticates towards the others: None unless the inter-broker
    listener (or `listener_name`: the control-plane one) is a SASL one; then a factory of
    fresh mechanism clients for `sasl.mechanism.inter.broker.protocol` (Kafka's mechanism
    on the control-plane listener too), with the username and password of that
    mechanism's JAAS entry on that listener."""
    name = listener_name or config.inter_broker_listener_name
    listener = listeners.get(name)
    if listener is None:
        return None
    key = "sasl.mechanism.inter.broker.protocol"
    mechanism = str(config.values[key]).strip().upper()
    if mechanism not in listener.mechanisms:
        raise ConfigError(key, mechanism, f"{key} must be included in sasl.enabled.mechanisms "
                          "when SASL is used for inter-broker communication (listener "
                          f"{name} enables {', '.join(listener.mechanisms)})")
    if mechanism == OAUTHBEARER_MECHANISM:
        return _inter_broker_oauthbearer(listener)
    if mechanism == GSSAPI_MECHANISM:
        # towards <service name>/<the other broker's host>, with this broker's own TGT
        kerberos = listener.kerberos
        assert kerberos is not None  # resolved with the listener's GSSAPI entry
        return lambda: GssapiClient(kerberos.service_name, kerberos.login.initiator)
    credentials = client_credentials(listener.logins[mechanism])
    if credentials is None:
        raise ConfigError(_jaas_key(name, mechanism), "[hidden]", "the inter-broker "
                          f"listener's {mechanism} entry needs username and password options: "
                          "they are what this broker authenticates with towards the others")
    username, password = credentials
    scram = ScramMechanism.by_name(mechanism)
    if scram is not None:
        return lambda: ScramClient(scram, username, password)
    return lambda: PlainClient(username, password)


def _inter_broker_oauthbearer(listener: SaslListener) -> Callable[[], SaslClient]:
    """OAUTHBEARER between brokers: unsecured tokens made from the `unsecuredLogin*`
    options of the listener's OAuthBearerLoginModule entry, as Kafka's broker makes them
    by default (a listener that validates signed JWTs would refuse them)."""
    key = _jaas_key(listener.name, OAUTHBEARER_MECHANISM)
    if not isinstance(listener.oauthbearer, UnsecuredJwsValidator):
        raise ConfigError("sasl.mechanism.inter.broker.protocol", OAUTHBEARER_MECHANISM,
                          f"listener {listener.name} validates signed JWTs, and Moldau's "
                          "brokers log in to each other only with unsecured OAUTHBEARER "
                          "tokens; choose another inter-broker mechanism")
    try:
        login = login_from_jaas(listener.logins[OAUTHBEARER_MECHANISM].options, None, {})
    except OAuthBearerConfigError as exc:
        raise ConfigError(key, "[hidden]", "the inter-broker listener's OAUTHBEARER entry "
                          f"makes no token for this broker ({exc.key}): {exc.message}") from None
    return lambda: OAuthBearerClient(login.token, login.extensions)
