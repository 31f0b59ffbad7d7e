"""Kerberos (SASL GSSAPI) from a ZooKeeper client (the broker, the ZooKeeper-facing tools)
to ZooKeeper, as ZooKeeper's Java client runs it inside Kafka.

The JAAS `Client` section holds `Krb5LoginModule required useKeyTab=true keyTab="..."
principal="kafka/<host>@REALM"`; the JVM's system properties in KAFKA_OPTS say the rest:
`zookeeper.sasl.client.username` (the server principal's first part, `zookeeper` by
default), `zookeeper.sasl.client.canonicalize.hostname` (true by default: the server's
host is looked up and named by its canonical name), `zookeeper.server.realm` (by default
the client principal's realm), `zookeeper.server.principal` (the whole server principal,
overriding the three), and `java.security.krb5.conf`. So the client asks the KDC for
`zookeeper/<server host>@REALM`, as ZooKeeper's SaslServerPrincipal computes it.

The login is a keytab login kept fresh on Kafka's and ZooKeeper's schedule (80% of the
ticket's life plus up to 5% jitter, at least a minute apart): moldau.security's
KerberosLogin. Every SASL exchange (each new connection to a ZooKeeper server) takes the
current TGT. kazoo runs its SASL step through pure-sasl, whose GSSAPI needs the `kerberos`
package; Moldau registers its own pure-sasl mechanism instead, over the `gssapi` package
the broker's GSSAPI listeners already use.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import puresasl
import puresasl.mechanisms

from moldau.security.kerberos_login import KerberosLogin, KerberosLoginError, RenewalSettings
from moldau.security.sasl.errors import SaslIllegalStateError, SaslMechanismError
from moldau.security.sasl.gssapi import (
    GSSAPI_MECHANISM,
    GssapiClient,
    GssapiUnavailable,
    Krb5LoginOptions,
)

if TYPE_CHECKING:
    import gssapi

__all__ = ["KAZOO_GSSAPI", "ZkKerberosLogin"]

ZK_SASL_CLIENT_USERNAME = "zookeeper.sasl.client.username"
DEFAULT_ZK_SERVICE = "zookeeper"
ZK_CANONICALIZE_HOSTNAME = "zookeeper.sasl.client.canonicalize.hostname"
ZK_SERVER_REALM = "zookeeper.server.realm"
ZK_SERVER_PRINCIPAL = "zookeeper.server.principal"
KRB5_CONF_PROPERTY = "java.security.krb5.conf"
# The key of Moldau's mechanism in pure-sasl's registry: not "GSSAPI", which belongs to
# pure-sasl's own (pykerberos) mechanism when that is installed.
KAZOO_GSSAPI = "MOLDAU-GSSAPI"


def canonical_host(host: str) -> str:
    """The host's canonical name as Java's InetAddress.getCanonicalHostName gives it (the
    name its address resolves back to), or `host` when there is none."""
    try:
        address = socket.gethostbyname(host)
        name = socket.gethostbyaddr(address)[0]
    except OSError:
        return host
    return host if name == address else name


class ZkKerberosLogin:
    """The Kerberos identity a ZooKeeper client logs in with, and where it came from.
    `log_in()` (idempotent) logs in from the keytab and starts the refresh; `close()`
    stops the refresh."""

    def __init__(self, principal: str, keytab: str, context: str, jaas_file: str, *,
                 service_name: str = DEFAULT_ZK_SERVICE, server_principal: str | None = None,
                 server_realm: str | None = None, canonicalize: bool = True,
                 krb5_conf: str | None = None,
                 renewal: RenewalSettings | None = None) -> None:
        self.principal = principal
        self.keytab = keytab
        self.context = context
        self.jaas_file = jaas_file
        self.service_name = service_name
        self.server_principal = server_principal
        self.server_realm = server_realm
        self.canonicalize = canonicalize
        self.krb5_conf = krb5_conf
        self.renewal = renewal or RenewalSettings()
        self._login: KerberosLogin | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_jaas(cls, options: Mapping[str, str], properties: Mapping[str, str],
                  context: str, jaas_file: str) -> ZkKerberosLogin:
        """From a Krb5LoginModule entry's options and KAFKA_OPTS' system properties;
        ValueError says what is missing."""
        principal, keytab = Krb5LoginOptions.from_jaas(options).keytab_login()
        return cls(principal, keytab, context, jaas_file,
                   service_name=properties.get(ZK_SASL_CLIENT_USERNAME, DEFAULT_ZK_SERVICE),
                   server_principal=properties.get(ZK_SERVER_PRINCIPAL),
                   server_realm=properties.get(ZK_SERVER_REALM),
                   # Java's Boolean.parseBoolean: "true" in any case, anything else is false
                   canonicalize=properties.get(ZK_CANONICALIZE_HOSTNAME,
                                               "true").lower() == "true",
                   krb5_conf=properties.get(KRB5_CONF_PROPERTY))

    def __repr__(self) -> str:
        return f"ZkKerberosLogin({self.principal!r}, keytab={self.keytab!r})"

    # -- what the rest of the ZooKeeper client asks of a login -------------------------

    refusal_hint = "wrong principal or keytab, or no such server principal in the KDC?"

    def describe(self) -> str:
        return (f"SASL {GSSAPI_MECHANISM} as '{self.principal}' from keyTab {self.keytab} "
                f"(JAAS section '{self.context}' of {self.jaas_file})")

    def kazoo_options(self) -> dict[str, Any]:
        """KazooClient's `sasl_options` (a fresh dict: kazoo adds keys to it)."""
        return {"mechanism": KAZOO_GSSAPI, "service": self.service_name, "zk_login": self}

    def log_in(self) -> None:
        """Log in from the keytab (once) and keep the TGT fresh. KerberosLoginError names
        the JAAS section, the principal, the keytab and Kerberos' reason (a missing
        keytab, a principal it lacks or the KDC refuses, an unreachable KDC)."""
        with self._lock:
            if self._login is not None:
                return
            failed = (f"Could not login to Kerberos for ZooKeeper (JAAS section "
                      f"'{self.context}' of {self.jaas_file})")
            if self.krb5_conf is not None:
                if not os.path.isfile(self.krb5_conf):
                    raise KerberosLoginError(f"{failed}: -D{KRB5_CONF_PROPERTY}="
                                             f"{self.krb5_conf} in KAFKA_OPTS names no file")
                # as the JVM's system property: this process's Kerberos library reads it
                os.environ["KRB5_CONFIG"] = self.krb5_conf
            login = KerberosLogin(self.principal, self.keytab, self.renewal)
            try:
                login.login()
            except (KerberosLoginError, GssapiUnavailable) as exc:
                raise KerberosLoginError(f"{failed}: {exc}") from None
            login.start_refresh()
            self._login = login

    def close(self) -> None:
        with self._lock:
            login, self._login = self._login, None
        if login is not None:
            login.close()

    def credentials(self) -> gssapi.Credentials:
        """The current TGT (KerberosLoginError before log_in())."""
        login = self._login
        if login is None:
            raise KerberosLoginError(f"{self.principal} has not logged in to Kerberos")
        return login.initiator()

    def target_principal(self, host: str) -> str:
        """The ZooKeeper server's principal for a connection to `host`."""
        name = self.server_principal or (
            f"{self.service_name}/{canonical_host(host) if self.canonicalize else host}")
        if "@" in name:
            return name
        realm = self.server_realm or self.principal.rpartition("@")[2]
        return f"{name}@{realm}" if realm else name  # no realm: krb5.conf's default


