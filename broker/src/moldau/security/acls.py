"""Kafka's ACL model, as Kafka 3.9's AclAuthorizer (ZooKeeper mode) keeps it: the enums with
their wire codes, resource patterns, entries, bindings and the filters that select them, the
JSON Kafka stores in `/kafka-acl...` znodes and change notifications, and the decision rule.

Pure: no I/O, so the authorizer (which reads ZooKeeper), the request handlers and the tools
share one reading of every rule. The sections, in order: enums, principals and hosts,
patterns/entries/bindings and their filters, creation checks, operations per resource type,
the znode codec, the decision.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Self

CLUSTER_NAME = "kafka-cluster"
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"


# -- enums ------------------------------------------------------------------------------------

def _spelling_key(text: str) -> str:
    """One key for Kafka's spellings of a name: `ClusterAction` (ZooKeeper, kafka-acls),
    `CLUSTER_ACTION` (the Java enum) and `cluster-action` or `cluster_action`."""
    return text.strip().replace("_", "").replace("-", "").upper()


class _AclEnum(IntEnum):
    """An enum of Kafka's ACL API: wire code = value, Java name = member name."""

    @classmethod
    def parse(cls, text: str) -> Self:
        """The member a name spells, in any of Kafka's spellings (see _spelling_key)."""
        key = _spelling_key(text)
        for member in cls:
            if _spelling_key(member.name) == key:
                return member
        names = ", ".join(member.pascal_name for member in cls)
        raise ValueError(f"unknown {_LABELS[cls.__name__]} {text!r}; expected one of {names}")

    @classmethod
    def from_code(cls, code: int) -> Self:
        """The member of a wire code; UNKNOWN (0) for a code this version does not know, as
        Kafka's fromCode answers."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)

    @property
    def pascal_name(self) -> str:
        """The name as Kafka writes it in ZooKeeper and kafka-acls: `TransactionalId`."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def is_unknown(self) -> bool:
        return self.value == 0


class ResourceType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_AclEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_LABELS = {"ResourceType": "resource type", "PatternType": "pattern type",
           "AclOperation": "operation", "AclPermissionType": "permission type"}

# The resource types and pattern types an ACL can be stored under (not ANY, MATCH, UNKNOWN).
CONCRETE_RESOURCE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                           ResourceType.TRANSACTIONAL_ID, ResourceType.DELEGATION_TOKEN,
                           ResourceType.USER)
STORED_PATTERN_TYPES = (PatternType.LITERAL, PatternType.PREFIXED)


# -- principals and hosts -----------------------------------------------------------------------

def check_principal(principal: str) -> str:
    """`principal` when it is `Type:name` (Kafka's SecurityUtils.parseKafkaPrincipal: the
    first colon splits, either side may be empty); ValueError otherwise."""
    if ":" not in principal:
        raise ValueError("expected a string in format principalType:principalName but got "
                         f"{principal}")
    return principal


