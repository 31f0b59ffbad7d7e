"""Key stores and trust stores from Kafka's `ssl.keystore.*` / `ssl.truststore.*` keys:
read, opened and checked (the key belongs to the first certificate of the chain).

* key stores: ``JKS`` (Kafka's default type; read by moldau.security.jks), ``PKCS12``
  and ``PEM`` (a PEM file by `ssl.keystore.location`, or Kafka's PEM-in-config form
  `ssl.keystore.key` + `ssl.keystore.certificate.chain`). Like Java 9+
  (keystore.type.compat), JKS and PKCS12 files load under either type. A JCEKS file gets
  an error with the keytool command that converts it. Same for trust stores
  (`ssl.truststore.*`).
  Moldau is more lenient than Kafka in one place: a PEM key store file may hold an
  unencrypted key (Kafka insists on `ssl.key.password`).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes, PublicKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

from moldau.security import jks
from moldau.security.ssl_settings import (
    KEY_PASSWORD,
    KEYSTORE_CERTIFICATE_CHAIN,
    KEYSTORE_KEY,
    KEYSTORE_LOCATION,
    KEYSTORE_PASSWORD,
    KEYSTORE_TYPE,
    TRUSTSTORE_CERTIFICATES,
    TRUSTSTORE_LOCATION,
    TRUSTSTORE_PASSWORD,
    TRUSTSTORE_TYPE,
    SslSettings,
    TlsConfigError,
    read_password,
    read_text,
)

log = logging.getLogger(__name__)

_JCEKS_MAGIC = b"\xce\xce\xce\xce"
_PEM_KEY = re.compile(rb"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----.*?-----END \1-----", re.S)


@dataclass(frozen=True)
class KeyMaterial:
    """The private key of a key store and its certificate chain."""

    key: PrivateKeyTypes
    chain: list[x509.Certificate]  # leaf first


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
             ) -> KeyMaterial:
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
            return KeyMaterial(entry.private_key(candidate), entry.chain)
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


def _public_der(public_key: PublicKeyTypes) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)


def _checked(key: str, material: KeyMaterial) -> KeyMaterial:
    if not material.chain:
        raise TlsConfigError(key, "the key store holds no certificate")
    if _public_der(material.key.public_key()) != _public_der(material.chain[0].public_key()):
        raise TlsConfigError(key, "the private key does not belong to the first "
                             "certificate of the chain (the chain must start with the "
                             "certificate of the key)")
    return material


def _load_pkcs12(pw_key: str, location: str, data: bytes, passwords: list[str | None]
                 ) -> tuple[PrivateKeyTypes | None, x509.Certificate | None,
                            list[x509.Certificate]]:
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


def load_keystore(settings: SslSettings) -> KeyMaterial | None:
    """The key and chain from the key store settings (Kafka's createKeystore rules)."""
    type_ = (read_text(settings, KEYSTORE_TYPE) or "JKS").upper()
    location = read_text(settings, KEYSTORE_LOCATION)
    password = read_password(settings, KEYSTORE_PASSWORD)
    key_password = read_password(settings, KEY_PASSWORD)
    inline_key = read_text(settings, KEYSTORE_KEY)
    inline_chain = read_text(settings, KEYSTORE_CERTIFICATE_CHAIN)
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
        return _checked(KEYSTORE_KEY, KeyMaterial(key, chain))
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
                        KeyMaterial(key, _pem_certificates(KEYSTORE_LOCATION, data)))
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
    stored_key, cert, extra = _load_pkcs12(KEYSTORE_PASSWORD, location, data, passwords)
    if stored_key is None or cert is None:
        raise TlsConfigError(KEYSTORE_LOCATION, f"{location} holds no private key entry "
                             "(is it a trust store?)")
    return _checked(KEYSTORE_LOCATION, KeyMaterial(stored_key, [cert, *extra]))


def load_truststore(settings: SslSettings) -> list[x509.Certificate] | None:
    """Trusted certificates, or None for the system's default CAs (Java's cacerts)."""
    type_ = (read_text(settings, TRUSTSTORE_TYPE) or "JKS").upper()
    location = read_text(settings, TRUSTSTORE_LOCATION)
    password = read_password(settings, TRUSTSTORE_PASSWORD)
    inline = read_text(settings, TRUSTSTORE_CERTIFICATES)
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
