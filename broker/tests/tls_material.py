"""Test certificates: a CA, a broker certificate and client certificates, in the forms
Kafka configurations and the real clients use. Generated with `cryptography` (EC P-256
keys: fast to make, accepted by OpenSSL, librdkafka and the JVM).

    material = make_tls_material(tmp_path)
    broker settings:  material.server_settings("PKCS12")       (Kafka ssl.* keys)
    confluent-kafka:  material.confluent_config()               (ssl.ca.location, ...)
    kafka-python:     material.kafka_python_config()            (ssl_cafile, ...)
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

STORE_PASSWORD = "store-secret"
KEY_PASSWORD = "key-secret"
SERVER_NAMES = ("localhost", "127.0.0.1")
# Subjects in encoding order (C first); Java prints them reversed: "CN=alice,OU=eng,...".
CLIENT_SUBJECT = (("C", "US"), ("O", "acme"), ("OU", "eng"), ("CN", "alice"))
SERVER_SUBJECT = (("C", "US"), ("O", "acme"), ("OU", "brokers"), ("CN", "broker"))
_OIDS = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME,
         "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "CN": NameOID.COMMON_NAME,
         "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME,
         "DC": NameOID.DOMAIN_COMPONENT, "EMAIL": NameOID.EMAIL_ADDRESS}
_PEM = serialization.Encoding.PEM


def java_dn(subject: tuple[tuple[str, str], ...]) -> str:
    """The RFC 2253 DN Java prints for a simple subject (no characters to escape)."""
    return ",".join(f"{k}={v}" for k, v in reversed(subject))


@dataclass(frozen=True)
class TlsMaterial:
    directory: Path
    ca_cert: Path  # PEM: the trust anchor for everything below
    ca_key: Path  # PEM, unencrypted (to issue more certificates with `issue`)
    server_key: Path  # PEM PKCS#8, unencrypted
    server_cert: Path  # PEM, leaf certificate (SAN localhost, 127.0.0.1)
    server_keystore_pem: Path  # Kafka's PEM key store file: key encrypted with key_password + cert
    server_p12: Path  # PKCS12 with store_password
    client_key: Path
    client_cert: Path
    client_p12: Path
    truststore_p12: Path  # the CA as a Java-style PKCS12 trust store, store_password
    jks: Path  # starts with JKS's magic bytes 0xFEEDFEED but is cut short (an error path)
    store_password: str = STORE_PASSWORD
    key_password: str = KEY_PASSWORD
    server_dn: str = java_dn(SERVER_SUBJECT)
    client_dn: str = java_dn(CLIENT_SUBJECT)

    # ---- ready-made configurations

    def server_settings(self, kind: str = "PKCS12", client_auth: str = "none") -> dict[str, str]:
        """Kafka `ssl.*` broker settings for the server certificate (PKCS12 or PEM files)."""
        if kind == "PKCS12":
            store = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.server_p12),
                     "ssl.keystore.password": self.store_password,
                     "ssl.truststore.type": "PKCS12",
                     "ssl.truststore.location": str(self.truststore_p12),
                     "ssl.truststore.password": self.store_password}
        elif kind == "PEM":
            store = {"ssl.keystore.type": "PEM",
                     "ssl.keystore.location": str(self.server_keystore_pem),
                     "ssl.key.password": self.key_password,
                     "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_cert)}
        else:
            raise ValueError(kind)
        return {**store, "ssl.client.auth": client_auth}

    def client_settings(self, with_cert: bool = True) -> dict[str, str]:
        """Kafka `ssl.*` client settings (PEM files) for build_client_context."""
        out = {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_cert)}
        if with_cert:
            out |= {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(self.client_p12),
                    "ssl.keystore.password": self.store_password}
        return out

    def confluent_config(self, with_cert: bool = True) -> dict[str, str]:
        """librdkafka (confluent-kafka) settings for security.protocol=SSL."""
        out = {"security.protocol": "SSL", "ssl.ca.location": str(self.ca_cert)}
        if with_cert:
            out |= {"ssl.certificate.location": str(self.client_cert),
                    "ssl.key.location": str(self.client_key)}
        return out

    def kafka_python_config(self, with_cert: bool = True) -> dict[str, object]:
        """kafka-python / aiokafka-style keyword arguments for security_protocol="SSL"."""
        out: dict[str, object] = {"security_protocol": "SSL", "ssl_cafile": str(self.ca_cert),
                                  "ssl_check_hostname": True}
        if with_cert:
            out |= {"ssl_certfile": str(self.client_cert), "ssl_keyfile": str(self.client_key)}
        return out

    # ---- more certificates from the same CA

    def issue(self, name: str, subject: tuple[tuple[str, str], ...],
              sans: tuple[str, ...] = (), *, server: bool = False) -> tuple[Path, Path]:
        """A new key + certificate (PEM files `<name>.key`, `<name>.crt`) signed by the CA."""
        ca_key = serialization.load_pem_private_key(self.ca_key.read_bytes(), None)
        ca_cert = x509.load_pem_x509_certificate(self.ca_cert.read_bytes())
        key, cert = _leaf(ca_key, ca_cert, subject, sans, server=server)
        return _write_pair(self.directory, name, key, cert)


def _name(subject: tuple[tuple[str, str], ...]) -> x509.Name:
    return x509.Name([x509.NameAttribute(_OIDS[k], v) for k, v in subject])


def _times() -> tuple[datetime.datetime, datetime.datetime]:
    now = datetime.datetime.now(datetime.UTC)
    return now - datetime.timedelta(hours=1), now + datetime.timedelta(days=30)


def _leaf(ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate,
          subject: tuple[tuple[str, str], ...], sans: tuple[str, ...], *, server: bool
          ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    start, end = _times()
    # a broker's certificate also serves its inter-broker client connections
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH] if server
              else [ExtendedKeyUsageOID.CLIENT_AUTH])
    builder = (x509.CertificateBuilder()
               .subject_name(_name(subject)).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    if sans:
        names: list[x509.GeneralName] = []
        for san in sans:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(san)))
            except ValueError:
                names.append(x509.DNSName(san))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password
        else serialization.NoEncryption())
    return key.private_bytes(_PEM, serialization.PrivateFormat.PKCS8, encryption)


def _write_pair(directory: Path, name: str, key: ec.EllipticCurvePrivateKey,
                cert: x509.Certificate) -> tuple[Path, Path]:
    key_path, cert_path = directory / f"{name}.key", directory / f"{name}.crt"
    key_path.write_bytes(_key_pem(key))
    key_path.chmod(0o600)
    cert_path.write_bytes(cert.public_bytes(_PEM))
    return key_path, cert_path


def _p12(path: Path, name: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate,
         ca: x509.Certificate) -> Path:
    path.write_bytes(pkcs12.serialize_key_and_certificates(
        name.encode(), key, cert, [ca],
        serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))
    return path


def make_tls_material(directory: Path | str) -> TlsMaterial:
    """Write a CA, a broker certificate (SAN localhost, 127.0.0.1) and a client
    certificate (CN=alice,OU=eng,O=acme,C=US) in PEM and PKCS12 forms to `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    start, end = _times()
    ca_name = _name((("O", "acme"), ("CN", "Moldau Test CA")))
    ca_cert = (x509.CertificateBuilder()
               .subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(start).not_valid_after(end)
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(
                   digital_signature=True, key_cert_sign=True, crl_sign=True,
                   content_commitment=False, key_encipherment=False, data_encipherment=False,
                   key_agreement=False, encipher_only=False, decipher_only=False),
                   critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                              critical=False)
               .sign(ca_key, hashes.SHA256()))
    ca_key_path, ca_cert_path = _write_pair(directory, "ca", ca_key, ca_cert)

    server_key, server_cert = _leaf(ca_key, ca_cert, SERVER_SUBJECT, SERVER_NAMES, server=True)
    server_key_path, server_cert_path = _write_pair(directory, "server", server_key, server_cert)
    keystore_pem = directory / "server-keystore.pem"
    keystore_pem.write_bytes(_key_pem(server_key, KEY_PASSWORD) + server_cert.public_bytes(_PEM))
    keystore_pem.chmod(0o600)

    client_key, client_cert = _leaf(ca_key, ca_cert, CLIENT_SUBJECT, (), server=False)
    client_key_path, client_cert_path = _write_pair(directory, "client", client_key, client_cert)

    truststore = directory / "truststore.p12"
    truststore.write_bytes(pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(ca_cert, b"ca")],
        serialization.BestAvailableEncryption(STORE_PASSWORD.encode())))
    jks = directory / "server.keystore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + b"\x00" * 64)
    return TlsMaterial(
        directory=directory, ca_cert=ca_cert_path, ca_key=ca_key_path,
        server_key=server_key_path, server_cert=server_cert_path,
        server_keystore_pem=keystore_pem,
        server_p12=_p12(directory / "server.p12", "broker", server_key, server_cert, ca_cert),
        client_key=client_key_path, client_cert=client_cert_path,
        client_p12=_p12(directory / "client.p12", "alice", client_key, client_cert, ca_cert),
        truststore_p12=truststore, jks=jks)


@dataclass(frozen=True)
class JksStores:
    keystore: Path  # the broker's key and chain (store_password, key_password)
    truststore: Path  # the CA as a trusted certificate entry (trust_password)
    store_password: str = "jks-store-secret"
    key_password: str = "jks-key-secret"  # differs from the store's, as keytool allows
    trust_password: str = "jks-trust-secret"


def make_jks_stores(tls: TlsMaterial) -> JksStores:
    """The broker's key store and the CA trust store as real JKS files, written by the
    JDK's keytool (as operators make them)."""
    keytool = shutil.which("keytool")
    if keytool is None:
        raise RuntimeError("keytool is missing: install default-jre-headless")
    stores = JksStores(tls.directory / "server.jks", tls.directory / "trust.jks")
    for path in (stores.keystore, stores.truststore):
        path.unlink(missing_ok=True)
    subprocess.run([keytool, "-importkeystore", "-noprompt",
                    "-srckeystore", str(tls.server_p12), "-srcstoretype", "PKCS12",
                    "-srcstorepass", tls.store_password,
                    "-destkeystore", str(stores.keystore), "-deststoretype", "JKS",
                    "-deststorepass", stores.store_password,
                    "-destkeypass", stores.key_password],
                   check=True, capture_output=True)
    subprocess.run([keytool, "-importcert", "-noprompt", "-alias", "ca",
                    "-file", str(tls.ca_cert), "-keystore", str(stores.truststore),
                    "-storetype", "JKS", "-storepass", stores.trust_password],
                   check=True, capture_output=True)
    return stores
