"""A site's own PKI for the scenario's provided-material path: a root and an issuing CA,
and for one host two certificates (the first, and the one that replaces it) with its
key, a key of another host, and the same identity as PKCS12 key and trust stores.

    site_pki.py DIR HOST ADDRESS    (store passwords: "site-ks" and "site-ts")

DIR/ca-bundle.pem (root, then issuing CA), DIR/HOST.crt (leaf, then issuing CA),
DIR/HOST-next.crt (a new certificate of the same key), DIR/HOST.key, DIR/other.key,
DIR/moldau-brokers.crt and .key (a client identity), DIR/HOST.p12 and DIR/truststore.p12.
"""

from __future__ import annotations

import datetime
import ipaddress
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

NOW = datetime.datetime.now(datetime.UTC)


def certificate(cn: str, key: ec.EllipticCurvePrivateKey,
                issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
                extensions: list[x509.ExtensionType]) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Example Site"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    builder = (x509.CertificateBuilder().subject_name(name)
               .issuer_name(issuer[0].subject if issuer else name).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(NOW - datetime.timedelta(hours=1))
               .not_valid_after(NOW + datetime.timedelta(days=400)))
    for extension in extensions:
        critical = isinstance(extension, x509.BasicConstraints)
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def main(directory: Path, host: str, address: str) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    root_key, issuing_key, host_key, other_key = (ec.generate_private_key(ec.SECP256R1())
                                                  for _ in range(4))
    root = certificate("Example Root CA", root_key, None, [x509.BasicConstraints(True, None)])
    issuing = certificate("Example Issuing CA", issuing_key, (root, root_key),
                          [x509.BasicConstraints(True, 0)])
    host_extensions: list[x509.ExtensionType] = [
        x509.BasicConstraints(False, None),
        x509.SubjectAlternativeName([x509.DNSName(host),
                                     x509.IPAddress(ipaddress.ip_address(address))]),
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])]
    leaf = certificate(host, host_key, (issuing, issuing_key), host_extensions)
    pem = serialization.Encoding.PEM
    issuing_pem = issuing.public_bytes(pem)
    (directory / "ca-bundle.pem").write_bytes(root.public_bytes(pem) + issuing_pem)
    (directory / f"{host}.crt").write_bytes(leaf.public_bytes(pem) + issuing_pem)
    renewed = certificate(host, host_key, (issuing, issuing_key), host_extensions)
    (directory / f"{host}-next.crt").write_bytes(renewed.public_bytes(pem) + issuing_pem)
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = certificate("moldau-brokers", client_key, (issuing, issuing_key), [
        x509.BasicConstraints(False, None),
        x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])])
    (directory / "moldau-brokers.crt").write_bytes(client.public_bytes(pem) + issuing_pem)
    for name, key in ((host, host_key), ("other", other_key), ("moldau-brokers", client_key)):
        (directory / f"{name}.key").write_bytes(key.private_bytes(
            pem, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    (directory / f"{host}.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        host.encode(), host_key, leaf, [issuing],
        serialization.BestAvailableEncryption(b"site-ks")))
    (directory / "truststore.p12").write_bytes(pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(root, b"root"), pkcs12.PKCS12Certificate(issuing, b"issuing")],
        serialization.BestAvailableEncryption(b"site-ts")))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
