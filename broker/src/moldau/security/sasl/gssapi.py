"""SASL/GSSAPI with Kerberos V5 (RFC 4752), as Kafka's brokers and clients run it through
the JDK's GSSAPI mechanism, over the `gssapi` package (MIT krb5's libgssapi).

The exchange: the client's GSS-API context tokens (an AP-REQ for `<service>/<broker host>`)
and the server's answers until the context is established (the server's AP-REP, then an
empty client token); then the server sends a *wrapped* 4 octets, the security layers it
offers (a bit mask) and the largest message it takes; the client answers with a wrapped
choice, the size it takes and an optional authorization id. Kafka offers only "no
security layer" (its traffic is protected by TLS or not at all), ignores the client's
authorization id (the Kerberos principal authenticated is the identity) and maps that
principal to a short name with `sasl.kerberos.principal.to.local.rules`: `alice@REALM`
becomes `User:alice`.

Every server failure is a SaslMechanismError, so the client gets Kafka's generic text; the
Kerberos reason is for the broker's log. The `gssapi` package is imported only when a
GSSAPI exchange or login is made, so a broker without Kerberos runs without it.
"""

from __future__ import annotations

import enum
import importlib
import itertools
import os
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from moldau.security.kerberos_names import KerberosNameError
from moldau.security.sasl.errors import SaslIllegalStateError, SaslMechanismError
from moldau.security.sasl.mechanism import NamedOnCompletion, SaslClient

if TYPE_CHECKING:
    import gssapi

__all__ = ["GSSAPI_MECHANISM", "GssapiClient", "GssapiServer", "GssapiUnavailable",
           "KerberosClientLogin", "Krb5LoginOptions", "acceptor_credentials",
           "bind_server_host", "default_realm", "kerberos_client_login", "keytab_credentials",
           "require_gssapi", "ticket_cache_credentials"]

GSSAPI_MECHANISM = "GSSAPI"
NO_SECURITY_LAYER = 0x01  # RFC 4752's bit for "no security layer" (auth only)
# what the JDK's server announces as its largest message, which Kafka's clients have
# always seen; with no security layer it is never used
SERVER_MAX_MESSAGE = 65536
_LAYERS = struct.Struct(">I")  # 1 octet of layers + 3 of size, read as one big-endian int
LIBRDKAFKA_SERVICE_NAME = "kafka"  # librdkafka's default sasl.kerberos.service.name
_client_caches = itertools.count(1)


class GssapiUnavailable(RuntimeError):
    """The `gssapi` package is not installed (or libgssapi cannot be loaded)."""


def require_gssapi() -> ModuleType:
    """The `gssapi` module, imported on first use."""
    try:
        return importlib.import_module("gssapi")
    except (ImportError, OSError) as exc:
        raise GssapiUnavailable(
            "SASL mechanism GSSAPI needs the Python package gssapi (pip install gssapi; it "
            f"builds against MIT Kerberos: Debian's libkrb5-dev): {exc}") from None


def _gss_errors() -> tuple[type[Exception], ...]:
    return (require_gssapi().exceptions.GSSError,)


def _describe(exc: Exception) -> str:
    """A GSS error's text, Kerberos' own reason included (e.g. "Server not found in Kerberos
    database")."""
    gen_message = getattr(exc, "gen_message", None)
    return str(gen_message()) if callable(gen_message) else str(exc)


# ---------------------------------------------------------------------------- credentials


def _flag(options: Mapping[str, str], key: str) -> bool:
    return options.get(key, "false").strip().lower() == "true"


