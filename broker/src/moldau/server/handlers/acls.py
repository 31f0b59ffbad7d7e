"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), as Kafka's AclApis answers them.

The requester needs DESCRIBE (describe) or ALTER (create, delete) on the cluster, else
every error slot of the answer is CLUSTER_AUTHORIZATION_FAILED. A broker without
`authorizer.class.name` answers SECURITY_DISABLED. DescribeAcls answers from the
authorizer's cache; creations and deletions are ZooKeeper writes, made on the broker's
ZooKeeper thread, and answered once written.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING

from moldau.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    SecurityDisabledError,
)
from moldau.protocol.generated.create_acls_response import CreateAclsResponse
from moldau.protocol.generated.delete_acls_response import DeleteAclsResponse
from moldau.protocol.generated.describe_acls_response import DescribeAclsResponse
from moldau.security.acls import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    ResourcePattern,
    ResourceType,
    binding_from_codes,
    filter_from_codes,
)

from .cluster_info import CLUSTER_NAME

if TYPE_CHECKING:
    from moldau.authorizer.acl_authorizer import AclAuthorizer, AclDeleteResult
    from moldau.cluster.zk_async import AsyncZk
    from moldau.protocol.generated.create_acls_request import CreateAclsRequest
    from moldau.protocol.generated.delete_acls_request import DeleteAclsRequest
    from moldau.protocol.generated.describe_acls_request import DescribeAclsRequest

    from ..requests import RequestContext

CLUSTER_DENIED = "Cluster authorization failed."
NO_AUTHORIZER = "No Authorizer is configured."
NO_AUTHORIZER_ON_BROKER = "No Authorizer is configured on the broker"

Resource_ = DescribeAclsResponse.DescribeAclsResource
Description_ = DescribeAclsResponse.AclDescription
Creation_ = CreateAclsResponse.AclCreationResult
FilterResult_ = DeleteAclsResponse.DeleteAclsFilterResult
Matching_ = DeleteAclsResponse.DeleteAclsMatchingAcl


class DescribeAclsHandler:
    MIN_VERSION, MAX_VERSION = 0, 3

    def __init__(self, authorizer: AclAuthorizer | None) -> None:
        self.authorizer = authorizer

    def __call__(self, ctx: RequestContext,
                 request: DescribeAclsRequest) -> DescribeAclsResponse:
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return DescribeAclsResponse(error_code=ClusterAuthorizationFailedError.code,
                                        error_message=CLUSTER_DENIED)
        if self.authorizer is None:
            return DescribeAclsResponse(error_code=SecurityDisabledError.code,
                                        error_message=NO_AUTHORIZER_ON_BROKER)
        # v0 has no pattern type: it describes literal patterns
        pattern_type = request.pattern_type_filter if ctx.api_version >= 1 else 3
        binding_filter = filter_from_codes(
            request.resource_type_filter, request.resource_name_filter, pattern_type,
            request.principal_filter, request.host_filter, request.operation,
            request.permission_type)
        if binding_filter.is_unknown:
            return DescribeAclsResponse(error_code=InvalidRequestError.code,
                                        error_message="The filter contains UNKNOWN elements")
        by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for binding in self.authorizer.describe_acls(binding_filter):
            by_pattern.setdefault(binding.pattern, []).append(binding.entry)
        return DescribeAclsResponse(error_code=0, error_message=None, resources=[
            Resource_(resource_type=pattern.resource_type.value, resource_name=pattern.name,
                      pattern_type=pattern.pattern_type.value, acls=[
                          Description_(principal=entry.principal, host=entry.host,
                                       operation=entry.operation.value,
                                       permission_type=entry.permission.value)
                          for entry in entries])
            for pattern, entries in by_pattern.items()])


def _creation_error(binding: AclBinding) -> KafkaError | None:
    """The checks Kafka's AclApis makes before handing bindings to the authorizer."""
    pattern = binding.pattern
    if pattern.resource_type is ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return InvalidRequestError(
            f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        return InvalidRequestError("Invalid empty resource name")
    return None


def _alter_refused(ctx: RequestContext, authorizer: AclAuthorizer | None) -> KafkaError | None:
    """Why a CreateAcls or DeleteAcls is refused as a whole: the requester may not alter
    the cluster, or there is no authorizer."""
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME):
        return ClusterAuthorizationFailedError(CLUSTER_DENIED)
    if authorizer is None:
        return SecurityDisabledError(NO_AUTHORIZER)
    return None


