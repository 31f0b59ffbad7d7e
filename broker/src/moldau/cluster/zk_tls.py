"""TLS to ZooKeeper: Kafka's `zookeeper.ssl.*` client settings for the broker's kazoo
session (the ACLs of `zookeeper.set.acl`, which a client certificate allows, are
zk_acls.py's).

The settings are read like the listeners' `ssl.*` ones (moldau.security.tls builds the
context: PKCS12 and PEM stores, protocols, cipher suites, host name checking), with
ZooKeeper's defaults: protocol TLSv1.2, and a store type taken from the file name when
`*.type` is unset (.pem = PEM, .p12/.pfx = PKCS12), as ZooKeeper's X509Util does.

kazoo builds its own SSL context from file names only, so the broker hands it a connection
handler that wraps each socket with the context built here instead. The broker's context
is rebuilt for a connection when its key or trust store files changed (StoreWatchingContext):
renewed certificates and a CA rotation reach ZooKeeper at the next reconnect, without a
broker restart.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import ssl
from collections.abc import Callable, Mapping

# Re-exported: the ACL policy lived here before SASL shared it.
from moldau.cluster.zk_acls import SET_ACL, acls_for, check_secure_acls
from moldau.cluster.zk_handler import PollingHandler
from moldau.security.ssl_settings import TlsConfigError
from moldau.security.tls import build_client_context

__all__ = ["ENABLE", "SET_ACL", "StoreWatchingContext", "TlsHandler", "acls_for",
           "check_secure_acls", "kazoo_options", "tls_context", "tls_settings"]

PREFIX = "zookeeper."
ENABLE = "zookeeper.ssl.client.enable"
# zookeeper.ssl.<name> -> the listener-style ssl.<name> key that moldau.security reads
_KEYS = ("keystore.location", "keystore.password", "keystore.type", "truststore.location",
         "truststore.password", "truststore.type", "protocol", "enabled.protocols",
         "cipher.suites", "endpoint.identification.algorithm")
_TYPE_BY_SUFFIX = {".pem": "PEM", ".p12": "PKCS12", ".pfx": "PKCS12", ".jks": "JKS"}
_SSL_KEY = re.compile(r"(?<![\w.])ssl\.")

log = logging.getLogger("moldau.cluster.zk_tls")

def tls_settings(values: Mapping[str, object]) -> dict[str, object] | None:
    """The `ssl.*` client settings for ZooKeeper, or None when
    `zookeeper.ssl.client.enable` is off. `values`: a broker's typed config values or a
    tool's properties."""
    if not _flag(values.get(ENABLE)):
        return None
    settings: dict[str, object] = {}
    for name in _KEYS:
        value = values.get(f"zookeeper.ssl.{name}")
        if value is not None:
            settings[f"ssl.{name}"] = value
    settings.setdefault("ssl.protocol", "TLSv1.2")
    for store in ("keystore", "truststore"):
        location = settings.get(f"ssl.{store}.location")
        if location and not settings.get(f"ssl.{store}.type"):
            path = str(location)
            suffix = "." + path.rsplit(".", 1)[-1].lower() if "." in path else ""
            settings[f"ssl.{store}.type"] = _TYPE_BY_SUFFIX.get(suffix, "JKS")
    return settings


def tls_context(values: Mapping[str, object]) -> ssl.SSLContext | None:
    """The client context for ZooKeeper's secure port, or None without TLS. Errors name the
    `zookeeper.ssl.*` key to fix."""
    settings = tls_settings(values)
    if settings is None:
        return None
    try:
        return build_client_context(settings)
    except TlsConfigError as exc:
        raise TlsConfigError(PREFIX + exc.key, _SSL_KEY.sub("zookeeper.ssl.", exc.reason)
                             ) from None


class StoreWatchingContext:
    """The ZooKeeper client context of a broker's settings, rebuilt when a store file
    changed since it was built (checked at each connection: they are rare). A rebuild
    that fails (a file half-written mid-rotation) keeps the last good context."""

    def __init__(self, values: Mapping[str, object], settings: Mapping[str, object],
                 context: ssl.SSLContext) -> None:
        self._values = dict(values)
        self._files = [str(settings[f"ssl.{store}.location"])
                       for store in ("keystore", "truststore")
                       if settings.get(f"ssl.{store}.location")]
        self._signature = self._stat()
        self.context = context

    @classmethod
    def of(cls, values: Mapping[str, object]) -> StoreWatchingContext | None:
        """None when `zookeeper.ssl.client.enable` is off; a TlsConfigError naming the
        key to fix when the stores do not load (a startup error)."""
        settings = tls_settings(values)
        context = tls_context(values)
        return None if settings is None or context is None else cls(values, settings, context)

    def _stat(self) -> tuple[tuple[int, int, int] | None, ...]:
        def one(path: str) -> tuple[int, int, int] | None:
            try:
                found = os.stat(path)
            except OSError:
                return None
            return found.st_ino, found.st_size, found.st_mtime_ns
        return tuple(one(path) for path in self._files)

    def __call__(self) -> ssl.SSLContext:
        signature = self._stat()
        if signature != self._signature:
            try:
                context = tls_context(self._values)
            except (TlsConfigError, OSError) as exc:
                log.warning("Keeping the previous ZooKeeper TLS context: the changed stores "
                            "do not load: %s", exc)
            else:
                assert context is not None
                self.context = context
                self._signature = signature
                log.info("ZooKeeper TLS stores changed: the next connections use them (%s)",
                         ", ".join(self._files))
        return self.context


def kazoo_options(values: Mapping[str, object]) -> dict[str, TlsHandler]:
    """KazooClient keyword arguments for a tool reading a broker's properties (or a
    `-zk-tls-config-file`): a TLS handler when `zookeeper.ssl.client.enable` is on."""
    context = tls_context(values)
    return {} if context is None else {"handler": TlsHandler(context)}


class TlsHandler(PollingHandler):
    """kazoo's threading handler (with poll_select) whose connections are TLS sockets
    from `context`; the last handshake failure is kept, for the error raised when no
    server can be reached."""

    def __init__(self, context: ssl.SSLContext | Callable[[], ssl.SSLContext]) -> None:
        """`context`: one for every connection, or a callable asked at each connection."""
        super().__init__()
        self.context_source = context if callable(context) else (lambda: context)
        self.last_error: str | None = None

    def create_connection(self, address: tuple[str, int], hostname: str | None = None,
                          timeout: float | None = None, **_kazoo_ssl_options: object
                          ) -> ssl.SSLSocket:
        plain = socket.create_connection(address, timeout)
        try:
            sock = self.context_source().wrap_socket(plain,
                                                     server_hostname=hostname or address[0])
        except (ssl.SSLError, ssl.CertificateError, OSError) as exc:
            plain.close()
            self.last_error = f"TLS handshake with {address[0]}:{address[1]} failed: {exc}"
            raise
        self.last_error = None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock


def _flag(value: object) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"