def parse_super_users(value: str | None) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by semicolons, `User:admin;User:CN=b1`."""
    if not value or not value.strip():
        return frozenset()
    return frozenset(check_principal(part.strip()) for part in value.split(";") if part.strip())


def java_host_address(address: str) -> str:
    """A client address as Java's InetAddress.getHostAddress prints it, the form ACL hosts are
    compared with: IPv4 dotted, IPv6 as eight unabbreviated lowercase hex groups
    (`0:0:0:0:0:0:0:1`), an IPv4-mapped IPv6 address as the IPv4 one (Java hands those out as
    Inet4Address). Anything that is not an IP address is returned as it is."""
    text, _, scope = address.partition("%")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv4Address):
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    groups = ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":"))
    return f"{groups}%{scope}" if scope else groups


# -- patterns, entries, bindings, filters -------------------------------------------------------

def _any(value: str | None) -> str:
    """How Kafka's filters print a field left open."""
    return "<any>" if value is None else value


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """What an ACL is attached to: a literal name (`*` = every resource of the type) or a name
    prefix."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:  # Kafka's toString, printed by kafka-acls
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (`Type:name`, `User:*` for everyone) may or may not do what from where (an IP
    address as Java prints it, `*` for anywhere)."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission.name})")


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Selects resource patterns (Kafka's ResourcePatternFilter). ANY resource type matches
    every type, a None name every name. Pattern type ANY: any stored pattern with exactly
    that name; MATCH: every stored pattern that applies to that name (the literal name, the
    literal `*`, each prefix of it); LITERAL or PREFIXED: that pattern exactly."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type is not ResourceType.ANY \
                and self.resource_type is not pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) \
                and self.pattern_type is not pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: does the stored pattern apply to a resource of this name?
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        if pattern.pattern_type is PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def indefinite_field(self) -> str | None:
        """Why this filter may match more than one pattern (Kafka's findIndefiniteField);
        None when it matches at most one (ANY then means the literal or the prefixed one)."""
        if self.resource_type is ResourceType.ANY:
            return "Resource type is ANY."
        if self.resource_type is ResourceType.UNKNOWN:
            return "Resource type is UNKNOWN."
        if self.name is None:
            return "Resource name is NULL."
        if self.pattern_type is PatternType.MATCH:
            return "Resource pattern type is MATCH."
        if self.pattern_type is PatternType.UNKNOWN:
            return "Resource pattern type is UNKNOWN."
        return None

    def matches_at_most_one(self) -> bool:
        return self.indefinite_field() is None

    def exact_patterns(self) -> tuple[ResourcePattern, ...]:
        """The stored patterns a filter that matches at most one can name (Kafka's
        filterToResources): for ANY, the literal and the prefixed pattern of the name."""
        if not self.matches_at_most_one() or self.name is None:
            return ()
        if self.pattern_type is PatternType.ANY:
            return tuple(ResourcePattern(self.resource_type, self.name, pattern_type)
                         for pattern_type in STORED_PATTERN_TYPES)
        return (ResourcePattern(self.resource_type, self.name, self.pattern_type),)

    @property
    def is_unknown(self) -> bool:
        return self.resource_type.is_unknown or self.pattern_type.is_unknown

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, "
                f"name={_any(self.name)}, patternType={self.pattern_type.name})")


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Selects entries (Kafka's AccessControlEntryFilter): a None principal or host and the
    ANY operation or permission match everything; otherwise equality (no wildcard
    expansion: principal `User:*` selects the entries stored for `User:*`)."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation is AclOperation.ANY or self.operation is entry.operation)
                and (self.permission is AclPermissionType.ANY
                     or self.permission is entry.permission))

    @property
    def is_unknown(self) -> bool:
        return self.operation.is_unknown or self.permission.is_unknown

    def __str__(self) -> str:
        return (f"(principal={_any(self.principal)}, host={_any(self.host)}, "
                f"operation={self.operation.name}, permissionType={self.permission.name})")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern_filter: ResourcePatternFilter = ResourcePatternFilter()
    entry_filter: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return (self.pattern_filter.matches(binding.pattern)
                and self.entry_filter.matches(binding.entry))

    @property
    def is_unknown(self) -> bool:
        return self.pattern_filter.is_unknown or self.entry_filter.is_unknown

    def __str__(self) -> str:
        return f"(patternFilter={self.pattern_filter}, entryFilter={self.entry_filter})"


def binding_from_codes(resource_type: int, name: str, pattern_type: int, principal: str,
                       host: str, operation: int, permission: int) -> AclBinding:
    """A binding from the wire fields of the ACL APIs (codes Kafka does not know read as
    UNKNOWN, which creation refuses)."""
    return AclBinding(
        ResourcePattern(ResourceType.from_code(resource_type), name,
                        PatternType.from_code(pattern_type)),
        AccessControlEntry(principal, host, AclOperation.from_code(operation),
                           AclPermissionType.from_code(permission)))


def filter_from_codes(resource_type: int, name: str | None, pattern_type: int,
                      principal: str | None, host: str | None, operation: int,
                      permission: int) -> AclBindingFilter:
    """A binding filter from the wire fields of DescribeAcls and DeleteAcls."""
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(resource_type), name,
                              PatternType.from_code(pattern_type)),
        AccessControlEntryFilter(principal, host, AclOperation.from_code(operation),
                                 AclPermissionType.from_code(permission)))


# -- creation checks ---------------------------------------------------------------------------

# The error message Kafka's authorizer answers for a binding it refuses (its
# InvalidRequestException; the cause stays in the broker's log).
FAILED_TO_CREATE = "Failed to create ACL"


def validate_for_create(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create this binding, in the message it answers; None when it may
    be created. Kafka answers these INVALID_REQUEST, except a malformed principal, which
    it only meets while writing and answers UNKNOWN_SERVER_ERROR with the message given
    here (moldau's authorizer refuses it up front, as an invalid request)."""
    pattern, entry = binding.pattern, binding.entry
    if (pattern.resource_type not in CONCRETE_RESOURCE_TYPES
            or pattern.pattern_type not in STORED_PATTERN_TYPES
            or entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY)
            or entry.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY)):
        return FAILED_TO_CREATE  # Kafka's cause: "ACL binding contains unknown elements"
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return "Invalid empty resource name"
    if "/" in pattern.name:
        return FAILED_TO_CREATE  # cause: "ACL binding contains invalid resource name: ..."
    try:
        check_principal(entry.principal)
    except ValueError as exc:
        return str(exc)
    return None


