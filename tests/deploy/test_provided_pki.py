"""The certificates role's checks of a site's own PKI (roles/certificates/files/provided.py),
run as the role runs it against real files: a test PKI (root, intermediate, host
certificates) made here with `cryptography`, and Java stores made by keytool. A good
chain passes and is written in the brokers' form (openssl verifies it); a swapped chain,
a key of another certificate, a missing SAN, a missing clientAuth and an expired
certificate each fail with the host and the variable named, and write nothing."""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "certificates" / "files" / "provided.py"
NOW = datetime.datetime.now(datetime.UTC)
BOTH = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
NAMES = ["--name", "b1", "--name", "10.0.0.1", "--name", "b1.example.com"]
Pair = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_cert(cn: str, issuer: Pair | None, *,
              ca: bool = False, sans: list[x509.GeneralName] | None = None,
              usages: list[x509.ObjectIdentifier] | None = None,
              days: tuple[int, int] = (-1, 365)) -> Pair:
    key = ec.generate_private_key(ec.SECP256R1())
    issuer_name, signer = (issuer[0].subject, issuer[1]) if issuer else (_name(cn), key)
    builder = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(NOW + datetime.timedelta(days=days[0]))
               .not_valid_after(NOW + datetime.timedelta(days=days[1]))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usages is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    return builder.sign(signer, hashes.SHA256()), key


def pem(*certs: x509.Certificate) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def key_pem(key: ec.EllipticCurvePrivateKey, password: bytes | None = None) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.BestAvailableEncryption(password) if password
                             else serialization.NoEncryption())


HOST_SANS: list[x509.GeneralName] = [x509.DNSName("b1"), x509.DNSName("*.example.com"),
                                     x509.IPAddress(ipaddress.ip_address("10.0.0.1"))]


@pytest.fixture(scope="module")
def site() -> dict[str, tuple[x509.Certificate, ec.EllipticCurvePrivateKey]]:
    root = make_cert("Site Root CA", None, ca=True, days=(-1, 3650))
    inter = make_cert("Site Issuing CA", root, ca=True, days=(-1, 1800))
    return {
        "root": root, "inter": inter,
        "good": make_cert("b1", inter, sans=HOST_SANS, usages=BOTH),
        "other": make_cert("b2", inter, sans=HOST_SANS, usages=BOTH),
        "no_san": make_cert("b1", inter, sans=HOST_SANS[:1], usages=BOTH),
        "server_only": make_cert("b1", inter, sans=HOST_SANS,
                                 usages=[ExtendedKeyUsageOID.SERVER_AUTH]),
        "expired": make_cert("b1", inter, sans=HOST_SANS, usages=BOTH, days=(-30, -1)),
        "ending": make_cert("b1", inter, sans=HOST_SANS, usages=BOTH, days=(-1, 10)),
        "client": make_cert("moldau-brokers", inter, usages=[ExtendedKeyUsageOID.CLIENT_AUTH]),
    }


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), "b1", *args], capture_output=True,
                          text=True, env=env)


def files(tmp_path: Path, site: dict, leaf: str, chain: list[str], key_of: str | None = None,
          password: bytes | None = None) -> list[str]:
    """The PEM options for a certificate file (leaf, then chain), its key and the bundle."""
    cert, _ = site[leaf]
    (tmp_path / "host.crt").write_bytes(pem(cert, *(site[c][0] for c in chain)))
    (tmp_path / "host.key").write_bytes(key_pem(site[key_of or leaf][1], password))
    (tmp_path / "ca.pem").write_bytes(pem(site["root"][0]))
    return ["--cert", str(tmp_path / "host.crt"), "--key", str(tmp_path / "host.key"),
            "--ca", str(tmp_path / "ca.pem")]