@dataclass(frozen=True)
class Krb5LoginOptions:
    """The options of a JAAS Krb5LoginModule entry that Moldau honours: a keytab login
    (`useKeyTab=true keyTab="<file>" principal="<name>"`) or a ticket cache filled by
    kinit (`useTicketCache=true`, optionally `ticketCache="<file>"` and `principal`), and
    Kafka's `serviceName` (an alternative to `sasl.kerberos.service.name`)."""

    use_keytab: bool
    keytab: str | None
    principal: str | None
    use_ticket_cache: bool
    ticket_cache: str | None
    service_name: str | None

    @classmethod
    def from_jaas(cls, options: Mapping[str, str]) -> Krb5LoginOptions:
        return cls(_flag(options, "useKeyTab"), options.get("keyTab"),
                   options.get("principal"), _flag(options, "useTicketCache"),
                   options.get("ticketCache"), options.get("serviceName"))

    def keytab_login(self) -> tuple[str, str]:
        """(principal, keytab) of a keytab login; ValueError saying what is missing."""
        if not self.use_keytab:
            raise ValueError("Krb5LoginModule needs useKeyTab=true (with keyTab and "
                             "principal): Moldau logs in from a keytab, never by a password "
                             "prompt")
        if not self.keytab or not self.principal:
            missing = " and ".join(k for k, v in (("keyTab", self.keytab),
                                                  ("principal", self.principal)) if not v)
            raise ValueError(f"Krb5LoginModule with useKeyTab=true needs {missing}")
        return self.principal, self.keytab


def default_realm() -> str:
    """The default realm of krb5.conf (KRB5_CONFIG), which the DEFAULT principal-to-local
    rule maps; "" when Kerberos has none, as Kafka falls back to."""
    gss = require_gssapi()
    try:
        # the library completes a realm-less name with the default realm
        name = gss.Name("probe", gss.NameType.kerberos_principal)
        full = str(name.canonicalize(gss.MechType.kerberos))
    except _gss_errors():
        return ""
    return full.rpartition("@")[2] if "@" in full else ""


def _principal_name(principal: str) -> gssapi.Name:
    gss = require_gssapi()
    name: gssapi.Name = gss.Name(principal, gss.NameType.kerberos_principal)
    return name


def acceptor_credentials(principal: str, keytab: str) -> gssapi.Credentials:
    """A server's credentials: the keys of `principal` in `keytab` (no KDC contact).
    Raises SaslMechanismError naming the keytab when it holds no key for the principal."""
    gss = require_gssapi()
    try:
        credentials: gssapi.Credentials = gss.Credentials(
            name=_principal_name(principal), usage="accept", store={"keytab": keytab})
        return credentials
    except _gss_errors() as exc:
        raise SaslMechanismError(f"no key for {principal} in keytab {keytab}: "
                                 f"{_describe(exc)}") from None


def keytab_credentials(principal: str, keytab: str, ccache: str) -> gssapi.Credentials:
    """A client's credentials logged in from a keytab (a TGT fetched from the KDC now, into
    the credential cache `ccache`, e.g. `MEMORY:<unique name>`). Raises SaslMechanismError
    with Kerberos' reason (KDC unreachable, principal unknown, keys that do not match)."""
    gss = require_gssapi()
    try:
        credentials: gssapi.Credentials = gss.Credentials(
            name=_principal_name(principal), usage="initiate",
            store={"client_keytab": keytab, "ccache": ccache})
        credentials.inquire()  # makes the library fetch the TGT now, not at first use
        return credentials
    except _gss_errors() as exc:
        raise SaslMechanismError(f"Kerberos login of {principal} from keytab {keytab} "
                                 f"failed: {_describe(exc)}") from None


def ticket_cache_credentials(ccache: str | None = None,
                             principal: str | None = None) -> gssapi.Credentials:
    """A client's credentials from a ticket cache filled by `kinit` (`ccache` None: the
    default one, KRB5CCNAME). Raises SaslMechanismError when it holds no usable TGT."""
    gss = require_gssapi()
    store = {"ccache": ccache} if ccache else None
    name = _principal_name(principal) if principal else None
    where = f"ticket cache {ccache}" if ccache else "the default ticket cache (KRB5CCNAME)"
    try:
        credentials: gssapi.Credentials = gss.Credentials(name=name, usage="initiate",
                                                          store=store)
        credentials.inquire()
        return credentials
    except _gss_errors() as exc:
        raise SaslMechanismError(f"no Kerberos ticket in {where} (run kinit?): "
                                 f"{_describe(exc)}") from None


