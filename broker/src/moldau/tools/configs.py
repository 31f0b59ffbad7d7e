"""kafka-configs: describe and alter topic, broker and broker-logger configs (Kafka 3.9's
ConfigCommand through the Admin API: DescribeConfigs and IncrementalAlterConfigs), the
SCRAM credentials of users, through the Admin API or ZooKeeper (configs_users.py), and the
client quotas of users, client ids and ips through the Admin API (configs_quotas.py)."""

from __future__ import annotations

import re

from moldau.protocol.generated.describe_configs_request import DescribeConfigsRequest
from moldau.protocol.generated.describe_configs_response import DescribeConfigsResponse
from moldau.protocol.generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from moldau.tools import config_names, configs_quotas, configs_users
from moldau.tools.acl_services import ZK_TLS_KEYS
from moldau.tools.admin import Admin
from moldau.tools.common import admin_from, bootstrap_opts
from moldau.tools.kafka_errors import check, check_as_java
from moldau.tools.options import Opt, Options, ToolError, UsageError, forbid
from moldau.tools.properties import load_properties
from moldau.tools.runner import ArgumentError, Tool

TOPICS, BROKERS, LOGGERS, USERS = "topics", "brokers", "broker-loggers", "users"
CLIENTS, IPS = "clients", "ips"
SUPPORTED = (TOPICS, BROKERS, LOGGERS, USERS, CLIENTS, IPS)
# the entity types an --alter may name by default entity as well as by name
DEFAULTABLE = (USERS, CLIENTS, BROKERS, IPS)
KAFKA_TYPES = ("topics", "clients", "users", "brokers", "ips", "broker-loggers",
               "client-metrics")  # Kafka 3.9.1's, in its order
