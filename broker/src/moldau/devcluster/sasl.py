"""SASL for the development cluster (`moldau dev-cluster up --sasl <mechanism>`): a
SASL_SSL listener for clients on every broker, an `admin` user, and a client.properties in
Kafka's client format that logs in as it, so application tests run against
authentication as they would in production.

The brokers keep their PLAINTEXT listener: health checks use it, and so does the traffic
between brokers, unless the cluster enforces ACLs (`--authorizer`): then the brokers talk
to each other over SASL_SSL as the admin user, Kafka's AclAuthorizer decides every request
and `admin` is the only super user, so a PLAINTEXT client is User:ANONYMOUS with no
rights until an ACL grants some.

Files in DIR (besides tls/, see tls.py):
    admin.password      the admin user's password, drawn once (mode 0600)
    client.properties   security.protocol, sasl.mechanism, sasl.jaas.config, the PEM trust
                        store and bootstrap.servers (mode 0600: it holds the password)

Where the admin user lives: PLAIN, in the listener's JAAS line (`user_admin`, in each
broker's server.properties, which is therefore mode 0600 too); SCRAM, in ZooKeeper
(/config/users/admin), written before the brokers start.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from moldau.cluster.zk_client import KafkaZkClient
from moldau.security.sasl.jaas import (
    PLAIN_LOGIN_MODULE,
    PLAIN_USER_PREFIX,
    SCRAM_LOGIN_MODULE,
    quote_jaas_value,
)
from moldau.security.sasl.scram_credentials import (
    CredentialFormatError,
    ScramCredential,
    ScramMechanism,
    derive_credential,
    password_matches,
)
from moldau.server.config import ACL_AUTHORIZER

from .private_files import write_private_file
from .tls import DevTls

# What `--sasl` accepts: Kafka's mechanism names in lower case, as in listener.name keys.
SASL_CHOICES = ("plain", "scram-sha-256", "scram-sha-512")
SASL_LISTENER = "SASL_SSL"
ADMIN_USER = "admin"
ADMIN_PASSWORD_FILE = "admin.password"
CLIENT_PROPERTIES_FILE = "client.properties"
# Kafka's minimum and kafka-configs' default: a dev cluster needs no more than that.
SCRAM_ITERATIONS = 4096


class DevSaslError(RuntimeError):
    """The SASL set-up of the dev cluster directory is unusable."""


@dataclass(frozen=True)
class DevSasl:
    """The SASL side of the dev cluster in `directory` (DIR)."""

    directory: Path
    mechanism: str  # Kafka's name: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    authorizer: bool = False  # ACLs enforced, the brokers talking over SASL_SSL as admin

    def __post_init__(self) -> None:
        if self.mechanism.lower() not in SASL_CHOICES:
            raise ValueError(f"unknown SASL mechanism {self.mechanism!r} for the dev "
                             f"cluster; choose one of {', '.join(SASL_CHOICES)}")

    @classmethod
    def from_choice(cls, directory: Path, choice: str, authorizer: bool = False) -> DevSasl:
        """From the `--sasl` value (plain, scram-sha-256, scram-sha-512)."""
        return cls(directory, choice.upper(), authorizer)

    @property
    def choice(self) -> str:
        """The mechanism as `--sasl` names it."""
        return self.mechanism.lower()

    @property
    def tls(self) -> DevTls:
        return DevTls.under(self.directory)

    @property
    def admin_password_path(self) -> Path:
        return self.directory / ADMIN_PASSWORD_FILE

    @property
    def client_properties_path(self) -> Path:
        return self.directory / CLIENT_PROPERTIES_FILE

    @property
    def scram_mechanism(self) -> ScramMechanism | None:
        return ScramMechanism.by_name(self.mechanism)

    # -- the files, made once --------------------------------------------------------------

    def prepare(self) -> None:
        """Create the CA, the broker certificate and the admin password where missing."""
        self.tls.ensure()
        if not self.admin_password_path.exists():
            # URL-safe characters: nothing to quote in a JAAS line or a properties file
            write_private_file(self.admin_password_path,
                               (secrets.token_urlsafe(24) + "\n").encode("ascii"))

    def admin_password(self) -> str:
        try:
            password = self.admin_password_path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            raise DevSaslError(
                f"{self.admin_password_path} is missing: the brokers of this cluster were "
                "configured with the admin password it held. Run `moldau dev-cluster down` "
                f"and remove {self.directory} to start afresh") from None
        if not password:
            raise DevSaslError(f"{self.admin_password_path} is empty")
        return password

    # -- the brokers ---------------------------------------------------------------------------

    def broker_properties(self, plaintext_port: int, sasl_port: int) -> dict[str, str]:
        """server.properties entries of a broker with both listeners (call prepare() first:
        a PLAIN JAAS line carries the admin password)."""
        listener = SASL_LISTENER.lower()
        mechanism = self.mechanism.lower()
        props = {
            "listeners": (f"PLAINTEXT://127.0.0.1:{plaintext_port},"
                          f"{SASL_LISTENER}://127.0.0.1:{sasl_port}"),
            "sasl.enabled.mechanisms": self.mechanism,
            f"listener.name.{listener}.{mechanism}.sasl.jaas.config": self._broker_jaas(),
            **self.tls.broker_properties(),
        }
        if self.authorizer:
            props |= {
                "inter.broker.listener.name": SASL_LISTENER,
                "sasl.mechanism.inter.broker.protocol": self.mechanism,
                # the other brokers' certificates, as their client
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.tls.ca_cert),
                "authorizer.class.name": ACL_AUTHORIZER,
                "super.users": f"User:{ADMIN_USER}",
            }
        return props

    def _broker_jaas(self) -> str:
        # with --authorizer the brokers log in to each other as admin
        login = (f" username={quote_jaas_value(ADMIN_USER)} "
                 f"password={quote_jaas_value(self.admin_password())}"
                 if self.authorizer else "")
        if self.scram_mechanism is not None:  # the users are in ZooKeeper
            return f"{SCRAM_LOGIN_MODULE} required{login};"
        return (f"{PLAIN_LOGIN_MODULE} required{login} "
                f"{PLAIN_USER_PREFIX}{ADMIN_USER}={quote_jaas_value(self.admin_password())};")

    def register_admin(self, zookeeper_connect: str) -> None:
        """SCRAM: store the admin credential in ZooKeeper unless the stored one already
        matches the password (every write draws a new salt, so it is not rewritten)."""
        mechanism = self.scram_mechanism
        if mechanism is None:
            return
        password = self.admin_password()
        zk = KafkaZkClient(zookeeper_connect)
        zk.start()
        try:
            stored = zk.get_user_config(ADMIN_USER).get(mechanism.mechanism_name)
            if stored is not None and _matches(mechanism, stored, password):
                return
            value = derive_credential(mechanism, password, SCRAM_ITERATIONS).to_config_value()
            zk.update_user_config(ADMIN_USER,
                                  lambda config: {**config, mechanism.mechanism_name: value})
        finally:
            zk.close()

    # -- the clients -----------------------------------------------------------------------

    def client_properties(self, bootstrap_servers: str) -> dict[str, str]:
        """Kafka's client properties that log in as the admin user over SASL_SSL."""
        module = PLAIN_LOGIN_MODULE if self.scram_mechanism is None else SCRAM_LOGIN_MODULE
        jaas = (f"{module} required username={quote_jaas_value(ADMIN_USER)} "
                f"password={quote_jaas_value(self.admin_password())};")
        return {
            "bootstrap.servers": bootstrap_servers,
            "security.protocol": SASL_LISTENER,
            "sasl.mechanism": self.mechanism,
            "sasl.jaas.config": jaas,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.tls.ca_cert),
        }

    def write_client_properties(self, bootstrap_servers: str) -> Path:
        text = format_properties(
            self.client_properties(bootstrap_servers),
            header=f"Moldau development cluster in {self.directory}: user {ADMIN_USER} over "
                   f"{SASL_LISTENER} with {self.mechanism} (Kafka's client properties)")
        # only the header may be non-ASCII (the path); Java skips comment lines
        write_private_file(self.client_properties_path, text.encode("utf-8"))
        return self.client_properties_path


def _matches(mechanism: ScramMechanism, stored: str, password: str) -> bool:
    try:
        credential = ScramCredential.from_config_value(stored)
    except CredentialFormatError:
        return False  # unreadable: write a good one over it
    return password_matches(mechanism, credential, password)


def format_properties(props: Mapping[str, str], header: str) -> str:
    """A properties file people read: `key=value` lines in the given order, escaped only
    where java.util.Properties.load needs it (unlike Properties.store, `=` and `:` in a
    value stay as they are, so the JAAS line reads as in Kafka's documentation)."""
    lines = [f"# {header}"]
    lines += [f"{key}={_escape_value(value)}" for key, value in props.items()]
    return "\n".join(lines) + "\n"


def _escape_value(value: str) -> str:
    out: list[str] = []
    for index, char in enumerate(value):
        if char == "\\":
            out.append("\\\\")
        elif char == " " and index == 0:
            out.append("\\ ")  # a leading space would be taken for the separator's
        elif char < " " or char > "~":
            out.append("".join(f"\\u{unit:04X}" for unit in _utf16_units(char)))
        else:
            out.append(char)
    return "".join(out)


def _utf16_units(char: str) -> list[int]:
    data = char.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]
