"""SASL from a ZooKeeper client (the broker, the ZooKeeper-facing tools) to ZooKeeper, as
Kafka 3.9 decides it.

Kafka reads no server.properties key for this: the JVM's system properties in KAFKA_OPTS
say it. The JAAS file of `-Djava.security.auth.login.config=` is searched for the section
`-Dzookeeper.sasl.clientconfig=` names (`Client` by default); when it is there, the client
authenticates with it, and a `-Dzookeeper.sasl.client=false` next to it stops a broker
(Kafka's JaasUtils.isZkSaslEnabled refuses the contradiction). ZooKeeper's client picks
the mechanism from the login's result: a Kerberos principal means GSSAPI, a username and
password (DigestLoginModule, or Kafka's Plain and Scram modules, which publish the same
credentials) mean DIGEST-MD5. Moldau speaks both through kazoo's `sasl_options`:
DIGEST-MD5 with pure-sasl's mechanism, GSSAPI with its own (zk_kerberos). A section it
cannot log in with is refused, so a broker never runs unauthenticated by mistake.

kazoo reports the connection as CONNECTED before its SASL exchange and gives no hook for
its outcome: `SaslOutcome.watch` records it, so a refused login becomes a clear error
rather than a silently dead session.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionDropped,
    SASLException,
    SessionClosedRequireSaslError,
)
from kazoo.handlers.threading import KazooTimeoutError

from moldau.cluster.zk_errors import UNAVAILABLE, ZkError, ZooKeeperUnavailableError
from moldau.cluster.zk_kerberos import ZkKerberosLogin
from moldau.security.kerberos_login import KerberosLoginError
from moldau.security.sasl.jaas import (
    DIGEST_LOGIN_MODULE,
    JAVA_LOGIN_CONFIG_PARAM,
    KRB5_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasEntry,
    JaasError,
    client_credentials,
    jaas_file_from_kafka_opts,
    load_jaas_file,
    system_properties_from_kafka_opts,
)

ZK_SASL_CLIENT = "zookeeper.sasl.client"
ZK_LOGIN_CONTEXT_NAME_KEY = "zookeeper.sasl.clientconfig"
DEFAULT_ZK_LOGIN_CONTEXT = "Client"
DIGEST_MD5 = "DIGEST-MD5"
# Login modules that leave a username and password in the subject, which ZooKeeper's
# client then uses for DIGEST-MD5.
PASSWORD_LOGIN_MODULES = (DIGEST_LOGIN_MODULE, PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE)

log = logging.getLogger("moldau.cluster.zk_client")


class ZkSaslConfigError(ValueError):
    """SASL settings for ZooKeeper that Kafka (or Moldau, for Kerberos) refuses; the
    message names the property, file and section to fix."""


class ZkAuthenticationError(ZkError):
    """ZooKeeper refused this client: its SASL login failed, or the server requires SASL
    and the client has none."""


@dataclass(frozen=True)
class ZkSaslLogin:
    """The DIGEST-MD5 identity a client logs in to ZooKeeper with, and where it came from."""

    username: str
    password: str = field(repr=False)
    context: str  # the JAAS section
    jaas_file: str

    def kazoo_options(self) -> dict[str, str]:
        """KazooClient's `sasl_options` (a fresh dict: kazoo adds keys to it)."""
        return {"mechanism": DIGEST_MD5, "username": self.username, "password": self.password}

    def describe(self) -> str:
        return (f"SASL {DIGEST_MD5} as '{self.username}' (JAAS section '{self.context}' of "
                f"{self.jaas_file})")

    refusal_hint = "wrong user or password?"

    def log_in(self) -> None:
        """Nothing to do before connecting (a Kerberos login fetches its TGT here)."""

    def close(self) -> None:
        """Nothing to release (a Kerberos login stops its ticket refresh here)."""


# how a client logs in to ZooKeeper: DIGEST-MD5 or Kerberos
ZkLogin = ZkSaslLogin | ZkKerberosLogin


@dataclass(frozen=True)
class ZkSaslSettings:
    """Kafka's system properties for SASL to ZooKeeper and the login they select
    (`login` None: the client connects without SASL)."""

    properties: Mapping[str, str]
    login: ZkLogin | None

    def describe(self) -> str:
        """Kafka's JaasUtils.zkSecuritySysConfigString: what its errors print."""
        return describe_properties(self.properties)