def _error_fields(error: KafkaError | None) -> dict[str, int | str | None]:
    if error is None:
        return {"error_code": 0, "error_message": None}
    return {"error_code": error.code, "error_message": str(error) or None}


class CreateAclsHandler:
    MIN_VERSION, MAX_VERSION = 0, 3

    def __init__(self, authorizer: AclAuthorizer | None, zk: AsyncZk) -> None:
        self.authorizer = authorizer
        self.zk = zk

    def __call__(self, ctx: RequestContext, request: CreateAclsRequest
                 ) -> CreateAclsResponse | Awaitable[CreateAclsResponse]:
        creations = request.creations
        authorizer = self.authorizer
        refused = _alter_refused(ctx, authorizer)
        if refused is not None or authorizer is None:
            return CreateAclsResponse(results=[Creation_(**_error_fields(refused))
                                               for _ in creations])
        literal_only = ctx.api_version == 0  # v0 has no pattern type: literal
        bindings = [binding_from_codes(
            c.resource_type, c.resource_name,
            PatternType.LITERAL.value if literal_only else c.resource_pattern_type,
            c.principal, c.host, c.operation, c.permission_type) for c in creations]
        return self._create(authorizer, bindings)

    async def _create(self, authorizer: AclAuthorizer,
                      bindings: list[AclBinding]) -> CreateAclsResponse:
        errors: list[KafkaError | None] = [_creation_error(b) for b in bindings]
        valid = [index for index, error in enumerate(errors) if error is None]
        if valid:
            try:
                written = await self.zk.call(authorizer.create_acls,
                                             [bindings[index] for index in valid])
            except KafkaError as exc:  # ZooKeeper is away: nothing was written
                written = [exc] * len(valid)
            for index, error in zip(valid, written, strict=True):
                errors[index] = error
        return CreateAclsResponse(results=[Creation_(**_error_fields(error))
                                           for error in errors])


class DeleteAclsHandler:
    MIN_VERSION, MAX_VERSION = 0, 3

    def __init__(self, authorizer: AclAuthorizer | None, zk: AsyncZk) -> None:
        self.authorizer = authorizer
        self.zk = zk

    def __call__(self, ctx: RequestContext, request: DeleteAclsRequest
                 ) -> DeleteAclsResponse | Awaitable[DeleteAclsResponse]:
        authorizer = self.authorizer
        refused = _alter_refused(ctx, authorizer)
        if refused is not None or authorizer is None:
            return DeleteAclsResponse(filter_results=[
                FilterResult_(**_error_fields(refused), matching_acls=[])
                for _ in request.filters])
        filters = [filter_from_codes(
            f.resource_type_filter, f.resource_name_filter,
            f.pattern_type_filter if ctx.api_version >= 1 else PatternType.LITERAL.value,
            f.principal_filter, f.host_filter, f.operation, f.permission_type)
            for f in request.filters]
        return self._delete(authorizer, filters)

    async def _delete(self, authorizer: AclAuthorizer,
                      filters: list[AclBindingFilter]) -> DeleteAclsResponse:
        try:
            results: list[AclDeleteResult] = await self.zk.call(authorizer.delete_acls, filters)
        except KafkaError as exc:  # ZooKeeper is away: nothing was deleted
            return DeleteAclsResponse(filter_results=[
                FilterResult_(**_error_fields(exc), matching_acls=[]) for _ in filters])
        return DeleteAclsResponse(filter_results=[
            FilterResult_(**_error_fields(result.error), matching_acls=[
                Matching_(**_error_fields(deleted.error),
                          resource_type=deleted.binding.pattern.resource_type.value,
                          resource_name=deleted.binding.pattern.name,
                          pattern_type=deleted.binding.pattern.pattern_type.value,
                          principal=deleted.binding.entry.principal,
                          host=deleted.binding.entry.host,
                          operation=deleted.binding.entry.operation.value,
                          permission_type=deleted.binding.entry.permission.value)
                for deleted in result.bindings])
            for result in results])
