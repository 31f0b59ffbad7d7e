"""The ACL pair's SSL listener and its certificates: principals from TLS client certificates.

One CA (made per lab, under `<lab>/acl-tls/`) signs the brokers' certificate (SAN 127.0.0.1
and localhost; both brokers of the pair share it) and the clients' (`CLIENTS`: the subject
of each, in encoding order, so the most specific attribute, CN, comes last and Java's
RFC 2253 name shows it first). A second CA of the same shape signs one client certificate
the brokers do not trust. Key stores are PKCS12 (Kafka's PEM key store files want an
encrypted key; both brokers and Kafka's client read PKCS12), the trust store the CA in a
PEM file.

The key store, the trust store and `ssl.client.auth=required` are the broker's own
settings. The `SSL` listener (the default protocol map's) maps names with its own
`listener.name.ssl.ssl.principal.mapping.rules` (Kafka reads every `ssl.*` key of a
listener with the listener prefix first): certificates of the `mapped` unit become their
lower-cased CN, every other one keeps its whole name (`DEFAULT`); the `STRICT` listener
(SSL too) has the first rule alone, so no rule maps the other names. Beside them a
`SASL_SSL` listener (SCRAM-SHA-256, and OAUTHBEARER with signed tokens:
compat/acl_oauth.py) has the same key store; the broker-wide `ssl.client.auth` does not
apply there (KIP-684), and its principal is the SASL login's even when the client sends a
certificate.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from compat.acl_setup import SASL_MECHANISM, SCRAM_LOGIN_MODULE, add_listener
from compat.acl_setup import client_properties as client_login
from moldau.devcluster.tls import self_signed_ca

if TYPE_CHECKING:
    from compat.acl_oauth import LabOAuth
    from compat.lab import KafkaBroker
    from moldau.devcluster.brokers import BrokerProcess

SSL_LISTENER = "SSL"
SASL_SSL_LISTENER = "SASL_SSL"
STRICT_LISTENER = "STRICT"  # SSL too, with rules that map the `mapped` unit alone
PKI_DIR = "acl-tls"  # under the lab's directory
STORE_PASSWORD = "lab-store-secret"
BROKER_HOSTS = ("127.0.0.1", "localhost")
MAPPED_RULE = "RULE:^CN=(.*?),OU=mapped,O=.*$/$1/L"
MAPPING_RULES = f"{MAPPED_RULE},DEFAULT"
_ATTRIBUTES = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME,
               "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "CN": NameOID.COMMON_NAME,
               "UID": NameOID.USER_ID, "EMAIL": NameOID.EMAIL_ADDRESS}
Subject = tuple[tuple[str, str], ...]
# Clients by name: their subjects, in encoding order.
CLIENTS: Mapping[str, Subject] = {
    "alice": (("O", "Acme"), ("CN", "alice")),
    # the mapping rule's: User:carol
    "carol": (("O", "Acme"), ("OU", "mapped"), ("CN", "Carol")),
    # characters RFC 2253 escapes (a comma, a plus, a leading '#'), and a type Java writes
    # as a dotted OID with its value in hex
    "dave": (("C", "DE"), ("O", "Acme, Inc."), ("OU", "#ops+dev"), ("CN", "dave")),
    "erin": (("O", "Acme"), ("EMAIL", "erin@acme.example"), ("CN", "erin")),
    "mallory": (("O", "Acme"), ("CN", "mallory")),  # no ACL names her
}
UNTRUSTED = "stranger"  # signed by a CA the brokers do not trust
_PEM = serialization.Encoding.PEM
# the clock of whichever machine checks a certificate may lag a little
_BACKDATE = datetime.timedelta(hours=1)
_VALIDITY = datetime.timedelta(days=30)


def _name(subject: Subject) -> x509.Name:
    return x509.Name([x509.NameAttribute(_ATTRIBUTES[key], value) for key, value in subject])


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    return self_signed_ca(_name((("O", "Moldau reference lab"), ("CN", common_name))),
                          _VALIDITY)


def _leaf(ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, subject: Subject,
          hosts: tuple[str, ...] = ()) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - _BACKDATE).not_valid_after(now + _VALIDITY)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
    if hosts:
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [_general_name(host) for host in hosts]), critical=False)
    builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _write_p12(path: Path, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate,
               ca: x509.Certificate) -> Path:
    path.write_bytes(pkcs12.serialize_key_and_certificates(
        path.stem.encode(), key, cert, [ca],
        serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class LabPki:
    """The files under `directory`; `create` writes them."""

    directory: Path

    @property
    def truststore(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def broker_keystore(self) -> Path:
        return self.directory / "broker.p12"

    def keystore(self, client: str) -> Path:
        return self.directory / f"{client}.p12"

    @classmethod
    def create(cls, directory: Path) -> LabPki:
        directory.mkdir(parents=True, exist_ok=True)
        pki = cls(directory)
        ca_key, ca_cert = _ca("Moldau reference lab CA")
        pki.truststore.write_bytes(ca_cert.public_bytes(_PEM))
        _write_p12(pki.broker_keystore,
                   *_leaf(ca_key, ca_cert, (("O", "Acme"), ("CN", "broker")), BROKER_HOSTS),
                   ca_cert)
        for client, subject in CLIENTS.items():
            _write_p12(pki.keystore(client), *_leaf(ca_key, ca_cert, subject), ca_cert)
        other_key, other_cert = _ca("A CA nobody trusts")
        _write_p12(pki.keystore(UNTRUSTED),
                   *_leaf(other_key, other_cert, (("O", "Acme"), ("CN", UNTRUSTED))), other_cert)
        return pki

    def broker_properties(self) -> dict[str, str]:
        """The TLS settings of both TLS listeners (the pair's others have no TLS), the
        SSL listener's mapping rules and the SASL_SSL listener's mechanism."""
        sasl_ssl = f"listener.name.{SASL_SSL_LISTENER.lower()}."
        return {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.broker_keystore),
            "ssl.keystore.password": STORE_PASSWORD,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.truststore),
            "ssl.client.auth": "required",
            f"listener.name.{SSL_LISTENER.lower()}.ssl.principal.mapping.rules": MAPPING_RULES,
            f"listener.name.{STRICT_LISTENER.lower()}.ssl.principal.mapping.rules": MAPPED_RULE,
            # OAUTHBEARER with signed tokens: compat/acl_oauth.py's settings
            sasl_ssl + "sasl.enabled.mechanisms": f"{SASL_MECHANISM},OAUTHBEARER",
            f"{sasl_ssl}{SASL_MECHANISM.lower()}.sasl.jaas.config":
                f"{SCRAM_LOGIN_MODULE} required;",
        }

    def client_properties(self, client: str | None) -> dict[str, str]:
        """A Java client's settings for the SSL listener, with `client`'s certificate
        (None: none)."""
        props = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                 "ssl.truststore.location": str(self.truststore)}
        if client is not None:
            props.update({"ssl.keystore.type": "PKCS12",
                          "ssl.keystore.location": str(self.keystore(client)),
                          "ssl.keystore.password": STORE_PASSWORD})
        return props

    def sasl_ssl_properties(self, user: str, client: str | None) -> dict[str, str]:
        """A Java client's settings for the SASL_SSL listener: `user`'s SCRAM login, and
        `client`'s certificate (None: none)."""
        return {**self.client_properties(client), **client_login(user),
                "security.protocol": SASL_SSL_LISTENER}


def add_tls_listeners(broker: KafkaBroker | BrokerProcess, pki: LabPki,
                      oauth: LabOAuth) -> None:
    """The SSL, STRICT and SASL_SSL listeners beside the broker's others (STRICT needs the
    protocol map, which then names every listener)."""
    for name in (SSL_LISTENER, STRICT_LISTENER, SASL_SSL_LISTENER):
        add_listener(broker, name)
    names = [listener.partition("://")[0]
             for listener in broker.properties["listeners"].split(",")]
    protocols = {name: "SSL" if name == STRICT_LISTENER else name for name in names}
    broker.properties = {**broker.properties, **pki.broker_properties(),
                         **oauth.broker_properties(SASL_SSL_LISTENER),
                         "listener.security.protocol.map":
                             ",".join(f"{name}:{protocol}" for name, protocol in protocols.items())}
