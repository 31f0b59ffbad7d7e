"""The request context: what a handler knows of the request it answers (connection,
header, version, arrival time) and how it asks the authorizer about the resources the
request names."""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from moldau.protocol.generated.api import APIS
from moldau.protocol.generated.request_header import RequestHeader
from moldau.security.acls import AclOperation, Action, ResourceType

from .authorization import Authorizer
from .network import Connection, Session
from .quota_managers import MutationQuota
from .quotas import NO_QUOTAS, QuotaRecorder


@dataclass(slots=True)
class RequestContext:
    conn: Connection
    header: RequestHeader
    api_version: int
    received_ns: int
    authorizer: Authorizer
    # the quota stage (server/quotas.py): its recorder, what it needs to know of the
    # request, and what it decided
    quotas: QuotaRecorder = NO_QUOTAS
    request_size: int = 0  # the request's bytes (Produce counts them)
    mutation_quota: MutationQuota | None = None  # CreateTopics etc.: the handler's quota
    throttle_ms: int = 0
    # what the handler leaves for after the quota stage, which may still change the
    # response (a consumer fetch's BytesOutPerSec: a throttled fetch leaves without its
    # records, and Kafka counts the bytes of the response that leaves)
    after_quota: Callable[[], None] | None = None

    @property
    def session(self) -> Session:
        return self.conn.session

    @property
    def listener(self) -> str:
        return self.conn.listener.name

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def api_name(self) -> str:
        """Kafka's name of the request's API (`Fetch`): the audit log's `request =`."""
        return APIS[self.header.request_api_key].name

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str, *,
                  reference_count: int = 1, log_if_denied: bool = True) -> bool:
        """May the requester do `operation` on the resource? A denial is logged at INFO
        unless `log_if_denied` is False (the request did not name the resource: a filter)."""
        session = self.conn.session
        action = Action(operation, resource_type, name, reference_count,
                        log_if_denied=log_if_denied)
        return self.authorizer.authorize(session.principal, session.acl_host, self.api_name,
                                         [action])[0]

    def authorized(self, operation: AclOperation, resource_type: ResourceType,
                   names: Iterable[str], *, log_if_denied: bool = True) -> set[str]:
        """The names among `names` the requester may do `operation` on, asked once per
        distinct name with how often the request names it (Kafka's filterByAuthorized)."""
        counts = collections.Counter(names)
        if not counts:
            return set()
        actions = [Action(operation, resource_type, name, count, log_if_denied=log_if_denied)
                   for name, count in counts.items()]
        session = self.conn.session
        allowed = self.authorizer.authorize(session.principal, session.acl_host,
                                            self.api_name, actions)
        return {action.name for action, ok in zip(actions, allowed, strict=True) if ok}

    def authorize_by_resource_type(self, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        session = self.conn.session
        return self.authorizer.authorize_by_resource_type(
            session.principal, session.acl_host, self.api_name, operation, resource_type)

    def authorized_operations(self, resource_type: ResourceType, name: str) -> int:
        """KIP-430's bit field of what the requester may do on the resource."""
        session = self.conn.session
        return self.authorizer.authorized_operations(
            session.principal, session.acl_host, self.api_name, resource_type, name)