def test_a_good_chain_passes_and_is_written_as_the_brokers_read_it(tmp_path: Path,
                                                                   site: dict) -> None:
    out = tmp_path / "out"
    env = {"MOLDAU_TRUSTSTORE_PASSWORD": "changeit", "PATH": "/usr/bin:/bin"}
    done = run(*files(tmp_path, site, "good", ["inter"]), *NAMES, "--out", str(out), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["changed"]
    # the bundle as Java trust stores too (java_truststores.py's writer)
    trusted = pkcs12.load_pkcs12((out / "truststore.p12").read_bytes(), b"changeit")
    assert [c.certificate for c in trusted.additional_certs] == [site["root"][0]]
    assert (out / "truststore.jks").read_bytes()[:4] == b"\xfe\xed\xfe\xed"
    host_pem = (out / "b1.pem").read_text()
    # PKCS#8 (ZooKeeper's PEM key store reads no other form), then the leaf and its issuer
    assert host_pem.startswith("-----BEGIN PRIVATE KEY-----")
    assert host_pem.count("-----BEGIN CERTIFICATE-----") == 2
    assert (out / "b1.pem").stat().st_mode & 0o777 == 0o600
    assert (out / "ca-bundle.pem").read_bytes() == pem(site["root"][0])
    # openssl agrees: the chain verifies against the bundle for server and client use
    for purpose in ("sslserver", "sslclient"):
        subprocess.run(["openssl", "verify", "-CAfile", str(out / "ca-bundle.pem"),
                        "-untrusted", str(out / "b1.pem"), "-purpose", purpose,
                        str(out / "b1.pem")], check=True, capture_output=True)
    again = run(*files(tmp_path, site, "good", ["inter"]), *NAMES, "--out", str(out), env=env)
    assert again.stdout.splitlines() == ["unchanged"]
    assert "PRIVATE KEY" not in done.stdout + done.stderr


@pytest.mark.parametrize(("leaf", "chain", "key_of", "says"), [
    ("good", [], None, "the chain in certificates_provided_cert does not verify against "
                       "certificates_provided_ca: no CA there signed CN=b1"),
    ("inter", ["good"], "good", "certificates_provided_key is not the key of the certificate in "
                                "certificates_provided_cert (CN=Site Issuing CA): it is the key of "
                                "certificate 2 of the chain, which must come first"),
    ("good", ["root", "inter"], None, "the chain in certificates_provided_cert is not in order "
                                      "(the leaf, then each issuer): certificate 2 "
                                      "(CN=Site Root CA) did not sign certificate 1 (CN=b1)"),
    ("good", ["inter"], "other", "certificates_provided_key is not the key of the certificate in "
                                 "certificates_provided_cert (CN=b1): another key"),
    ("no_san", ["inter"], None, "has no SAN for 10.0.0.1, b1.example.com (it has: b1)"),
    ("server_only", ["inter"], None, "lacks the extended key usage clientAuth"),
    ("expired", ["inter"], None,
     "the certificate in certificates_provided_cert (CN=b1) expired on"),
])
def test_a_bad_certificate_fails_naming_host_and_variable(tmp_path: Path, site: dict, leaf: str,
                                                          chain: list[str], key_of: str | None,
                                                          says: str) -> None:
    out = tmp_path / "out"
    done = run(*files(tmp_path, site, leaf, chain, key_of), *NAMES, "--out", str(out))
    assert done.returncode == 1
    assert [line for line in done.stdout.splitlines()
            if line.startswith("ERROR b1: ") and says in line], done.stdout
    assert not out.exists()
    assert "PRIVATE KEY" not in done.stdout + done.stderr


def test_a_bundle_of_the_issuing_ca_alone_trusts_a_chain_up_to_the_root(tmp_path: Path,
                                                                         site: dict) -> None:
    options = files(tmp_path, site, "good", ["inter", "root"])
    (tmp_path / "ca.pem").write_bytes(pem(site["inter"][0]))
    done = run(*options, *NAMES)
    assert done.returncode == 0, done.stdout
    (tmp_path / "ca.pem").write_bytes(pem(make_cert("Another CA", None, ca=True)[0]))
    refused = run(*options, *NAMES)
    assert "does not verify against certificates_provided_ca: no CA there signed " \
           "CN=Site Root CA" in refused.stdout


def test_near_its_end_warns_and_passes(tmp_path: Path, site: dict) -> None:
    done = run(*files(tmp_path, site, "ending", ["inter"]), *NAMES, "--renew-days", "30")
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == "checked"
    assert ("WARNING b1: the certificate in certificates_provided_cert (CN=b1) ends on"
            in done.stdout)
    assert "within certificates_renew_days (30)" in done.stdout


def test_an_encrypted_key_with_its_password_and_a_separate_chain_file(tmp_path: Path,
                                                                      site: dict) -> None:
    options = files(tmp_path, site, "good", [], password=b"s3cret")
    (tmp_path / "chain.pem").write_bytes(pem(site["inter"][0]))
    both = [*options, "--chain", str(tmp_path / "chain.pem"), *NAMES]
    refused = run(*both)
    assert refused.returncode == 1
    assert "ERROR b1: certificates_provided_key (" in refused.stdout
    assert "certificates_provided_key_password" in refused.stdout
    done = run(*both, env={"MOLDAU_PROVIDED_KEY_PASSWORD": "s3cret", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout


def test_a_shared_client_identity_is_checked_and_written(tmp_path: Path, site: dict) -> None:
    (tmp_path / "client.crt").write_bytes(pem(site["client"][0], site["inter"][0]))
    (tmp_path / "client.key").write_bytes(key_pem(site["client"][1]))
    client = ["--client-cert", str(tmp_path / "client.crt"), "--client-key",
              str(tmp_path / "client.key"), "--client-name", "moldau-brokers"]
    out = tmp_path / "out"
    done = run(*files(tmp_path, site, "good", ["inter"]), *NAMES, *client, "--out", str(out))
    assert done.returncode == 0, done.stdout
    assert (out / "moldau-brokers.pem").stat().st_mode & 0o777 == 0o600
    (tmp_path / "client.key").write_bytes(key_pem(site["other"][1]))
    bad = run(*files(tmp_path, site, "good", ["inter"]), *NAMES, *client)
    assert "ERROR b1: certificates_provided_shared_client_key is not the key of the certificate " \
           "in certificates_provided_shared_client_cert (CN=moldau-brokers)" in bad.stdout


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, site: dict) -> Path:
    """PKCS12 key and trust stores of the good host certificate, and their JKS copies
    made by keytool (Java's own writer)."""
    tmp_path = tmp_path_factory.mktemp("stores")
    cert, key = site["good"]
    (tmp_path / "keystore.p12").write_bytes(pkcs12.serialize_key_and_certificates(
        b"b1", key, cert, [site["inter"][0]], serialization.BestAvailableEncryption(b"kspass")))
    (tmp_path / "truststore.p12").write_bytes(pkcs12.serialize_java_truststore(
        [pkcs12.PKCS12Certificate(site["root"][0], b"root")],
        serialization.BestAvailableEncryption(b"tspass")))
    if shutil.which("keytool") is None:
        pytest.skip("no keytool (a JDK) to write JKS stores")
    for name, password in (("keystore", "kspass"), ("truststore", "tspass")):
        subprocess.run(["keytool", "-importkeystore", "-srckeystore", str(tmp_path / f"{name}.p12"),
                        "-srcstoretype", "PKCS12", "-srcstorepass", password,
                        "-destkeystore", str(tmp_path / f"{name}.jks"), "-deststoretype", "JKS",
                        "-deststorepass", password, "-noprompt"], check=True, capture_output=True)
    return tmp_path


@pytest.mark.parametrize("kind", ["p12", "jks"])
def test_provided_key_and_trust_stores(stores: Path, site: dict, kind: str) -> None:
    env = {"MOLDAU_PROVIDED_KEYSTORE_PASSWORD": "kspass",
           "MOLDAU_PROVIDED_TRUSTSTORE_PASSWORD": "tspass", "PATH": "/usr/bin:/bin"}
    out = stores / f"out-{kind}"
    options = ["--keystore", str(stores / f"keystore.{kind}"),
               "--truststore", str(stores / f"truststore.{kind}"), *NAMES]
    done = run(*options, "--out", str(out), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    written = x509.load_pem_x509_certificates((out / "b1.pem").read_bytes())
    assert written == [site["good"][0], site["inter"][0]]
    key = serialization.load_pem_private_key((out / "b1.pem").read_bytes(), None)
    assert key.public_key() == site["good"][1].public_key()
    assert (out / "ca-bundle.pem").read_bytes() == pem(site["root"][0])
    wrong = run(*options, env={**env, "MOLDAU_PROVIDED_KEYSTORE_PASSWORD": "nope"})
    assert wrong.returncode == 1
    assert "ERROR b1: certificates_provided_keystore (" in wrong.stdout
    assert "certificates_provided_keystore_password" in wrong.stdout
