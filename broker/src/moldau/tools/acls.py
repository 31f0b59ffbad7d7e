"""kafka-acls: add, remove and list ACLs as Kafka 3.9's AclCommand does, through the Admin
API of a running cluster (`--bootstrap-server`, `--command-config`) or straight into
ZooKeeper (`--authorizer-properties zookeeper.connect=...`, `--zk-tls-config-file`).

The command line is read by acl_plan, the ACLs are read and written by acl_services; this
module checks the flags, asks before a removal, and prints Kafka's blocks:
"Adding ACLs for resource `ResourcePattern(...)`: " and "Current ACLs for resource ...",
each followed by the entries, one per line behind a tab. As Kafka 3.9's, --add and
--remove print no listing afterwards, and a failure once the command line is checked goes
to stdout: "Error while executing ACL command: ..." and the Java exception."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

from moldau.security.acls import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    ResourcePattern,
    ResourcePatternFilter,
)
from moldau.tools.acl_plan import (
    add_plan,
    filter_plan,
    parse_pattern_type,
    principals,
    resource_filters,
)
from moldau.tools.acl_services import (
    ACL_AUTHORIZER,
    ZK_TLS_KEYS,
    AclService,
    AdminAclService,
    AdminCallFailure,
    open_authorizer,
    zk_tls_file_properties,
)
from moldau.tools.common import admin_from
from moldau.tools.options import Opt, Options, ToolError, UsageError, exactly_one, forbid, require
from moldau.tools.properties import load_properties
from moldau.tools.runner import ArgumentError, Tool, java_exception

ERROR_PREFIX = "Error while executing ACL command: "
DEPRECATION = ("Warning: support for ACL configuration directly through the authorizer is "
               "deprecated and will be removed in a future release. Please use "
               "--bootstrap-server instead to set ACLs through the admin client.")
# in the order AclCommand lists them (its hash set's)
_OPERATION_NAMES = ("CreateTokens", "Create", "Describe", "DescribeTokens", "AlterConfigs",
                    "Write", "Alter", "IdempotentWrite", "Delete", "ClusterAction", "Read", "All",
                    "DescribeConfigs")

OPTIONS = [
    Opt("bootstrap-server", "A list of host/port pairs to use for establishing the connection "
        "to the Kafka cluster. This list should be in the form host1:port1,host2:port2,... "
        "This config is required for acl management using admin client API.",
        "server to connect to"),
    Opt("command-config", "A property file containing configs to be passed to Admin Client.",
        "command-config", optional=True),
    Opt("authorizer", "DEPRECATED: Fully qualified class name of the authorizer, which "
        f"defaults to {ACL_AUTHORIZER} if --bootstrap-server is not provided. {DEPRECATION}",
        "authorizer"),
    Opt("authorizer-properties", "DEPRECATED: The properties required to configure an "
        "instance of the Authorizer specified by --authorizer. These are key=val pairs. For "
        "the default authorizer, example values are: zookeeper.connect=localhost:2181. "
        + DEPRECATION, "authorizer-properties"),
    Opt("zk-tls-config-file", "DEPRECATED: Identifies the file where ZooKeeper client TLS "
        f"connectivity properties are defined for the default authorizer {ACL_AUTHORIZER}. "
        "Any properties other than the following (with or without an \"authorizer.\" prefix) "
        "are ignored: " + ", ".join(sorted(ZK_TLS_KEYS)) + ". Note that if SASL is not "
        "configured and zookeeper.set.acl is supposed to be true due to mutual certificate "
        "authentication being used then it is necessary to explicitly specify "
        "--authorizer-properties zookeeper.set.acl=true. " + DEPRECATION,
        "Authorizer ZooKeeper TLS configuration"),
    Opt("topic", "topic to which ACLs should be added or removed. A value of '*' indicates "
        "ACL should apply to all topics.", "topic"),
    Opt("cluster", "Add/Remove cluster ACLs."),
    Opt("group", "Consumer Group to which the ACLs should be added or removed. A value of "
        "'*' indicates the ACLs should apply to all groups.", "group"),
    Opt("transactional-id", "The transactionalId to which ACLs should be added or removed. "
        "A value of '*' indicates the ACLs should apply to all transactionalIds.",
        "transactional-id"),
    Opt("idempotent", "Enable idempotence for the producer. This should be used in "
        "combination with the --producer option. Note that idempotence is enabled "
        "automatically if the producer is authorized to a particular transactional-id."),
    Opt("delegation-token", "Delegation token to which ACLs should be added or removed. A "
        "value of '*' indicates ACL should apply to all tokens.", "delegation-token"),
    Opt("user-principal", "Specifies a user principal as a resource in relation with the "
        "operation. For instance one could grant CreateTokens or DescribeTokens permission "
        "on a given user principal.", "user-principal"),
    Opt("resource-pattern-type", "The type of the resource pattern or pattern filter. When "
        "adding acls, this should be a specific pattern type, e.g. 'literal' or 'prefixed'. "
        "When listing or removing acls, a specific pattern type can be used to list or "
        "remove acls from specific resource patterns, or use the filter values of 'any' or "
        "'match', where 'any' will match any pattern type, but will match the resource name "
        "exactly, where as 'match' will perform pattern matching to list or remove all acls "
        "that affect the supplied resource(s). WARNING: 'match', when used in combination "
        "with the '--remove' switch, should be used with care.",
        "", parse_pattern_type, "LITERAL", label="ANY|MATCH|LITERAL|PREFIXED"),
    Opt("add", "Indicates you are trying to add ACLs."),
    Opt("remove", "Indicates you are trying to remove ACLs."),
    Opt("list", "List ACLs for the specified resource, use --topic <topic> or --group "
        "<group> or --cluster to specify a resource."),
    Opt("operation", "Operation that is being allowed or denied. Valid operation names "
        "are: \n" + "".join(f"\t{name}\n" for name in _OPERATION_NAMES), "", default="All"),
    Opt("allow-principal", "principal is in principalType:name format. Note that "
        "principalType must be supported by the Authorizer being used. For example, "
        "User:'*' is the wild card indicating all users.", "allow-principal"),
    Opt("deny-principal", "principal is in principalType:name format. By default anyone not "
        "added through --allow-principal is denied access. You only need to use this option "
        "as negation to already allowed set. Note that principalType must be supported by "
        "the Authorizer being used. For example if you wanted to allow access to all users "
        "in the system but not test-user you can define an ACL that allows access to "
        "User:'*' and specify --deny-principal=User:test@EXAMPLE.COM. AND PLEASE REMEMBER "
        "DENY RULES TAKES PRECEDENCE OVER ALLOW RULES.", "deny-principal"),
    Opt("principal", "List ACLs for the specified principal. principal is in "
        "principalType:name format. Note that principalType must be supported by the "
        "Authorizer being used. Multiple --principal option can be passed.", "principal",
        optional=True),
    Opt("allow-host", "Host from which principals listed in --allow-principal will have "
        "access. If you have specified --allow-principal then the default for this option "
        "will be set to '*' which allows access from all hosts.", "allow-host"),
    Opt("deny-host", "Host from which principals listed in --deny-principal will be denied "
        "access. If you have specified --deny-principal then the default for this option "
        "will be set to '*' which denies access from all hosts.", "deny-host"),
    Opt("producer", "Convenience option to add/remove ACLs for producer role. This will "
        "generate ACLs that allows WRITE,DESCRIBE and CREATE on topic."),
    Opt("consumer", "Convenience option to add/remove ACLs for consumer role. This will "
        "generate ACLs that allows READ,DESCRIBE on topic and READ on group."),
    Opt("force", "Assume Yes to all queries and do not prompt."),
]


def check_args(options: Options) -> str:
    """Kafka's checkArgs, in its order; the action. Without --bootstrap-server the
    deprecation warning goes to stderr first, as Kafka prints it."""
    if options.has("bootstrap-server") and options.has("authorizer"):
        raise UsageError("Only one of --bootstrap-server or --authorizer must be specified")
    if not options.has("bootstrap-server"):
        require(options, "authorizer-properties")
        print(DEPRECATION, file=sys.stderr)
    if options.has("command-config") and not options.has("bootstrap-server"):
        raise UsageError("The --command-config option can only be used with "
                         "--bootstrap-server option")
    if options.has("authorizer-properties") and options.has("bootstrap-server"):
        raise UsageError("The --authorizer-properties option can only be used with "
                         "--authorizer option")
    action = exactly_one(options, ("add", "remove", "list"),
                         "Command must include exactly one action: --list, --add, --remove. ")
    forbid(options, "list", "producer", "consumer", "allow-host", "allow-principal",
           "deny-host", "deny-principal")
    # --producer and --consumer choose the operations, and only allow
    forbid(options, "producer", "operation", "deny-principal", "deny-host")
    forbid(options, "consumer", "operation", "deny-principal", "deny-host")
    if options.has("principal") and not options.has("list"):
        raise UsageError("The --principal option is only available if --list is set")
    if options.has("producer") and not options.has("topic"):
        raise UsageError("With --producer you must specify a --topic")
    if options.has("idempotent") and not options.has("producer"):
        raise UsageError("The --idempotent option is only available if --producer is set")
    if options.has("consumer") and (
            not options.has("topic") or not options.has("group")
            or (not options.has("producer")
                and (options.has("cluster") or options.has("transactional-id")))):
        raise UsageError("With --consumer you must specify a --topic and a --group and no "
                         "--cluster or --transactional-id option should be specified.")
    return action


# -- output --------------------------------------------------------------------------------

def filter_text(resource: ResourcePatternFilter) -> str:
    """Kafka's ResourcePatternFilter.toString, which reads like a pattern (`<any>` for no
    name): the prompts name filters so."""
    return (f"ResourcePattern(resourceType={resource.resource_type.name}, "
            f"name={'<any>' if resource.name is None else resource.name}, "
            f"patternType={resource.pattern_type.name})")


def entry_lines(entries: Iterable[AccessControlEntry]) -> str:
    """The entries as Kafka prints them: a space, then each behind a tab, then a space."""
    return " " + "\n".join(f"\t{entry}" for entry in entries) + " "


def block(head: str, entries: Iterable[AccessControlEntry]) -> str:
    """`head`, the entries, and the empty line println leaves after them."""
    return f"{head} \n{entry_lines(entries)}\n"


def grouped(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """Bindings by pattern, in the order met, each entry once."""
    found: dict[ResourcePattern, dict[AccessControlEntry, None]] = {}
    for binding in bindings:
        found.setdefault(binding.pattern, {})[binding.entry] = None
    return {pattern: list(entries) for pattern, entries in found.items()}


def print_current(acls: Mapping[ResourcePattern, list[AccessControlEntry]]) -> None:
    for pattern, entries in acls.items():
        print(block(f"Current ACLs for resource `{pattern}`:", entries))


# -- actions -------------------------------------------------------------------------------

def list_acls(service: AclService, options: Options) -> None:
    """The ACLs of the named resources (every ACL when none is named); with --principal,
    for each principal only its own entries."""
    filters = resource_filters(options, required=False) or [ResourcePatternFilter()]
    acls = grouped(binding for resource in filters
                   for binding in service.describe(AclBindingFilter(resource)))
    wanted = principals(options, "principal")
    if not wanted:
        print_current(acls)
    for principal in wanted:
        print(f"ACLs for principal `{principal}`")
        own = {pattern: [e for e in entries if e.principal == principal]
               for pattern, entries in acls.items()}
        print_current({pattern: entries for pattern, entries in own.items() if entries})


def add_acls(service: AclService, options: Options) -> None:
    for pattern, entries in add_plan(options).items():
        print(block(f"Adding ACLs for resource `{pattern}`:", entries))
        service.create([AclBinding(pattern, entry) for entry in entries])


def confirmed(options: Options, question: str) -> bool:
    """--force, or a "y" (either case) read from stdin; end of input is a no."""
    if options.has("force"):
        return True
    print(question, flush=True)
    return sys.stdin.readline().rstrip("\r\n").lower() == "y"


def remove_acls(service: AclService, options: Options) -> None:
    """For each resource filter: its entries named on the command line, or all of them
    when none is named, once confirmed."""
    for resource, entries in filter_plan(options).items():
        if not entries:
            question = ("Are you sure you want to delete all ACLs for resource filter "
                        f"`{filter_text(resource)}`? (y/n)")
            if confirmed(options, question):
                service.delete([AclBindingFilter(resource, AccessControlEntryFilter())])
        else:
            question = (f"Are you sure you want to remove ACLs: \n{entry_lines(entries)}\n "
                        f"from resource filter `{filter_text(resource)}`? (y/n)")
            if confirmed(options, question):
                service.delete([AclBindingFilter(resource, AccessControlEntryFilter(
                    e.principal, e.host, e.operation, e.permission)) for e in entries])


def _key_values(values: list[str]) -> dict[str, str]:
    """Kafka's CommandLineUtils.parseKeyValueArgs without missing values."""
    pairs = [value.split("=", 1) for value in values]
    for pair in pairs:
        if len(pair) == 1 or not pair[1]:
            # the closing brace is in Kafka 3.9's message too
            raise ArgumentError(f"Missing value for key {pair[0]}}}")
    return {key: value for key, value in pairs}


