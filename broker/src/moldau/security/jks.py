"""Reading Java KeyStore (JKS) files: Kafka's default store type, still what many
operators' keytool commands write.

The format (Sun's JavaKeyStore, version 2, big-endian):

    magic 0xFEEDFEED, version, entry count
    per entry: tag (1 = private key, 2 = trusted certificate), alias (Java modified
      UTF-8 with a 2-byte length), creation time (ms)
      tag 1: the protected key (an EncryptedPrivateKeyInfo, length-prefixed), then the
             certificate chain: count, then per certificate its type and DER bytes
      tag 2: one certificate: type and DER bytes
    a SHA-1 digest of (password as UTF-16BE, "Mighty Aphrodite", everything above)

A private key is protected by Sun's key protector (OID 1.3.6.1.4.1.42.2.17.1.1): 20
bytes of salt, the PKCS#8 key XORed with a SHA-1 keystream (each block the digest of the
password and the previous block, starting from the salt), and a SHA-1 check of the
password and the plain key. JCEKS files (magic 0xCECECECE, Triple-DES protection) are
not read.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

MAGIC = b"\xfe\xed\xfe\xed"
PRIVATE_KEY_ENTRY = 1
TRUSTED_CERT_ENTRY = 2
_INTEGRITY_WHITENER = b"Mighty Aphrodite"
_KEY_PROTECTOR_OID = bytes.fromhex("060a2b060104012a02110101")  # DER of 1.3.6.1.4.1.42.2.17.1.1
_DIGEST = 20


class JksError(ValueError):
    """A JKS file that cannot be read: malformed, a wrong password, or an entry kind this
    reader does not know."""


@dataclass
class KeyEntry:
    alias: str
    protected: bytes  # EncryptedPrivateKeyInfo (DER)
    chain: list[x509.Certificate]  # leaf first

    def private_key(self, password: str) -> PrivateKeyTypes:
        """The key, unprotected with `password` (keytool's default: the store password)."""
        plain = _unprotect(_encrypted_data(self.protected), password)
        return serialization.load_der_private_key(plain, None)


@dataclass
class KeyStore:
    keys: list[KeyEntry] = field(default_factory=list)
    trusted: list[x509.Certificate] = field(default_factory=list)


def is_jks(data: bytes) -> bool:
    return data[:4] == MAGIC


def load(data: bytes, password: str | None) -> KeyStore:
    """Parse a JKS file. With a password its integrity digest is checked (a mismatch means
    a wrong password or a damaged file); without one the check is skipped, as Java does
    for a trust store opened without a password."""
    if len(data) < 12 + _DIGEST or not is_jks(data):
        raise JksError("not a JKS file")
    if password is not None:
        expected = hashlib.sha1(_password_bytes(password) + _INTEGRITY_WHITENER
                                + data[:-_DIGEST]).digest()
        if not hmac.compare_digest(expected, data[-_DIGEST:]):
            raise JksError("integrity check failed: wrong password or a damaged file")
    reader = _Reader(data[:-_DIGEST])
    reader.take(len(MAGIC))
    version = reader.u32()
    if version != 2:
        raise JksError(f"JKS version {version}; only version 2 (every JDK since 1.2) is read")
    store = KeyStore()
    for _ in range(reader.u32()):
        tag = reader.u32()
        alias = reader.utf()
        reader.take(8)  # creation time
        if tag == PRIVATE_KEY_ENTRY:
            protected = reader.take(reader.u32())
            chain = [reader.certificate() for _ in range(reader.u32())]
            store.keys.append(KeyEntry(alias, protected, chain))
        elif tag == TRUSTED_CERT_ENTRY:
            store.trusted.append(reader.certificate())
        else:
            raise JksError(f"entry {alias!r} has kind {tag} (a secret key?), which JKS "
                           "trust and key stores for TLS do not hold")
    if reader.remaining():
        raise JksError(f"{reader.remaining()} unexpected bytes after the last entry")
    return store


def _password_bytes(password: str) -> bytes:
    return password.encode("utf-16-be")  # Java chars, two bytes each


def _unprotect(protected: bytes, password: str) -> bytes:
    if len(protected) < 2 * _DIGEST:
        raise JksError("a protected key too short to hold its salt and check")
    salt, body, check = protected[:_DIGEST], protected[_DIGEST:-_DIGEST], protected[-_DIGEST:]
    secret = _password_bytes(password)
    stream = bytearray()
    block = salt
    while len(stream) < len(body):
        block = hashlib.sha1(secret + block).digest()
        stream += block
    plain = bytes(a ^ b for a, b in zip(body, stream, strict=False))
    if not hmac.compare_digest(hashlib.sha1(secret + plain).digest(), check):
        raise JksError("the key password does not open the private key")
    return plain


def _encrypted_data(info: bytes) -> bytes:
    """The encryptedData octets of an EncryptedPrivateKeyInfo protected by Sun's key
    protector: SEQUENCE { SEQUENCE { OID, NULL? }, OCTET STRING }."""
    outer = _Der(info)
    seq = _Der(outer.read(0x30))
    algorithm = seq.read(0x30)
    if not algorithm.startswith(_KEY_PROTECTOR_OID):
        raise JksError("the private key is not protected by Sun's JKS key protector")
    return seq.read(0x04)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise JksError("truncated file")
        chunk = self.data[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def u32(self) -> int:
        return struct.unpack(">I", self.take(4))[0]

    def utf(self) -> str:
        raw = self.take(struct.unpack(">H", self.take(2))[0])
        # Java's modified UTF-8 differs from UTF-8 only for NUL and supplementary
        # characters, which aliases and certificate types do not use.
        return raw.decode("utf-8", "replace")

    def certificate(self) -> x509.Certificate:
        kind = self.utf()
        der = self.take(self.u32())
        if kind != "X.509":
            raise JksError(f"a {kind} certificate; only X.509 is used for TLS")
        return x509.load_der_x509_certificate(der)

    def remaining(self) -> int:
        return len(self.data) - self.pos


class _Der:
    """Just enough DER to walk an EncryptedPrivateKeyInfo."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def read(self, tag: int) -> bytes:
        if self.pos + 2 > len(self.data) or self.data[self.pos] != tag:
            raise JksError("a malformed protected key")
        length = self.data[self.pos + 1]
        start = self.pos + 2
        if length & 0x80:
            count = length & 0x7F
            length = int.from_bytes(self.data[start:start + count], "big")
            start += count
        if start + length > len(self.data):
            raise JksError("a malformed protected key")
        self.pos = start + length
        return self.data[start:start + length]
