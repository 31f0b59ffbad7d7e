"""How the nodes of a test or development ZooKeeper ensemble (zk_ensemble) secure their
client ports: TLS with client certificates (ZkServerTls) and SASL (ZkServerSasl) with
DIGEST-MD5 users or a Kerberos identity (ZkServerKerberos), as the zoo.cfg lines, the
server's JAAS `Server` section and the JVM flags Debian's ZooKeeper 3.8 reads them from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from moldau.security.sasl.jaas import DIGEST_LOGIN_MODULE, KRB5_LOGIN_MODULE, quote_jaas_value


@dataclass(frozen=True)
class ZkServerTls:
    """The key and trust stores of the secure client port (ZooKeeper's ssl.* settings;
    types PKCS12, PEM or JKS) and whether clients must show a certificate."""

    keystore: str
    truststore: str
    keystore_password: str | None = None
    truststore_password: str | None = None
    keystore_type: str = "PKCS12"
    truststore_type: str = "PKCS12"
    client_auth: str = "need"  # need, want or none

    def zoo_cfg_lines(self) -> list[str]:
        lines = [
            # ZooKeeper turns zoo.cfg keys it does not know into zookeeper.* system
            # properties, which is where it reads these from.
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
            "authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider",
            f"ssl.keyStore.location={self.keystore}",
            f"ssl.keyStore.type={self.keystore_type}",
            f"ssl.trustStore.location={self.truststore}",
            f"ssl.trustStore.type={self.truststore_type}",
            f"ssl.clientAuth={self.client_auth}",
        ]
        if self.keystore_password is not None:
            lines.append(f"ssl.keyStore.password={self.keystore_password}")
        if self.truststore_password is not None:
            lines.append(f"ssl.trustStore.password={self.truststore_password}")
        return lines


SASL_AUTH_PROVIDER = "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"


@dataclass(frozen=True)
class ZkServerKerberos:
    """ZooKeeper's Kerberos identity: its principal (`zookeeper/<host>@REALM`, the host as
    clients name it), the keytab holding its keys, and the krb5.conf naming the KDC."""

    principal: str
    keytab: str
    krb5_conf: str


@dataclass(frozen=True)
class ZkServerSasl:
    """SASL on the client ports: DIGEST-MD5 for the users ZooKeeper knows (name ->
    password, the `user_<name>` options of its JAAS `Server` section), or GSSAPI with
    `kerberos`; and whether a client must authenticate before anything else (`required`;
    otherwise SASL is optional and only the ACLs protect znodes)."""

    users: Mapping[str, str] = field(default_factory=dict)
    required: bool = True
    kerberos: ZkServerKerberos | None = None

    def zoo_cfg_lines(self) -> list[str]:
        # ZooKeeper turns unknown zoo.cfg keys into zookeeper.* system properties: these
        # are zookeeper.authProvider.sasl and zookeeper.enforce.auth.* (3.7+). Debian's
        # 3.8.0 honours them (and the older sessionRequireClientSASLAuth=true):
        # tests/cluster/test_zk_sasl.py checks an anonymous client is refused.
        lines = [f"authProvider.sasl={SASL_AUTH_PROVIDER}"]
        if self.kerberos is not None:
            # `kafka/broker1@REALM` and `kafka/broker2@REALM` both become `sasl:kafka`, so
            # every broker may change what the others created
            lines += ["kerberos.removeHostFromPrincipal=true",
                      "kerberos.removeRealmFromPrincipal=true"]
        if self.required:
            lines += ["enforce.auth.enabled=true", "enforce.auth.schemes=sasl"]
        return lines

    def jaas_text(self) -> str:
        """The server's JAAS file: its keytab login, or one DigestLoginModule listing every
        user."""
        if self.kerberos is not None:
            options = (f"useKeyTab=true storeKey=true useTicketCache=false "
                       f"keyTab={quote_jaas_value(self.kerberos.keytab)} "
                       f"principal={quote_jaas_value(self.kerberos.principal)}")
            return f"Server {{\n  {KRB5_LOGIN_MODULE} required {options};\n}};\n"
        users = "".join(f"\n    user_{name}={quote_jaas_value(password)}"
                        for name, password in self.users.items())
        return f"Server {{\n  {DIGEST_LOGIN_MODULE} required{users};\n}};\n"

    def jvm_flags(self, jaas_file: Path) -> list[str]:
        """The JAAS file (and krb5.conf) as zkServer.sh passes them in SERVER_JVMFLAGS."""
        flags = [f"-Djava.security.auth.login.config={jaas_file}"]
        if self.kerberos is not None:
            flags.append(f"-Djava.security.krb5.conf={self.kerberos.krb5_conf}")
        return flags

    def state(self) -> dict[str, object]:
        """For ensemble.json (without Kerberos: what DIGEST-MD5 ensembles always wrote)."""
        state: dict[str, object] = {"users": dict(self.users), "required": self.required}
        if self.kerberos is not None:
            state["kerberos"] = asdict(self.kerberos)
        return state

    @classmethod
    def from_state(cls, state: Mapping[str, object]) -> ZkServerSasl:
        kerberos = state.get("kerberos")
        users = state.get("users") or {}
        assert isinstance(users, dict)
        return cls(users=users, required=bool(state.get("required", True)),
                   kerberos=ZkServerKerberos(**kerberos) if isinstance(kerberos, dict)
                   else None)
