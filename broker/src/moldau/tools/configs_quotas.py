"""kafka-configs for client quotas: users, client ids, a user's client ids and ips, as
Kafka 3.9's ConfigCommand handles them through the admin API (--bootstrap-server):
DescribeClientQuotas for `--describe`, then AlterClientQuotas for `--alter`.

The entity types and names come in Kafka's order (`--entity-type`/`--entity-name`/
`--entity-default` as given, then the `--client`, `--user`, `--ip` flags, then the
`--*-defaults` flags), and the output is Kafka's: one line per entity, in the order a
java.util.HashMap of the AdminClient's result iterates, values printed as Java doubles
(`producer_byte_rate=1048576.0`, `consumer_byte_rate=1.048576E7`)."""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Mapping, Sequence
from typing import Any

from moldau.coordinator.group.records import java_string_hash
from moldau.protocol.generated.alter_client_quotas_request import AlterClientQuotasRequest
from moldau.protocol.generated.describe_client_quotas_request import (
    DescribeClientQuotasRequest,
)
from moldau.security.sasl.scram_credentials import SCRAM_MECHANISM_NAMES
from moldau.server.config_rendering import java_double
from moldau.tools.admin import Admin
from moldau.tools.kafka_errors import check
from moldau.tools.options import Options
from moldau.tools.runner import ArgumentError

USERS, CLIENTS, IPS = "users", "clients", "ips"
QUOTA_TYPES = (USERS, CLIENTS, IPS)
# Kafka's QuotaConfigs.isClientOrUserQuotaConfig, and DynamicConfig.Ip's names
CLIENT_QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage",
                     "controller_mutation_rate")
IP_QUOTA_KEYS = ("connection_creation_rate",)
ENTITY_TYPE = {USERS: "user", CLIENTS: "client-id", IPS: "ip"}
DESCRIPTION = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
# the flags naming an entity, in ConfigCommandOptions' entityFlags / entityDefaultsFlags order
NAME_FLAGS = (("client", CLIENTS), ("user", USERS), ("ip", IPS))
DEFAULT_FLAGS = (("client-defaults", CLIENTS), ("user-defaults", USERS), ("ip-defaults", IPS))
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
# java.lang.Double.parseDouble's decimal forms (hexadecimal ones are not accepted here)
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)")

Component_ = DescribeClientQuotasRequest.ComponentData
Entry_ = AlterClientQuotasRequest.EntryData
Entity_ = AlterClientQuotasRequest.EntityData
Op_ = AlterClientQuotasRequest.OpData


# ---------------------------------------------------------------------- the command line


def entity_args(options: Options) -> tuple[list[str], list[str]]:
    """ConfigCommandOptions.entityTypes and entityNames: "" names a default entity."""
    types = list(options.all("entity-type"))
    types += [kind for flag, kind in (*NAME_FLAGS, *DEFAULT_FLAGS) if options.has(flag)]
    names = _entity_names_in_order(options)
    names += [options.get(flag) for flag, _ in NAME_FLAGS if options.has(flag)]
    names += ["" for flag, _ in DEFAULT_FLAGS if options.has(flag)]
    return types, names


def _entity_names_in_order(options: Options) -> list[str]:
    """The --entity-name values and --entity-default flags, in command-line order."""
    given = iter(options.all("entity-name"))
    names: list[str] = []
    argv = list(options.argv)
    i = 0
    while i < len(argv):
        flag, eq, _ = argv[i].partition("=")
        i += 1
        if flag == "--":
            break
        if flag == "--entity-name":
            names.append(next(given, ""))
            i += 0 if eq else 1  # skip its value
        elif flag == "--entity-default":
            names.append("")
    return names


def valid_ip_entity(name: str) -> bool:
    """DynamicConfig.Ip.isValidIpEntity: an address, or a name that resolves."""
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(name, None)
    except (OSError, UnicodeError):
        return False
    return True


def java_parse_double(key: str, text: str) -> float:
    """Scala's `toDouble`, failing with ConfigCommand's message."""
    stripped = text.strip()
    if not _JAVA_DOUBLE.fullmatch(stripped):
        raise ArgumentError(f"Cannot parse quota configuration value for {key}: {text}")
    return float(stripped.rstrip("fFdD").replace("Infinity", "inf"))


def _scala_set(keys: Sequence[str]) -> str:
    return f"Set({', '.join(keys)})"


def _buffer(keys: Sequence[str]) -> str:
    return f"ArrayBuffer({', '.join(keys)})"


def check_keys(types: Sequence[str], adding: Sequence[str], deleting: Sequence[str]) -> None:
    """alterConfig's refusals of keys that are not quota keys of the entity type (users
    are checked with their SCRAM keys in configs_users)."""
    if types[0] == IPS:
        unknown = [k for k in [*adding, *deleting] if k not in IP_QUOTA_KEYS]
        if unknown:
            raise ArgumentError("Only connection quota configs can be added for 'ips' using "
                                f"--bootstrap-server. Unexpected config names: "
                                f"{','.join(unknown)}")
        return
    # a client, or a user's client: quota keys only (SCRAM ones listed last)
    unknown = [k for k in adding if k not in CLIENT_QUOTA_KEYS and k not in SCRAM_MECHANISM_NAMES]
    scram = [k for k in adding if k in SCRAM_MECHANISM_NAMES]
    if unknown or scram:
        raise ArgumentError("Only quota configs can be added for 'clients' using "
                            f"--bootstrap-server. Unexpected config names: "
                            f"{_scala_set([*unknown, *scram])}")
    unknown = [k for k in deleting if k not in CLIENT_QUOTA_KEYS
               and k not in SCRAM_MECHANISM_NAMES]
    scram = [k for k in deleting if k in SCRAM_MECHANISM_NAMES]
    if unknown or scram:
        raise ArgumentError("Only quota configs can be deleted for 'clients' using "
                            f"--bootstrap-server. Unexpected config names: "
                            f"{_buffer([*unknown, *scram])}")


