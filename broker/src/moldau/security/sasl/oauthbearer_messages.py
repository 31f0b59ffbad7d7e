"""The OAUTHBEARER wire messages (RFC 7628) as Kafka's OAuthBearerClientInitialResponse
and OAuthBearerSaslServer write and read them.

The client's only message: `n,[a=<authzid>],` 0x01 `auth=Bearer <token>` 0x01, then zero or
more `<key>=<value>` 0x01 (SASL extensions; `auth` is reserved), then a final 0x01. A
server that refuses the token answers with a JSON error (`{"status":"invalid_token"}`),
the client replies with a lone 0x01, and only then does the server fail the exchange."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from moldau.security.sasl.errors import SaslMechanismError

SEPARATOR = "\x01"
CONTROL_A = b"\x01"  # the client's answer to the server's error
AUTH_KEY = "auth"
INVALID_MESSAGE = "Invalid OAUTHBEARER client first message"

# RFC 7628's saslname: US-ASCII but ',' and '=', which travel as =2C and =3D
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
EXTENSION_KEY = re.compile(_KEY)
EXTENSION_VALUE = re.compile(_VALUE)
_MESSAGE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{SEPARATOR}"
    rf"(?P<pairs>(?:{_KEY}={_VALUE}{SEPARATOR})*){SEPARATOR}")
# the token: RFC 6750's b64token as Kafka narrows it (no '+', '/', '=' or '~')
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)", re.ASCII)


@dataclass(frozen=True)
class ClientInitialResponse:
    token: str
    authorization_id: str = ""  # as sent: Kafka does not decode =2C / =3D
    extensions: Mapping[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        """The message as Kafka's client writes it."""
        check_extensions(self.extensions)
        authzid = f"a={self.authorization_id}" if self.authorization_id else ""
        pairs = "".join(f"{SEPARATOR}{k}={v}" for k, v in self.extensions.items())
        return (f"n,{authzid},{SEPARATOR}auth=Bearer {self.token}{pairs}"
                f"{SEPARATOR}{SEPARATOR}").encode()


def check_extensions(extensions: Mapping[str, str]) -> None:
    """Extension names and values as RFC 7628 §3.1 allows them (ValueError else)."""
    for name, value in extensions.items():
        if name == AUTH_KEY or not EXTENSION_KEY.fullmatch(name):
            raise ValueError(f"Extension name {name} is invalid")
        if not EXTENSION_VALUE.fullmatch(value):
            raise ValueError(f"Extension value ({value}) for extension {name} is invalid")


def parse_client_initial_response(message: bytes) -> ClientInitialResponse:
    """The client's message; SaslMechanismError (the client gets the generic text) when
    it is malformed, as Kafka's SaslException."""
    # Java decodes malformed UTF-8 to U+FFFD, which no pattern below accepts
    match = _MESSAGE.fullmatch(message.decode("utf-8", "replace"))
    if match is None:
        raise SaslMechanismError(INVALID_MESSAGE)
    properties: dict[str, str] = {}
    # Java's split drops the trailing empty piece after the last separator; a later
    # duplicate key wins, as in Kafka's HashMap
    for pair in match.group("pairs").split(SEPARATOR)[:-1]:
        key, _, value = pair.partition("=")
        properties[key] = value
    auth = properties.pop(AUTH_KEY, None)
    if auth is None:
        raise SaslMechanismError(f"{INVALID_MESSAGE}: 'auth' not specified")
    auth_match = _AUTH.fullmatch(auth)
    if auth_match is None:
        raise SaslMechanismError(f"{INVALID_MESSAGE}: invalid 'auth' format")
    scheme = auth_match.group("scheme")
    if scheme.lower() != "bearer":
        raise SaslMechanismError(f"Invalid scheme in OAUTHBEARER client first message: {scheme}")
    return ClientInitialResponse(auth_match.group("token"), match.group("authzid") or "",
                                 properties)


def error_json(status: str, scope: str | None = None,
               openid_configuration: str | None = None) -> str:
    """The server's RFC 7628 §3.2.2 error, spelled as Kafka spells it (the values are not
    escaped, and members after the first are separated by ", ")."""
    text = f'{{"status":"{status}"'
    if scope is not None:
        text += f', "scope":"{scope}"'
    if openid_configuration is not None:
        text += f', "openid-configuration":"{openid_configuration}"'
    return text + "}"
