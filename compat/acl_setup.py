"""The ACL scenarios' own pair of brokers: Kafka's AclAuthorizer with nobody a super user
and `allow.everyone.if.no.acl.found=false`, so the lab's clients (User:ANONYMOUS on
PLAINTEXT) may do only what ACLs grant them.

Before the pair starts, Kafka's AclCommand writes the grants it cannot start without into
both chroots, through ZooKeeper: ClusterAction on the cluster (Kafka's controller sends
its own broker LeaderAndIsr and UpdateMetadata over the listener, as that principal) and
Create on the cluster (the scenarios create their topics). Every topic and group is
denied until a scenario grants it.

Beside the PLAINTEXT listener (the lab's own User:ANONYMOUS work) each broker of the pair
has a SASL_PLAINTEXT listener with SCRAM-SHA-256, SCRAM-SHA-512, PLAIN and OAUTHBEARER
(Kafka's unsecured tokens), whose users (`USERS`: SCRAM credentials of both kinds written
into both chroots through ZooKeeper with Kafka's ConfigCommand before the brokers start,
PLAIN passwords in the JAAS entry) are the named principals of the SASL scenarios, and a
delegation token secret, so the same users can create tokens. GSSAPI is
compat/acl_kerberos.py's, the TLS listeners (client certificates) compat/acl_tls.py's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from compat import batch
from moldau.devcluster.brokers import free_port

if TYPE_CHECKING:
    from compat.lab import KafkaBroker
    from moldau.devcluster.brokers import BrokerProcess

ACL_COMMAND = "kafka.admin.AclCommand"
PRINCIPAL = "User:ANONYMOUS"
FIRST_GRANTS = ("--add", "--cluster", "--allow-principal", PRINCIPAL,
                "--operation", "ClusterAction", "--operation", "Create")
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
SASL_LISTENER = "SASL_PLAINTEXT"  # its own name: the default security protocol map applies
SASL_MECHANISM = "SCRAM-SHA-256"  # the SCRAM scenarios' and the token tools' login
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
USERS: Mapping[str, str] = {"alice": "alice-secret", "bob": "bob-secret"}
# Each mechanism's JAAS entry on the listener. PLAIN's holds the passwords; OAUTHBEARER's
# validates unsecured tokens, and the broker's own login with it makes one for "broker".
_SERVER_JAAS: Mapping[str, str] = {
    "SCRAM-SHA-256": f"{SCRAM_LOGIN_MODULE} required;",
    "SCRAM-SHA-512": f"{SCRAM_LOGIN_MODULE} required;",
    "PLAIN": f"{PLAIN_LOGIN_MODULE} required "
             + " ".join(f'user_{user}="{password}"' for user, password in USERS.items()) + ";",
    "OAUTHBEARER": f'{OAUTHBEARER_LOGIN_MODULE} required unsecuredLoginStringClaim_sub="broker";',
}
MECHANISMS = tuple(_SERVER_JAAS)
SASL_PROPERTIES: Mapping[str, str] = {
    # GSSAPI (Kafka's default) joins them when the lab runs a KDC (compat/acl_kerberos.py)
    "sasl.enabled.mechanisms": ",".join(MECHANISMS),
    **{f"listener.name.{SASL_LISTENER.lower()}.{mechanism.lower()}.sasl.jaas.config": jaas
       for mechanism, jaas in _SERVER_JAAS.items()},
    "delegation.token.secret.key": "the-reference-lab-token-secret",
}


class SeedError(RuntimeError):
    """Kafka's AclCommand could not write the first grants."""


def properties(shared: Mapping[str, str]) -> dict[str, str]:
    """The shared pair's settings without its super user, and no ACL means no access."""
    props = {key: value for key, value in shared.items() if key != "super.users"}
    props["allow.everyone.if.no.acl.found"] = "false"
    props.update(SASL_PROPERTIES)
    return props


def add_listener(broker: KafkaBroker | BrokerProcess, name: str) -> None:
    """Another listener (`name`, the default protocol map's) beside the broker's PLAINTEXT
    one (which stays its `port`, the one the lab's readiness checks and super-user-less
    PLAINTEXT work use)."""
    if broker.port == 0:
        broker.port = free_port()
    listeners = broker.properties.get("listeners", f"PLAINTEXT://127.0.0.1:{broker.port}")
    broker.properties = {**broker.properties,
                         "listeners": f"{listeners},{name}://127.0.0.1:{free_port()}"}


def add_sasl_listener(broker: KafkaBroker | BrokerProcess) -> None:
    add_listener(broker, SASL_LISTENER)


def listener_address(broker: KafkaBroker | BrokerProcess, name: str) -> str:
    """The `host:port` of one of the broker's listeners."""
    for listener in broker.properties.get("listeners", "").split(","):
        listener_name, _, address = listener.partition("://")
        if listener_name == name:
            return address
    raise LookupError(f"the broker at {broker.bootstrap} has no {name} listener")


def sasl_bootstrap(broker: KafkaBroker | BrokerProcess) -> str:
    """The `host:port` of the broker's SASL_PLAINTEXT listener."""
    return listener_address(broker, SASL_LISTENER)


def client_properties(user: str, password: str | None = None,
                      mechanism: str = SASL_MECHANISM) -> dict[str, str]:
    """A Java client's settings to log in as `user` over the SASL listener with a
    password mechanism (SCRAM or PLAIN)."""
    secret = USERS[user] if password is None else password
    module = PLAIN_LOGIN_MODULE if mechanism == "PLAIN" else SCRAM_LOGIN_MODULE
    return {"security.protocol": SASL_LISTENER, "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{module} required username="{user}" password="{secret}";'}


def oauthbearer_properties(options: Mapping[str, str]) -> dict[str, str]:
    """A Java client's settings to log in over the SASL listener with an unsecured token
    that Kafka's login module makes from `options` (`unsecuredLoginStringClaim_sub`...)."""
    words = " ".join(f'{key}="{value}"' for key, value in options.items())
    return {"security.protocol": SASL_LISTENER, "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f"{OAUTHBEARER_LOGIN_MODULE} required {words};"}


def scram_users(zookeeper_connect: str) -> list[tuple[str, list[str]]]:
    """ConfigCommand's ZooKeeper path: the SCRAM credentials of `USERS`, both kinds."""
    return [(CONFIG_COMMAND, ["--zookeeper", zookeeper_connect, "--alter", "--entity-type",
                              "users", "--entity-name", user, "--add-config",
                              ",".join(f"{mechanism}=[iterations=4096,password={password}]"
                                       for mechanism in SCRAM_MECHANISMS)])
            for user, password in USERS.items()]


def zookeeper_args(zookeeper_connect: str) -> list[str]:
    """AclCommand's deprecated path straight into a chroot."""
    return ["--authorizer-properties", f"zookeeper.connect={zookeeper_connect}"]


def seed(chroots: Sequence[str]) -> None:
    """The first grants and the SCRAM users into each chroot (`host:port/chroot`), in
    one JVM."""
    commands = [command for chroot in chroots for command in
                [(ACL_COMMAND, [*zookeeper_args(chroot), *FIRST_GRANTS]), *scram_users(chroot)]]
    runs = batch.run_batch(commands, timeout=120)
    for (main_class, args), run in zip(commands, runs, strict=True):
        if run.exit_code != 0:
            raise SeedError(f"{main_class} {' '.join(args)} failed (exit {run.exit_code}):"
                            f"\n{run.stdout}\n{run.stderr}")
