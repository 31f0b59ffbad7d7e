"""SSL contexts from Kafka's `ssl.*` keys, and their reload at run time.

Settings are read through moldau.security.ssl_settings (`listener_settings()` applies the
`listener.name.<listener>.ssl.*` overrides); the key and trust stores are loaded by
moldau.security.stores.

What maps to what:

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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from moldau.security.ssl_settings import (
    ALLOW_DN_CHANGES,
    ALLOW_SAN_CHANGES,
    CIPHER_SUITES,
    CLIENT_AUTH,
    ENABLED_PROTOCOLS,
    ENDPOINT_IDENTIFICATION,
    KEYSTORE_CERTIFICATE_CHAIN,
    KEYSTORE_KEY,
    KEYSTORE_LOCATION,
    PROTOCOL,
    RECONFIGURABLE_KEYS,
    TRUSTSTORE_LOCATION,
    SslSettings,
    TlsConfigError,
    read_flag,
    read_list,
    read_text,
)
from moldau.security.stores import KeyMaterial, load_keystore, load_truststore
from moldau.security.x500 import distinguished_name

log = logging.getLogger(__name__)

DEFAULT_ENABLED_PROTOCOLS = ("TLSv1.2", "TLSv1.3")

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


# ---------------------------------------------------------------------------- key material


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


def _install_key_material(context: ssl.SSLContext, key: str, material: KeyMaterial) -> None:
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


def _enabled_versions(settings: SslSettings, client: bool) -> set[ssl.TLSVersion]:
    protocol = read_text(settings, PROTOCOL, "TLSv1.3") or "TLSv1.3"
    cap = _PROTOCOL_CAP.get(protocol.lower())
    if cap is None:
        raise TlsConfigError(PROTOCOL, f"unknown protocol {protocol}; use TLSv1.3 or TLSv1.2")
    names = read_list(settings, ENABLED_PROTOCOLS, DEFAULT_ENABLED_PROTOCOLS)
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


def _apply_ciphers(context: ssl.SSLContext, settings: SslSettings,
                   enabled: set[ssl.TLSVersion]) -> set[ssl.TLSVersion]:
    names = read_list(settings, CIPHER_SUITES, ())
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
                             f"{read_list(settings, ENABLED_PROTOCOLS, DEFAULT_ENABLED_PROTOCOLS)}")
    if tls12:
        context.set_ciphers(":".join(tls12))
    return enabled


def _configure(context: ssl.SSLContext, settings: SslSettings, client: bool) -> None:
    enabled = _apply_ciphers(context, settings, _enabled_versions(settings, client))
    context.minimum_version = min(enabled)
    context.maximum_version = max(enabled)


# ---------------------------------------------------------------------------- contexts


@dataclass(frozen=True)
class _Built:
    context: ssl.SSLContext
    keystore: KeyMaterial | None
    trusted: list[x509.Certificate] | None  # None = the system's default CAs


def _build(settings: SslSettings, server_side: bool) -> _Built:
    auth = "none"
    if server_side:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        auth = (read_text(settings, CLIENT_AUTH, "none") or "none").lower()
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
    material = load_keystore(settings)
    if material is not None:
        source = KEYSTORE_KEY if read_text(settings, KEYSTORE_KEY) else KEYSTORE_LOCATION
        _install_key_material(context, source, material)
    elif server_side:
        raise TlsConfigError(KEYSTORE_LOCATION, "an SSL listener needs a key store: set "
                             f"{KEYSTORE_LOCATION} (PKCS12 or PEM) or {KEYSTORE_KEY} and "
                             f"{KEYSTORE_CERTIFICATE_CHAIN}")
    trusted = load_truststore(settings)
    if trusted is not None:
        context.load_verify_locations(cadata=_trust_pem(trusted))
    elif server_side and auth != "none":
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    elif not server_side:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if server_side:
        context.verify_mode = _CLIENT_AUTH[auth]
    return _Built(context, material, trusted)


def build_server_context(settings: SslSettings) -> ssl.SSLContext:
    """The context of an SSL listener. Raises TlsConfigError naming the key to fix."""
    return _build(settings, server_side=True).context


def build_client_context(settings: SslSettings) -> ssl.SSLContext:
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

    def __init__(self, settings: SslSettings, *, server_side: bool = True) -> None:
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
    def settings(self) -> SslSettings:
        return dict(self._settings)

    def _switch(self, ssl_object: ssl.SSLObject | ssl.SSLSocket, _server_name: str | None,
                _context: ssl.SSLContext) -> None:
        current = self._built.context
        if current is not self._front:
            ssl_object.context = current

    def reload(self, settings: SslSettings) -> ssl.SSLContext:
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

    def check(self, settings: SslSettings) -> None:
        """Validate what `reload(settings)` would install, without installing it: raises
        TlsConfigError (the stores do not load, or the new certificate is not compatible
        with the current one). Kafka's SslFactory.validateReconfiguration, which runs
        before a dynamic listener update is accepted."""
        self._prepare(settings)

    def _prepare(self, settings: SslSettings) -> tuple[dict[str, object], _Built]:
        merged = dict(self._settings)
        for key in RECONFIGURABLE_KEYS | {ALLOW_DN_CHANGES, ALLOW_SAN_CHANGES}:
            if key in settings:
                merged[key] = settings[key]
        built = _build(merged, self._server_side)
        self._check_compatible(built, merged)
        return merged, built

    def _check_compatible(self, new: _Built, settings: SslSettings) -> None:
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
        if not read_flag(settings, ALLOW_DN_CHANGES):
            old_dn = distinguished_name(old_leaf.public_bytes(serialization.Encoding.DER))
            new_dn = distinguished_name(new_leaf.public_bytes(serialization.Encoding.DER))
            if old_dn.lower() != new_dn.lower():
                raise TlsConfigError(KEYSTORE_LOCATION, f"the new certificate's subject "
                                     f"{new_dn!r} differs from the current {old_dn!r}; set "
                                     f"{ALLOW_DN_CHANGES}=true to allow that")
        if not read_flag(settings, ALLOW_SAN_CHANGES):
            old_sans, new_sans = _subject_alt_names(old_leaf), _subject_alt_names(new_leaf)
            if old_sans != new_sans:
                raise TlsConfigError(KEYSTORE_LOCATION, f"the new certificate's "
                                     f"SubjectAltNames {sorted(new_sans)} differ from the "
                                     f"current {sorted(old_sans)}; set {ALLOW_SAN_CHANGES}="
                                     "true to allow that")