ZK_TYPES = ("users", "brokers")  # what 3.9 still configures through --zookeeper
RESOURCE = {TOPICS: 2, BROKERS: 4, LOGGERS: 8}
# the source that makes an entry "dynamic" for each entity type (None: every entry)
DYNAMIC_SOURCE = {TOPICS: 1, BROKERS: 2, LOGGERS: None}
DEFAULT_BROKER_SOURCE = 3
SOURCE_NAMES = {0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
                3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG",
                5: "DEFAULT_CONFIG", 6: "DYNAMIC_BROKER_LOGGER_CONFIG",
                7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG"}
SET, DELETE = 0, 1
# shortcut flag -> entity type; the *-defaults flags name the default entity
SHORTCUTS = {"topic": TOPICS, "broker": BROKERS, "broker-logger": LOGGERS,
             "client": "clients", "user": "users", "ip": "ips"}
DEFAULT_SHORTCUTS = {"broker-defaults": BROKERS, "client-defaults": "clients",
                     "user-defaults": "users", "ip-defaults": "ips"}
# split on commas (and '=') that are not inside [...], as ConfigCommand does
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"

OPTIONS = [
    *bootstrap_opts("Admin Client. This is used only with --bootstrap-server option for "
                    "describing and altering broker configs",
                    "The Kafka servers to connect to."),
    Opt("bootstrap-controller", "The Kafka controllers to connect to.",
        "controller to connect to"),
    Opt("zookeeper", "DEPRECATED. The connection string for the zookeeper connection in the "
        "form host:port. Multiple URLS can be given to allow fail-over. Required when "
        "configuring SCRAM credentials for users or dynamic broker configs when the relevant "
        "broker(s) are down. Not allowed otherwise.", "urls"),
    Opt("describe", "List configs for the given entity."),
    Opt("alter", "Alter the configuration for the entity."),
    Opt("all", "List all configs for the given topic, broker, or broker-logger entity "
        "(includes static configuration when the entity type is brokers)"),
    Opt("entity-type", "Type of entity "
        "(topics/clients/users/brokers/broker-loggers/ips/client-metrics)", ""),
    Opt("entity-name", "Name of entity (topic name/client id/user principal name/broker "
        "id/ip/client metrics)", ""),
    Opt("entity-default", "Default entity name for clients/users/brokers/ips (applies to "
        "corresponding entity type in command line)"),
    Opt("add-config", "Key Value pairs of configs to add. Square brackets can be used to "
        "group values which contain commas: 'k1=v1,k2=[v1,v2,v2],k3=v3'. The following is a "
        "list of valid configurations: "
        + "".join(f"For entity-type '{kind}':\n{config_names.listed(names)}"
                  for kind, names in config_names.BY_ENTITY_TYPE.items())
        + "Entity types 'users' and 'clients' may be specified together to update config for "
        "clients of a specific user.", ""),
    Opt("add-config-file", "Path to a properties file with configs to add. See add-config for a "
        "list of valid configurations.", ""),
    Opt("delete-config", "config keys to remove 'k1,k2'", ""),
    Opt("force", "Suppress console prompts"),
    Opt("topic", "The topic's name.", ""),
    Opt("client", "The client's ID.", ""),
    Opt("user", "The user's principal name.", ""),
    Opt("broker", "The broker's ID.", ""),
    Opt("broker-logger", "The broker's ID for its logger config.", ""),
    Opt("ip", "The IP address.", ""),
    Opt("broker-defaults", "The config defaults for all brokers."),
    Opt("client-defaults", "The config defaults for all clients."),
    Opt("user-defaults", "The config defaults for all users."),
    Opt("ip-defaults", "The config defaults for all IPs."),
    Opt("zk-tls-config-file", "Identifies the file where ZooKeeper client TLS connectivity "
        "properties are defined.  Any properties other than "
        + ", ".join(sorted(ZK_TLS_KEYS)) + " are ignored.", "ZooKeeper TLS configuration"),
]


def entity(options: Options) -> tuple[str, str | None]:
    """(entity type, name): name "" is the default entity, None means every entity."""
    types = options.all("entity-type")
    names = options.all("entity-name")
    for flag, kind in SHORTCUTS.items():
        if options.has(flag):
            types.append(kind)
            names.append(options.get(flag))
    for flag, kind in DEFAULT_SHORTCUTS.items():
        if options.has(flag):
            types.append(kind)
            names.append("")
    if options.has("entity-default"):
        names.append("")
    if len(types) != len(set(types)):
        dupes = sorted({t for t in types if types.count(t) > 1})
        raise ArgumentError(f"Duplicate entity type(s) specified: {','.join(dupes)}")
    allowed, connect = ((ZK_TYPES, "--zookeeper") if options.has("zookeeper") else
                        (KAFKA_TYPES, "--bootstrap-server or --bootstrap-controller"))
    for kind in types:
        if kind not in allowed:
            raise ArgumentError(f"Invalid entity type {kind}, the entity type must be one of "
                                f"{', '.join(allowed)} with a {connect} argument")
    if not types:
        raise ArgumentError("At least one entity type must be specified")
    if len(types) > 1 and set(types) != {USERS, CLIENTS}:
        raise ArgumentError("Only 'users' and 'clients' entity types may be specified together")
    kind = types[0]
    if kind not in SUPPORTED:
        raise ArgumentError(f"Entity type {kind} is not supported by Moldau's kafka-configs "
                            "yet (client quotas arrive in a later release)")
    name = names[-1] if names else None
    if name and kind in (BROKERS, LOGGERS) and not name.isdigit():
        raise ArgumentError(f"The entity name for {kind} must be a valid integer broker id, "
                            f"but it is: {name}")
    return kind, name


def check_args(options: Options) -> tuple[str, str, str | None]:
    actions = [a for a in ("alter", "describe") if options.has(a)]
    if len(actions) != 1:
        raise UsageError("Command must include exactly one action: --describe, --alter")
    forbid(options, "describe", "alter", "add-config", "delete-config")
    explicit = any(options.has(o) for o in ("entity-name", "entity-type", "entity-default"))
    if explicit and any(options.has(f) for f in (*SHORTCUTS, *DEFAULT_SHORTCUTS)):
        raise ArgumentError("--entity-{type,name,default} should not be used in conjunction "
                            "with specific entity flags")
    kind, name = entity(options)
    connects = [o for o in ("bootstrap-server", "bootstrap-controller", "zookeeper")
                if options.has(o)]
    if not connects:
        raise ArgumentError("One of the required --bootstrap-server, --boostrap-controller, "
                            "or --zookeeper arguments must be specified")
    if len(connects) > 1:
        raise ArgumentError("Only one of --bootstrap-server, --boostrap-controller, and "
                            "--zookeeper can be specified")
    if options.has("bootstrap-controller"):
        raise ArgumentError("--bootstrap-controller reaches KRaft controllers, which a "
                            "ZooKeeper-mode cluster has none of: use --bootstrap-server")
    if options.has("all") and options.has("zookeeper"):
        raise ArgumentError("--bootstrap-server must be specified for --all")
    if options.has("zk-tls-config-file") and not options.has("zookeeper"):
        raise ArgumentError("Only the --zookeeper option can be used with the "
                            "--zk-tls-config-file option.")
    if options.has("zookeeper") and kind == BROKERS:
        raise ArgumentError("Moldau's kafka-configs does not write broker configs through "
                            "ZooKeeper yet: use --bootstrap-server")
    if name and kind == IPS and not configs_quotas.valid_ip_entity(name):
        raise ArgumentError(f"The entity name for {kind} must be a valid IP or resolvable "
                            f"host, but it is: {name}")
    if options.has("describe") and kind == LOGGERS and not name:
        raise ArgumentError(f"an entity name must be specified with --describe of {kind}")
    if options.has("alter"):
        if kind in DEFAULTABLE and name is None:
            raise ArgumentError("An entity-name or default entity must be specified with "
                                "--alter of users, clients, brokers or ips")
        if kind not in DEFAULTABLE and not name:
            raise ArgumentError(f"an entity name must be specified with --alter of {kind}")
        if options.has("add-config") and options.has("add-config-file"):
            raise ArgumentError("Only one of --add-config or --add-config-file must be "
                                "specified")
        if not any(options.has(o) for o in ("add-config", "add-config-file", "delete-config")):
            raise ArgumentError("At least one of --add-config, --add-config-file, or "
                                "--delete-config must be specified with --alter")
    return actions[0], kind, name


def configs_to_add(options: Options) -> dict[str, str]:
    if options.has("add-config-file"):
        return load_properties(options.get("add-config-file"))
    if not options.has("add-config"):
        return {}
    pairs = [re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
             for item in re.split("," + _OUTSIDE_BRACKETS, options.get("add-config"))]
    if not all(len(p) == 2 for p in pairs):
        raise ArgumentError('requirement failed: Invalid entity config: all configs to be '
                            'added must be in the format "key=val".')
    return {k.strip(): re.sub(r"\[?\]?", "", v).strip() for k, v in pairs}


def configs_to_delete(options: Options) -> list[str]:
    return [k.strip() for value in options.all("delete-config") for k in value.split(",")]


def _node_for(kind: str, name: str) -> int | None:
    """Broker resources with an id go to that broker, as Kafka's AdminClient sends them."""
    return int(name) if kind in (BROKERS, LOGGERS) and name else None


ConfigEntry = DescribeConfigsResponse.DescribeConfigsResourceResult


def describe_entries(admin: Admin, kind: str, name: str, synonyms: bool) -> list[ConfigEntry]:
    answer = admin.call("DescribeConfigs", 4, _node_for(kind, name), resources=[
        DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=RESOURCE[kind], resource_name=name, configuration_keys=None)],
        include_synonyms=synonyms, include_documentation=False)
    result = answer.results[0]
    check_as_java(result.error_code, result.error_message)
    return result.configs


