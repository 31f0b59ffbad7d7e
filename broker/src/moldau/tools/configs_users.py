"""kafka-configs for user entities: SCRAM credentials as Kafka 3.9's ConfigCommand handles
them, either through the admin API (--bootstrap-server: the tool salts and hashes the
password and sends AlterUserScramCredentials; DescribeUserScramCredentials lists them) or
straight into ZooKeeper (--zookeeper: how the inter-broker user is created before any
broker runs). The value grammar is `[iterations=<n>,]password=<p>`, 4096 iterations by
default. A user's quota keys go to configs_quotas (never in the same command as SCRAM
keys, as Kafka refuses)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from moldau.cluster import zk_data as zd
from moldau.cluster import zk_sasl, zk_tls
from moldau.cluster.zk_client import KafkaZkClient, ZkError
from moldau.cluster.zk_json import java_properties_order
from moldau.errors import ResourceNotFoundError
from moldau.protocol.generated.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
)
from moldau.protocol.generated.describe_user_scram_credentials_request import (
    DescribeUserScramCredentialsRequest,
)
from moldau.security.sasl.scram_credentials import (
    DEFAULT_ITERATIONS,
    MIN_ITERATIONS,
    SCRAM_MECHANISM_NAMES,
    ScramMechanism,
    derive_credential,
    random_salt,
)
from moldau.security.ssl_settings import TlsConfigError
from moldau.tools import configs_quotas
from moldau.tools.acl_services import zk_tls_file_properties
from moldau.tools.admin import Admin
from moldau.tools.kafka_errors import check, error_text, exception_class
from moldau.tools.options import ToolError
from moldau.tools.properties import load_properties
from moldau.tools.runner import ArgumentError

USERS = "users"
# Kafka's QuotaConfigs.isClientOrUserQuotaConfig
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
              "controller_mutation_rate")
ZK_WARNING = ("Warning: --zookeeper is deprecated and will be removed in a future version of "
              "Kafka.\nUse --bootstrap-server instead to specify a broker to connect to.")
ZK_TIMEOUT_MS = 30000  # ConfigCommand's session and connection timeouts
# the credential grammars of the ZooKeeper and the admin paths (the latter takes -1 too)
_ZK_CREDENTIAL = re.compile(r"(?:iterations=([0-9]*),)?password=(.*)")
_ADMIN_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)")
_INT = re.compile(r"-?[0-9]+")
RESOURCE_NOT_FOUND = ResourceNotFoundError.code

Upsertion_ = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Deletion_ = AlterUserScramCredentialsRequest.ScramCredentialDeletion


def entity_text(user: str) -> str:
    """ConfigCommand's Entity.toString of a user ("" is the default user)."""
    return "default user-principal" if user == "" else f"user-principal '{user}'"


def java_int(text: str) -> int:
    """Integer.parseInt, failing with its NumberFormatException's message."""
    if _INT.fullmatch(text) and -2**31 <= int(text) < 2**31:
        return int(text)
    raise ToolError(f'For input string: "{text}"')


def _properties_text(props: Mapping[str, str]) -> str:
    """A java.util.Properties' toString, in its iteration order."""
    return "{" + ", ".join(f"{k}={props[k]}" for k in java_properties_order(list(props))) + "}"


# --------------------------------------------------------------------- through ZooKeeper


def open_zookeeper(connect: str, tls_config_file: str | None) -> KafkaZkClient:
    """A started ZooKeeper session as ConfigCommand opens one: 30 s timeouts, TLS from a
    --zk-tls-config-file, SASL from KAFKA_OPTS's JAAS `Client` section, Kafka's secure
    ACLs on what it creates when it has either identity (a SASL login or a client
    certificate)."""
    values = zk_tls_file_properties(load_properties(tls_config_file)) if tls_config_file \
        else {}
    try:
        tls_context = zk_tls.tls_context(values)
        sasl = zk_sasl.settings_from_environment().login
    except (TlsConfigError, OSError, zk_sasl.ZkSaslConfigError) as exc:
        raise ToolError(str(exc)) from None
    secure = sasl is not None or (
        tls_context is not None and bool(values.get("zookeeper.ssl.keystore.location")))
    zk = KafkaZkClient(connect, session_timeout_ms=ZK_TIMEOUT_MS,
                       connection_timeout_ms=ZK_TIMEOUT_MS, tls_context=tls_context,
                       secure_acls=secure, sasl=sasl)
    try:
        zk.start()
    except ZkError as exc:
        zk.close()
        raise ToolError(str(exc)) from None
    return zk


