"""A host's TLS material from the site's own PKI, checked and put in the form the brokers
and ZooKeeper read (the form the built-in CA gives them). Run by the certificates role on
the control node with Ansible's Python (it has `cryptography`):

    provided.py HOST [options]
      --cert FILE [--chain FILE] --key FILE --ca FILE     PEM: the certificate (with its
          chain after it, or the chain in --chain), its key, the CA bundle (one or more CAs)
      --keystore FILE --truststore FILE                   PKCS12 or JKS stores instead
      --client-cert FILE --client-key FILE --client-name NAME
                                                          the brokers' shared client identity
      --name NAME ...       a name the host is reached by (DNS name or address); its
                            certificate must have a SAN for each
      --usage server+client|client   what the host's certificate is for
      --renew-days N        warn when a certificate ends within N days
      --out DIR             when every check passes: DIR/HOST.pem (PKCS#8 key, then the
                            chain), DIR/ca-bundle.pem, DIR/NAME.pem of the client identity
                            and, with MOLDAU_TRUSTSTORE_PASSWORD, the bundle as Java trust
                            stores DIR/truststore.p12 and .jks (java_truststores.py)
    Passwords in the environment: MOLDAU_PROVIDED_KEY_PASSWORD (an encrypted PEM key, or a
    key store's key when it differs from the store's), MOLDAU_PROVIDED_KEYSTORE_PASSWORD,
    MOLDAU_PROVIDED_TRUSTSTORE_PASSWORD, MOLDAU_TRUSTSTORE_PASSWORD (the stores written).

Each problem is printed as "ERROR <host>: ..." naming the inventory variable to fix, each
warning as "WARNING ...", and the exit status is 1 when there is an error: then nothing is
written. The last line is "changed" or "unchanged" (--out) or "checked". Key material is
never printed.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from java_truststores import write_stores
from keystores import StoreError, read_store  # beside this script, on sys.path
from pki import write_atomically
from pki_checks import (
    CLIENT_ONLY,
    SERVER_AND_CLIENT,
    Findings,
    Identity,
    check_bundle,
    check_identity,
)

# The inventory variable behind each option, for the messages.
VARIABLES = {
    "cert": "certificates_provided_cert", "chain": "certificates_provided_chain",
    "key": "certificates_provided_key", "ca": "certificates_provided_ca",
    "keystore": "certificates_provided_keystore", "truststore": "certificates_provided_truststore",
    "client_cert": "certificates_provided_shared_client_cert",
    "client_key": "certificates_provided_shared_client_key",
}


class Unreadable(Exception):
    """An input that cannot be read at all: the message names host and variable."""


def _read(host: str, option: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise Unreadable(f"{host}: {VARIABLES[option]} ({path}) cannot be read: "
                         f"{exc.strerror}") from exc


def _certificates(host: str, option: str, path: str) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(_read(host, option, path))
    except ValueError as exc:
        raise Unreadable(f"{host}: {VARIABLES[option]} ({path}) holds no PEM "
                         "certificate") from exc


def _pem_identity(host: str, cert: str, chain: str | None, key: str,
                  cert_option: str, key_option: str) -> Identity:
    certificates = _certificates(host, cert_option, cert)
    if chain:
        certificates += _certificates(host, "chain", chain)
    password = os.environ.get("MOLDAU_PROVIDED_KEY_PASSWORD") or None
    try:
        private = serialization.load_pem_private_key(
            _read(host, key_option, key), password.encode() if password else None)
    except (ValueError, TypeError) as exc:
        hint = (" or certificates_provided_key_password is wrong" if password else
                " (an encrypted one needs certificates_provided_key_password)")
        raise Unreadable(f"{host}: {VARIABLES[key_option]} ({key}) is not a PEM private "
                         f"key{hint}") from exc
    chain_var = VARIABLES[cert_option] + (f" + {VARIABLES['chain']}" if chain else "")
    return Identity(private, certificates, VARIABLES[key_option], chain_var)


def _store_identity(host: str, path: str) -> Identity:
    password = os.environ.get("MOLDAU_PROVIDED_KEYSTORE_PASSWORD", "")
    try:
        keys, _trusted = read_store(_read(host, "keystore", path), password,
                                    os.environ.get("MOLDAU_PROVIDED_KEY_PASSWORD") or None)
    except (StoreError, ValueError) as exc:
        raise Unreadable(f"{host}: certificates_provided_keystore ({path}): {exc} "
                         "(certificates_provided_keystore_password)") from exc
    if len(keys) != 1:
        raise Unreadable(f"{host}: certificates_provided_keystore ({path}) holds {len(keys)} "
                         "private keys; it must hold exactly this host's one")
    variable = VARIABLES["keystore"]
    return Identity(keys[0][0], keys[0][1], variable, variable)


def _store_bundle(host: str, path: str) -> list[x509.Certificate]:
    password = os.environ.get("MOLDAU_PROVIDED_TRUSTSTORE_PASSWORD", "")
    try:
        _keys, trusted = read_store(_read(host, "truststore", path), password)
    except (StoreError, ValueError) as exc:
        raise Unreadable(f"{host}: certificates_provided_truststore ({path}): {exc} "
                         "(certificates_provided_truststore_password)") from exc
    return trusted


def _pem(identity: Identity) -> bytes:
    key = identity.key.private_bytes(serialization.Encoding.PEM,
                                     serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())
    return key + b"".join(c.public_bytes(serialization.Encoding.PEM) for c in identity.chain)


def _write(path: Path, data: bytes, mode: int) -> bool:
    if path.exists() and path.read_bytes() == data and path.stat().st_mode & 0o777 == mode:
        return False
    write_atomically(path, data, mode)
    return True


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="provided.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("host")
    for option in ("cert", "chain", "key", "ca", "keystore", "truststore", "client-cert",
                   "client-key", "client-name", "out"):
        parser.add_argument(f"--{option}")
    parser.add_argument("--name", action="append", default=[])
    parser.add_argument("--usage", choices=["server+client", "client"], default="server+client")
    parser.add_argument("--renew-days", type=int, default=30)
    return parser


def run(args: argparse.Namespace, now: datetime.datetime) -> tuple[Findings, bool | None]:
    """The findings, and whether --out changed (None: not written)."""
    host = args.host
    if args.keystore:
        identity = _store_identity(host, args.keystore)
        bundle, bundle_var = _store_bundle(host, args.truststore), VARIABLES["truststore"]
    else:
        identity = _pem_identity(host, args.cert, args.chain, args.key, "cert", "key")
        bundle, bundle_var = _certificates(host, "ca", args.ca), VARIABLES["ca"]
    usage = SERVER_AND_CLIENT if args.usage == "server+client" else CLIENT_ONLY
    found = check_bundle(host, bundle, bundle_var, now, args.renew_days)
    more = check_identity(host, identity, bundle, bundle_var, args.name, usage, now,
                          args.renew_days)
    found.errors += more.errors
    found.warnings += more.warnings
    client = None
    if args.client_cert:
        client = _pem_identity(host, args.client_cert, None, args.client_key,
                               "client_cert", "client_key")
        more = check_identity(host, client, bundle, bundle_var, [], CLIENT_ONLY, now,
                              args.renew_days)
        found.errors += more.errors
        found.warnings += more.warnings
    if found.errors or not args.out:
        return found, None
    out = Path(args.out)
    for directory in reversed([out, *out.parents]):  # private: the key is written there
        if not directory.exists():
            directory.mkdir(mode=0o700)
    changed = _write(out / f"{host}.pem", _pem(identity), 0o600)
    bundle_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in bundle)
    changed = _write(out / "ca-bundle.pem", bundle_pem, 0o644) or changed
    store_password = os.environ.get("MOLDAU_TRUSTSTORE_PASSWORD", "")
    if store_password:
        changed = write_stores(bundle, out, store_password) or changed
    if client is not None:
        changed = _write(out / f"{args.client_name}.pem", _pem(client), 0o600) or changed
    return found, changed


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    pem_inputs = args.cert and args.key and args.ca
    if not (pem_inputs or (args.keystore and args.truststore)) or \
            (args.client_cert and not (args.client_key and args.client_name)):
        print(__doc__, file=sys.stderr)
        return 2
    now = datetime.datetime.now(datetime.UTC)
    try:
        found, changed = run(args, now)
    except Unreadable as exc:
        print(f"ERROR {exc}")
        return 1
    for warning in found.warnings:
        print(f"WARNING {warning}")
    for error in found.errors:
        print(f"ERROR {error}")
    if found.errors:
        return 1
    print("checked" if changed is None else ("changed" if changed else "unchanged"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