def resource_configs(admin: Admin, kind: str, name: str, synonyms: bool,
                     describe_all: bool) -> list[ConfigEntry]:
    """Kafka's getResourceConfig: the dynamic entries (or all of them), sorted by name."""
    entries = describe_entries(admin, kind, name, synonyms)
    source = DYNAMIC_SOURCE[kind]
    if kind == BROKERS and name == "":
        source = DEFAULT_BROKER_SOURCE
    if not describe_all and source is not None:
        entries = [e for e in entries if e.config_source == source]
    return sorted(entries, key=lambda e: e.name)


def _value(value: str | None) -> str:
    return "null" if value is None else value


def entry_line(entry: ConfigEntry) -> str:
    synonyms = ", ".join(f"{SOURCE_NAMES.get(s.source, 'UNKNOWN')}:{s.name}={_value(s.value)}"
                         for s in entry.synonyms)
    return (f"  {entry.name}={_value(entry.value)} sensitive="
            f"{'true' if entry.is_sensitive else 'false'} synonyms={{{synonyms}}}")


def describe(admin: Admin, options: Options, kind: str, name: str | None) -> int:
    if name is not None:
        names = [name]
    elif kind == TOPICS:
        names = sorted(t.name for t in admin.metadata(None).topics if t.error_code == 0)
    else:
        names = [str(b.node_id) for b in admin.metadata([]).brokers] + [""]
    describe_all = options.has("all")
    for each in names:
        # the header first: Kafka's prints it before it asks (and fails)
        if each == "":
            print(f"Default configs for {kind} in the cluster are:", flush=True)
        else:
            print(f"{'All' if describe_all else 'Dynamic'} configs for {kind[:-1]} {each} are:",
                  flush=True)
        entries = resource_configs(admin, kind, each, True, describe_all)
        for entry in entries:
            print(entry_line(entry))
    return 0