@dataclass(frozen=True)
class KerberosClientLogin:
    """How a client logs in: from a keytab (`keytab` and `principal`) or from a ticket
    cache kinit filled (`ticket_cache` None: KRB5CCNAME), towards brokers whose principals
    are `<service_name>/<host>`. `source` names the settings, for error messages."""

    service_name: str
    principal: str | None
    keytab: str | None
    ticket_cache: str | None
    source: str
    # a keytab login's TGT lives in this in-memory cache, shared by the connections
    ccache: str = ""

    def credentials(self) -> gssapi.Credentials:
        """The TGT's credentials (SaslMechanismError with Kerberos' reason)."""
        if self.keytab is not None and self.principal is not None:
            return keytab_credentials(self.principal, self.keytab, self.ccache)
        return ticket_cache_credentials(self.ticket_cache, self.principal)

    def client(self) -> GssapiClient:
        """A fresh mechanism client; the connection sets its `server_host`."""
        return GssapiClient(self.service_name, self.credentials)

    def librdkafka(self) -> dict[str, str]:
        """The same login as librdkafka settings (its Cyrus SASL GSSAPI plugin)."""
        out = {"sasl.kerberos.service.name": self.service_name}
        if self.keytab is not None and self.principal is not None:
            out["sasl.kerberos.keytab"] = self.keytab
            out["sasl.kerberos.principal"] = self.principal
        else:
            if self.ticket_cache is not None:
                raise ValueError(f"{self.source}: librdkafka reads its ticket cache from "
                                 "KRB5CCNAME only; set that instead of ticketCache")
            # the ticket cache is kinit's business: librdkafka must not run kinit itself
            out["sasl.kerberos.min.time.before.relogin"] = "0"
        return out


def kerberos_client_login(options: Mapping[str, str] | None, config: Mapping[str, str],
                          source: str) -> KerberosClientLogin:
    """A client's GSSAPI login from its Krb5LoginModule entry's `options` (Kafka's rules:
    a service name from the entry's serviceName or `sasl.kerberos.service.name`, which must
    agree and one of which must be set), or, with no JAAS entry (`options` None), from
    librdkafka's `sasl.kerberos.keytab`/`sasl.kerberos.principal` (service name "kafka"
    unless set). ValueError names what is wrong."""
    configured = config.get("sasl.kerberos.service.name")
    ccache = f"MEMORY:moldau-client-{os.getpid()}-{next(_client_caches)}"
    if options is None:
        keytab, principal = config.get("sasl.kerberos.keytab"), config.get(
            "sasl.kerberos.principal")
        if keytab and not principal:
            raise ValueError(f"{source}: sasl.kerberos.keytab needs sasl.kerberos.principal")
        return KerberosClientLogin(configured or LIBRDKAFKA_SERVICE_NAME, principal,
                                   keytab or None, None, source, ccache)
    login = Krb5LoginOptions.from_jaas(options)
    if login.service_name and configured and login.service_name != configured:
        raise ValueError(f"{source}: Conflicting serviceName values found in JAAS and Kafka "
                         f"configs value in JAAS file {login.service_name}, value in Kafka "
                         f"config {configured}")
    service_name = login.service_name or configured
    if not service_name:
        raise ValueError(f"{source}: No serviceName defined in either JAAS or Kafka config "
                         "(set sasl.kerberos.service.name, e.g. kafka)")
    if login.use_keytab:
        try:
            principal, keytab = login.keytab_login()
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None
        return KerberosClientLogin(service_name, principal, keytab, None, source, ccache)
    if not login.use_ticket_cache:
        raise ValueError(f"{source}: Krb5LoginModule needs useKeyTab=true (keyTab, principal) "
                         "or useTicketCache=true (after kinit): Moldau's clients never prompt "
                         "for a password")
    return KerberosClientLogin(service_name, login.principal, None, login.ticket_cache,
                               source, ccache)


