"""The certificates role's Java trust stores (roles/certificates/files/java_truststores.py):
the JDK's keytool lists the CA as a trusted certificate in both files, Moldau's own JKS
reader opens them, a second run changes nothing, a new CA rewrites them, and a wrong
password is caught by keytool's integrity check."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles" / "certificates" / "files" / "java_truststores.py"
sys.path.insert(0, str(REPO / "broker" / "tests"))

from tls_material import make_tls_material  # noqa: E402

from moldau.security import jks  # noqa: E402

PASSWORD = "changeit"
KEYTOOL = shutil.which("keytool")
pytestmark = pytest.mark.skipif(KEYTOOL is None, reason="keytool (default-jre-headless) is missing")


def run(ca: Path, out: Path, password: str = PASSWORD) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), str(ca), str(out)],
                          env=dict(os.environ, MOLDAU_TRUSTSTORE_PASSWORD=password),
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def keytool_list(store: Path, store_type: str, password: str = PASSWORD
                 ) -> subprocess.CompletedProcess[str]:
    assert KEYTOOL is not None
    return subprocess.run([KEYTOOL, "-list", "-keystore", str(store), "-storetype", store_type,
                           "-storepass", password], capture_output=True, text=True)


def test_keytool_trusts_the_ca_in_both_stores(tmp_path: Path) -> None:
    tls = make_tls_material(tmp_path / "pki")
    out = tmp_path / "out"
    out.mkdir()
    assert run(tls.ca_cert, out) == "changed"
    for name, store_type in (("truststore.jks", "JKS"), ("truststore.p12", "PKCS12")):
        listed = keytool_list(out / name, store_type)
        assert listed.returncode == 0, listed.stderr
        assert "1 entry" in listed.stdout and "trustedCertEntry" in listed.stdout, listed.stdout
    ca = x509.load_pem_x509_certificate(tls.ca_cert.read_bytes())
    store = jks.load((out / "truststore.jks").read_bytes(), PASSWORD)
    assert store.trusted == [ca]


def test_runs_are_idempotent_and_follow_a_new_ca(tmp_path: Path) -> None:
    first, second = make_tls_material(tmp_path / "a"), make_tls_material(tmp_path / "b")
    out = tmp_path / "out"
    out.mkdir()
    assert run(first.ca_cert, out) == "changed"
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert run(first.ca_cert, out) == "unchanged"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert run(second.ca_cert, out) == "changed"
    assert (out / "truststore.jks").read_bytes() != before["truststore.jks"]
    assert run(second.ca_cert, out, password="another") == "changed"
    wrong = keytool_list(out / "truststore.jks", "JKS", PASSWORD)
    assert wrong.returncode != 0 and "password" in (wrong.stdout + wrong.stderr).lower()
