"""Checks of a host's key and certificate chain from the site's own PKI, made before the
certificates role installs them (provided.py runs them): the key is the certificate's,
the chain runs leaf first and each certificate is signed by the next, the last one is
signed by a CA of the bundle, the SANs cover the names the host is reached by, the
extended key usage allows what the host does, and nothing has expired. Each finding
names the host and the inventory variable to fix; no key material is ever in one.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID

SERVER_AND_CLIENT = (ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH)
CLIENT_ONLY = (ExtendedKeyUsageOID.CLIENT_AUTH,)
_USAGE_NAMES = {ExtendedKeyUsageOID.SERVER_AUTH: "serverAuth",
                ExtendedKeyUsageOID.CLIENT_AUTH: "clientAuth"}


@dataclass
class Identity:
    """A key with its certificate chain (leaf first), and the variables they came from."""
    key: PrivateKeyTypes
    chain: list[x509.Certificate]
    key_var: str
    chain_var: str


@dataclass
class Findings:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def describe(cert: x509.Certificate) -> str:
    return cert.subject.rfc4514_string() or f"serial {cert.serial_number:x}"


def _signed_by(cert: x509.Certificate, issuer: x509.Certificate) -> bool:
    if cert.issuer != issuer.subject:
        return False
    try:
        cert.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        return False


def name_covered(name: str, sans: x509.SubjectAlternativeName) -> bool:
    """Whether a SAN covers name, as a TLS client's hostname verification decides: an
    address against the IP SANs, a DNS name against the DNS SANs (a wildcard stands for
    exactly one leftmost label). The subject's CN is not looked at (RFC 6125)."""
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        wanted = name.rstrip(".").lower()
        for san in sans.get_values_for_type(x509.DNSName):
            pattern = san.rstrip(".").lower()
            if pattern == wanted:
                return True
            if pattern.startswith("*.") and "." in wanted \
                    and wanted.split(".", 1)[1] == pattern[2:]:
                return True
        return False
    return address in sans.get_values_for_type(x509.IPAddress)


def _check_dates(host: str, what: str, variable: str, cert: x509.Certificate,
                 now: datetime.datetime, renew_days: int, found: Findings) -> None:
    if cert.not_valid_after_utc <= now:
        found.errors.append(f"{host}: {what} in {variable} ({describe(cert)}) expired on "
                            f"{cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC")
    elif cert.not_valid_before_utc > now:
        found.errors.append(f"{host}: {what} in {variable} ({describe(cert)}) is not valid "
                            f"before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC")
    elif cert.not_valid_after_utc - now < datetime.timedelta(days=renew_days):
        found.warnings.append(f"{host}: {what} in {variable} ({describe(cert)}) ends on "
                              f"{cert.not_valid_after_utc:%Y-%m-%d} UTC, within "
                              f"certificates_renew_days ({renew_days}): provide a new one")


def check_bundle(host: str, bundle: list[x509.Certificate], bundle_var: str,
                 now: datetime.datetime, renew_days: int) -> Findings:
    found = Findings()
    if not bundle:
        found.errors.append(f"{host}: {bundle_var} holds no certificate")
    for cert in bundle:
        if not _is_ca(cert):
            found.errors.append(f"{host}: {bundle_var} holds {describe(cert)}, which is not a "
                                "CA certificate (basicConstraints CA:TRUE)")
        _check_dates(host, "the CA", bundle_var, cert, now, renew_days, found)
    return found


def check_identity(host: str, identity: Identity, bundle: list[x509.Certificate],
                   bundle_var: str, names: list[str], usages: tuple[x509.ObjectIdentifier, ...],
                   now: datetime.datetime, renew_days: int) -> Findings:
    """Every problem of one identity, against the CA bundle (checked by check_bundle)."""
    found = Findings()
    chain_var = identity.chain_var
    if not identity.chain:
        found.errors.append(f"{host}: {chain_var} holds no certificate")
        return found
    leaf = identity.chain[0]
    if leaf.public_key() != identity.key.public_key():
        holder = next((i for i, c in enumerate(identity.chain)
                       if c.public_key() == identity.key.public_key()), None)
        where = (f"it is the key of certificate {holder + 1} of the chain, which must come "
                 "first" if holder is not None else "another key")
        found.errors.append(f"{host}: {identity.key_var} is not the key of the certificate in "
                            f"{chain_var} ({describe(leaf)}): {where}")
    pairs = zip(identity.chain[:-1], identity.chain[1:], strict=True)
    for position, (cert, issuer) in enumerate(pairs, 1):
        if not _signed_by(cert, issuer):
            found.errors.append(
                f"{host}: the chain in {chain_var} is not in order (the leaf, then each "
                f"issuer): certificate {position + 1} ({describe(issuer)}) did not sign "
                f"certificate {position} ({describe(cert)})")
    # Trusted when a certificate of the chain is a CA of the bundle or signed by one (a
    # TLS peer stops at the first trust anchor; the order was checked above).
    if not any(cert == ca or _signed_by(cert, ca) for cert in identity.chain for ca in bundle):
        last = identity.chain[-1]
        found.errors.append(f"{host}: the chain in {chain_var} does not verify against "
                            f"{bundle_var}: no CA there signed {describe(last)} (issuer "
                            f"{last.issuer.rfc4514_string()})")
    for position, cert in enumerate(identity.chain):
        what = "the certificate" if position == 0 else f"chain certificate {position + 1}"
        _check_dates(host, what, chain_var, cert, now, renew_days, found)
    try:
        sans: x509.SubjectAlternativeName | None = \
            leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        sans = None
    missing = [name for name in names if sans is None or not name_covered(name, sans)]
    if missing:
        held = "" if sans is None else ", ".join(
            sans.get_values_for_type(x509.DNSName)
            + [str(a) for a in sans.get_values_for_type(x509.IPAddress)])
        found.errors.append(f"{host}: the certificate in {chain_var} ({describe(leaf)}) has no "
                            f"SAN for {', '.join(missing)} (it has: {held or 'none'}); the host "
                            "is reached by these names")
    try:
        held_usages = set(leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    except x509.ExtensionNotFound:
        held_usages = None  # no extended key usage: any use is allowed
    if held_usages is not None and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in held_usages:
        lacking = [_USAGE_NAMES[u] for u in usages if u not in held_usages]
        if lacking:
            found.errors.append(f"{host}: the certificate in {chain_var} ({describe(leaf)}) lacks "
                                f"the extended key usage {' and '.join(lacking)} (the host "
                                "both serves TLS and connects as a TLS client)"
                                if usages == SERVER_AND_CLIENT else
                                f"{host}: the certificate in {chain_var} ({describe(leaf)}) "
                                f"lacks the extended key usage {' and '.join(lacking)}")
    return found
