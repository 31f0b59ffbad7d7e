"""Kafka's `ssl.*` setting names, reading their values, and the error naming the key to fix.

Settings are a mapping of Kafka key names to values, either typed (`BrokerConfig.values`:
lists are lists) or raw properties strings (lists comma-separated); use
`listener_settings()` to apply the `listener.name.<listener>.ssl.*` overrides first.
No I/O and no TLS here: the store loaders, the context builders and the principal mapping
all read their settings and report their errors through this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

PROTOCOL = "ssl.protocol"
ENABLED_PROTOCOLS = "ssl.enabled.protocols"
CIPHER_SUITES = "ssl.cipher.suites"
KEYSTORE_TYPE = "ssl.keystore.type"
KEYSTORE_LOCATION = "ssl.keystore.location"
KEYSTORE_PASSWORD = "ssl.keystore.password"
KEY_PASSWORD = "ssl.key.password"
KEYSTORE_KEY = "ssl.keystore.key"
KEYSTORE_CERTIFICATE_CHAIN = "ssl.keystore.certificate.chain"
TRUSTSTORE_TYPE = "ssl.truststore.type"
TRUSTSTORE_LOCATION = "ssl.truststore.location"
TRUSTSTORE_PASSWORD = "ssl.truststore.password"
TRUSTSTORE_CERTIFICATES = "ssl.truststore.certificates"
CLIENT_AUTH = "ssl.client.auth"
ENDPOINT_IDENTIFICATION = "ssl.endpoint.identification.algorithm"
PRINCIPAL_MAPPING_RULES = "ssl.principal.mapping.rules"
ALLOW_DN_CHANGES = "ssl.allow.dn.changes"
ALLOW_SAN_CHANGES = "ssl.allow.san.changes"

# Kafka's SslConfigs.RECONFIGURABLE_CONFIGS: only the stores change on a dynamic update;
# everything else about a listener's TLS is fixed when the listener starts.
RECONFIGURABLE_KEYS = frozenset({
    KEYSTORE_TYPE, KEYSTORE_LOCATION, KEYSTORE_PASSWORD, KEY_PASSWORD, KEYSTORE_KEY,
    KEYSTORE_CERTIFICATE_CHAIN, TRUSTSTORE_TYPE, TRUSTSTORE_LOCATION, TRUSTSTORE_PASSWORD,
    TRUSTSTORE_CERTIFICATES,
})

# Kafka key -> value, typed or a raw properties string: readers below accept either.
SslSettings = Mapping[str, object]

_Value = TypeVar("_Value")


class TlsConfigError(ValueError):
    """Invalid TLS settings or key material; the message starts with the key to fix."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


def listener_settings(values: Mapping[str, _Value], listener: str) -> dict[str, _Value]:
    """The `ssl.*` settings of one listener: `listener.name.<listener lower-case>.ssl.*`
    overrides the plain `ssl.*` key, as Kafka's valuesWithPrefixOverride does.

    `values` is e.g. `BrokerConfig.values` (which must then keep the prefixed keys)."""
    prefix = f"listener.name.{listener.lower()}."
    out = {k: v for k, v in values.items() if k.startswith("ssl.")}
    for key, value in values.items():
        if key.startswith(prefix) and key[len(prefix):].startswith("ssl."):
            out[key[len(prefix):]] = value
    return out


def read_text(settings: SslSettings, key: str, default: str | None = None) -> str | None:
    """A string setting; blank counts as unset (a blank location names no file)."""
    value = settings.get(key)
    if value is None:
        return default
    text = str(value).strip()
    return text or default


def read_password(settings: SslSettings, key: str) -> str | None:
    """A password keeps "" (an empty password is still a password, as Kafka's Password)."""
    value = settings.get(key)
    return None if value is None else str(value).strip()


def read_list(settings: SslSettings, key: str, default: tuple[str, ...]) -> list[str]:
    value = settings.get(key)
    if value is None:
        return list(default)
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, Iterable):
        items = [str(v) for v in value]
    else:
        raise TypeError(f"{key}: expected a list or a comma-separated string, not {value!r}")
    return [item.strip() for item in items if item.strip()]


def read_flag(settings: SslSettings, key: str) -> bool:
    value = settings.get(key, False)
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"
