"""What a kafka-acls command line asks for, read as Kafka 3.9's AclCommand reads it: the
resource pattern filters (`--topic`, `--group`, `--cluster`, ...), the entries (allowed and
denied principals x operations x hosts), the `--producer` and `--consumer` expansions, and
the checks Kafka makes on them before anything is sent.

Kafka keeps these in Scala sets and maps, whose order is a hash order; here the order is
the command line's (resources in Kafka's option order, entries principal by principal),
with duplicates dropped, so the output is the same at every run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from moldau.security.acls import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    check_principal,
    supported_operations,
)
from moldau.tools.options import Options, UsageError
from moldau.tools.runner import ArgumentError

T = TypeVar("T")

CLUSTER_FILTER = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)
# (flag, resource type, whether Kafka trims the value): in the order AclCommand reads them;
# --cluster comes after the topics
_NAMED_RESOURCES = (("topic", ResourceType.TOPIC, True), ("group", ResourceType.GROUP, True),
                    ("transactional-id", ResourceType.TRANSACTIONAL_ID, False),
                    ("delegation-token", ResourceType.DELEGATION_TOKEN, True),
                    ("user-principal", ResourceType.USER, True))
_SPECIFIC = (PatternType.LITERAL, PatternType.PREFIXED)

NO_RESOURCE = ("You must provide at least one resource: --topic <topic> or --cluster or "
               "--group <group> or --delegation-token <Delegation Token ID>")
NO_PRINCIPAL = ("You must specify one of: --allow-principal, --deny-principal when trying to "
                "add ACLs.")

Plan = dict[ResourcePatternFilter, list[AccessControlEntry]]


def unique(items: Iterable[T]) -> list[T]:
    """The items without repeats, first occurrence first (a set in command line order)."""
    return list(dict.fromkeys(items))


def pattern_type(options: Options) -> PatternType:
    value = options.get("resource-pattern-type")
    return value if isinstance(value, PatternType) else parse_pattern_type(str(value))


def parse_pattern_type(text: str) -> PatternType:
    """jopt-simple's enum conversion (any case), UNKNOWN refused as Kafka's converter does;
    a ValueError becomes the parser's "Cannot parse argument" message."""
    for member in PatternType:
        if member.name == text.upper() and not member.is_unknown:
            return member
    raise ValueError(f"Unknown resource-pattern-type: {text}")


def parse_operation(name: str) -> AclOperation:
    """Kafka's SecurityUtils.operation: `ClusterAction` or `CLUSTERACTION`; any other
    spelling is UNKNOWN, which the operation check then refuses."""
    for operation in AclOperation:
        if name in (operation.pascal_name, operation.pascal_name.upper()):
            return operation
    return AclOperation.UNKNOWN


def principals(options: Options, flag: str) -> list[str]:
    """The `Type:name` principals of a flag; a malformed one fails the command with
    Kafka's message. An empty value is `--principal` given without one (jopt-simple's
    optional argument): no principal."""
    found = []
    for value in options.all(flag):
        if value == "":
            continue
        try:
            found.append(check_principal(value.strip()))
        except ValueError as exc:  # Kafka's IllegalArgumentException
            raise ArgumentError(str(exc)) from None
    return unique(found)


def resource_filters(options: Options, required: bool = True) -> list[ResourcePatternFilter]:
    """Kafka's getResourceFilter: one filter per named resource, with the pattern type of
    --resource-pattern-type; the cluster only with a literal pattern type (--cluster, or
    --idempotent's IdempotentWrite)."""
    kind = pattern_type(options)
    found: list[ResourcePatternFilter] = []
    for flag, resource_type, trimmed in _NAMED_RESOURCES:
        found += [ResourcePatternFilter(resource_type, name.strip() if trimmed else name, kind)
                  for name in options.all(flag)]
        if flag == "topic" and kind is PatternType.LITERAL \
                and (options.has("cluster") or options.has("idempotent")):
            found.append(CLUSTER_FILTER)
    if not found and required:
        raise UsageError(NO_RESOURCE)
    return unique(found)


def _hosts(options: Options, host_flag: str, principal_flag: str) -> list[str]:
    """The hosts of --allow-host/--deny-host; `*` when only principals are given."""
    if options.has(host_flag):
        return unique(host.strip() for host in options.all(host_flag))
    return [WILDCARD_HOST] if options.has(principal_flag) else []


def entries(options: Options, operations: Sequence[AclOperation]) -> list[AccessControlEntry]:
    """Kafka's getAcl: every allowed principal from every allowed host, then every denied
    principal from every denied host, for each operation."""
    found: list[AccessControlEntry] = []
    for permission, side in ((AclPermissionType.ALLOW, "allow"), (AclPermissionType.DENY, "deny")):
        named = principals(options, f"{side}-principal")
        hosts = _hosts(options, f"{side}-host", f"{side}-principal")
        found += [AccessControlEntry(principal, host, operation, permission)
                  for principal in named for operation in operations for host in hosts]
    return unique(found)


