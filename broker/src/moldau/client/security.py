"""Kafka's client security properties (`security.protocol`, `ssl.*`, `sasl.mechanism`,
`sasl.jaas.config`, or a JAAS file named in KAFKA_OPTS), read in one place: for Moldau's
own connections (`client_security`: a TLS context and a SASL mechanism factory) and
translated for librdkafka, which the perf tools, mirror maker and the checker run on
(`librdkafka_settings`). librdkafka's own names (`ssl.ca.location`, `sasl.username`, ...)
are understood too, so one properties file serves either kind of client.

SASL credentials come, as Kafka's clients find them, from `sasl.jaas.config` (one
PlainLoginModule or ScramLoginModule entry with username and password; ScramLoginModule's
`tokenauth="true"` logs in with a delegation token), else from librdkafka's
`sasl.username`/`sasl.password`, else from the `KafkaClient` section of the JAAS file that
`-Djava.security.auth.login.config=` in KAFKA_OPTS names, as Kafka's scripts pass it on.
OAUTHBEARER logs in with an OAuthBearerLoginModule entry instead: unsecured tokens from its
`unsecuredLogin*` options, or, with Kafka's OAuthBearerLoginCallbackHandler as
`sasl.login.callback.handler.class`, tokens from `sasl.oauthbearer.token.endpoint.url`
(security/sasl/oauthbearer_login.py); librdkafka's `sasl.oauthbearer.config` and
`sasl.oauthbearer.method=oidc` settings are read as the same logins.
GSSAPI logs in with a Krb5LoginModule entry (a keytab, or the ticket cache kinit filled)
towards `<sasl.kerberos.service.name>/<broker host>` (security/sasl/gssapi.py);
librdkafka's `sasl.kerberos.keytab`/`sasl.kerberos.principal` are read as the same login.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from cryptography.hazmat.primitives import serialization

from moldau.security.sasl.errors import SaslMechanismError
from moldau.security.sasl.gssapi import (
    GSSAPI_MECHANISM,
    GssapiUnavailable,
    KerberosClientLogin,
    kerberos_client_login,
)
from moldau.security.sasl.jaas import (
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
    parse_single_login_module,
    system_properties_from_kafka_opts,
)
from moldau.security.sasl.mechanism import SaslClient
from moldau.security.sasl.oauthbearer import OAUTHBEARER_MECHANISM, OAuthBearerClient
from moldau.security.sasl.oauthbearer_login import (
    OAuthBearerLogin,
    librdkafka_oauthbearer,
    login_from_jaas,
    login_from_librdkafka,
)
from moldau.security.sasl.oauthbearer_unsecured import OAuthBearerConfigError
from moldau.security.sasl.plain import PlainClient
from moldau.security.sasl.scram import ScramClient
from moldau.security.sasl.scram_credentials import ScramMechanism
from moldau.security.ssl_settings import TlsConfigError
from moldau.security.stores import load_keystore, load_truststore
from moldau.security.tls import IANA_TO_OPENSSL, TLS13_SUITES, build_client_context

__all__ = ["ClientConfigError", "ClientSecurity", "SaslLogin", "client_security",
           "gssapi_login", "librdkafka_settings", "oauthbearer_login", "sasl_login",
           "sasl_mechanism", "security_protocol"]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_SASL_MECHANISM = "GSSAPI"  # Kafka's default for sasl.mechanism
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", OAUTHBEARER_MECHANISM,
                        GSSAPI_MECHANISM)
LATER_MECHANISMS: tuple[str, ...] = ()  # Kafka's, not yet in Moldau's tools: none
CLIENT_JAAS_SECTION = "KafkaClient"
TOKEN_AUTH = "tokenauth"

# librdkafka's names for the PEM files, taken as they are
_LIBRDKAFKA_TLS_KEYS = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location")
# Java client properties librdkafka does not have (it refuses unknown ones): dropped, after
# the security ones among them have been translated
_JAVA_ONLY = frozenset({
    "key.serializer", "value.serializer", "key.deserializer", "value.deserializer",
    "buffer.memory", "max.block.ms", "interceptor.classes", "metric.reporters",
    "partitioner.class", "security.providers",
    "sasl.jaas.config", "sasl.client.callback.handler.class",
    "sasl.login.callback.handler.class", "sasl.login.class",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.provider", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
    "ssl.engine.factory.class",
    # the broker's OAUTHBEARER validator settings
    "sasl.oauthbearer.jwks.endpoint.url", "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name",
})
_JAVA_ONLY_PREFIXES = ("sasl.login.",)


class ClientConfigError(ValueError):
    """Client security properties that do not make a working configuration."""


@dataclass(frozen=True)
class ClientSecurity:
    """What a connection needs: the TLS context (SSL, SASL_SSL) and a factory of fresh
    SASL mechanism clients, one per connection (SASL_PLAINTEXT, SASL_SSL)."""

    protocol: str
    ssl_context: ssl.SSLContext | None
    sasl_mechanism: str | None
    sasl: Callable[[], SaslClient] | None


@dataclass(frozen=True)
class SaslLogin:
    """The credentials a JAAS login (or librdkafka's properties) gives a PLAIN or SCRAM
    client; `source` names where they came from, for error messages."""

    username: str
    password: str
    token_auth: bool
    source: str


def client_security(config: Mapping[str, str],
                    environ: Mapping[str, str] | None = None) -> ClientSecurity:
    """Read the security properties of a client config (`environ` holds KAFKA_OPTS; the
    process environment by default). Raises ClientConfigError naming what is wrong."""
    protocol = security_protocol(config)
    ssl_context = _ssl_context(config) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, ssl_context, None, None)
    mechanism = sasl_mechanism(config, protocol)
    if mechanism == OAUTHBEARER_MECHANISM:
        login = oauthbearer_login(config, environ)
        return ClientSecurity(protocol, ssl_context, mechanism, functools.partial(
            OAuthBearerClient, login.token, login.extensions))
    if mechanism == GSSAPI_MECHANISM:
        return ClientSecurity(protocol, ssl_context, mechanism,
                              _gssapi_client(gssapi_login(config, environ)))
    factory = _mechanism_factory(mechanism, sasl_login(config, environ))
    return ClientSecurity(protocol, ssl_context, mechanism, factory)


def security_protocol(config: Mapping[str, str]) -> str:
    """`security.protocol`, upper-cased (Kafka's clients take it in any case)."""
    value = config.get("security.protocol", "PLAINTEXT")
    protocol = value.strip().upper()
    if protocol not in PROTOCOLS:
        raise ClientConfigError(
            f"Invalid value {value} for configuration security.protocol: String must be "
            f"one of (case insensitive): {', '.join(PROTOCOLS)}")
    return protocol


def sasl_mechanism(config: Mapping[str, str], protocol: str) -> str:
    """`sasl.mechanism` (or librdkafka's `sasl.mechanisms`), Kafka's default GSSAPI; one
    Moldau's clients speak, else a ClientConfigError."""
    given = config.get("sasl.mechanism") or config.get("sasl.mechanisms")
    mechanism = (given or DEFAULT_SASL_MECHANISM).strip()
    if mechanism in LATER_MECHANISMS:
        unset = "" if given else " (sasl.mechanism is not set: Kafka's default is GSSAPI)"
        raise ClientConfigError(
            f"sasl.mechanism {mechanism} (security.protocol {protocol}) is not supported by "
            f"Moldau's tools yet; use {', '.join(SUPPORTED_MECHANISMS)}{unset}")
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ClientConfigError(
            f"Invalid sasl.mechanism {mechanism}: Moldau's tools speak "
            f"{', '.join(SUPPORTED_MECHANISMS)} (mechanism names are case-sensitive)")
    return mechanism


def sasl_login(config: Mapping[str, str],
               environ: Mapping[str, str] | None = None) -> SaslLogin:
    """The username and password to log in with, from the first of: `sasl.jaas.config`,
    librdkafka's `sasl.username`/`sasl.password`, the KAFKA_OPTS JAAS file."""
    environ = os.environ if environ is None else environ
    system_properties = _system_properties(environ)
    disallowed = disallowed_login_modules(system_properties)
    jaas_config = config.get("sasl.jaas.config")
    if jaas_config is not None:
        try:
            entry = parse_single_login_module(jaas_config, disallowed)
        except JaasError as exc:
            raise ClientConfigError(str(exc)) from None
        return _login_from_entries([entry], "sasl.jaas.config")
    if "sasl.username" in config or "sasl.password" in config:
        missing = [k for k in ("sasl.username", "sasl.password") if not config.get(k)]
        if missing:
            raise ClientConfigError(f"{' and '.join(missing)} must be set with "
                                    "sasl.username/sasl.password (librdkafka's SASL login)")
        return SaslLogin(config["sasl.username"], config["sasl.password"], False,
                         "sasl.username/sasl.password")
    path = jaas_file_from_kafka_opts(environ.get("KAFKA_OPTS", ""))
    try:
        sections = {} if path is None else load_jaas_file(path, system_properties)
        _, entries = find_context(sections, CLIENT_JAAS_SECTION, jaas_file=path)
        check_login_modules(entries, disallowed)
    except JaasError as exc:
        raise ClientConfigError(str(exc)) from None
    return _login_from_entries(entries, f"the {CLIENT_JAAS_SECTION} section of {path}")


def oauthbearer_login(config: Mapping[str, str],
                      environ: Mapping[str, str] | None = None) -> OAuthBearerLogin:
    """Where an OAUTHBEARER client's tokens come from: the OAuthBearerLoginModule entry
    of `sasl.jaas.config`, else librdkafka's OAUTHBEARER settings, else the entry in the
    KAFKA_OPTS JAAS file's KafkaClient section."""
    environ = os.environ if environ is None else environ
    system_properties = _system_properties(environ)
    disallowed = disallowed_login_modules(system_properties)
    jaas_config = config.get("sasl.jaas.config")
    try:
        if jaas_config is not None:
            source = "sasl.jaas.config"
            entries = [parse_single_login_module(jaas_config, disallowed)]
        else:
            source = "librdkafka's sasl.oauthbearer.* settings"
            login = login_from_librdkafka(config)
            if login is not None:
                return login
            path = jaas_file_from_kafka_opts(environ.get("KAFKA_OPTS", ""))
            source = f"the {CLIENT_JAAS_SECTION} section of {path}"
            sections = {} if path is None else load_jaas_file(path, system_properties)
            _, entries = find_context(sections, CLIENT_JAAS_SECTION, jaas_file=path)
            check_login_modules(entries, disallowed)
        entry = next((e for e in entries if e.login_module == OAUTHBEARER_LOGIN_MODULE), None)
        if entry is None:
            raise ClientConfigError(
                f"{source}: sasl.mechanism OAUTHBEARER logs in with "
                f"{OAUTHBEARER_LOGIN_MODULE}, not {', '.join(e.login_module for e in entries)}")
        return login_from_jaas(entry.options, config.get("sasl.login.callback.handler.class"),
                               config)
    except JaasError as exc:
        raise ClientConfigError(str(exc)) from None
    except OAuthBearerConfigError as exc:
        raise ClientConfigError(f"{source}: {exc.key}: {exc.message}") from None


def gssapi_login(config: Mapping[str, str],
                 environ: Mapping[str, str] | None = None) -> KerberosClientLogin:
    """A GSSAPI client's Kerberos login: the Krb5LoginModule entry of `sasl.jaas.config`,
    else librdkafka's `sasl.kerberos.keytab`/`.principal` when set, else the entry in the
    KAFKA_OPTS JAAS file's KafkaClient section, else, when librdkafka's
    `sasl.kerberos.service.name` or `.kinit.cmd` is set, the ticket cache (librdkafka's
    way); with none of these, Kafka's error for a missing KafkaClient section."""
    environ = os.environ if environ is None else environ
    system_properties = _system_properties(environ)
    disallowed = disallowed_login_modules(system_properties)
    path = jaas_file_from_kafka_opts(environ.get("KAFKA_OPTS", ""))
    entries: list[JaasEntry] | None = None
    source = "librdkafka's sasl.kerberos.* settings"
    try:
        if "sasl.jaas.config" in config:
            source = "sasl.jaas.config"
            entries = [parse_single_login_module(config["sasl.jaas.config"], disallowed)]
        elif not any(key in config for key in ("sasl.kerberos.keytab",
                                               "sasl.kerberos.principal")) and (
                path is not None or not any(key in config for key in (
                    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd"))):
            source = f"the {CLIENT_JAAS_SECTION} section of {path}"
            sections = {} if path is None else load_jaas_file(path, system_properties)
            _, entries = find_context(sections, CLIENT_JAAS_SECTION, jaas_file=path)
            check_login_modules(entries, disallowed)
        entry = next((e for e in entries or [] if e.login_module == KRB5_LOGIN_MODULE), None)
        if entries is not None and entry is None:
            raise ClientConfigError(
                f"{source}: sasl.mechanism GSSAPI logs in with {KRB5_LOGIN_MODULE}, not "
                f"{', '.join(e.login_module for e in entries)}")
        return kerberos_client_login(entry.options if entry else None, config, source)
    except JaasError as exc:
        raise ClientConfigError(str(exc)) from None
    except ValueError as exc:
        raise ClientConfigError(str(exc)) from None


def _gssapi_client(login: KerberosClientLogin) -> Callable[[], SaslClient]:
    """The GSSAPI mechanism factory; the login is tried once here, so that a missing
    ticket or a keytab the KDC refuses fails when the config is read."""
    try:
        login.credentials()
    except (SaslMechanismError, GssapiUnavailable) as exc:
        raise ClientConfigError(f"{login.source}: {exc}") from None
    return login.client


def _system_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """The -D system properties of KAFKA_OPTS, as Kafka's scripts hand them to the JVM."""
    try:
        return system_properties_from_kafka_opts(environ.get("KAFKA_OPTS", ""))
    except JaasError as exc:
        raise ClientConfigError(str(exc)) from None


def _login_from_entries(entries: list[JaasEntry], source: str) -> SaslLogin:
    """The first entry with credentials (Kafka's callback handler reads them from the
    Subject every login module of the section filled)."""
    for entry in entries:
        credentials = client_credentials(entry)
        if credentials is not None:
            token_auth = (entry.login_module == SCRAM_LOGIN_MODULE
                          and entry.options.get(TOKEN_AUTH, "").lower() == "true")
            return SaslLogin(credentials[0], credentials[1], token_auth, source)
    modules = ", ".join(e.login_module for e in entries)
    raise ClientConfigError(
        f"{source}: {modules} gives no username and password; a PLAIN or SCRAM login needs "
        f"{PLAIN_LOGIN_MODULE} or {SCRAM_LOGIN_MODULE} with username=\"...\" "
        "password=\"...\"")


def _mechanism_factory(mechanism: str, login: SaslLogin) -> Callable[[], SaslClient]:
    """A factory of fresh mechanism clients, tried once here so that credentials a client
    cannot send (a NUL in a name or password) fail when the config is read, not at the
    first connect."""
    scram = ScramMechanism.by_name(mechanism)
    factory: Callable[[], SaslClient]
    if scram is not None:
        extensions = {TOKEN_AUTH: "true"} if login.token_auth else None
        factory = functools.partial(ScramClient, scram, login.username, login.password,
                                    extensions)
    else:
        factory = functools.partial(PlainClient, login.username, login.password)
    try:
        factory()
    except ValueError as exc:
        raise ClientConfigError(f"{login.source}: {exc}") from None
    return factory


# ---------------------------------------------------------------------------- TLS


def _ssl_context(config: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context: Kafka's `ssl.truststore.*` / `ssl.keystore.*` (JKS, PKCS12 or PEM,
    passwords) as the broker reads them, or librdkafka's `ssl.ca.location` /
    `ssl.certificate.location` / `ssl.key.location` PEM files. A store file given without
    its type is taken as PEM when it is one (Kafka's default type, JKS, could not hold it
    anyway)."""
    if any(key in config for key in _LIBRDKAFKA_TLS_KEYS):
        return _librdkafka_context(config)
    try:
        return build_client_context(_with_sniffed_types(config))
    except (TlsConfigError, OSError) as exc:
        raise ClientConfigError(str(exc)) from None


def _with_sniffed_types(config: Mapping[str, str]) -> dict[str, str]:
    settings = dict(config)
    for store in ("truststore", "keystore"):
        location = config.get(f"ssl.{store}.location")
        if location and f"ssl.{store}.type" not in config and _is_pem(location):
            settings[f"ssl.{store}.type"] = "PEM"
    return settings


def _is_pem(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return b"-----BEGIN " in fh.read(4096)
    except OSError:
        return False  # the store loader names the unreadable file


def _librdkafka_context(config: Mapping[str, str]) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(
            cafile=config.get("ssl.ca.location") or config.get("ssl.truststore.location"))
        if config.get("ssl.endpoint.identification.algorithm", "https") in ("", "none"):
            context.check_hostname = False
        cert = config.get("ssl.certificate.location") or config.get("ssl.keystore.location")
        if cert:
            context.load_cert_chain(cert, config.get("ssl.key.location") or None,
                                    config.get("ssl.key.password") or None)
    except (OSError, ssl.SSLError) as exc:
        raise ClientConfigError(
            f"the TLS settings of the client config do not load: {exc}") from None
    return context


# ---------------------------------------------------------------------------- librdkafka


def librdkafka_settings(config: Mapping[str, str],
                        environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The same client properties for librdkafka (confluent-kafka): the SASL login as
    `sasl.username`/`sasl.password`, Kafka's key and trust stores as librdkafka's PEM
    settings, Java-only properties dropped, everything else passed on as it is.
    Raises ClientConfigError as client_security does."""
    protocol = security_protocol(config)
    out = {k: v for k, v in config.items()
           if k not in _JAVA_ONLY and not k.startswith(_JAVA_ONLY_PREFIXES)}
    if "security.protocol" in out:
        out["security.protocol"] = protocol
    if protocol.startswith("SASL_") and sasl_mechanism(config, protocol) == OAUTHBEARER_MECHANISM:
        try:
            out.update(librdkafka_oauthbearer(oauthbearer_login(config, environ)))
        except OAuthBearerConfigError as exc:
            raise ClientConfigError(f"{exc.key}: {exc.message}") from None
    elif protocol.startswith("SASL_") and sasl_mechanism(config, protocol) == GSSAPI_MECHANISM:
        for key in ("sasl.kerberos.ticket.renew.window.factor",  # Java's, not librdkafka's
                    "sasl.kerberos.ticket.renew.jitter"):
            out.pop(key, None)
        try:
            out.update(gssapi_login(config, environ).librdkafka())
        except ValueError as exc:
            raise ClientConfigError(str(exc)) from None
    elif protocol.startswith("SASL_"):
        mechanism = sasl_mechanism(config, protocol)
        login = sasl_login(config, environ)
        _mechanism_factory(mechanism, login)  # refuses what client_security refuses
        if login.token_auth:
            raise ClientConfigError(
                f"{login.source}: tokenauth=\"true\" (a delegation token login) needs the "
                "SCRAM tokenauth extension, which librdkafka cannot send")
        out["sasl.username"], out["sasl.password"] = login.username, login.password
    if protocol in ("SSL", "SASL_SSL"):
        tls = _librdkafka_tls(config)
        if "ssl.key.pem" in tls:
            out.pop("ssl.key.password", None)  # it opened the store's key, now in the clear
        out.update(tls)
        if "ssl.cipher.suites" in config:
            ciphers = _openssl_ciphers(config["ssl.cipher.suites"])
            if ciphers is None:
                del out["ssl.cipher.suites"]
            else:
                out["ssl.cipher.suites"] = ciphers
    if out.get("ssl.endpoint.identification.algorithm") == "":
        out["ssl.endpoint.identification.algorithm"] = "none"  # Kafka's "" is "no check"
    return out


def _librdkafka_tls(config: Mapping[str, str]) -> dict[str, str]:
    """Kafka's stores as librdkafka settings: a PEM file by its path, anything else
    Moldau can open (JKS, PKCS12, PEM in the config) as PEM text."""
    settings = _with_sniffed_types(config)
    out: dict[str, str] = {}
    try:
        trust_file = settings.get("ssl.truststore.location")
        if trust_file and settings.get("ssl.truststore.type", "").upper() == "PEM":
            out["ssl.ca.location"] = trust_file
        elif trust_file or "ssl.truststore.certificates" in settings:
            certificates = load_truststore(settings) or []
            out["ssl.ca.pem"] = "".join(
                c.public_bytes(serialization.Encoding.PEM).decode() for c in certificates)
        key_file = settings.get("ssl.keystore.location")
        if key_file and settings.get("ssl.keystore.type", "").upper() == "PEM":
            out["ssl.certificate.location"] = out["ssl.key.location"] = key_file
        elif key_file or "ssl.keystore.key" in settings:
            material = load_keystore(settings)
            assert material is not None  # a location or an inline key was given
            out["ssl.certificate.pem"] = "".join(
                c.public_bytes(serialization.Encoding.PEM).decode() for c in material.chain)
            # unencrypted: it stays in this process's memory (librdkafka takes it as text)
            out["ssl.key.pem"] = material.key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption()).decode()
    except (TlsConfigError, OSError) as exc:
        raise ClientConfigError(str(exc)) from None
    return out


def _openssl_ciphers(names: str) -> str | None:
    """Kafka's IANA cipher suite names as OpenSSL's (librdkafka's), OpenSSL names kept.
    TLS 1.3 suites are left out: librdkafka's list is OpenSSL's TLS 1.2 one (it has no
    setting for TLS 1.3 suites). None when nothing is left to restrict."""
    listed = [n.strip() for n in names.split(",") if n.strip()]
    tls12 = [IANA_TO_OPENSSL.get(name, name) for name in listed if name not in TLS13_SUITES]
    return ":".join(tls12) if tls12 else None
