"""TLS from Kafka's `ssl.*` keys, and the principal of a TLS connection.

Settings are a mapping of Kafka key names to values, either typed (`BrokerConfig.values`:
lists are lists) or raw properties strings (lists comma-separated); use
`listener_settings()` to apply the `listener.name.<listener>.ssl.*` overrides first.

What maps to what:

* key stores: ``JKS`` (Kafka's default type; read by moldau.security.jks), ``PKCS12``
  and ``PEM`` (a PEM file by `ssl.keystore.location`, or Kafka's PEM-in-config form
  `ssl.keystore.key` + `ssl.keystore.certificate.chain`). Like Java 9+
  (keystore.type.compat), JKS and PKCS12 files load under either type. A JCEKS file gets
  an error with the keytool command that converts it. Same for trust stores
  (`ssl.truststore.*`).
  Moldau is more lenient than Kafka in one place: a PEM key store file may hold an
  unencrypted key (Kafka insists on `ssl.key.password`).
* `ssl.client.auth` none/requested/required -> CERT_NONE/CERT_OPTIONAL/CERT_REQUIRED.
* `ssl.enabled.protocols` -> minimum/maximum TLS version. TLSv1.2 and TLSv1.3 only:
  TLSv1/TLSv1.1/SSLv3 are ignored with a warning (current JVMs disable them too).
  `ssl.protocol` is validated; on client contexts it caps the maximum version, as Kafka
  documents ("TLSv1.2" = the client never uses TLSv1.3).
* `ssl.cipher.suites`: Kafka (JSSE) uses IANA names, OpenSSL its own; the common IANA
  names are mapped (`IANA_TO_OPENSSL`), OpenSSL names pass through. Python's ssl module
  cannot restrict TLS 1.3 suites: listing only TLS 1.2 suites disables TLS 1.3 and listing
  only TLS 1.3 suites disables TLS 1.2 (what JSSE does), a partial TLS 1.3 list is warned
  about and all TLS 1.3 suites stay on.
* `ssl.endpoint.identification.algorithm` is a client setting: ``https`` checks the
  server's host name against its certificate, empty turns the check off. A server
  context ignores it (as Kafka does).
* JVM-only keys (`ssl.provider`, `ssl.keymanager.algorithm`, `ssl.trustmanager.algorithm`,
  `ssl.secure.random.implementation`, `ssl.engine.factory.class`) are ignored.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from moldau.security import jks

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------- key names

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

DEFAULT_ENABLED_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
DEFAULT_RULES = "DEFAULT"
SUPPORTED_STORE_TYPES = ("PKCS12", "PEM")

_VERSIONS = {"tlsv1.2": ssl.TLSVersion.TLSv1_2, "tlsv1.3": ssl.TLSVersion.TLSv1_3}
_LEGACY_PROTOCOLS = {"tlsv1", "tlsv1.1", "sslv3", "sslv2", "sslv2hello"}
# ssl.protocol (the JSSE SSLContext algorithm) -> the highest version it allows a client.
_PROTOCOL_CAP = {
    "tls": ssl.TLSVersion.TLSv1_3, "tlsv1.3": ssl.TLSVersion.TLSv1_3,
    "tlsv1.2": ssl.TLSVersion.TLSv1_2, "tlsv1.1": ssl.TLSVersion.TLSv1_1,
    "tlsv1": ssl.TLSVersion.TLSv1, "ssl": ssl.TLSVersion.TLSv1_3,
    "sslv3": ssl.TLSVersion.SSLv3,
}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED,
}

TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                          "TLS_CHACHA20_POLY1305_SHA256"})
# IANA (JSSE) name -> OpenSSL name, checked against `openssl ciphers -stdname`.
IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
}
_OPENSSL_NAME = re.compile(r"[A-Z0-9]+(?:-[A-Z0-9]+)+")

_JCEKS_MAGIC = b"\xce\xce\xce\xce"
_PEM_KEY = re.compile(rb"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----.*?-----END \1-----", re.S)


class TlsConfigError(ValueError):
    """Invalid TLS settings or key material; the message starts with the key to fix."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


class PrincipalMappingError(ValueError):
    """No `ssl.principal.mapping.rules` rule applies to a certificate's name (Kafka fails
    the authentication of that connection)."""


# ---------------------------------------------------------------------------- settings


def listener_settings(values: Mapping[str, Any], listener: str) -> dict[str, Any]:
    """The `ssl.*` settings of one listener: `listener.name.<listener lower-case>.ssl.*`
    overrides the plain `ssl.*` key, as Kafka's valuesWithPrefixOverride does.

    `values` is e.g. `BrokerConfig.values` (which must then keep the prefixed keys)."""
    prefix = f"listener.name.{listener.lower()}."
    out = {k: v for k, v in values.items() if k.startswith("ssl.")}
    for key, value in values.items():
        if key.startswith(prefix) and key[len(prefix):].startswith("ssl."):
            out[key[len(prefix):]] = value
    return out