def _command_line_operations(options: Options) -> list[AclOperation]:
    return unique(parse_operation(name.strip()) for name in options.all("operation") or ["All"])


def _producer_plan(options: Options) -> Plan:
    """WRITE, DESCRIBE, CREATE on each topic; WRITE, DESCRIBE on each transactional id;
    IDEMPOTENT_WRITE on the cluster with --idempotent."""
    filters = resource_filters(options)
    topic = entries(options, [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE])
    transactional = entries(options, [AclOperation.WRITE, AclOperation.DESCRIBE])
    plan: Plan = {f: topic for f in filters if f.resource_type is ResourceType.TOPIC}
    plan.update({f: transactional for f in filters
                 if f.resource_type is ResourceType.TRANSACTIONAL_ID})
    if options.has("idempotent"):
        plan[CLUSTER_FILTER] = entries(options, [AclOperation.IDEMPOTENT_WRITE])
    return plan


def _consumer_plan(options: Options) -> Plan:
    """READ, DESCRIBE on each topic; READ on each group."""
    filters = resource_filters(options)
    topic = entries(options, [AclOperation.READ, AclOperation.DESCRIBE])
    group = entries(options, [AclOperation.READ])
    plan: Plan = {f: topic for f in filters if f.resource_type is ResourceType.TOPIC}
    plan.update({f: group for f in filters if f.resource_type is ResourceType.GROUP})
    return plan


# The order Kafka 3.9.1's refusal names a type's operations in: a Scala set's, ordered by
# hash codes (of the names for TOPIC and CLUSTER; for the smaller sets, of the enum
# constants, which Kafka's JVM gives the same at every run), as kafka_2.13-3.9.1 prints it.
_KAFKA_MESSAGE_ORDER = {
    ResourceType.TOPIC: ("Read", "All", "AlterConfigs", "DescribeConfigs", "Delete", "Write",
                         "Alter", "Create", "Describe"),
    ResourceType.CLUSTER: ("All", "AlterConfigs", "DescribeConfigs", "IdempotentWrite",
                           "Alter", "ClusterAction", "Create", "Describe"),
    ResourceType.GROUP: ("Read", "Describe", "Delete", "All"),
    ResourceType.TRANSACTIONAL_ID: ("Describe", "Write", "All"),
    ResourceType.USER: ("DescribeTokens", "CreateTokens", "All"),
    ResourceType.DELEGATION_TOKEN: ("Describe", "All"),
}


def valid_operations(resource_type: ResourceType) -> list[AclOperation]:
    """The operations an ACL on the type may name: its own, by wire code, then ALL."""
    return [*sorted(supported_operations(resource_type)), AclOperation.ALL]


def operations_text(resource_type: ResourceType) -> str:
    """The type's valid operations as Kafka's refusal lists them."""
    names = [op.pascal_name for op in valid_operations(resource_type)]
    order = _KAFKA_MESSAGE_ORDER.get(resource_type, ())
    return ", ".join(sorted(names, key=lambda name: (
        order.index(name) if name in order else len(order))))


def _check_operations(plan: Plan) -> None:
    for resource, found in plan.items():
        valid = valid_operations(resource.resource_type)
        if any(entry.operation not in valid for entry in found):
            raise UsageError(f"ResourceType {resource.resource_type.name} only supports "
                             f"operations {operations_text(resource.resource_type)}")


def filter_plan(options: Options) -> Plan:
    """Kafka's getResourceFilterToAcls: the entries for each resource filter (none: every
    entry of the filter, for --remove). --producer and --consumer may be combined; they
    replace the command line's own operations."""
    plan: Plan = {}
    if not options.has("producer") and not options.has("consumer"):
        found = entries(options, _command_line_operations(options))
        plan = {f: found for f in resource_filters(options)}
    if options.has("producer"):
        plan.update(_producer_plan(options))
    if options.has("consumer"):
        for resource, found in _consumer_plan(options).items():
            plan[resource] = unique([*found, *plan.get(resource, [])])
    _check_operations(plan)
    return plan


def add_plan(options: Options) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """Kafka's getResourceToAcls: what --add creates; a specific pattern type and a
    principal are required."""
    kind = pattern_type(options)
    if kind not in _SPECIFIC:
        raise UsageError(f"A '--resource-pattern-type' value of '{kind.name}' is not valid "
                         "when adding acls.")
    plan = {ResourcePattern(f.resource_type, f.name or "", f.pattern_type): found
            for f, found in filter_plan(options).items()}
    if any(not found for found in plan.values()):
        raise UsageError(NO_PRINCIPAL)
    return plan