# ------------------------------------------------------------------------------ describe


def filter_components(types: Sequence[str], names: Sequence[str]) -> list[Component_]:
    """getAllClientQuotasConfigs' filter: one component per entity type, exact for a
    name, default for "", any specified name when the type has no name."""
    if len(names) > len(types):
        raise ArgumentError("More entity names specified than entity types")
    components = []
    for i, kind in enumerate(types):
        entity_type = ENTITY_TYPE.get(kind)
        if entity_type is None:
            raise ArgumentError(f"Unexpected entity type {kind}")
        if i >= len(names):
            components.append(Component_(entity_type=entity_type, match_type=MATCH_SPECIFIED,
                                         match=None))
        elif names[i] == "":
            components.append(Component_(entity_type=entity_type, match_type=MATCH_DEFAULT,
                                         match=None))
        else:
            components.append(Component_(entity_type=entity_type, match_type=MATCH_EXACT,
                                         match=names[i]))
    return components


Described = list[tuple[dict[str, str | None], dict[str, float]]]


def describe_quotas(admin: Admin, types: Sequence[str], names: Sequence[str]) -> Described:
    """The entities the filter matches (strict, as ClientQuotaFilter.containsOnly), each
    with its values, in the iteration order of the AdminClient's HashMaps."""
    answer = admin.call("DescribeClientQuotas", 1,
                        components=filter_components(types, names), strict=True)
    check(answer.error_code, answer.error_message)
    entries = answer.entries or []
    described: Described = []
    for entry in entries:
        entity = {e.entity_type: e.entity_name for e in entry.entity}
        values: dict[str, float] = {}
        for value in entry.values:
            values[value.key] = value.value
        ordered_keys = java_hashmap_order([(java_string_hash(k), k) for k in values],
                                          len(values))
        described.append((entity, {k: values[k] for k in ordered_keys}))
    order = java_hashmap_order([(_entity_hash(e), i) for i, (e, _) in enumerate(described)],
                               len(described))
    return [described[i] for i in order]


def describe_lines(admin: Admin, types: Sequence[str], names: Sequence[str]) -> list[str]:
    """describeQuotaConfigs' lines: `Quota configs for user-principal 'u', client-id 'c'
    are producer_byte_rate=1048576.0, ...`."""
    lines = []
    for entity, values in describe_quotas(admin, types, names):
        parts = []
        for entity_type in ("user", "client-id", "ip"):
            if entity_type not in entity:
                continue
            name = entity[entity_type]
            word = DESCRIPTION[entity_type]
            parts.append(f"the default {word}" if name is None else f"{word} '{name}'")
        text = ", ".join(f"{k}={java_double(v)}" for k, v in values.items())
        lines.append(f"Quota configs for {', '.join(parts)} are {text}")
    return lines


def _entity_hash(entity: Mapping[str, str | None]) -> int:
    """ClientQuotaEntity.hashCode: its HashMap's, the sum of key ^ value hashes."""
    total = 0
    for key, value in entity.items():
        total += java_string_hash(key) ^ (0 if value is None else java_string_hash(value))
    total &= 0xFFFFFFFF
    return total - (1 << 32) if total & 0x80000000 else total


def java_hashmap_order(items: Sequence[tuple[int, Any]], capacity: int) -> list[Any]:
    """The iteration order of a `new java.util.HashMap<>(capacity)` filled with the items'
    keys in order (each given with its hashCode): by bucket of the final table, then by
    insertion (a resize keeps the relative order of a bucket's nodes)."""
    table = 1
    while table < capacity:
        table *= 2
    threshold = int(table * 0.75)
    for size in range(1, len(items) + 1):
        if size > threshold:
            threshold = threshold * 2 if table >= 16 else int(table * 2 * 0.75)
            table *= 2

    def bucket(h: int) -> int:
        h &= 0xFFFFFFFF
        return (h ^ (h >> 16)) & (table - 1)

    ranked = sorted(range(len(items)), key=lambda i: (bucket(items[i][0]), i))
    return [items[i][1] for i in ranked]


# --------------------------------------------------------------------------------- alter


def alter_quotas(admin: Admin, types: Sequence[str], names: Sequence[str],
                 adding: Mapping[str, str], deleting: Sequence[str]) -> None:
    """alterQuotaConfigs: the entity's current quotas first (a deleted key must be one of
    them), then one AlterClientQuotas entry with a set per added key and a removal per
    deleted one."""
    if len(types) != len(names):
        raise ArgumentError("Exactly one entity name must be specified for every entity type")
    current = describe_quotas(admin, types, names)
    old = current[0][1] if current else {}
    invalid = [k for k in deleting if k not in old]
    if invalid:
        raise ArgumentError(f"Invalid config(s): {','.join(invalid)}")
    entity = [Entity_(entity_type=ENTITY_TYPE[kind], entity_name=name or None)
              for kind, name in zip(types, names, strict=True)]
    ops = [Op_(key=k, value=java_parse_double(k, v), remove=False) for k, v in adding.items()]
    ops += [Op_(key=k, value=0.0, remove=True) for k in deleting]
    answer = admin.call("AlterClientQuotas", 1, entries=[Entry_(entity=entity, ops=ops)],
                        validate_only=False)
    for entry in answer.entries:
        check(entry.error_code, entry.error_message)
