"""The desired state of access_apply.py: the principals (SCRAM users), ACLs and quotas an
inventory declares, read from one JSON document and checked whole before anything is
written, with Kafka's messages where Kafka has one (kafka-acls' and the ACL APIs').

  {"users": [{"name": "alice", "password": "...", "mechanisms": ["SCRAM-SHA-512"]}],
   "acls": [{"principal": "User:alice", "host": "*", "operation": "Read",
             "permission": "Allow", "resource_type": "Topic", "resource_name": "orders",
             "pattern_type": "literal"}],
   "acls_exclusive": false,
   "quotas": [{"entity": {"user": "alice"}, "config": {"producer_byte_rate": 1048576}}],
   "quotas_exclusive": false}

`users` is scram_user.py's users file; in an ACL `host` defaults to `*` and
`pattern_type` to `literal`, and names are accepted in any of Kafka's spellings (`Read`,
`READ`, `TransactionalId`, `transactional-id`); quotas are access_quotas.py's."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from moldau.security.acls import (
    CONCRETE_RESOURCE_TYPES,
    STORED_PATTERN_TYPES,
    WILDCARD_HOST,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_for_create,
)
from moldau.tools.access_quotas import Quotas, declared_quotas
from moldau.tools.acl_plan import operations_text, valid_operations
from moldau.tools.scram_user import DesiredUser, InputError, users_from_document

ACL_KEYS = ("principal", "host", "operation", "permission", "resource_type",
            "resource_name", "pattern_type")
_REQUIRED_ACL_KEYS = ("principal", "operation", "permission", "resource_type",
                      "resource_name")
_DOCUMENT_KEYS = ("users", "acls", "acls_exclusive", "quotas", "quotas_exclusive")


@dataclass(frozen=True)
class DesiredState:
    users: list[DesiredUser] = field(default_factory=list)
    acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = field(default_factory=dict)
    acls_exclusive: bool = False
    quotas: Quotas = field(default_factory=dict)
    quotas_exclusive: bool = False


def acl_document(binding: AclBinding) -> dict[str, str]:
    """A binding in the inventory's form (Kafka's PascalCase names), as the drift report
    lists it: an entry that can be copied into `kafka_acls` as it is."""
    pattern, entry = binding.pattern, binding.entry
    return {"principal": entry.principal, "host": entry.host,
            "operation": entry.operation.pascal_name,
            "permission": entry.permission.pascal_name,
            "resource_type": pattern.resource_type.pascal_name,
            "resource_name": pattern.name,
            "pattern_type": pattern.pattern_type.name.lower()}


def _text(item: Mapping[str, object], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise InputError(f"{where}: '{key}' must be a string")
    return value


E = TypeVar("E", ResourceType, PatternType, AclOperation, AclPermissionType)


def _member(enum: type[E], text: str, where: str) -> E:
    try:
        return enum.parse(text)
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None


def acl_binding(item: object, where: str) -> AclBinding:
    """One declared ACL, refused as Kafka refuses it (kafka-acls' checks, then the
    authorizer's: a malformed principal, a Cluster not named kafka-cluster, a `/`)."""
    if not isinstance(item, dict):
        raise InputError(f"{where} is not an object")
    unknown = sorted(set(item) - set(ACL_KEYS))
    if unknown:
        raise InputError(f"{where}: unknown keys {unknown} (known: {list(ACL_KEYS)})")
    missing = [key for key in _REQUIRED_ACL_KEYS if key not in item]
    if missing:
        raise InputError(f"{where}: missing {missing}")
    resource_type = _member(ResourceType, _text(item, "resource_type", where), where)
    pattern_type = _member(PatternType, str(item.get("pattern_type", "literal")), where)
    operation = _member(AclOperation, _text(item, "operation", where), where)
    permission = _member(AclPermissionType, _text(item, "permission", where), where)
    if resource_type not in CONCRETE_RESOURCE_TYPES:
        raise InputError(f"{where}: resource type {resource_type.pascal_name} names no "
                         "resource; use Topic, Group, Cluster, TransactionalId, "
                         "DelegationToken or User")
    if pattern_type not in STORED_PATTERN_TYPES:
        # kafka-acls' message for --add
        raise InputError(f"{where}: A '--resource-pattern-type' value of "
                         f"'{pattern_type.name}' is not valid when adding acls.")
    if permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise InputError(f"{where}: permission must be Allow or Deny, not "
                         f"{permission.pascal_name}")
    if operation not in valid_operations(resource_type):
        raise InputError(f"{where}: ResourceType {resource_type.name} only supports "
                         f"operations {operations_text(resource_type)}")
    name = _text(item, "resource_name", where)
    if "/" in name:  # the authorizer's cause behind its "Failed to create ACL"
        raise InputError(f"{where}: ACL binding contains invalid resource name: {name}")
    binding = AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(_text(item, "principal", where),
                           _text(item, "host", where) if "host" in item else WILDCARD_HOST,
                           operation, permission))
    reason = validate_for_create(binding)
    if reason is not None:
        raise InputError(f"{where}: {reason}")
    return binding


def desired_state(text: str, source: str) -> DesiredState:
    """The whole document, or InputError naming the first entry that cannot be applied."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{source}: not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise InputError(f"{source}: expected a JSON object with {list(_DOCUMENT_KEYS)}")
    unknown = sorted(set(document) - set(_DOCUMENT_KEYS))
    if unknown:
        raise InputError(f"{source}: unknown keys {unknown} (known: {list(_DOCUMENT_KEYS)})")
    users_doc, acls_doc = document.get("users", []), document.get("acls", [])
    if not isinstance(acls_doc, list):
        raise InputError(f"{source}: 'acls' must be a list")
    exclusive, quotas_exclusive = (_flag(document, key, source)
                                   for key in ("acls_exclusive", "quotas_exclusive"))
    users = users_from_document(json.dumps(users_doc), f"{source}: users")
    acls: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for index, item in enumerate(acls_doc):
        binding = acl_binding(item, f"{source}: ACL #{index + 1}")
        acls.setdefault(binding.pattern, set()).add(binding.entry)
    quotas = declared_quotas(document.get("quotas", []), source)
    return DesiredState(users, {pattern: frozenset(entries)
                                for pattern, entries in acls.items()}, exclusive,
                        quotas, quotas_exclusive)


def _flag(document: Mapping[str, object], key: str, source: str) -> bool:
    value = document.get(key, False)
    if not isinstance(value, bool):
        raise InputError(f"{source}: '{key}' must be true or false")
    return value


def bindings(acls: Mapping[ResourcePattern, Sequence[AccessControlEntry]
                           | frozenset[AccessControlEntry]]) -> list[AclBinding]:
    """The bindings of a pattern -> entries map, in a stable order (for the report)."""
    return sorted((AclBinding(pattern, entry) for pattern, entries in acls.items()
                   for entry in entries),
                  key=lambda b: (b.pattern.resource_type.value, b.pattern.name,
                                 b.pattern.pattern_type.value, b.entry.principal,
                                 b.entry.host, b.entry.operation.value,
                                 b.entry.permission.value))