def zk_credential(mechanism: ScramMechanism, value: str) -> str:
    """ConfigCommand.preProcessScramCredentials: the stored form of `[iterations=<n>,]
    password=<p>`, with a new random salt."""
    match = _ZK_CREDENTIAL.fullmatch(value)
    if match is None:
        # Kafka names the mechanism by its enum constant here (SCRAM_SHA_256)
        raise ArgumentError(f"Invalid credential property {mechanism.name}={value}")
    iterations = DEFAULT_ITERATIONS if match[1] is None else java_int(match[1])
    if iterations < MIN_ITERATIONS:
        raise ArgumentError(f"Iterations {iterations} is less than the minimum "
                            f"{MIN_ITERATIONS} required for {mechanism.name}")
    return derive_credential(mechanism, match[2], iterations).to_config_value()


def alter_in_zookeeper(zk: KafkaZkClient, user: str, adding: Mapping[str, str],
                       deleting: Sequence[str] | None) -> str:
    """alterConfigWithZk for a user (`deleting` None: no --delete-config given): SCRAM keys
    only; the deleted ones must exist. One compare-and-set write of the user's config map,
    so its quota keys stay. Returns the line to print."""
    deleted = list(deleting or [])
    if any(key not in SCRAM_MECHANISM_NAMES for key in [*adding, *deleted]):
        removals = "List()" if deleting is None else f"ArrayBuffer({', '.join(deleted)})"
        raise ArgumentError(
            "requirement failed: --bootstrap-server option must be specified to update users "
            f"configs: {{add: {_properties_text(adding)}, delete: {removals}}}. User "
            "configuration updates using ZooKeeper are only supported for SCRAM credential "
            "updates.")
    credentials = {m.mechanism_name: zk_credential(m, adding[m.mechanism_name])
                   for m in ScramMechanism if m.mechanism_name in adding}

    def change(config: dict[str, str]) -> dict[str, str]:
        invalid = [key for key in deleted if key not in config]
        if invalid:
            raise ArgumentError(f"Invalid config(s): {','.join(invalid)}")
        config.update(credentials)
        for key in deleted:
            config.pop(key, None)
        unknown = [key for key in config if key not in QUOTA_KEYS]
        if user == "" and unknown:  # DynamicConfig.Client: the default user has quotas only
            raise ArgumentError("requirement failed: Unknown Dynamic Configuration: "
                                f"HashSet({', '.join(sorted(unknown))}).")
        return config

    zk.update_user_config(zd.DEFAULT_ENTITY if user == "" else user, change)
    return f"Completed updating config for entity: {entity_text(user)}."


def describe_in_zookeeper(zk: KafkaZkClient, user: str | None) -> list[str]:
    """describeConfigWithZk for users: the stored config of one user (even if empty), or
    of every user that has one (`user` None)."""
    def line(name: str, config: Mapping[str, str]) -> str:
        entries = ",".join(f"{k}={config[k]}" for k in java_properties_order(list(config)))
        return f"Configs for {entity_text(name)} are {entries}"

    if user is not None:
        return [line(user, zk.get_user_config(zd.DEFAULT_ENTITY if user == "" else user))]
    return [line("" if name == zd.DEFAULT_ENTITY else name, config)
            for name, config in zk.get_all_user_configs().items() if config]


# ----------------------------------------------------------------- through the admin API


def _admin_credential(mechanism: ScramMechanism, value: str) -> tuple[int, str]:
    """(iterations, password) of `[iterations=<n>,]password=<p>` (-1: the default)."""
    match = _ADMIN_CREDENTIAL.fullmatch(value)
    if match is None:
        raise ArgumentError(f"Invalid credential property {mechanism.name}={value}")
    iterations = DEFAULT_ITERATIONS if match[1] in (None, "-1") else java_int(match[1])
    if iterations < MIN_ITERATIONS:
        raise ArgumentError(f"Iterations {iterations} is less than the minimum "
                            f"{MIN_ITERATIONS} required for {mechanism.mechanism_name}")
    return iterations, match[2]


