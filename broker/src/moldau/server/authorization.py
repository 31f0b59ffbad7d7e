"""The authorization port of the request layer: what a handler asks through its request
context, and the authorizer behind it.

`AllowAll` is the broker without `authorizer.class.name`: every action is allowed, as in
Kafka, and the ACL APIs answer SECURITY_DISABLED. With Kafka's AclAuthorizer configured
the broker passes a `moldau.authorizer.AclAuthorizer`, which has the same three methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from moldau.security.acls import (
    AclOperation,
    Action,
    ResourceType,
    operations_bitfield,
    supported_operations,
)


class Authorizer(Protocol):
    def authorize(self, principal: str, host: str, request_name: str,
                  actions: Sequence[Action]) -> list[bool]:
        """Per action: may `principal`, connected from `host` (Java's form of the client
        IP), do it? `request_name` (Kafka's API name) is for the audit log."""
        ...

    def authorize_by_resource_type(self, principal: str, host: str, request_name: str,
                                   operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May `principal` do `operation` on some resource of the type?"""
        ...

    def authorized_operations(self, principal: str, host: str, request_name: str,
                              resource_type: ResourceType, name: str) -> int:
        """KIP-430's authorized-operations bit field of one resource."""
        ...


class AllowAll:
    """No authorizer configured: everything is allowed (Kafka's behaviour without
    `authorizer.class.name`)."""

    def authorize(self, principal: str, host: str, request_name: str,
                  actions: Sequence[Action]) -> list[bool]:
        return [True] * len(actions)

    def authorize_by_resource_type(self, principal: str, host: str, request_name: str,
                                   operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        return True

    def authorized_operations(self, principal: str, host: str, request_name: str,
                              resource_type: ResourceType, name: str) -> int:
        return operations_bitfield(supported_operations(resource_type))