# ---------------------------------------------------------------------------- server


class _Stage(enum.Enum):
    CONTEXT = "GSS-API context tokens"
    OFFER = "the empty token after the context, before the security layer offer"
    CHOICE = "the client's wrapped security layer choice"
    COMPLETE = "complete"
    FAILED = "failed"


class GssapiServer(NamedOnCompletion):
    """The broker's side of one exchange. `credentials` are the acceptor's (the listener's
    keytab); `short_name` maps the authenticated principal to the name of `User:<name>`
    (a KerberosNameError, e.g. no rule for a foreign realm, fails the exchange)."""

    mechanism = GSSAPI_MECHANISM

    def __init__(self, credentials: gssapi.Credentials,
                 short_name: Callable[[str], str]) -> None:
        gss = require_gssapi()
        self._context: gssapi.SecurityContext = gss.SecurityContext(creds=credentials,
                                                                   usage="accept")
        self._short_name = short_name
        self._stage = _Stage.CONTEXT
        self.principal: str | None = None  # the Kerberos name, once the context is up
        self._authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes | None:
        stage = self._stage
        if stage in (_Stage.COMPLETE, _Stage.FAILED):
            raise SaslIllegalStateError("SASL authentication already complete")
        try:
            if stage is _Stage.CONTEXT:
                return self._accept(token)
            if stage is _Stage.OFFER:
                if token:
                    raise SaslMechanismError("Handshake expecting no response data from "
                                             f"the client, got {len(token)} bytes")
                return self._offer()
            self._choose(token)
            return None  # Kafka's GssapiSaslServer answers the last step with nothing
        except SaslMechanismError:
            self._stage = _Stage.FAILED
            raise
        except _gss_errors() as exc:
            self._stage = _Stage.FAILED
            raise SaslMechanismError(f"GSS initiate failed at {stage.value}: "
                                     f"{_describe(exc)}") from None

    def _accept(self, token: bytes) -> bytes:
        if not token:
            # the library would take "no token" as "nothing yet" and wait for more
            raise SaslMechanismError("GSS initiate failed: the client's first token is empty "
                                     "(no Kerberos ticket)")
        answer = self._context.step(token)
        if not self._context.complete:
            return answer or b""
        self.principal = str(self._context.initiator_name)
        if answer:  # the AP-REP (mutual authentication): the client answers it empty
            self._stage = _Stage.OFFER
            return answer
        return self._offer()

    def _offer(self) -> bytes:
        offer = _LAYERS.pack(NO_SECURITY_LAYER << 24 | SERVER_MAX_MESSAGE)
        self._stage = _Stage.CHOICE
        wrapped: bytes = self._context.wrap(offer, False).message
        return wrapped

    def _choose(self, token: bytes) -> None:
        choice = self._context.unwrap(token)
        message = choice.message
        if len(message) < 4:
            raise SaslMechanismError(f"the client's security layer choice is "
                                     f"{len(message)} bytes, not at least 4")
        if not message[0] & NO_SECURITY_LAYER:
            raise SaslMechanismError(f"Client selected unsupported protection: {message[0]}")
        # octets 1-3 (the client's largest message) matter only with a security layer, and
        # the authorization id (octets 4-) is ignored: the principal is the identity
        assert self.principal is not None
        try:
            self._authorization_id = self._short_name(self.principal)
        except KerberosNameError as exc:
            raise SaslMechanismError(f"Failed to set name for '{self.principal}' based on "
                                     f"Kerberos authentication rules: {exc}") from None
        self._stage = _Stage.COMPLETE

    @property
    def complete(self) -> bool:
        return self._stage is _Stage.COMPLETE



# ---------------------------------------------------------------------------- client