# -- operations per resource type ---------------------------------------------------------------

_Op = AclOperation
_SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_Op.READ, _Op.WRITE, _Op.CREATE, _Op.DESCRIBE, _Op.DELETE,
                                   _Op.ALTER, _Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_Op.READ, _Op.DESCRIBE, _Op.DELETE}),
    ResourceType.CLUSTER: frozenset({_Op.CREATE, _Op.CLUSTER_ACTION, _Op.DESCRIBE_CONFIGS,
                                     _Op.ALTER_CONFIGS, _Op.IDEMPOTENT_WRITE, _Op.ALTER,
                                     _Op.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_Op.DESCRIBE, _Op.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_Op.DESCRIBE}),
    ResourceType.USER: frozenset({_Op.CREATE_TOKENS, _Op.DESCRIBE_TOKENS}),
}

# An ALLOW for any of these operations also allows the key (Kafka's AclOperation docs).
_IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    _Op.DESCRIBE: frozenset({_Op.DESCRIBE, _Op.READ, _Op.WRITE, _Op.DELETE, _Op.ALTER}),
    _Op.DESCRIBE_CONFIGS: frozenset({_Op.DESCRIBE_CONFIGS, _Op.ALTER_CONFIGS}),
}


def supported_operations(resource_type: ResourceType) -> frozenset[AclOperation]:
    """The operations of a resource type that `*AuthorizedOperations` fields report."""
    try:
        return _SUPPORTED_OPERATIONS[resource_type]
    except KeyError:
        raise ValueError(f"{resource_type.name} is not a concrete resource type") from None


def operations_bitfield(operations: Iterable[AclOperation]) -> int:
    """KIP-430's authorized-operations field: bit `code` set for each operation."""
    bits = 0
    for operation in operations:
        bits |= 1 << operation.value
    return bits


