"""The certificates role's CA and issuer (roles/certificates/files/pki.py), run as the role
runs it: a CA is made once and never replaced; a certificate is issued when it is missing,
forced, for other SANs, from another CA or near its end, and kept otherwise; openssl
verifies what it issues; a bad SAN is an error that writes nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "certificates" / "files" / "pki.py"
SANS = ["DNS:b1", "IP:10.0.0.1", "DNS:localhost", "IP:127.0.0.1"]


def pki(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                          text=True, check=check)


def issue(directory: Path, *extra: str, ca: str = "ca", days: str = "365",
          sans: list[str] = SANS) -> list[str]:
    return pki("issue", str(directory), ca, "b1", days, "30", *extra, *sans).stdout.split("\n")


def serial(directory: Path) -> int:
    return x509.load_pem_x509_certificate((directory / "b1.crt").read_bytes()).serial_number


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    pki("ca", str(tmp_path / "pki"), "ca", "Moldau cluster CA", "3650")
    return tmp_path / "pki"


def test_the_ca_is_made_once(directory: Path) -> None:
    before = (directory / "ca.crt").read_bytes()
    again = pki("ca", str(directory), "ca", "Another name", "3650").stdout.split()
    assert again[-1] == "unchanged"
    assert (directory / "ca.crt").read_bytes() == before
    assert (directory / "ca.key").stat().st_mode & 0o777 == 0o600
    assert directory.stat().st_mode & 0o777 == 0o700
    text = subprocess.run(["openssl", "x509", "-in", str(directory / "ca.crt"), "-noout",
                           "-text"], capture_output=True, text=True, check=True).stdout
    assert "CA:TRUE" in text and "Certificate Sign, CRL Sign" in text


def test_issued_certificate_verifies_and_is_kept(directory: Path) -> None:
    first = issue(directory)
    assert first[-2] == "changed"
    subprocess.run(["openssl", "verify", "-CAfile", str(directory / "ca.crt"),
                    str(directory / "b1.crt")], check=True, capture_output=True)
    text = subprocess.run(["openssl", "x509", "-in", str(directory / "b1.crt"), "-noout",
                           "-subject", "-ext", "subjectAltName,extendedKeyUsage"],
                          capture_output=True, text=True, check=True).stdout
    assert "CN = b1" in text
    assert "DNS:b1, IP Address:10.0.0.1, DNS:localhost, IP Address:127.0.0.1" in text
    assert "TLS Web Server Authentication, TLS Web Client Authentication" in text
    assert (directory / "b1.key").read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert (directory / "b1.key").stat().st_mode & 0o777 == 0o600
    before = serial(directory)
    assert issue(directory)[-2] == "unchanged"
    assert serial(directory) == before


def test_reissued_for_new_sans_force_and_renewal(directory: Path) -> None:
    issue(directory)
    key = (directory / "b1.key").read_bytes()
    before = serial(directory)
    assert "other SANs" in issue(directory, sans=SANS[:1])[0]
    assert serial(directory) != before and (directory / "b1.key").read_bytes() == key
    assert "new key" in issue(directory, "--force", days="10", sans=SANS[:1])[0]
    assert (directory / "b1.key").read_bytes() != key
    assert "ends within 30 days" in issue(directory, sans=SANS[:1])[0]


def test_a_new_ca_reaches_the_certificate(directory: Path) -> None:
    issue(directory)
    pki("ca", str(directory), "ca-next", "Next CA", "3650")
    assert "issued by another CA" in issue(directory, ca="ca-next")[0]
    subprocess.run(["openssl", "verify", "-CAfile", str(directory / "ca-next.crt"),
                    str(directory / "b1.crt")], check=True, capture_output=True)


def test_a_traditional_key_becomes_pkcs8_and_is_kept(directory: Path) -> None:
    issue(directory)
    key = serialization.load_pem_private_key((directory / "b1.key").read_bytes(), None)
    (directory / "b1.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()))
    before = serial(directory)
    assert issue(directory)[:2] == ["key rewritten as PKCS#8", "changed"]
    assert (directory / "b1.key").read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert serial(directory) == before


def test_a_bad_san_writes_nothing(directory: Path) -> None:
    done = pki("issue", str(directory), "ca", "b1", "365", "30", "DNS:b1", "b1.example.com",
               check=False)
    assert done.returncode == 1
    assert "a SAN is DNS:<name> or IP:<address>, not 'b1.example.com'" in done.stderr
    assert not (directory / "b1.key").exists() and not (directory / "b1.crt").exists()
    assert "PRIVATE KEY" not in done.stdout + done.stderr