def describe_properties(properties: Mapping[str, str]) -> str:
    login_config = properties.get(JAVA_LOGIN_CONFIG_PARAM, "null")  # Java prints null
    enabled = properties.get(ZK_SASL_CLIENT, "default:true")
    context = properties.get(ZK_LOGIN_CONTEXT_NAME_KEY, f"default:{DEFAULT_ZK_LOGIN_CONTEXT}")
    return (f"[{JAVA_LOGIN_CONFIG_PARAM}={login_config}, {ZK_SASL_CLIENT}={enabled}, "
            f"{ZK_LOGIN_CONTEXT_NAME_KEY}={context}]")


def settings_from_kafka_opts(kafka_opts: str, *, zookeeper_client_rules: bool = False
                             ) -> ZkSaslSettings:
    """The SASL login to ZooKeeper that KAFKA_OPTS selects, as a broker and Kafka's
    ZooKeeper tools decide it. `zookeeper_client_rules`: ZooKeeper's own client decides
    (zookeeper-shell runs ZooKeeperMain), where `zookeeper.sasl.client=false` simply turns
    SASL off. Raises ZkSaslConfigError for what Kafka or Moldau refuses."""
    try:
        properties = system_properties_from_kafka_opts(kafka_opts)
    except JaasError as exc:
        raise ZkSaslConfigError(f"KAFKA_OPTS: {exc}") from None
    # Java's Boolean.parseBoolean: "true" in any case, anything else is false.
    enabled = properties.get(ZK_SASL_CLIENT, "true").lower() == "true"
    if zookeeper_client_rules and not enabled:
        return ZkSaslSettings(properties, None)
    context = properties.get(ZK_LOGIN_CONTEXT_NAME_KEY, DEFAULT_ZK_LOGIN_CONTEXT)
    jaas_file = jaas_file_from_kafka_opts(kafka_opts)
    if jaas_file is None:
        return ZkSaslSettings(properties, None)
    try:
        sections = load_jaas_file(jaas_file, properties)
    except JaasError as exc:
        raise ZkSaslConfigError("Exception while loading Zookeeper JAAS login context "
                                f"{describe_properties(properties)}: {exc}") from None
    entries = sections.get(context)
    if entries is None:
        return ZkSaslSettings(properties, None)
    if not enabled:
        raise ZkSaslConfigError(
            "Exception while determining if ZooKeeper is secure "
            f"{describe_properties(properties)}: JAAS configuration is present, but system "
            f"property {ZK_SASL_CLIENT} is set to false, which disables SASL in the "
            "ZooKeeper client")
    return ZkSaslSettings(properties, _login(entries, context, jaas_file, properties))


def settings_from_environment(environ: Mapping[str, str] | None = None, *,
                              zookeeper_client_rules: bool = False) -> ZkSaslSettings:
    """settings_from_kafka_opts of $KAFKA_OPTS, as Kafka's scripts hand it to the JVM."""
    env = os.environ if environ is None else environ
    return settings_from_kafka_opts(env.get("KAFKA_OPTS", ""),
                                    zookeeper_client_rules=zookeeper_client_rules)


def _login(entries: list[JaasEntry], context: str, jaas_file: str,
           properties: Mapping[str, str]) -> ZkLogin:
    where = f"JAAS section '{context}' of {jaas_file}"
    for entry in entries:
        if entry.login_module.strip() == KRB5_LOGIN_MODULE:
            # the JDK's login yields a Kerberos principal: ZooKeeper's client uses GSSAPI
            try:
                return ZkKerberosLogin.from_jaas(entry.options, properties, context,
                                                 jaas_file)
            except ValueError as exc:
                raise ZkSaslConfigError(f"the {where}: {exc}") from None
    for entry in entries:
        if entry.login_module.strip() not in PASSWORD_LOGIN_MODULES:
            raise ZkSaslConfigError(
                f"the {where} names login module {entry.login_module}, which Moldau cannot "
                f"run: use {DIGEST_LOGIN_MODULE} with username and password options, or "
                f"{KRB5_LOGIN_MODULE} with a keytab")
        credentials = client_credentials(entry)
        if credentials is not None:
            return ZkSaslLogin(credentials[0], credentials[1], context, jaas_file)
    raise ZkSaslConfigError(f"the {where} has no login module with both a username and a "
                            f"password option (e.g. {DIGEST_LOGIN_MODULE} required "
                            'username="kafka" password="...";)')


# -- the outcome of kazoo's SASL exchanges --------------------------------------------------


