"""The cluster CA as Java trust stores, for Java clients (Kafka's tools, Spark, Connect):
`truststore.p12` (PKCS12 whose entry carries Java's trusted-certificate attribute, what
keytool -importcert writes) and `truststore.jks` (Kafka's default type), next to the PEM
bundle. Run by the certificates role on the control node, with Ansible's Python:

    java_truststores.py CA_PEM OUT_DIR     (password in MOLDAU_TRUSTSTORE_PASSWORD)

A trust store's password guards its integrity, not secrecy. A file is rewritten only when
it no longer holds exactly these certificates under this password; the last line printed
is "changed" or "unchanged", for the role's changed_when.
"""

from __future__ import annotations

import hashlib
import os
import struct
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from pki import write_atomically  # beside this script: its directory is on sys.path

JKS_MAGIC = b"\xfe\xed\xfe\xed"
JKS_VERSION = 2
TRUSTED_CERT_ENTRY = 2
INTEGRITY_WHITENER = b"Mighty Aphrodite"
_SHA256 = hashes.SHA256()


def _utf(text: str) -> bytes:
    raw = text.encode("utf-8")  # aliases are ASCII: Java's modified UTF-8 is the same
    return struct.pack(">H", len(raw)) + raw


def jks_bytes(certificates: list[x509.Certificate], password: str) -> bytes:
    """A JKS trust store of `certificates` (aliases ca, ca-1, ...). Entry times are the
    certificates' notBefore, so the same input gives the same bytes."""
    body = bytearray(JKS_MAGIC + struct.pack(">II", JKS_VERSION, len(certificates)))
    for index, cert in enumerate(certificates):
        der = cert.public_bytes(serialization.Encoding.DER)
        created = int(cert.not_valid_before_utc.timestamp() * 1000)
        body += struct.pack(">I", TRUSTED_CERT_ENTRY) + _utf("ca" if index == 0 else f"ca-{index}")
        body += struct.pack(">q", created) + _utf("X.509") + struct.pack(">I", len(der)) + der
    digest = hashlib.sha1(password.encode("utf-16-be") + INTEGRITY_WHITENER + body).digest()
    return bytes(body) + digest


def _p12_holds(path: Path, certificates: list[x509.Certificate], password: str) -> bool:
    try:
        _key, cert, extra = pkcs12.load_key_and_certificates(path.read_bytes(),
                                                             password.encode())
    except (OSError, ValueError):
        return False
    held = ([cert] if cert is not None else []) + list(extra)
    return sorted(c.fingerprint(_SHA256) for c in held) == \
        sorted(c.fingerprint(_SHA256) for c in certificates)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    certificates = x509.load_pem_x509_certificates(Path(argv[0]).read_bytes())
    out = Path(argv[1])
    password = os.environ.get("MOLDAU_TRUSTSTORE_PASSWORD", "")
    if not password:
        print("MOLDAU_TRUSTSTORE_PASSWORD is empty: Java opens a trust store with a "
              "password (set certificates_truststore_password)", file=sys.stderr)
        return 2
    print("changed" if write_stores(certificates, out, password) else "unchanged")
    return 0


def write_stores(certificates: list[x509.Certificate], out: Path, password: str) -> bool:
    """OUT/truststore.jks and OUT/truststore.p12 of `certificates`; whether either was
    rewritten (also used by provided.py for a site's CA bundle)."""
    changed = False
    jks_path, jks = out / "truststore.jks", jks_bytes(certificates, password)
    if not jks_path.exists() or jks_path.read_bytes() != jks:
        write_atomically(jks_path, jks, 0o644)
        changed = True
    p12_path = out / "truststore.p12"
    if not _p12_holds(p12_path, certificates, password):
        write_atomically(p12_path, pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(c, b"ca" if i == 0 else f"ca-{i}".encode())
             for i, c in enumerate(certificates)],
            serialization.BestAvailableEncryption(password.encode())), 0o644)
        changed = True
    return changed

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