def open_service(options: Options) -> AclService:
    if options.has("bootstrap-server"):
        return AdminAclService(admin_from(options))
    authorizer = options.get("authorizer", ACL_AUTHORIZER)
    if authorizer != ACL_AUTHORIZER:
        raise ToolError(f"{authorizer}: Moldau's kafka-acls writes ACLs for {ACL_AUTHORIZER} "
                        "only")
    properties = _key_values(options.all("authorizer-properties"))
    if options.has("zk-tls-config-file"):
        properties.update(zk_tls_file_properties(
            load_properties(options.get("zk-tls-config-file"))))
    return open_authorizer(properties)


def execute(action: str, options: Options) -> None:
    # the command line is checked before anything is opened: a bad one writes nothing
    if action == "add":
        add_plan(options)
    elif action == "remove":
        filter_plan(options)
    principals(options, "principal")
    service = open_service(options)
    try:
        {"add": add_acls, "remove": remove_acls, "list": list_acls}[action](service, options)
    finally:
        service.close()


def print_failure(error: ToolError) -> None:
    """Kafka's AclCommand.main catch: the message, then Utils.stackTrace of the exception
    (without frames, which Moldau has none of) and println's empty line, on stdout."""
    trace = (error.trace if isinstance(error, AdminCallFailure)
             else [f"{java_exception(error)}: {error}"])
    print(f"{ERROR_PREFIX}{error}")
    print("\n".join(trace) + "\n", flush=True)


def run(options: Options) -> int:
    action = check_args(options)
    try:
        execute(action, options)
    except UsageError:  # Kafka's usage errors: stderr and the usage table
        raise
    except ToolError as exc:
        print_failure(exc)
        return 1
    return 0


TOOL = Tool("acls", "This tool helps to manage acls on kafka.", OPTIONS, run, ERROR_PREFIX,
            plain_parse_errors=True)