def _text(settings: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    """A string setting; blank counts as unset (a blank location names no file)."""
    value = settings.get(key)
    if value is None:
        return default
    text = str(value).strip()
    return text or default


def _password(settings: Mapping[str, Any], key: str) -> str | None:
    """A password keeps "" (an empty password is still a password, as Kafka's Password)."""
    value = settings.get(key)
    return None if value is None else str(value).strip()


def _list(settings: Mapping[str, Any], key: str, default: tuple[str, ...]) -> list[str]:
    value = settings.get(key)
    if value is None:
        return list(default)
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return [item.strip() for item in items if item.strip()]


def _flag(settings: Mapping[str, Any], key: str) -> bool:
    value = settings.get(key, False)
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"


# ---------------------------------------------------------------------------- key material


@dataclass(frozen=True)
class _KeyMaterial:
    key: PrivateKeyTypes
    chain: list[x509.Certificate]  # leaf first


@dataclass(frozen=True)
class _Built:
    context: ssl.SSLContext
    keystore: _KeyMaterial | None
    trusted: list[x509.Certificate] | None  # None = the system's default CAs


def _read(key: str, location: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise TlsConfigError(key, f"cannot read {location}: {exc.strerror or exc}") from None


def _jceks_error(key: str, location: str) -> TlsConfigError:
    target = str(Path(location).with_suffix(".p12"))
    return TlsConfigError(
        key, f"{location} is a JCEKS store; Moldau reads JKS, PKCS12 and PEM stores. "
        f"Convert it with: keytool -importkeystore -srckeystore {location} -srcstoretype "
        f"JCEKS -destkeystore {target} -deststoretype PKCS12")


def _store_kind(type_key: str, type_: str, loc_key: str, location: str, data: bytes) -> str:
    """JKS, PKCS12 or PEM, from the configured type and the file's content."""
    if data[:4] == _JCEKS_MAGIC:
        raise _jceks_error(loc_key, location)
    looks_pem = b"-----BEGIN " in data[:4096]
    if type_ in ("JKS", "PKCS12"):
        # Java 9+ loads either binary format under either type (keystore.type.compat).
        if jks.is_jks(data):
            return "JKS"
        if looks_pem:
            raise TlsConfigError(type_key, f"{location} is a PEM file but the type is "
                                 f"{type_}: set {type_key}=PEM")
        return "PKCS12"
    if type_ == "JCEKS":
        raise _jceks_error(loc_key, location)
    if type_ == "PEM":
        return "PEM"
    raise TlsConfigError(type_key, f"unsupported store type {type_}; Moldau supports "
                         "JKS, PKCS12 and PEM")


def _open_jks(pw_key: str, location: str, data: bytes, password: str | None) -> jks.KeyStore:
    try:
        return jks.load(data, password)
    except jks.JksError as exc:
        raise TlsConfigError(pw_key, f"cannot open the JKS store {location}: {exc}") from None


def _jks_key(location: str, data: bytes, password: str, key_password: str | None
             ) -> _KeyMaterial:
    store = _open_jks(KEYSTORE_PASSWORD, location, data, password)
    if not store.keys:
        raise TlsConfigError(KEYSTORE_LOCATION, f"{location} holds no private key entry "
                             "(is it a trust store?)")
    if len(store.keys) > 1:
        log.warning("%s: %s holds %d private keys; using the first, %r", KEYSTORE_LOCATION,
                    location, len(store.keys), store.keys[0].alias)
    entry = store.keys[0]
    # keytool protects the key with the store password unless told otherwise.
    for candidate in dict.fromkeys(p for p in (key_password, password) if p is not None):
        try:
            return _KeyMaterial(entry.private_key(candidate), entry.chain)
        except jks.JksError:
            continue
    raise TlsConfigError(KEY_PASSWORD, f"neither {KEY_PASSWORD} nor {KEYSTORE_PASSWORD} "
                         f"opens the private key {entry.alias!r} in {location}")


def _pem_certificates(key: str, data: bytes) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TlsConfigError(key, "no valid PEM certificate (-----BEGIN CERTIFICATE-----) "
                             "found") from None


def _pem_private_key(key: str, data: bytes, password: str | None) -> PrivateKeyTypes:
    blocks = [m.group(0) for m in _PEM_KEY.finditer(data)]
    if len(blocks) != 1:
        raise TlsConfigError(key, f"expected one PEM private key, found {len(blocks)}")
    pw = password.encode() if password else None
    try:
        return serialization.load_pem_private_key(blocks[0], pw)
    except TypeError:
        if pw is None:
            raise TlsConfigError(KEY_PASSWORD, "the private key is encrypted: set "
                                 f"{KEY_PASSWORD}") from None
        # an unencrypted key with a key password: Kafka would fail; the key is usable
        return serialization.load_pem_private_key(blocks[0], None)
    except ValueError:
        if pw is not None:
            raise TlsConfigError(KEY_PASSWORD, "cannot decrypt the private key: wrong "
                                 "password") from None
        raise TlsConfigError(key, "the private key cannot be read") from None


def _public_der(public_key: Any) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)


def _checked(key: str, material: _KeyMaterial) -> _KeyMaterial:
    if not material.chain:
        raise TlsConfigError(key, "the key store holds no certificate")
    if _public_der(material.key.public_key()) != _public_der(material.chain[0].public_key()):
        raise TlsConfigError(key, "the private key does not belong to the first "
                             "certificate of the chain (the chain must start with the "
                             "certificate of the key)")
    return material


def _load_pkcs12(pw_key: str, location: str, data: bytes, passwords: list[str | None]
                 ) -> tuple[Any, Any, list[x509.Certificate]]:
    for password in passwords:
        try:
            return pkcs12.load_key_and_certificates(
                data, password.encode() if password is not None else None)
        except ValueError:
            continue
    if passwords == [None]:
        # Java reads a PKCS12 trust store without a password (skipping the integrity
        # check); cryptography insists on the password of a MAC-protected file.
        raise TlsConfigError(pw_key, f"cannot open the PKCS12 store {location} without a "
                             f"password: set {pw_key}")
    raise TlsConfigError(pw_key, f"cannot open the PKCS12 store {location}: wrong password "
                         "or not a PKCS12 file")


def _load_keystore(settings: Mapping[str, Any]) -> _KeyMaterial | None:
    """The key and chain from the key store settings (Kafka's createKeystore rules)."""
    type_ = (_text(settings, KEYSTORE_TYPE) or "JKS").upper()
    location = _text(settings, KEYSTORE_LOCATION)
    password = _password(settings, KEYSTORE_PASSWORD)
    key_password = _password(settings, KEY_PASSWORD)
    inline_key = _text(settings, KEYSTORE_KEY)
    inline_chain = _text(settings, KEYSTORE_CERTIFICATE_CHAIN)
    if inline_key is not None:
        if type_ != "PEM":
            raise TlsConfigError(KEYSTORE_TYPE, f"{KEYSTORE_KEY} is set, so {KEYSTORE_TYPE} "
                                 f"must be PEM, not {type_}")
        if inline_chain is None:
            raise TlsConfigError(KEYSTORE_CERTIFICATE_CHAIN, f"{KEYSTORE_KEY} is set but the "
                                 "certificate chain is not")
        if location is not None:
            raise TlsConfigError(KEYSTORE_LOCATION, f"set either {KEYSTORE_LOCATION} or "
                                 f"{KEYSTORE_KEY}, not both")
        if password:
            raise TlsConfigError(KEYSTORE_PASSWORD, "a PEM key store has no store password; "
                                 f"only {KEY_PASSWORD} (for an encrypted key) applies")
        key = _pem_private_key(KEYSTORE_KEY, inline_key.encode(), key_password)
        chain = _pem_certificates(KEYSTORE_CERTIFICATE_CHAIN, inline_chain.encode())
        return _checked(KEYSTORE_KEY, _KeyMaterial(key, chain))
    if inline_chain is not None:
        raise TlsConfigError(KEYSTORE_KEY, f"{KEYSTORE_CERTIFICATE_CHAIN} is set but the "
                             "private key is not")
    if location is None:
        if password:
            raise TlsConfigError(KEYSTORE_PASSWORD, "a key store password is set but "
                                 f"{KEYSTORE_LOCATION} is not")
        return None
    data = _read(KEYSTORE_LOCATION, location)
    kind = _store_kind(KEYSTORE_TYPE, type_, KEYSTORE_LOCATION, location, data)
    if kind == "PEM":
        if password:
            raise TlsConfigError(KEYSTORE_PASSWORD, "a PEM key store has no store password; "
                                 f"only {KEY_PASSWORD} (for an encrypted key) applies")
        key = _pem_private_key(KEYSTORE_LOCATION, data, key_password)
        return _checked(KEYSTORE_LOCATION,
                        _KeyMaterial(key, _pem_certificates(KEYSTORE_LOCATION, data)))
    if password is None:
        raise TlsConfigError(KEYSTORE_PASSWORD, f"{KEYSTORE_LOCATION} is set but the key "
                             "store password is not")
    if kind == "JKS":
        return _checked(KEYSTORE_LOCATION, _jks_key(location, data, password, key_password))
    # PKCS12 has one password in practice (keytool ignores a separate key password);
    # try ssl.key.password second for stores written by other tools.
    passwords: list[str | None] = [password]
    if key_password is not None and key_password != password:
        passwords.append(key_password)
    key, cert, extra = _load_pkcs12(KEYSTORE_PASSWORD, location, data, passwords)
    if key is None or cert is None:
        raise TlsConfigError(KEYSTORE_LOCATION, f"{location} holds no private key entry "
                             "(is it a trust store?)")
    return _checked(KEYSTORE_LOCATION, _KeyMaterial(key, [cert, *extra]))


def _load_truststore(settings: Mapping[str, Any]) -> list[x509.Certificate] | None:
    """Trusted certificates, or None for the system's default CAs (Java's cacerts)."""
    type_ = (_text(settings, TRUSTSTORE_TYPE) or "JKS").upper()
    location = _text(settings, TRUSTSTORE_LOCATION)
    password = _password(settings, TRUSTSTORE_PASSWORD)
    inline = _text(settings, TRUSTSTORE_CERTIFICATES)
    if inline is not None:
        if type_ != "PEM":
            raise TlsConfigError(TRUSTSTORE_TYPE, f"{TRUSTSTORE_CERTIFICATES} is set, so "
                                 f"{TRUSTSTORE_TYPE} must be PEM, not {type_}")
        if location is not None:
            raise TlsConfigError(TRUSTSTORE_LOCATION, f"set either {TRUSTSTORE_LOCATION} or "
                                 f"{TRUSTSTORE_CERTIFICATES}, not both")
        if password:
            raise TlsConfigError(TRUSTSTORE_PASSWORD, "a PEM trust store has no password")
        return _pem_certificates(TRUSTSTORE_CERTIFICATES, inline.encode())
    if location is None:
        if password:
            raise TlsConfigError(TRUSTSTORE_PASSWORD, "a trust store password is set but "
                                 f"{TRUSTSTORE_LOCATION} is not")
        return None
    data = _read(TRUSTSTORE_LOCATION, location)
    kind = _store_kind(TRUSTSTORE_TYPE, type_, TRUSTSTORE_LOCATION, location, data)
    if kind == "PEM":
        if password:
            raise TlsConfigError(TRUSTSTORE_PASSWORD, "a PEM trust store has no password")
        return _pem_certificates(TRUSTSTORE_LOCATION, data)
    if kind == "JKS":
        # Without a password Java skips the integrity check of a trust store; so does this.
        store = _open_jks(TRUSTSTORE_PASSWORD, location, data, password)
        certs = store.trusted + [entry.chain[0] for entry in store.keys if entry.chain]
        if not certs:
            raise TlsConfigError(TRUSTSTORE_LOCATION, f"{location} holds no certificate")
        return certs
    # Java opens a PKCS12 trust store without a password too (skipping the integrity
    # check); here that works only for a store without a MAC (see _load_pkcs12).
    _key, cert, extra = _load_pkcs12(TRUSTSTORE_PASSWORD, location, data, [password])
    certs = ([cert] if cert is not None else []) + list(extra)
    if not certs:
        raise TlsConfigError(TRUSTSTORE_LOCATION, f"{location} holds no certificate")
    return certs


@contextmanager
def _private_file(data: bytes) -> Iterator[str]:
    """A path whose content is `data`, readable by this process only, gone afterwards."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        # Linux: an anonymous in-memory file; nothing reaches a file system.
        fd = os.memfd_create("moldau-tls", os.MFD_CLOEXEC)
        try:
            _write_all(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="moldau-tls-")  # mkstemp creates the file 0600
    try:
        _write_all(fd, data)
        os.close(fd)
        fd = -1
        yield path
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _install_key_material(context: ssl.SSLContext, key: str, material: _KeyMaterial) -> None:
    # Why a file: ssl.SSLContext.load_cert_chain reads only from files (the ssl module has
    # no in-memory form for keys, unlike cadata for trust), while PKCS12 and PEM-in-config
    # material lives in memory. The key is written encrypted under a random one-time
    # passphrase that never leaves this process, into a memfd on Linux (else a 0600 temp
    # file removed right after loading), so no readable key ever lands on disk.
    passphrase = secrets.token_urlsafe(32).encode()
    blob = material.key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(passphrase))
    blob += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in material.chain)
    try:
        with _private_file(blob) as path:
            context.load_cert_chain(path, password=passphrase)
    except ssl.SSLError as exc:
        raise TlsConfigError(key, f"OpenSSL rejected the key material: {exc}") from None


def _trust_pem(certs: list[x509.Certificate]) -> str:
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs)


# ---------------------------------------------------------------------------- protocols, ciphers


def _enabled_versions(settings: Mapping[str, Any], client: bool) -> set[ssl.TLSVersion]:
    protocol = _text(settings, PROTOCOL, "TLSv1.3") or "TLSv1.3"
    cap = _PROTOCOL_CAP.get(protocol.lower())
    if cap is None:
        raise TlsConfigError(PROTOCOL, f"unknown protocol {protocol}; use TLSv1.3 or TLSv1.2")
    names = _list(settings, ENABLED_PROTOCOLS, DEFAULT_ENABLED_PROTOCOLS)
    if not names:  # Kafka: an empty list means the SSL context's defaults
        names = list(DEFAULT_ENABLED_PROTOCOLS)
    enabled: set[ssl.TLSVersion] = set()
    for name in names:
        version = _VERSIONS.get(name.lower())
        if version is not None:
            enabled.add(version)
        elif name.lower() in _LEGACY_PROTOCOLS:
            log.warning("%s: %s is insecure and disabled (as in current JVMs); ignored",
                        ENABLED_PROTOCOLS, name)
        else:
            raise TlsConfigError(ENABLED_PROTOCOLS, f"unknown protocol {name}; use TLSv1.2 "
                                 "and/or TLSv1.3")
    if client:
        enabled = {v for v in enabled if v <= cap}
    if not enabled:
        raise TlsConfigError(ENABLED_PROTOCOLS, f"no usable protocol in {names} (Moldau "
                             f"speaks TLSv1.2 and TLSv1.3; {PROTOCOL}={protocol})")
    return enabled


def _apply_ciphers(context: ssl.SSLContext, settings: Mapping[str, Any],
                   enabled: set[ssl.TLSVersion]) -> set[ssl.TLSVersion]:
    names = _list(settings, CIPHER_SUITES, ())
    if not names:
        return enabled
    tls12: list[str] = []
    tls13: list[str] = []
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for name in names:
        if name in TLS13_SUITES:
            tls13.append(name)
            continue
        openssl_name = IANA_TO_OPENSSL.get(name)
        if openssl_name is None and _OPENSSL_NAME.fullmatch(name):
            openssl_name = name  # already an OpenSSL name
        if openssl_name is None:
            raise TlsConfigError(CIPHER_SUITES, f"unknown cipher suite {name}; use an IANA "
                                 "name Moldau maps (e.g. TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384)"
                                 " or an OpenSSL name (e.g. ECDHE-RSA-AES256-GCM-SHA384)")
        try:
            probe.set_ciphers(openssl_name)
        except ssl.SSLError:
            raise TlsConfigError(CIPHER_SUITES, f"cipher suite {name} ({openssl_name}) is not "
                                 "available in this OpenSSL") from None
        tls12.append(openssl_name)
    enabled = set(enabled)
    # A version without any listed suite cannot be negotiated (as in JSSE): turn it off.
    if not tls12:
        enabled.discard(ssl.TLSVersion.TLSv1_2)
    if not tls13:
        enabled.discard(ssl.TLSVersion.TLSv1_3)
    elif set(tls13) != TLS13_SUITES and ssl.TLSVersion.TLSv1_3 in enabled:
        log.warning("%s: Python's ssl module cannot restrict TLS 1.3 suites; all of %s stay "
                    "enabled", CIPHER_SUITES, ", ".join(sorted(TLS13_SUITES)))
    if not enabled:
        raise TlsConfigError(CIPHER_SUITES, f"no listed suite fits the enabled protocols "
                             f"{_list(settings, ENABLED_PROTOCOLS, DEFAULT_ENABLED_PROTOCOLS)}")
    if tls12:
        context.set_ciphers(":".join(tls12))
    return enabled


def _configure(context: ssl.SSLContext, settings: Mapping[str, Any], client: bool) -> None:
    enabled = _apply_ciphers(context, settings, _enabled_versions(settings, client))
    context.minimum_version = min(enabled)
    context.maximum_version = max(enabled)


# ---------------------------------------------------------------------------- contexts


def _build(settings: Mapping[str, Any], server_side: bool) -> _Built:
    auth = "none"
    if server_side:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        auth = (_text(settings, CLIENT_AUTH, "none") or "none").lower()
        if auth not in _CLIENT_AUTH:
            raise TlsConfigError(CLIENT_AUTH, f"unknown value {auth}; use none, requested or "
                                 "required")
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        # absent = Kafka's default (https); an explicitly empty value turns the check off
        raw = settings.get(ENDPOINT_IDENTIFICATION, "https")
        algorithm = "" if raw is None else str(raw).strip().lower()
        if algorithm not in ("", "https"):
            raise TlsConfigError(ENDPOINT_IDENTIFICATION, f"unknown algorithm {algorithm}; "
                                 "use https (check host names) or an empty value (no check)")
        context.check_hostname = algorithm == "https"
        context.verify_mode = ssl.CERT_REQUIRED  # the chain is always checked, as in JSSE
    _configure(context, settings, client=not server_side)
    material = _load_keystore(settings)
    if material is not None:
        source = KEYSTORE_KEY if _text(settings, KEYSTORE_KEY) else KEYSTORE_LOCATION
        _install_key_material(context, source, material)
    elif server_side:
        raise TlsConfigError(KEYSTORE_LOCATION, "an SSL listener needs a key store: set "
                             f"{KEYSTORE_LOCATION} (PKCS12 or PEM) or {KEYSTORE_KEY} and "
                             f"{KEYSTORE_CERTIFICATE_CHAIN}")
    trusted = _load_truststore(settings)
    if trusted is not None:
        context.load_verify_locations(cadata=_trust_pem(trusted))
    elif server_side and auth != "none":
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    elif not server_side:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if server_side:
        context.verify_mode = _CLIENT_AUTH[auth]
    return _Built(context, material, trusted)


def build_server_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    """The context of an SSL listener. Raises TlsConfigError naming the key to fix."""
    return _build(settings, server_side=True).context


def build_client_context(settings: Mapping[str, Any]) -> ssl.SSLContext:
    """A client context (inter-broker client, tools): the trust store (else the system's
    CAs), an optional key store for mutual TLS, host name checking per
    `ssl.endpoint.identification.algorithm` (https = check, empty = none; Kafka's default
    is https). Pass the host to `server_hostname=` when connecting."""
    return _build(settings, server_side=False).context


def _subject_alt_names(cert: x509.Certificate) -> set[tuple[str, str]]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return {(type(name).__name__, str(name.value)) for name in ext.value}


class TlsContextHolder:
    """The current TLS context of a listener (or client), replaceable at run time.

    `reload()` rebuilds the context from new settings, as Kafka's dynamic listener update:
    only the store keys (`RECONFIGURABLE_KEYS`) are taken from the new settings, the new
    key material is validated first (it loads, the key matches the certificate, the
    certificate's DN and SubjectAltNames equal the old ones unless `ssl.allow.dn.changes` /
    `ssl.allow.san.changes`), and on any failure the old context stays and the error is
    raised. New connections use the new context; established ones keep theirs.

    Connections pick up the current context in either of two ways:
    * `context`: take it per connection (`loop.start_tls`, `StreamWriter.start_tls`,
      or a client's `open_connection(ssl=holder.context)`);
    * `listener_context` (server side): a fixed context for `loop.create_server(ssl=...)`
      that moves every new handshake onto the current context (through the SNI
      callback, which OpenSSL calls for every ClientHello, with or without SNI). Settings
      fixed at that point (protocols, ciphers, client auth) are not reconfigurable, so
      only the stores differ, and those do follow the switch.
    """

    def __init__(self, settings: Mapping[str, Any], *, server_side: bool = True) -> None:
        self._server_side = server_side
        self._settings = dict(settings)
        self._built = _build(self._settings, server_side)
        self._front = self._built.context
        self.generation = 0  # successful reloads so far
        if server_side:
            self._front.sni_callback = self._switch

    @property
    def context(self) -> ssl.SSLContext:
        return self._built.context

    @property
    def certificate(self) -> x509.Certificate | None:
        """The leaf certificate served now (None without a key store)."""
        keystore = self._built.keystore
        return keystore.chain[0] if keystore is not None else None

    @property
    def listener_context(self) -> ssl.SSLContext:
        if not self._server_side:
            raise TypeError("listener_context is for server-side holders")
        return self._front

    @property
    def settings(self) -> Mapping[str, Any]:
        return dict(self._settings)

    def _switch(self, ssl_object: Any, _server_name: str | None,
                _context: ssl.SSLContext) -> None:
        current = self._built.context
        if current is not self._front:
            ssl_object.context = current

    def reload(self, settings: Mapping[str, Any]) -> ssl.SSLContext:
        """Rebuild from `settings` (a full or partial mapping; the store keys in it replace
        the current ones). Returns the new context; raises TlsConfigError and keeps the
        old context when the new material is not acceptable. Always rereads the store
        files, so an in-place file replacement is picked up."""
        merged, built = self._prepare(settings)
        self._settings = merged
        self._built = built
        self.generation += 1
        log.info("TLS context reloaded (generation %d)", self.generation)
        return built.context

    def check(self, settings: Mapping[str, Any]) -> None:
        """Validate what `reload(settings)` would install, without installing it: raises
        TlsConfigError (the stores do not load, or the new certificate is not compatible
        with the current one). Kafka's SslFactory.validateReconfiguration, which runs
        before a dynamic listener update is accepted."""
        self._prepare(settings)

    def _prepare(self, settings: Mapping[str, Any]) -> tuple[dict[str, Any], _Built]:
        merged = dict(self._settings)
        for key in RECONFIGURABLE_KEYS | {ALLOW_DN_CHANGES, ALLOW_SAN_CHANGES}:
            if key in settings:
                merged[key] = settings[key]
        built = _build(merged, self._server_side)
        self._check_compatible(built, merged)
        return merged, built

    def _check_compatible(self, new: _Built, settings: Mapping[str, Any]) -> None:
        old = self._built
        if old.keystore is None and new.keystore is not None:
            raise TlsConfigError(KEYSTORE_LOCATION, "cannot add a key store to a listener "
                                 "that was configured without one")
        if old.keystore is not None and new.keystore is None:
            raise TlsConfigError(KEYSTORE_LOCATION, "cannot remove the key store of a "
                                 "listener that was configured with one")
        if old.trusted is None and new.trusted is not None:
            raise TlsConfigError(TRUSTSTORE_LOCATION, "cannot add a trust store to a listener "
                                 "that was configured without one")
        if old.keystore is None or new.keystore is None:
            return
        old_leaf, new_leaf = old.keystore.chain[0], new.keystore.chain[0]
        if not _flag(settings, ALLOW_DN_CHANGES):
            old_dn = distinguished_name(old_leaf.public_bytes(serialization.Encoding.DER))
            new_dn = distinguished_name(new_leaf.public_bytes(serialization.Encoding.DER))
            if old_dn.lower() != new_dn.lower():
                raise TlsConfigError(KEYSTORE_LOCATION, f"the new certificate's subject "
                                     f"{new_dn!r} differs from the current {old_dn!r}; set "
                                     f"{ALLOW_DN_CHANGES}=true to allow that")
        if not _flag(settings, ALLOW_SAN_CHANGES):
            old_sans, new_sans = _subject_alt_names(old_leaf), _subject_alt_names(new_leaf)
            if old_sans != new_sans:
                raise TlsConfigError(KEYSTORE_LOCATION, f"the new certificate's "
                                     f"SubjectAltNames {sorted(new_sans)} differ from the "
                                     f"current {sorted(old_sans)}; set {ALLOW_SAN_CHANGES}="
                                     "true to allow that")


# ---------------------------------------------------------------------------- distinguished names

# Java's X500Principal.getName() (RFC 2253) writes these attribute types by keyword and
# every other one as a dotted OID with a '#'-hex DER value.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types Java renders as text (AVA.isDerString, non-canonical): UTF8String,
# PrintableString, T61String, IA5String, GeneralString, BMPString. Java 17 decodes the
# content bytes of all of them as UTF-8 (a BMPString comes out garbled: so does it here).
_DER_STRINGS = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E})
_ESCAPED = frozenset(',=+<>#;"\\')


def _tlv(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at `pos`."""
    if pos + 2 > end:
        raise ValueError("truncated DER")
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if not 1 <= count <= 4 or pos + count > end:
            raise ValueError("bad DER length")
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    if pos + length > end:
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(tag, element start, content start, content end) of each element in a range."""
    pos = start
    while pos < end:
        tag, cstart, cend = _tlv(data, pos, end)
        yield tag, pos, cstart, cend
        pos = cend


def _oid(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        raise ValueError("empty OID")
    first = min(arcs[0] // 40, 2)
    return ".".join(str(a) for a in (first, arcs[0] - 40 * first, *arcs[1:]))


def _ava(data: bytes, start: int, end: int) -> str:
    (_t, _s, ostart, oend), (vtag, vstart, cstart, cend) = list(_children(data, start, end))[:2]
    oid = _oid(data[ostart:oend])
    keyword = _RFC2253_KEYWORDS.get(oid)
    if keyword is None or vtag not in _DER_STRINGS:
        return f"{keyword or oid}=#{data[vstart:cend].hex()}"
    text = data[cstart:cend].decode("utf-8", errors="replace")
    out: list[str] = []
    for ch in text:
        if ch in _ESCAPED:
            out.append("\\" + ch)
        elif ch == "\x00":
            out.append("\\00")
        else:
            out.append(ch)
    chars = "".join(out)
    # leading and trailing spaces (and CRs) are escaped, as Java does
    lead = len(chars) - len(chars.lstrip(" \r"))
    trail = len(chars.rstrip(" \r"))
    return keyword + "=" + "".join(
        "\\" + c if i < lead or i >= trail else c for i, c in enumerate(chars))


def name_to_rfc2253(name_der: bytes) -> str:
    """An X.501 Name (DER) as Java's X500Principal.getName() writes it: RDNs from the last
    to the first, multi-valued RDNs joined with '+', in the order they are encoded."""
    tag, start, end = _tlv(name_der, 0, len(name_der))
    if tag != 0x30:
        raise ValueError("a Name is a SEQUENCE")
    rdns: list[str] = []
    for rtag, _e, rstart, rend in _children(name_der, start, end):
        if rtag != 0x31:
            raise ValueError("an RDN is a SET")
        rdns.append("+".join(_ava(name_der, s, e)
                             for _t, _el, s, e in _children(name_der, rstart, rend)))
    return ",".join(reversed(rdns))


def distinguished_name(cert_der: bytes) -> str:
    """The subject of a DER certificate, RFC 2253 as Java writes it (what Kafka maps)."""
    _t, start, end = _tlv(cert_der, 0, len(cert_der))  # Certificate
    _t, start, end = _tlv(cert_der, start, end)  # TBSCertificate
    fields = list(_children(cert_der, start, end))
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    _tag, element, _cstart, cend = fields[4]
    return name_to_rfc2253(cert_der[element:cend])


# ---------------------------------------------------------------------------- principal mapping


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal as Kafka writes it: "User:alice"."""

    name: str
    type: str = "User"

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


ANONYMOUS = KafkaPrincipal("ANONYMOUS")


@dataclass(frozen=True)
class _Rule:
    pattern_text: str | None  # None = DEFAULT
    replacement_text: str = ""
    case: str = ""  # "", "L" or "U"
    pattern: re.Pattern[str] | None = None
    parts: tuple[str | int, ...] = ()  # literal text (str) and group references
    names: frozenset[int] = field(default_factory=frozenset)  # indexes of named refs

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        # Kafka: matches() decides, then replaceAll() rewrites (the whole DN, normally).
        result = self.pattern.sub(self._expand, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def _expand(self, match: re.Match[str]) -> str:
        out: list[str] = []
        for index, part in enumerate(self.parts):
            if index in self.names or isinstance(part, int):
                out.append(match.group(part) or "")
            else:
                out.append(part)
        return "".join(out)

    def __str__(self) -> str:  # Kafka's Rule.toString
        if self.pattern_text is None:
            return "DEFAULT"
        case = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern_text}/{self.replacement_text}{case}"


_SPACE = " \t\n\x0b\f\r"


def _read_part(text: str, pos: int) -> tuple[str, int] | None:
    """Up to the next unescaped '/' (backslash escapes kept); None if there is none."""
    start = pos
    while pos < len(text):
        if text[pos] == "\\":
            pos += 2
        elif text[pos] == "/":
            return text[start:pos], pos + 1
        else:
            pos += 1
    return None


def _java_regex(pattern: str) -> str:
    """The few Java regex spellings Python writes differently: named groups."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("\\k<", i):
            close = pattern.find(">", i)
            if close > 0:
                out.append(f"(?P={pattern[i + 3:close]})")
                i = close + 1
                continue
        if pattern[i] == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if pattern.startswith("(?<", i) and i + 3 < len(pattern) and pattern[i + 3].isalpha():
            out.append("(?P<")
            i += 3
            continue
        out.append(pattern[i])
        i += 1
    return "".join(out)


def _compile_replacement(rule: str, text: str, pattern: re.Pattern[str]
                         ) -> tuple[tuple[str | int, ...], frozenset[int]]:
    """Java's replacement syntax: \\x is a literal x, $n a group (Java takes more digits
    while the number stays a valid group), ${name} a named group. As in Kafka, $n with n
    beyond the groups is literal text."""
    groups = pattern.groups
    parts: list[str | int] = []
    names: set[int] = set()
    literal: list[str] = []

    def flush() -> None:
        if literal:
            parts.append("".join(literal))
            literal.clear()

    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            if i + 1 == len(text):
                raise TlsConfigError(PRINCIPAL_MAPPING_RULES, f"invalid rule {rule}: the "
                                     "replacement ends with a lone backslash")
            literal.append(text[i + 1])
            i += 2
        elif ch == "$" and text.startswith("{", i + 1):
            close = text.find("}", i)
            name = text[i + 2:close] if close > 0 else ""
            if name not in pattern.groupindex:
                raise TlsConfigError(PRINCIPAL_MAPPING_RULES, f"invalid rule {rule}: no "
                                     f"group named {name!r}")
            flush()
            names.add(len(parts))
            parts.append(name)
            i = close + 1
        elif ch == "$" and i + 1 < len(text) and text[i + 1] in "0123456789":
            ref = int(text[i + 1])
            if ref > groups:
                literal.append("$")
                i += 1
                continue
            j = i + 2
            while j < len(text) and text[j] in "0123456789" and ref * 10 + int(text[j]) <= groups:
                ref = ref * 10 + int(text[j])
                j += 1
            flush()
            parts.append(ref)
            i = j
        elif ch == "$":
            raise TlsConfigError(PRINCIPAL_MAPPING_RULES, f"invalid rule {rule}: '$' must be "
                                 "followed by a group number or {name}; write \\$ for a $")
        else:
            literal.append(ch)
            i += 1
    flush()
    return tuple(parts), frozenset(names)


def _make_rule(source: str, pattern_text: str, replacement: str, case: str) -> _Rule:
    try:
        pattern = re.compile(_java_regex(pattern_text))
    except re.error as exc:
        raise TlsConfigError(PRINCIPAL_MAPPING_RULES, f"invalid rule {source}: bad pattern "
                             f"{pattern_text!r}: {exc}") from None
    parts, names = _compile_replacement(source, replacement, pattern)
    return _Rule(pattern_text, replacement, case, pattern, parts, names)


def parse_rules(rules: str | None) -> list[_Rule]:
    """Kafka's `ssl.principal.mapping.rules`: comma-separated `DEFAULT` and
    `RULE:pattern/replacement/[LU]` entries (whitespace around entries and empty entries
    are ignored; pattern and replacement may hold commas and `\\/`)."""
    text = (DEFAULT_RULES if rules is None else rules).strip(_SPACE)
    out: list[_Rule] = []
    pos = 0
    while pos < len(text):
        while pos < len(text) and text[pos] in _SPACE:
            pos += 1
        start = pos
        if text.startswith(",", pos):
            pos += 1
            continue
        if text.startswith("DEFAULT", pos):
            out.append(_Rule(None))
            pos += len("DEFAULT")
        elif text.startswith("RULE:", pos):
            first = _read_part(text, pos + len("RULE:"))
            second = _read_part(text, first[1]) if first else None
            if first is None or second is None:
                end = text.find(",", pos)
                raise TlsConfigError(PRINCIPAL_MAPPING_RULES, "invalid rule "
                                     f"{text[pos:end if end >= 0 else None]!r}: expected "
                                     "RULE:pattern/replacement/ with an optional L or U")
            pos = second[1]
            case = ""
            if pos < len(text) and text[pos] in "LU":
                case = text[pos]
                pos += 1
            out.append(_make_rule(text[start:pos], first[0], second[0], case))
        while pos < len(text) and text[pos] in _SPACE:
            pos += 1
        if pos < len(text):
            if text[pos] != ",":
                end = text.find(",", pos)
                bad = text[start:end if end >= 0 else None].strip(_SPACE)
                raise TlsConfigError(PRINCIPAL_MAPPING_RULES, f"invalid rule {bad!r}: "
                                     "expected DEFAULT or RULE:pattern/replacement/[LU]")
            pos += 1
    return out


class SslPrincipalMapper:
    """Maps a certificate's RFC 2253 DN to a principal name with Kafka's rules."""

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        self.rules = parse_rules(rules)

    @staticmethod
    def from_rules(rules: str | None) -> SslPrincipalMapper:
        """A parsed mapper, cached: connections share the listener's rules string."""
        return _cached_mapper(rules)

    def get_name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise PrincipalMappingError(f"No rules apply to {dn}, rules {self._names()}")

    def _names(self) -> str:
        return "[" + ", ".join(str(r) for r in self.rules) + "]"

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = {self._names()})"


@lru_cache(maxsize=64)
def _cached_mapper(rules: str | None) -> SslPrincipalMapper:
    return SslPrincipalMapper(rules)


def principal_from_certificate(peer_cert_der: bytes | None,
                               rules: str | None = DEFAULT_RULES) -> str:
    """The principal name (no "User:" prefix) of a TLS peer: ANONYMOUS without a client
    certificate, else the subject DN mapped by `ssl.principal.mapping.rules`.
    Raises PrincipalMappingError when no rule applies (Kafka fails that authentication)."""
    if not peer_cert_der:
        return ANONYMOUS.name
    return SslPrincipalMapper.from_rules(rules).get_name(distinguished_name(peer_cert_der))


def peer_principal(ssl_object: ssl.SSLObject | ssl.SSLSocket | None,
                   rules: str | None = DEFAULT_RULES) -> KafkaPrincipal:
    """The KafkaPrincipal of an established TLS connection (asyncio: the transport's
    "ssl_object" extra info)."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    return KafkaPrincipal(principal_from_certificate(der, rules))
