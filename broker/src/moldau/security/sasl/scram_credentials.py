"""SCRAM credentials as Kafka stores them (ScramFormatter, ScramCredentialUtils): the
mechanisms, the derivation of a stored credential from a password (RFC 5802, no
SASLprep: the password's UTF-8 bytes), and the `salt=...,stored_key=...,server_key=...,
iterations=...` text of a `/config/users/<user>` entry."""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import secrets
from dataclasses import dataclass

MIN_ITERATIONS = 4096  # below this a stored credential is refused at login
MAX_ITERATIONS = 16384  # AlterUserScramCredentials refuses more
DEFAULT_ITERATIONS = 4096  # kafka-configs' when the value names none


class ScramMechanism(enum.Enum):
    """(Kafka's mechanism name, the admin API's type byte, the hash)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", 1, "sha256")
    SCRAM_SHA_512 = ("SCRAM-SHA-512", 2, "sha512")

    def __init__(self, mechanism_name: str, type_code: int, hash_name: str) -> None:
        self.mechanism_name = mechanism_name
        self.type_code = type_code
        self.hash_name = hash_name

    @classmethod
    def by_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)

    @classmethod
    def by_type(cls, code: int) -> ScramMechanism | None:
        return next((m for m in cls if m.type_code == code), None)

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.digest(key, data, self.hash_name)

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """Hi() of RFC 5802: PBKDF2 with this mechanism's HMAC."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")


SCRAM_MECHANISM_NAMES = tuple(m.mechanism_name for m in ScramMechanism)


class CredentialFormatError(ValueError):
    """A stored credential that is not Kafka's four `key=value` fields."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config_value(self) -> str:
        """ScramCredentialUtils.credentialToString: standard base64, with padding."""
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_config_value(cls, text: str) -> ScramCredential:
        """ScramCredentialUtils.credentialFromString: exactly the four fields."""
        fields: dict[str, str] = {}
        for item in text.split(","):
            key, sep, value = item.partition("=")
            if not sep:
                raise CredentialFormatError(f"Credentials not valid: '{item}' is not key=value")
            fields[key] = value
        if sorted(fields) != ["iterations", "salt", "server_key", "stored_key"]:
            raise CredentialFormatError(
                "Credentials not valid: expected salt, stored_key, server_key and iterations")
        try:
            return cls(salt=base64.b64decode(fields["salt"], validate=True),
                       stored_key=base64.b64decode(fields["stored_key"], validate=True),
                       server_key=base64.b64decode(fields["server_key"], validate=True),
                       iterations=int(fields["iterations"]))
        except (binascii.Error, ValueError) as exc:
            raise CredentialFormatError(f"Credentials not valid: {exc}") from None


def random_nonce() -> str:
    """ScramFormatter.secureRandomString: a 130-bit random integer in base 36."""
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if not value:
            return out


def random_salt() -> bytes:
    """What Kafka's tools salt with: the UTF-8 bytes of a random base-36 string."""
    return random_nonce().encode("ascii")


def credential_from_salted_password(mechanism: ScramMechanism, salted_password: bytes,
                                    salt: bytes, iterations: int) -> ScramCredential:
    """The stored credential of a salted password (AlterUserScramCredentials sends the
    salted password; the broker derives the keys)."""
    return ScramCredential(salt=salt,
                           stored_key=mechanism.hash(mechanism.client_key(salted_password)),
                           server_key=mechanism.server_key(salted_password),
                           iterations=iterations)


def derive_credential(mechanism: ScramMechanism, password: str, iterations: int,
                      salt: bytes | None = None) -> ScramCredential:
    """A stored credential for a password (a new random salt unless one is given)."""
    salt = random_salt() if salt is None else salt
    salted = mechanism.salted_password(password, salt, iterations)
    return credential_from_salted_password(mechanism, salted, salt, iterations)


def password_matches(mechanism: ScramMechanism, credential: ScramCredential,
                     password: str) -> bool:
    """Whether a stored credential was made from `password` (with its salt and
    iterations): how the playbooks keep a credential instead of re-salting it."""
    derived = derive_credential(mechanism, password, credential.iterations, credential.salt)
    return hmac.compare_digest(derived.stored_key, credential.stored_key)