def _upsertion(user: str, mechanism: ScramMechanism, value: str) -> Upsertion_:
    """What Kafka's AdminClient sends: a random salt and the salted password (the broker
    derives the keys)."""
    iterations, password = _admin_credential(mechanism, value)
    if not password:  # the AdminClient refuses it before sending anything
        raise ToolError("Password must not be empty")
    salt = random_salt()
    return Upsertion_(name=user, mechanism=mechanism.type_code, iterations=iterations,
                      salt=salt,
                      salted_password=mechanism.salted_password(password, salt, iterations))


def alter_with_admin(admin: Admin, user: str, adding: Mapping[str, str],
                     deleting: Sequence[str]) -> None:
    """alterConfig for a user with --bootstrap-server: quota or SCRAM keys, not both
    (`user` "" is the default user, which has quotas only)."""
    added = java_properties_order(list(adding))
    unknown = [k for k in added if k not in SCRAM_MECHANISM_NAMES and k not in QUOTA_KEYS]
    if unknown:
        raise ArgumentError("Only quota and SCRAM credential configs can be added for 'users' "
                            f"using --bootstrap-server. Unexpected config names: "
                            f"Set({', '.join(unknown)})")
    unknown = [k for k in deleting if k not in SCRAM_MECHANISM_NAMES and k not in QUOTA_KEYS]
    if unknown:
        raise ArgumentError("Only quota and SCRAM credential configs can be deleted for "
                            "'users' using --bootstrap-server. Unexpected config names: "
                            f"ArrayBuffer({', '.join(unknown)})")
    scram = [k for k in [*added, *deleting] if k in SCRAM_MECHANISM_NAMES]
    quotas = [k for k in [*added, *deleting] if k in QUOTA_KEYS]
    if scram and user == "":
        raise ArgumentError("The use of --entity-default or --user-defaults is not allowed "
                            "with User SCRAM Credentials using --bootstrap-server.")
    if scram and quotas:
        raise ArgumentError("Cannot alter both quota and SCRAM credential configs "
                            "simultaneously for 'users' using --bootstrap-server.")
    if quotas:
        configs_quotas.alter_quotas(admin, [USERS], [user], adding, deleting)
        return
    upsertions = [_upsertion(user, _mechanism(k), adding[k])
                  for k in added if k in SCRAM_MECHANISM_NAMES]
    deletions = [Deletion_(name=user, mechanism=_mechanism(k).type_code) for k in deleting]
    answer = admin.to_controller("AlterUserScramCredentials", 0, deletions=deletions,
                                 upsertions=upsertions)
    for result in answer.results:
        check(result.error_code, result.error_message)


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.by_name(name)
    assert mechanism is not None, name  # only SCRAM names get here
    return mechanism


def describe_with_admin(admin: Admin, user: str | None) -> list[str]:
    """The SCRAM lines of describeClientQuotaAndUserScramCredentialConfigs: one user, or
    every user with a credential (None); the default user ("") has none to show."""
    if user == "":
        return []
    users = [] if user is None else [DescribeUserScramCredentialsRequest.UserName(name=user)]
    answer = admin.call("DescribeUserScramCredentials", 0, users=users)
    check(answer.error_code, answer.error_message)
    lines = []
    for result in answer.results:
        if result.error_code == RESOURCE_NOT_FOUND:  # the AdminClient leaves these out
            continue
        if result.error_code:
            cause = exception_class(result.error_code)
            lines.append(f"Error retrieving SCRAM credential configs for user-principal "
                         f"'{result.user}': ExecutionException: {cause}: "
                         f"{error_text(result.error_code, result.error_message)}")
            continue
        infos = ", ".join(f"{_mechanism_text(i.mechanism)}=iterations={i.iterations}"
                          for i in result.credential_infos)
        lines.append(f"SCRAM credential configs for user-principal '{result.user}' are {infos}")
    return lines


def _mechanism_text(code: int) -> str:
    mechanism = ScramMechanism.by_type(code)
    return "UNKNOWN" if mechanism is None else mechanism.mechanism_name
