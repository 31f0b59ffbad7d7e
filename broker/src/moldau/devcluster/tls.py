"""The development cluster's TLS material: a small CA made once per cluster directory and
one broker certificate it signs, valid for 127.0.0.1 and localhost (every broker of the
dev cluster listens on 127.0.0.1, so they share it).

Layout of DIR/tls/:
    ca.pem                  the CA certificate: what clients trust (ssl.truststore.location)
    ca.key                  the CA's private key (mode 0600)
    broker-keystore.pem     the broker's key, certificate and the CA, as Kafka's PEM key
                            store file (ssl.keystore.type=PEM; mode 0600)

Existing files are kept: clients that already trust ca.pem keep working across `up`/`down`.
EC P-256 keys: fast to make, accepted by OpenSSL, librdkafka and the JVM.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .private_files import write_private_file

TLS_DIR = "tls"
CA_CERT_FILE = "ca.pem"
CA_KEY_FILE = "ca.key"
BROKER_KEYSTORE_FILE = "broker-keystore.pem"
BROKER_HOST_NAMES = ("127.0.0.1", "localhost")
CA_VALIDITY = datetime.timedelta(days=3650)
BROKER_VALIDITY = datetime.timedelta(days=825)  # the longest leaf lifetime clients accept
# Tolerates a clock that runs a little behind on whichever machine checks the certificate.
BACKDATE = datetime.timedelta(hours=1)
_PEM = serialization.Encoding.PEM


class DevTlsError(RuntimeError):
    """The TLS files of the dev cluster directory are unusable."""


@dataclass(frozen=True)
class DevTls:
    """Paths of the TLS files under `directory` (DIR/tls); `ensure()` creates them."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / CA_CERT_FILE

    @property
    def ca_key(self) -> Path:
        return self.directory / CA_KEY_FILE

    @property
    def broker_keystore(self) -> Path:
        return self.directory / BROKER_KEYSTORE_FILE

    @classmethod
    def under(cls, cluster_directory: Path) -> DevTls:
        return cls(cluster_directory / TLS_DIR)

    def ensure(self) -> None:
        """Create the CA unless it exists, then the broker's key store unless it exists."""
        if not self.ca_cert.exists() or not self.ca_key.exists():
            if self.broker_keystore.exists():
                raise DevTlsError(
                    f"{self.broker_keystore} exists but its CA ({self.ca_cert} and "
                    f"{self.ca_key}) is missing: remove {self.directory} to make a new CA")
            self._write_ca()
        if not self.broker_keystore.exists():
            self._write_broker_keystore()

    def broker_properties(self) -> dict[str, str]:
        """Kafka's broker settings for the key store (a PEM file; the key is unencrypted,
        protected by the file's mode, so no ssl.key.password)."""
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.broker_keystore)}

    def _write_ca(self) -> None:
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Moldau"),
                          x509.NameAttribute(NameOID.COMMON_NAME,
                                             "Moldau development cluster CA")])
        key, cert = self_signed_ca(name, CA_VALIDITY)
        # the key first: a CA certificate without its key could never sign the broker's
        write_private_file(self.ca_key, _unencrypted_pem(key))
        self.ca_cert.write_bytes(cert.public_bytes(_PEM))

    def _write_broker_keystore(self) -> None:
        ca_key = serialization.load_pem_private_key(self.ca_key.read_bytes(), None)
        if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
            raise DevTlsError(f"{self.ca_key} is not the EC key this module writes")
        ca_cert = x509.load_pem_x509_certificate(self.ca_cert.read_bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Moldau"),
                    x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
                .issuer_name(ca_cert.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - BACKDATE).not_valid_after(now + BROKER_VALIDITY)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.SubjectAlternativeName(_host_names()), critical=False)
                # a broker certificate also serves the broker's own client connections
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    ca_key.public_key()), critical=False)
                .sign(ca_key, hashes.SHA256()))
        write_private_file(self.broker_keystore, _unencrypted_pem(key)
                           + cert.public_bytes(_PEM) + ca_cert.public_bytes(_PEM))


def self_signed_ca(name: x509.Name, validity: datetime.timedelta
                   ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A new P-256 key and a self-signed CA certificate for it (signing certificates only,
    no intermediates below it), valid from BACKDATE ago for `validity`."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False),
                critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return key, cert


def _host_names() -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in BROKER_HOST_NAMES:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def _unencrypted_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
