"""JAAS configuration as Kafka 3.9 reads it: the `sasl.jaas.config` property (Kafka's
JaasConfig), the section Kafka picks from a JAAS file, the login modules Kafka refuses,
and the options its own login modules read. Error texts are Kafka's, so an operator sees
what Kafka would print.

The one place to import JAAS support from: JAAS files (jaas_file) and KAFKA_OPTS
(kafka_opts) are re-exported here."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from moldau.security.sasl.jaas_entry import CONTROL_FLAGS, JaasEntry, JaasError
from moldau.security.sasl.jaas_file import expand_properties, load_jaas_file, parse_jaas_file
from moldau.security.sasl.jaas_tokenizer import (
    KAFKA_JAAS_CONFIG_SYNTAX,
    StreamTokenizer,
    Token,
    TokenKind,
)
from moldau.security.sasl.kafka_opts import (
    JAVA_LOGIN_CONFIG_PARAM,
    jaas_file_from_kafka_opts,
    system_properties_from_kafka_opts,
)

__all__ = [
    "CONTROL_FLAGS", "DIGEST_LOGIN_MODULE", "DISALLOWED_LOGIN_MODULES",
    "DISALLOWED_LOGIN_MODULES_PROPERTY", "JAVA_LOGIN_CONFIG_PARAM", "KRB5_LOGIN_MODULE",
    "OAUTHBEARER_LOGIN_MODULE", "PLAIN_LOGIN_MODULE", "PLAIN_USER_PREFIX",
    "SCRAM_LOGIN_MODULE", "JaasEntry", "JaasError", "check_login_modules",
    "client_credentials", "disallowed_login_modules", "expand_properties", "find_context",
    "format_jaas_config", "jaas_file_from_kafka_opts", "load_jaas_file", "parse_jaas_config",
    "parse_jaas_file", "parse_single_login_module", "plain_users", "quote_jaas_value",
    "system_properties_from_kafka_opts",
]

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"

DISALLOWED_LOGIN_MODULES_PROPERTY = "org.apache.kafka.disallowed.login.modules"
# Kafka 3.9.1's default for that property (JaasUtils.DISALLOWED_LOGIN_MODULES_DEFAULT).
DISALLOWED_LOGIN_MODULES = ("com.sun.security.auth.module.JndiLoginModule",
                            "com.sun.security.auth.module.LdapLoginModule")

PLAIN_USER_PREFIX = "user_"  # PlainServerCallbackHandler's JAAS_USER_PREFIX


# -- sasl.jaas.config (Kafka's JaasConfig) -------------------------------------------


def parse_jaas_config(text: str) -> list[JaasEntry]:
    """The entries of a `sasl.jaas.config` value."""
    tokenizer = StreamTokenizer(text, KAFKA_JAAS_CONFIG_SYNTAX)
    entries: list[JaasEntry] = []
    while (token := tokenizer.next_token()).kind is not TokenKind.EOF:
        entries.append(_parse_config_entry(token, tokenizer))
    if not entries:
        raise JaasError("Login module not specified in JAAS config")
    return entries


def _parse_config_entry(first: Token, tokenizer: StreamTokenizer) -> JaasEntry:
    login_module = first.sval
    flag_token = tokenizer.next_token()
    if flag_token.kind is TokenKind.EOF:
        raise JaasError("Login module control flag not specified in JAAS config")
    control_flag = _config_control_flag(flag_token.sval)
    options: dict[str, str] = {}
    token = tokenizer.next_token()
    while token.kind is not TokenKind.EOF and not token.is_char(";"):
        key = token.sval
        equals, value = tokenizer.next_token(), None
        if equals.is_char("="):
            value = tokenizer.next_token().sval
        if value is None:  # Java prints a missing key (a stray character) as null
            raise JaasError(f"Value not specified for key '{key if key is not None else 'null'}'"
                            " in JAAS config")
        if key is None:
            # Java would store it under a null key; no login module could read it.
            raise JaasError(f"Key not specified for value '{value}' in JAAS config")
        options[key] = value
        token = tokenizer.next_token()
    if not token.is_char(";"):
        raise JaasError("JAAS config entry not terminated by semi-colon")
    if not login_module:
        # Java's AppConfigurationEntry refuses it without a message.
        raise JaasError("Login module not specified in JAAS config")
    return JaasEntry(login_module, control_flag, options)


def _config_control_flag(flag: str | None) -> str:
    if flag is None:
        raise JaasError("Login module control flag is not available in the JAAS config")
    if flag.upper().lower() not in CONTROL_FLAGS:  # Java compares the upper-cased flag
        raise JaasError(f"Invalid login module control flag '{flag}' in JAAS config")
    return flag.upper().lower()


def quote_jaas_value(value: str) -> str:
    """`value` as a double-quoted JAAS string that reads back unchanged (a JAAS file
    would still expand any `${...}` in it)."""
    escaped = (value.replace("\\", "\\\\").replace('"', '\\"')
               .replace("\n", "\\n").replace("\r", "\\r"))
    return f'"{escaped}"'


def format_jaas_config(entry: JaasEntry) -> str:
    """An entry as a `sasl.jaas.config` value (every option quoted)."""
    options = "".join(f" {key}={quote_jaas_value(value)}"
                      for key, value in entry.options.items())
    return f"{entry.login_module} {entry.control_flag}{options};"


def parse_single_login_module(text: str,
                              disallowed: Iterable[str] = DISALLOWED_LOGIN_MODULES
                              ) -> JaasEntry:
    """A `sasl.jaas.config` value as JaasContext.load takes it: exactly one login
    module, and not a disallowed one."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasError(f"JAAS config property contains {len(entries)} login modules, "
                        "should be 1 module")
    check_login_modules(entries, disallowed)
    return entries[0]