class GssapiClient:
    """The client's side: towards `<service_name>/<server_host>` (the broker's host as the
    client connects to it), with `credentials` (a TGT: keytab or ticket cache login).
    `server_host` may be set after construction, by the connection that knows it.
    `target_principal` names the server's full principal instead (ZooKeeper's client
    computes `<service>/<host>@<realm>` itself)."""

    mechanism = GSSAPI_MECHANISM

    def __init__(self, service_name: str, credentials: Callable[[], gssapi.Credentials],
                 server_host: str | None = None, *,
                 target_principal: str | None = None) -> None:
        self.service_name = service_name
        self.server_host = server_host
        self.target_principal = target_principal
        self._credentials = credentials
        self._context: gssapi.SecurityContext | None = None
        self._stage = _Stage.CONTEXT

    def initial_response(self) -> bytes:
        if self._context is not None:
            raise SaslIllegalStateError("GSSAPI authentication already started")
        gss = require_gssapi()
        if self.target_principal:
            target = gss.Name(self.target_principal, gss.NameType.kerberos_principal)
            towards = self.target_principal
        elif self.server_host:
            target = gss.Name(f"{self.service_name}@{self.server_host}",
                              gss.NameType.hostbased_service)
            towards = f"{self.service_name}/{self.server_host}"
        else:
            raise SaslMechanismError(
                f"GSSAPI needs the broker's host name to name its service principal "
                f"{self.service_name}/<host>, and this connection did not give it")
        try:
            self._context = gss.SecurityContext(
                name=target, creds=self._credentials(), usage="initiate",
                mech=gss.MechType.kerberos,
                flags=gss.RequirementFlag.mutual_authentication)
            token: bytes = self._context.step()
        except _gss_errors() as exc:
            raise SaslMechanismError(f"GSSAPI could not start towards {towards}: "
                                     f"{_describe(exc)}") from None
        if self._context.complete:
            self._stage = _Stage.CHOICE  # no mutual authentication: the offer comes next
        return token

    def evaluate(self, challenge: bytes) -> bytes | None:
        context = self._context
        if context is None:
            return self.initial_response()
        try:
            if self._stage is _Stage.CONTEXT:
                answer = context.step(challenge)
                if context.complete:
                    self._stage = _Stage.CHOICE
                return answer or b""  # after the AP-REP: an empty token asks for the offer
            if self._stage is _Stage.CHOICE:
                return self._choose(context, challenge)
        except _gss_errors() as exc:
            raise SaslMechanismError(f"GSSAPI failed: {_describe(exc)}") from None
        raise SaslIllegalStateError("GSSAPI authentication already completed")

    def _choose(self, context: gssapi.SecurityContext, challenge: bytes) -> bytes:
        offer = context.unwrap(challenge).message
        if len(offer) != 4:
            raise SaslMechanismError(f"the broker's security layer offer is {len(offer)} "
                                     "bytes, not 4")
        if not offer[0] & NO_SECURITY_LAYER:
            raise SaslMechanismError("the broker does not offer 'no security layer', the "
                                     "only one Kafka's clients use")
        # no security layer: the largest message we take is 0 (RFC 4752), and no
        # authorization id (the broker takes the principal anyway)
        choice = _LAYERS.pack(NO_SECURITY_LAYER << 24)
        self._stage = _Stage.COMPLETE
        wrapped: bytes = context.wrap(choice, False).message
        return wrapped

    @property
    def complete(self) -> bool:
        return self._stage is _Stage.COMPLETE


def bind_server_host(client: SaslClient, host: str) -> SaslClient:
    """Tell a fresh mechanism client which host its connection goes to, for the
    mechanisms that need it (GSSAPI names the broker's principal `<service>/<host>` after
    it); every other mechanism is returned untouched. The connection code calls it with
    each client its factory makes, before the exchange starts."""
    if isinstance(client, GssapiClient) and client.server_host is None:
        client.server_host = host
    return client