class SaslOutcome:
    """What became of the SASL exchanges of one kazoo client: the last failure (None once
    a login succeeds again) and whether any login succeeded."""

    def __init__(self) -> None:
        self.failure: str | None = None
        self.ever_authenticated = False

    @classmethod
    def watch(cls, zk: KazooClient, hint: str = ZkSaslLogin.refusal_hint) -> SaslOutcome:
        """Record the outcome of `zk`'s SASL exchanges (kazoo has no public hook for it,
        so its connection's SASL step is wrapped).

        A refused first login ends the client as kazoo ends it for a failed auth, so
        start() fails fast, as Kafka's does. A server that requires SASL refuses with a
        code kazoo does not handle there, which would kill its connection thread instead.
        A refusal after a successful login drops the connection and kazoo tries again
        (next server, same session), as Kafka reinitializes its session after one.
        `hint`: the likely cause of a refusal, for the message (the login's)."""
        outcome = cls()
        connection = zk._connection  # kazoo's ConnectionHandler: owns the SASL step
        original: Callable[[str, float], None] = connection._authenticate_with_sasl

        def authenticate(host: str, timeout: float) -> None:
            try:
                original(host, timeout)
            except (AuthFailedError, SessionClosedRequireSaslError, SASLException) as exc:
                outcome.failure = _failure_text(exc, hint)
                if outcome.ever_authenticated:
                    log.error("SASL authentication to ZooKeeper at %s failed, retrying: %s",
                              host, outcome.failure)
                    raise ConnectionDropped(outcome.failure) from exc
                log.error("SASL authentication to ZooKeeper at %s failed: %s", host,
                          outcome.failure)
                raise AuthFailedError(outcome.failure) from exc
            outcome.failure = None
            outcome.ever_authenticated = True

        connection._authenticate_with_sasl = authenticate
        return outcome


def _failure_text(exc: Exception, hint: str) -> str:
    if isinstance(exc, SessionClosedRequireSaslError):
        return f"the server refused the login and closed the session ({hint})"
    if isinstance(exc, SASLException):
        return f"the SASL library failed: {exc.__cause__ or exc}"
    reason = str(exc) or "authentication failed"
    if exc.__cause__ is not None:
        reason += f": {exc.__cause__}"
    return f"{reason} ({hint})"


# -- was the new session admitted --------------------------------------------------------

# kazoo's errors for a session ZooKeeper would not admit
REFUSALS = (AuthFailedError, SessionClosedRequireSaslError)


def start_admitted(zk: KazooClient, hosts: str, login: ZkLogin | None,
                   outcome: SaslOutcome | None, timeout: float) -> None:
    """The login's log_in() (a Kerberos login fetches its TGT), zk.start(), then one round
    trip, so a refused login fails here rather than at the first call after it (kazoo
    reports CONNECTED before its SASL exchange and queues requests behind it). Raises
    ZkAuthenticationError (naming the cause when ZooKeeper requires SASL and the client
    has none, or the Kerberos login failed) or ZooKeeperUnavailableError, with `zk`
    stopped; kazoo's timeout error when no server answered in time."""
    deadline = time.monotonic() + timeout
    if login is not None:
        try:
            login.log_in()
        except KerberosLoginError as exc:  # fail closed: never connect without it
            zk.close()
            raise ZkAuthenticationError(str(exc)) from None
    try:
        # No server in time: kazoo raises its timeout error, stopped; left to the caller.
        zk.start(timeout=timeout)  # with a chroot it makes a first request of its own
    except REFUSALS as exc:
        zk.stop()
        zk.close()
        raise _refusal(exc, hosts, login, outcome) from None
    except KazooTimeoutError:
        # kazoo's start() wakes on CONNECTED; when the SASL exchange that follows has
        # already failed, it finds the client closed and reports a time-out at once.
        if outcome is not None and outcome.failure is not None:
            raise _refusal(AuthFailedError(), hosts, login, outcome) from None
        raise
    try:
        zk.exists_async("/").get(timeout=max(deadline - time.monotonic(), 1.0))
    except (*REFUSALS, *UNAVAILABLE) as exc:
        zk.stop()
        zk.close()
        raise _refusal(exc, hosts, login, outcome) from None


def _refusal(exc: Exception, hosts: str, login: ZkLogin | None,
             outcome: SaslOutcome | None) -> ZkError:
    if login is not None and outcome is not None and outcome.failure is not None:
        return ZkAuthenticationError(
            "Auth failed either before or while waiting for connection: ZooKeeper at "
            f"{hosts} refused {login.describe()}: {outcome.failure}")
    if isinstance(exc, SessionClosedRequireSaslError):
        return ZkAuthenticationError(
            f"ZooKeeper at {hosts} requires SASL authentication and this client has no SASL "
            "login: name a JAAS file with a 'Client' section in KAFKA_OPTS "
            f"(-D{JAVA_LOGIN_CONFIG_PARAM}=<file>)")
    return ZooKeeperUnavailableError(
        f"ZooKeeper at {hosts} dropped the new session: {type(exc).__name__} {exc}")