# -- which JAAS context applies (Kafka's JaasContext) ------------------------------------


def find_context(sections: Mapping[str, list[JaasEntry]], global_name: str,
                 listener_name: str | None = None, jaas_file: str | None = None
                 ) -> tuple[str, list[JaasEntry]]:
    """The section Kafka uses from a JAAS file: `<listener lower-case>.<global_name>`
    when present, else `<global_name>` (KafkaServer, KafkaClient); the name and entries."""
    listener_context = (f"{listener_name.lower()}.{global_name}"
                        if listener_name is not None else None)
    if listener_context is not None and listener_context in sections:
        return listener_context, sections[listener_context]
    if global_name in sections:
        return global_name, sections[global_name]
    listener_text = f" or '{listener_context}'" if listener_context is not None else ""
    raise JaasError(
        f"Could not find a '{global_name}'{listener_text} entry in the JAAS configuration. "
        f"System property '{JAVA_LOGIN_CONFIG_PARAM}' is "
        f"{jaas_file if jaas_file is not None else 'not set'}")


def disallowed_login_modules(system_properties: Mapping[str, str]) -> tuple[str, ...]:
    """The modules refused under `-Dorg.apache.kafka.disallowed.login.modules=a,b`."""
    value = system_properties.get(DISALLOWED_LOGIN_MODULES_PROPERTY)
    if value is None:
        return DISALLOWED_LOGIN_MODULES
    return tuple(name.strip() for name in value.split(","))


def check_login_modules(entries: Iterable[JaasEntry],
                        disallowed: Iterable[str] = DISALLOWED_LOGIN_MODULES) -> None:
    """Refuse a login module Kafka refuses (JndiLoginModule, LdapLoginModule, ...)."""
    refused = {name.strip() for name in disallowed}
    for entry in entries:
        name = entry.login_module.strip()
        if name in refused:
            raise JaasError(f"{name} is not allowed. Update System property "
                            f"'{DISALLOWED_LOGIN_MODULES_PROPERTY}' to allow {name}")


# -- options Kafka's login modules read ------------------------------------------------


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """PlainLoginModule's `user_<name>="<password>"` options: name -> password."""
    return {key[len(PLAIN_USER_PREFIX):]: value for key, value in entry.options.items()
            if key.startswith(PLAIN_USER_PREFIX)}


def client_credentials(entry: JaasEntry) -> tuple[str, str] | None:
    """The `username` and `password` options (what the broker or a client logs in with),
    None unless both are set."""
    username, password = entry.options.get("username"), entry.options.get("password")
    if username is None or password is None:
        return None
    return username, password