def allowing_operations(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW entries allow `operation`: itself, the ones implying it
    and ALL. (DENY entries deny only their own operation, and ALL.)"""
    return _IMPLIED_BY.get(operation, frozenset({operation})) | {AclOperation.ALL}


# -- the znode codec ---------------------------------------------------------------------------

LITERAL_ACL_ROOT = "/kafka-acl"
EXTENDED_ACL_ROOT = "/kafka-acl-extended"
LITERAL_CHANGE_ROOT = "/kafka-acl-changes"
EXTENDED_CHANGE_ROOT = "/kafka-acl-extended-changes"
CHANGE_ROOTS = (LITERAL_CHANGE_ROOT, EXTENDED_CHANGE_ROOT)
CHANGE_PREFIX = "acl_changes_"
ACL_JSON_VERSION = 1


def acl_root(pattern_type: PatternType) -> str:
    """Where the patterns of a type live: `/kafka-acl`, `/kafka-acl-extended/prefixed`."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_ACL_ROOT
    if pattern_type is PatternType.PREFIXED:
        return f"{EXTENDED_ACL_ROOT}/{pattern_type.name.lower()}"
    raise ValueError(f"ACLs are not stored under pattern type {pattern_type.name}")


def resource_type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    return f"{acl_root(pattern_type)}/{resource_type.pascal_name}"


def acl_znode_path(pattern: ResourcePattern) -> str:
    """`/kafka-acl/Topic/orders`, `/kafka-acl-extended/prefixed/Topic/orders-`."""
    return f"{resource_type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def acl_paths() -> list[str]:
    """Every znode the authorizer creates at start (Kafka's createAclPaths): both roots, both
    change roots, and each concrete resource type's directory under both roots."""
    paths = [LITERAL_ACL_ROOT, LITERAL_CHANGE_ROOT, acl_root(PatternType.PREFIXED),
             EXTENDED_CHANGE_ROOT]
    paths += [resource_type_path(pattern_type, resource_type)
              for pattern_type in STORED_PATTERN_TYPES
              for resource_type in CONCRETE_RESOURCE_TYPES]
    return paths


def _entry_order(entry: AccessControlEntry) -> tuple[str, int, int, str]:
    return entry.principal, entry.permission.value, entry.operation.value, entry.host


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A resource znode's data, byte for byte as Kafka 3.9 writes it: its Java AclEntry puts
    the keys in HashMaps, which Jackson writes in hash order (`acls` before `version`;
    principal, permissionType, host, operation), PascalCase names, no spaces. (The older
    Scala AclEntry wrote `version` first and `operation` before `host`; both read the
    same.) Entries sorted so equal sets encode equally."""
    acls = [{"principal": entry.principal, "permissionType": entry.permission.pascal_name,
             "host": entry.host, "operation": entry.operation.pascal_name}
            for entry in sorted(entries, key=_entry_order)]
    return json.dumps({"acls": acls, "version": ACL_JSON_VERSION},
                      separators=(",", ":"), ensure_ascii=False).encode()


def _lenient(enum: type[_AclEnum], name: object) -> int:
    """Kafka's reading of a stored name: a name it does not know becomes UNKNOWN (an entry
    that never matches), so one ACL written by a newer version cannot hide the others."""
    if not isinstance(name, str):
        raise ValueError(f"expected a name, got {name!r}")
    try:
        return enum.parse(name).value
    except ValueError:
        return 0


def _json_object(data: bytes, what: str) -> dict[str, object]:
    try:
        parsed = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{what} is not a JSON object: {data!r}")
    return parsed


def _check_version(parsed: Mapping[str, object], what: str) -> None:
    version = parsed.get("version")
    if version != ACL_JSON_VERSION:
        raise ValueError(f"{what} has version {version!r}; this broker reads version "
                         f"{ACL_JSON_VERSION} only")


def decode_acls(data: bytes | None) -> set[AccessControlEntry]:
    """A resource znode's entries. No data is no entries (Kafka's fromBytes); names may be
    PascalCase or UPPER_CASE. ValueError for anything else than version 1 JSON with a
    principal, host, operation and permissionType in each entry."""
    if not data:
        return set()
    parsed = _json_object(data, "ACL znode data")
    _check_version(parsed, "ACL znode data")
    items = parsed.get("acls")
    if not isinstance(items, list):
        raise ValueError(f"ACL znode data has no acls list: {data!r}")
    entries = set()
    for item in items:
        if not isinstance(item, dict):
            raise ValueError(f"ACL entry is not a JSON object: {item!r}")
        try:
            principal, host = item["principal"], item["host"]
            operation = AclOperation(_lenient(AclOperation, item["operation"]))
            permission = AclPermissionType(_lenient(AclPermissionType, item["permissionType"]))
        except KeyError as exc:
            raise ValueError(f"ACL entry {item!r} lacks {exc.args[0]!r}") from None
        if not isinstance(principal, str) or not isinstance(host, str):
            raise ValueError(f"ACL entry {item!r}: principal and host must be strings")
        entries.add(AccessControlEntry(check_principal(principal), host, operation, permission))
    return entries


def change_root(pattern_type: PatternType) -> str:
    """The change-notification root of a pattern type."""
    if pattern_type is PatternType.LITERAL:
        return LITERAL_CHANGE_ROOT
    if pattern_type is PatternType.PREFIXED:
        return EXTENDED_CHANGE_ROOT
    raise ValueError(f"ACLs are not stored under pattern type {pattern_type.name}")


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """A change notification's data: `TOPIC:orders` for a literal pattern (the enum name),
    `{"version":1,"resourceType":"TOPIC","name":"orders-","patternType":"PREFIXED"}` for
    the others."""
    if pattern.pattern_type is PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    change_root(pattern.pattern_type)  # refuses ANY, MATCH, UNKNOWN
    return json.dumps({"version": ACL_JSON_VERSION, "resourceType": pattern.resource_type.name,
                       "name": pattern.name, "patternType": pattern.pattern_type.name},
                      separators=(",", ":"), ensure_ascii=False).encode()


def decode_literal_acl_change(data: bytes) -> ResourcePattern:
    text = data.decode()
    resource_type, colon, name = text.partition(":")
    if not colon:
        raise ValueError("expected a string in format ResourceType:ResourceName but got "
                         f"{text}")
    return ResourcePattern(ResourceType.parse(resource_type), name, PatternType.LITERAL)


def decode_extended_acl_change(data: bytes) -> ResourcePattern:
    parsed = _json_object(data, "ACL change event")
    _check_version(parsed, "ACL change event")
    resource_type, name, pattern_type = (parsed.get(key) for key in
                                         ("resourceType", "name", "patternType"))
    if not (isinstance(resource_type, str) and isinstance(name, str)
            and isinstance(pattern_type, str)):
        raise ValueError(f"ACL change event lacks resourceType, name or patternType: {data!r}")
    return ResourcePattern(ResourceType.parse(resource_type), name,
                           PatternType.parse(pattern_type))


def decode_acl_change(root: str, data: bytes) -> ResourcePattern:
    """The pattern a change notification under `root` names."""
    if root == LITERAL_CHANGE_ROOT:
        return decode_literal_acl_change(data)
    if root == EXTENDED_CHANGE_ROOT:
        return decode_extended_acl_change(data)
    raise ValueError(f"{root} is not an ACL change root")


# -- the decision --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Action:
    """What a request asks about one literal resource. `reference_count`: how many times the
    request names it (for the audit log); `log_if_allowed`/`log_if_denied`: False when the
    answer only filters or fills an authorized-operations field (logged at TRACE then)."""

    operation: AclOperation
    resource_type: ResourceType
    name: str
    reference_count: int = 1
    log_if_allowed: bool = True
    log_if_denied: bool = True


def _matches(entry: AccessControlEntry, permission: AclPermissionType, principal: str,
             host: str, operations: Collection[AclOperation]) -> bool:
    return (entry.permission is permission
            and (entry.principal == principal or entry.principal == WILDCARD_PRINCIPAL)
            and (entry.host == host or entry.host == WILDCARD_HOST)
            and entry.operation in operations)


@dataclass(frozen=True, slots=True)
class AclPolicy:
    """Kafka's AclAuthorizer decision, given the ACLs: `super.users` and
    `allow.everyone.if.no.acl.found`."""

    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    def authorize(self, acl_sets: Sequence[Collection[AccessControlEntry]], principal: str,
                  host: str, operation: AclOperation) -> bool:
        """May `principal` from `host` perform `operation` on a literal resource, whose
        applying ACLs are `acl_sets` (those of its literal name, of the literal `*`, of every
        prefix pattern of its name)? A super user may; with no ACL at all on the resource,
        for anyone, everyone may iff allow.everyone.if.no.acl.found; else a matching DENY
        (its operation or ALL) refuses, and a matching ALLOW (its operation, an operation
        implying it, or ALL) allows; nothing matching refuses."""
        if principal in self.super_users:
            return True
        if not any(acl_sets):
            return self.allow_everyone_if_no_acl_found
        denying = (operation, AclOperation.ALL)
        for entries in acl_sets:
            for entry in entries:
                if _matches(entry, AclPermissionType.DENY, principal, host, denying):
                    return False
        allowing = allowing_operations(operation)
        return any(_matches(entry, AclPermissionType.ALLOW, principal, host, allowing)
                   for entries in acl_sets for entry in entries)

    def authorize_by_resource_type(
            self, acls: Iterable[tuple[ResourcePattern, Collection[AccessControlEntry]]],
            principal: str, host: str, operation: AclOperation,
            resource_type: ResourceType) -> bool:
        """Might `principal` perform `operation` on some resource of the type (Kafka's
        authorizeByResourceType; an idempotent producer's InitProducerId asks it for WRITE
        on topics)? `acls`: every stored pattern with its entries (other types are skipped).
        Exact entries only (no implied operations): a super user may; a DENY on the literal
        `*` refuses; allow.everyone.if.no.acl.found allows; otherwise some ALLOW (literal or
        prefixed) must name a resource that no DENY literal of the same name or DENY prefix
        of it covers (an ALLOW on the literal `*` always counts)."""
        if operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"authorize_by_resource_type needs a concrete operation, got "
                             f"{operation.name}")
        if resource_type not in CONCRETE_RESOURCE_TYPES:
            raise ValueError(f"authorize_by_resource_type needs a concrete resource type, "
                             f"got {resource_type.name}")
        if principal in self.super_users:
            return True
        operations = (operation, AclOperation.ALL)
        names: dict[tuple[AclPermissionType, PatternType], set[str]] = {
            (permission, pattern_type): set()
            for permission in (AclPermissionType.ALLOW, AclPermissionType.DENY)
            for pattern_type in STORED_PATTERN_TYPES}
        for pattern, entries in acls:
            if pattern.resource_type is not resource_type:
                continue
            for permission in (AclPermissionType.ALLOW, AclPermissionType.DENY):
                if any(_matches(entry, permission, principal, host, operations)
                       for entry in entries):
                    names[permission, pattern.pattern_type].add(pattern.name)
        deny_literals = names[AclPermissionType.DENY, PatternType.LITERAL]
        deny_prefixes = names[AclPermissionType.DENY, PatternType.PREFIXED]
        allow_literals = names[AclPermissionType.ALLOW, PatternType.LITERAL]
        allow_prefixes = names[AclPermissionType.ALLOW, PatternType.PREFIXED]
        if WILDCARD_RESOURCE in deny_literals:
            return False
        if self.allow_everyone_if_no_acl_found:
            return True

        def denied_by_prefix(name: str) -> bool:
            return any(name[:length] in deny_prefixes for length in range(len(name) + 1))

        return (any(not denied_by_prefix(prefix) for prefix in allow_prefixes)
                or any(literal == WILDCARD_RESOURCE
                       or (literal not in deny_literals and not denied_by_prefix(literal))
                       for literal in allow_literals))