class _KazooGssapi(puresasl.mechanisms.Mechanism):
    """pure-sasl's side of one exchange, made by kazoo for each connection with
    `sasl_options` from ZkKerberosLogin.kazoo_options (pure-sasl passes `zk_login`).
    Failures are pure-sasl's SASLError, which kazoo reports as a SASLException."""

    name = KAZOO_GSSAPI
    score = 100
    allows_anonymous = False
    uses_plaintext = False
    active_safe = True

    def __init__(self, sasl: Any, zk_login: ZkKerberosLogin, **props: Any) -> None:
        super().__init__(sasl)
        self.complete = False
        self._zk_login = zk_login
        self._client: GssapiClient | None = None  # made at the first step: it may fail

    def process(self, challenge: bytes | None = None) -> bytes | None:
        try:
            if self._client is None:
                login = self._zk_login
                self._client = GssapiClient(
                    login.service_name, login.credentials,
                    target_principal=login.target_principal(self.sasl.host))
            answer = self._client.evaluate(challenge or b"")
        except (SaslMechanismError, SaslIllegalStateError, KerberosLoginError) as exc:
            raise puresasl.SASLError(str(exc)) from None
        self.complete = self._client.complete
        return answer

    def dispose(self) -> None:
        self._client = None


puresasl.mechanisms.mechanisms[KAZOO_GSSAPI] = _KazooGssapi