def alter(admin: Admin, options: Options, kind: str, name: str) -> int:
    adding = configs_to_add(options)
    deleting = configs_to_delete(options)
    current = {e.name for e in resource_configs(admin, kind, name, False, False)}
    if kind == LOGGERS:
        invalid = [k for k in [*deleting, *adding] if k not in current]
        if invalid:
            raise ArgumentError(f"Invalid broker logger(s): {','.join(invalid)}")
    else:
        invalid = [k for k in deleting if k not in current]
        if invalid:
            raise ArgumentError(f"Invalid config(s): {','.join(invalid)}")
    ops = [IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=SET, value=v)
           for k, v in adding.items()]
    ops += [IncrementalAlterConfigsRequest.AlterableConfig(name=k, config_operation=DELETE,
                                                           value=None) for k in deleting]
    answer = admin.call("IncrementalAlterConfigs", 1, _node_for(kind, name), resources=[
        IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=RESOURCE[kind], resource_name=name, configs=ops)],
        validate_only=False)
    result = answer.responses[0]
    check(result.error_code, result.error_message)
    if name:
        print(f"Completed updating config for {kind[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {kind} in the cluster.")
    return 0


def run_for_users(options: Options, action: str, name: str | None) -> int:
    """A user's SCRAM credentials through ZooKeeper (name "" is the default user, None
    every user)."""
    if options.has("zookeeper"):
        print(configs_users.ZK_WARNING)
        zk = configs_users.open_zookeeper(options.get("zookeeper"),
                                          options.get("zk-tls-config-file"))
        try:
            if action == "describe":
                lines = configs_users.describe_in_zookeeper(zk, name)
            else:
                assert name is not None  # check_args
                lines = [configs_users.alter_in_zookeeper(
                    zk, name, configs_to_add(options),
                    configs_to_delete(options) if options.has("delete-config") else None)]
        finally:
            zk.close()
        for line in lines:
            print(line)
        return 0
    return run_for_quota_entities(options, action)


def run_for_quota_entities(options: Options, action: str) -> int:
    """Users, clients, a user's clients and ips through the Admin API: their quotas, and
    a user's SCRAM credentials (ConfigCommand's alterConfig and describeConfig)."""
    types, names = configs_quotas.entity_args(options)
    if action == "alter" and len(types) != len(names):
        raise ArgumentError("An entity name must be specified for every entity type")
    with admin_from(options) as admin:
        if action == "describe":
            lines = configs_quotas.describe_lines(admin, types, names)
            # SCRAM credentials: of users alone, not of their defaults
            if CLIENTS not in types and IPS not in types and "" not in names:
                lines += configs_users.describe_with_admin(admin, names[0] if names else None)
            for line in lines:
                print(line)
            return 0
        adding, deleting = configs_to_add(options), configs_to_delete(options)
        if types == [USERS]:
            configs_users.alter_with_admin(admin, names[0], adding, deleting)
        else:
            configs_quotas.check_keys(types, list(adding), deleting)
            configs_quotas.alter_quotas(admin, types, names, adding, deleting)
    kind, name = types[0], names[0]
    print(f"Completed updating config for {kind[:-1]} {name}." if name else
          f"Completed updating default config for {kind} in the cluster.")
    return 0


def run(options: Options) -> int:
    action, kind, name = check_args(options)
    if kind == USERS and options.has("zookeeper"):
        return run_for_users(options, action, name)
    if kind in configs_quotas.QUOTA_TYPES:
        return run_for_quota_entities(options, action)
    with admin_from(options) as admin:
        if action == "describe":
            return describe(admin, options, kind, name)
        if name is None:
            raise ToolError("an entity name must be given")
        return alter(admin, options, kind, name)


TOOL = Tool("configs", "This tool helps to manipulate and describe entity config for a topic, "
            "client, user, broker, ip or client-metrics", OPTIONS, run,
            "Error while executing config command with args '{args}' : ",
            plain_parse_errors=True,
            broker_error_header="Error while executing config command with args '{args}'")
