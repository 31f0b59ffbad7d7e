"""The four SCRAM messages (RFC 5802 section 7) with exactly the grammar Kafka's
ScramMessages accepts: gs2 header `n` only (no channel binding), ASCII names and values,
standard base64, optional reserved `m=` and `,key=value` extensions. Parse failures are
SaslMechanismError, which the broker answers with its generic message."""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from moldau.security.sasl.errors import SaslMechanismError

# Kafka's character classes, spelled without Java's `&&[^...]` intersections:
# 0x2C is ',' and 0x3D is '='.
_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"

_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})")
_SERVER_FIRST = re.compile(
    rf"{_RESERVED}r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),"
    rf"i=(?P<iterations>[0-9]+){_EXTENSIONS}")
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")
_SERVER_FINAL = re.compile(
    rf"(?:e=(?P<error>{_VALUE_SAFE}))|(?:v=(?P<signature>{_BASE64}){_EXTENSIONS})")

EXTENSION_NAME = re.compile(r"[A-Za-z]+")
EXTENSION_VALUE = re.compile(_VALUE)
TOKEN_AUTH_EXTENSION = "tokenauth"
_JAVA_INT_MAX = 2**31 - 1


def sasl_name(username: str) -> str:
    """A user name escaped for `n=` (ScramFormatter.saslName)."""
    return username.replace("=", "=3D").replace(",", "=2C")


def username_from_sasl_name(name: str) -> str:
    """The inverse of `sasl_name`; a `=` that starts neither =2C nor =3D is invalid."""
    unescaped_commas = name.replace("=2C", ",")
    if "=" in unescaped_commas.replace("=3D", ""):
        raise ValueError(f"Invalid username: {name}")
    return unescaped_commas.replace("=3D", "=")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)  # the grammar has checked the alphabet


def _decode(data: bytes) -> str:
    # Java decodes malformed UTF-8 to U+FFFD, which then fails the ASCII grammar.
    return data.decode("utf-8", "replace")


def parse_extensions(text: str) -> dict[str, str]:
    """`k=v,k=v` as Kafka's Utils.parseMap reads it (a later duplicate wins)."""
    extensions: dict[str, str] = {}
    for item in text.split(",") if text else ():
        key, _, value = item.partition("=")
        extensions[key] = value
    return extensions


def render_extensions(extensions: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in extensions.items())


def _frozen(mapping: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True)
class ClientFirstMessage:
    sasl_name: str  # escaped, as on the wire
    nonce: str
    authorization_id: str = ""  # as on the wire (Kafka compares it unescaped to the user)
    extensions: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extensions", _frozen(self.extensions))

    @classmethod
    def parse(cls, data: bytes) -> ClientFirstMessage:
        message = _decode(data)
        match = _CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise SaslMechanismError(f"Invalid SCRAM client first message format: {message}")
        return cls(sasl_name=match["saslname"], nonce=match["nonce"],
                   authorization_id=match["authzid"] or "",
                   extensions=parse_extensions(match["extensions"][1:]))

    @property
    def token_auth(self) -> bool:
        """The `tokenauth` extension, read as Java's Boolean.parseBoolean does."""
        return self.extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true"

    def bare(self) -> str:
        """client-first-message-bare as Kafka re-renders it for the AuthMessage: any
        reserved `m=` is dropped and the extensions come from the parsed map."""
        rendered = render_extensions(self.extensions)
        return f"n={self.sasl_name},r={self.nonce}" + (f",{rendered}" if rendered else "")

    def to_bytes(self) -> bytes:
        gs2_header = f"n,a={self.authorization_id}," if self.authorization_id else "n,,"
        return (gs2_header + self.bare()).encode("utf-8")


@dataclass(frozen=True)
class ServerFirstMessage:
    nonce: str  # the client's nonce followed by the server's
    salt: bytes
    iterations: int

    @classmethod
    def parse(cls, data: bytes) -> ServerFirstMessage:
        message = _decode(data)
        match = _SERVER_FIRST.fullmatch(message)
        if match is None:
            raise SaslMechanismError(f"Invalid SCRAM server first message format: {message}")
        iterations = int(match["iterations"])
        if iterations > _JAVA_INT_MAX:  # where Java's Integer.parseInt gives up
            raise SaslMechanismError(
                "Invalid SCRAM server first message format: invalid iterations")
        if iterations <= 0:
            raise SaslMechanismError(
                f"Invalid SCRAM server first message format: invalid iterations {iterations}")
        return cls(nonce=match["nonce"], salt=_unb64(match["salt"]), iterations=iterations)

    def render(self) -> str:
        return f"r={self.nonce},s={_b64(self.salt)},i={self.iterations}"

    def to_bytes(self) -> bytes:
        return self.render().encode("utf-8")


@dataclass(frozen=True)
class ClientFinalMessage:
    channel_binding: bytes
    nonce: str
    proof: bytes

    @classmethod
    def parse(cls, data: bytes) -> ClientFinalMessage:
        message = _decode(data)
        match = _CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise SaslMechanismError(f"Invalid SCRAM client final message format: {message}")
        return cls(channel_binding=_unb64(match["channel"]), nonce=match["nonce"],
                   proof=_unb64(match["proof"]))

    def without_proof(self) -> str:
        """As Kafka re-renders it for the AuthMessage (extensions dropped)."""
        return f"c={_b64(self.channel_binding)},r={self.nonce}"

    def to_bytes(self) -> bytes:
        return f"{self.without_proof()},p={_b64(self.proof)}".encode()


@dataclass(frozen=True)
class ServerFinalMessage:
    signature: bytes | None
    error: str | None = None

    @classmethod
    def parse(cls, data: bytes) -> ServerFinalMessage:
        message = _decode(data)
        match = _SERVER_FINAL.fullmatch(message)
        if match is None:
            raise SaslMechanismError(f"Invalid SCRAM server final message format: {message}")
        if match["error"] is not None:
            return cls(signature=None, error=match["error"])
        return cls(signature=_unb64(match["signature"]))

    def to_bytes(self) -> bytes:
        if self.error is not None:
            return f"e={self.error}".encode()
        assert self.signature is not None
        return f"v={_b64(self.signature)}".encode()


def auth_message(client_first: ClientFirstMessage, server_first: ServerFirstMessage,
                 client_final: ClientFinalMessage) -> bytes:
    """RFC 5802's AuthMessage, from the messages as Kafka renders them."""
    return ",".join((client_first.bare(), server_first.render(),
                     client_final.without_proof())).encode("utf-8")
