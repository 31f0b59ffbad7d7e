"""Read the Java key and trust stores a site provides (cp-ansible's ssl_custom_certs): a
PKCS12 file, or a JKS file (Java's own format, told apart by its magic number). A key
store gives its one private key with its certificate chain, a trust store its trusted
certificates. JKS protects a key with Sun's key protector (a SHA-1 keystream over the
password), which `cryptography` does not read, so it is undone here.
"""

from __future__ import annotations

import hashlib
import struct

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.hazmat.primitives.serialization import pkcs12

JKS_MAGIC = b"\xfe\xed\xfe\xed"
Entries = tuple[list[tuple[PrivateKeyTypes, list[x509.Certificate]]], list[x509.Certificate]]
PRIVATE_KEY_ENTRY = 1
TRUSTED_CERT_ENTRY = 2
INTEGRITY_WHITENER = b"Mighty Aphrodite"
_DIGEST = 20  # SHA-1


class StoreError(ValueError):
    """The store cannot be read: its format, its password or its content."""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise StoreError("the JKS file ends early")
        chunk = self.data[self.at:self.at + size]
        self.at += size
        return chunk

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def utf(self) -> str:
        (size,) = struct.unpack(">H", self.take(2))
        return self.take(size).decode("utf-8", "replace")


def _der_items(data: bytes) -> list[bytes]:
    """The contents of the elements of one DER SEQUENCE (enough for EncryptedPrivateKeyInfo)."""
    def header(at: int) -> tuple[int, int]:
        size = data[at + 1]
        if size < 0x80:
            return at + 2, size
        count = size & 0x7F
        return at + 2 + count, int.from_bytes(data[at + 2:at + 2 + count], "big")
    try:
        start, size = header(0)
        items, at = [], start
        while at < start + size:
            body, length = header(at)
            items.append(data[body:body + length])
            at = body + length
    except IndexError as exc:
        raise StoreError("a JKS key entry is not DER") from exc
    return items


def _unprotect_jks_key(protected: bytes, password: str) -> bytes:
    """PKCS#8 DER of a JKS key entry: salt, keystream-XORed key, SHA-1 check."""
    items = _der_items(protected)
    if len(items) != 2:
        raise StoreError("a JKS key entry is not an EncryptedPrivateKeyInfo")
    blob = items[1]
    salt, sealed, check = blob[:_DIGEST], blob[_DIGEST:-_DIGEST], blob[-_DIGEST:]
    secret = password.encode("utf-16-be")
    stream, digest = bytearray(), salt
    while len(stream) < len(sealed):
        digest = hashlib.sha1(secret + digest).digest()
        stream += digest
    plain = bytes(a ^ b for a, b in zip(sealed, stream[:len(sealed)], strict=True))
    if hashlib.sha1(secret + plain).digest() != check:
        raise StoreError("wrong key password for a JKS key entry")
    return plain


def _read_jks(data: bytes, password: str, key_password: str) -> Entries:
    body, digest = data[:-_DIGEST], data[-_DIGEST:]
    if hashlib.sha1(password.encode("utf-16-be") + INTEGRITY_WHITENER + body).digest() != digest:
        raise StoreError("wrong password (the JKS integrity check fails)")
    reader = _Reader(body)
    reader.take(4)
    version, count = reader.u32(), reader.u32()
    keys, trusted = [], []

    def certificate() -> x509.Certificate:
        if version == 2:
            reader.utf()  # the type, X.509
        return x509.load_der_x509_certificate(reader.take(reader.u32()))

    for _ in range(count):
        tag = reader.u32()
        reader.utf()  # alias
        reader.take(8)  # creation time
        if tag == PRIVATE_KEY_ENTRY:
            der = _unprotect_jks_key(reader.take(reader.u32()), key_password)
            key = serialization.load_der_private_key(der, password=None)
            keys.append((key, [certificate() for _ in range(reader.u32())]))
        elif tag == TRUSTED_CERT_ENTRY:
            trusted.append(certificate())
        else:
            raise StoreError(f"a JKS entry of kind {tag} (only keys and trusted certificates "
                             "are read; a JCEKS secret key is not)")
    return keys, trusted


def read_store(data: bytes, password: str, key_password: str | None = None) -> Entries:
    """The (key, chain) entries and the trusted certificates of a PKCS12 or JKS store."""
    if data[:4] == JKS_MAGIC:
        return _read_jks(data, password, key_password or password)
    try:
        store = pkcs12.load_pkcs12(data, password.encode())
    except ValueError as exc:
        raise StoreError("not a PKCS12 or JKS store, or a wrong password") from exc
    keys: list[tuple[PrivateKeyTypes, list[x509.Certificate]]] = []
    if store.key is not None:
        leaf = [store.cert.certificate] if store.cert is not None else []
        keys.append((store.key, leaf + _chain_after(store.cert, store.additional_certs)))
        return keys, []
    return keys, [c.certificate for c in store.additional_certs]


def _chain_after(leaf: pkcs12.PKCS12Certificate | None,
                 others: list[pkcs12.PKCS12Certificate]) -> list[x509.Certificate]:
    """A PKCS12 file does not keep its certificates in order: the issuers after the leaf,
    each the issuer of the one before; what does not fit the chain is left out."""
    pool = [c.certificate for c in others]
    chain: list[x509.Certificate] = []
    current = leaf.certificate if leaf is not None else None
    while current is not None and current.issuer != current.subject:
        issuer = next((c for c in pool if c.subject == current.issuer and c not in chain), None)
        if issuer is None:
            break
        chain.append(issuer)
        current = issuer
    return chain

