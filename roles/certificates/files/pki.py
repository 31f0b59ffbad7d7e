"""The cluster's certificate authority on the control node: make a CA, and issue or renew
a host's or client's key and certificate signed by it. Run by the certificates role with
Ansible's Python (it has `cryptography`):

    pki.py ca DIR STEM COMMON_NAME DAYS
        DIR/STEM.key and DIR/STEM.crt, a self-signed CA (EC P-384), unless STEM.crt exists:
        an existing CA is never replaced here (rotate-certificates.yml makes a new one)
    pki.py issue DIR CA_STEM NAME DAYS RENEW_DAYS [--force] SAN...
        DIR/NAME.key (EC P-256, PKCS#8) and DIR/NAME.crt (CN=NAME, the SANs in this order,
        serverAuth and clientAuth), signed by DIR/CA_STEM; SANs are "DNS:<name>" or
        "IP:<address>"

`issue` keeps what still fits: a key is made only when there is none, it is not a P-256
key or --force says so (a key in the traditional EC form is rewritten as PKCS#8, which
ZooKeeper's PEM key store needs, and kept); a certificate is issued only when there is
none, it does not match the key, its name, SANs or usages differ, the CA did not sign it
(how a CA rotation reaches every certificate), it ends within RENEW_DAYS, or the key is
new. The last line printed is "changed" or "unchanged", for the role's changed_when; the
line before says why. Key material is never printed.

One process issues a certificate, where Ansible's community.crypto modules took four
tasks of a second or more each, run one host after another: a CA rotation ran 76 of them
per stage.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import sys
import tempfile
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

HOST_CURVE = ec.SECP256R1
CA_CURVE = ec.SECP384R1
USAGES = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]


def write_atomically(path: Path, data: bytes, mode: int) -> None:
    """Replace path atomically with data, created with mode (never briefly wider); the
    trust stores (java_truststores.py) are written with it too."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def parse_san(text: str) -> x509.GeneralName:
    kind, _, value = text.partition(":")
    if kind == "DNS" and value:
        return x509.DNSName(value)
    if kind == "IP" and value:
        return x509.IPAddress(ipaddress.ip_address(value))
    raise ValueError(f"a SAN is DNS:<name> or IP:<address>, not {text!r}")


def make_ca(directory: Path, stem: str, common_name: str, days: int) -> tuple[bool, str]:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    tightened = directory.stat().st_mode & 0o777 != 0o700  # it holds the CA key
    if tightened:
        directory.chmod(0o700)
    cert_path = directory / f"{stem}.crt"
    if cert_path.exists():
        return tightened, f"the CA {cert_path} exists"
    key = ec.generate_private_key(CA_CURVE())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    now = _now()
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(ski, critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski),
                           critical=False)
            .sign(key, hashes.SHA256()))
    write_atomically(directory / f"{stem}.key", _key_pem(key), 0o600)
    write_atomically(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return True, f"made the CA {cert_path} ({common_name})"


def _load_key(path: Path, force: bool) -> tuple[ec.EllipticCurvePrivateKey, str | None]:
    """The key to certify, and why it was (re)written, or None when it was kept as is."""
    if not force:
        try:
            raw = path.read_bytes()
            key = serialization.load_pem_private_key(raw, password=None)
        except (OSError, ValueError, TypeError):
            pass
        else:
            if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, HOST_CURVE):
                if raw.lstrip().startswith(b"-----BEGIN PRIVATE KEY-----"):
                    if path.stat().st_mode & 0o777 != 0o600:
                        path.chmod(0o600)
                        return key, "key mode set to 0600"
                    return key, None
                write_atomically(path, _key_pem(key), 0o600)
                return key, "key rewritten as PKCS#8"
    key = ec.generate_private_key(HOST_CURVE())
    write_atomically(path, _key_pem(key), 0o600)
    return key, "new key"


def _stale(cert_path: Path, key: ec.EllipticCurvePrivateKey, name: str,
           sans: list[x509.GeneralName], ca: x509.Certificate, renew_days: int) -> str | None:
    """Why the certificate at cert_path must be issued again, or None when it fits."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    except (OSError, ValueError):
        return "no readable certificate"
    if cert.public_key() != key.public_key():
        return "the certificate is not of the key"
    if cert.subject != x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]):
        return "another subject name"
    try:
        held = list(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
        usages = list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        return "no SANs or usages"
    if held != sans:
        return "other SANs"
    if sorted(u.dotted_string for u in usages) != sorted(u.dotted_string for u in USAGES):
        return "other usages"
    if cert.issuer != ca.subject:
        return "issued by another CA"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "not signed by the CA"
    if cert.not_valid_after_utc - _now() < datetime.timedelta(days=renew_days):
        return f"ends within {renew_days} days"
    return None


def issue(directory: Path, ca_stem: str, name: str, days: int, renew_days: int,
          force: bool, san_texts: list[str]) -> tuple[bool, str]:
    sans = [parse_san(text) for text in san_texts]
    ca_key = serialization.load_pem_private_key((directory / f"{ca_stem}.key").read_bytes(),
                                                password=None)
    ca = x509.load_pem_x509_certificate((directory / f"{ca_stem}.crt").read_bytes())
    key, key_change = _load_key(directory / f"{name}.key", force)
    cert_path = directory / f"{name}.crt"
    why = "new key" if key_change == "new key" else _stale(cert_path, key, name, sans, ca,
                                                           renew_days)
    if why is None:
        return key_change is not None, key_change or f"{name}: key and certificate fit"
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{ca_stem}.key is not an EC key")
    now = _now()
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage(USAGES), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    write_atomically(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return True, f"{name}: certificate issued by {ca_stem} ({why})"


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["ca"] and len(argv) == 5:
            changed, why = make_ca(Path(argv[1]), argv[2], argv[3], int(argv[4]))
            print(why)
            return _finish(changed)
        if argv[:1] == ["issue"] and len(argv) >= 6:
            force = "--force" in argv[6:]
            sans = [a for a in argv[6:] if a != "--force"]
            changed, why = issue(Path(argv[1]), argv[2], argv[3], int(argv[4]), int(argv[5]),
                                 force, sans)
            print(why)
            return _finish(changed)
    except (OSError, ValueError) as exc:
        print(f"pki.py: {exc}", file=sys.stderr)
        return 1
    print(__doc__, file=sys.stderr)
    return 2


def _finish(changed: bool) -> int:
    print("changed" if changed else "unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
