"""DescribeClientQuotas (48) and AlterClientQuotas (49), answered as Kafka 3.9's
ZkAdminManager answers them in ZooKeeper mode (KIP-546; kafka-configs.sh and
AdminClient.describe/alterClientQuotas send them), on any broker.

Describe needs DESCRIBE_CONFIGS on the cluster and Alter ALTER_CONFIGS on the cluster
(else 31, for the whole response or for every entry). Describe reads the quota znodes
(`/config/users/...`, `/config/clients/...`, `/config/ips/...`) and answers the entities
the filter matches; a filter Kafka refuses fails the whole response (42, or 35 for an
entity type it does not know). Alter validates each entry on its own, with Kafka's 42
messages, and writes its changes as one compare-and-set of the entity's config map
(zk_quota_ops), which leaves a user's SCRAM credentials as they are; an entry with an
error writes nothing. Values of LONG and INT keys are stored as integers, DOUBLE keys as
Java prints a double.

One deliberate difference: a zero or negative value is refused as Kafka 3.9 refuses it
in KRaft mode ("Quota <key> must be greater than 0"); ZooKeeper mode would store it
(docs/compat.md).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_json import java_properties_order
from moldau.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    UnsupportedVersionError,
)
from moldau.protocol.generated.alter_client_quotas_response import AlterClientQuotasResponse
from moldau.protocol.generated.describe_client_quotas_response import (
    DescribeClientQuotasResponse,
)
from moldau.security.acls import AclOperation, ResourceType
from moldau.security.sasl.scram_credentials import SCRAM_MECHANISM_NAMES

from ..client_quota_configs import (
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from ..config_rendering import java_double
from .cluster_info import CLUSTER_NAME
from .scram_credentials import api_error

if TYPE_CHECKING:
    from moldau.cluster.zk_async import AsyncZk
    from moldau.protocol.generated.alter_client_quotas_request import AlterClientQuotasRequest
    from moldau.protocol.generated.describe_client_quotas_request import (
        DescribeClientQuotasRequest,
    )

    from ..requests import RequestContext

log = logging.getLogger("kafka.server.ZkAdminManager")

# ClientQuotaEntity's entity types
USER, CLIENT_ID, IP = "user", "client-id", "ip"
# DescribeClientQuotas' match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

LONG, INT, DOUBLE = "LONG", "INT", "DOUBLE"
# QuotaConfigs: the keys of a user, a client id or both, and of an address, with their types
CLIENT_KEY_TYPES = {PRODUCER_BYTE_RATE: LONG, CONSUMER_BYTE_RATE: LONG,
                    REQUEST_PERCENTAGE: DOUBLE, CONTROLLER_MUTATION_RATE: DOUBLE}
IP_KEY_TYPES = {CONNECTION_CREATION_RATE: INT}
_LIMITS = {LONG: 2**63 - 1, INT: 2**31 - 1}
_EPSILON = 1e-6

CLUSTER_DENIED = ClusterAuthorizationFailedError.code
DescribeEntry_ = DescribeClientQuotasResponse.EntryData
DescribeEntity_ = DescribeClientQuotasResponse.EntityData
Value_ = DescribeClientQuotasResponse.ValueData
AlterEntry_ = AlterClientQuotasResponse.EntryData
AlterEntity_ = AlterClientQuotasResponse.EntityData
# an entity as a request names it: (entity type, name or None for the default)
Entity = list[tuple[str, str | None]]


# ----------------------------------------------------------------------- DescribeClientQuotas

ANY = object()  # a component matching any specified name (the default too)
Match = object  # a name, None for the default entity, or ANY


@dataclass(frozen=True)
class QuotaFilter:
    """A parsed filter: per entity type, absent or what its component matches."""

    user: Match
    client_id: Match
    ip: Match
    has_user: bool
    has_client_id: bool
    has_ip: bool
    strict: bool


def parse_filter(request: DescribeClientQuotasRequest) -> QuotaFilter:
    """DescribeClientQuotasRequest.filter and ZkAdminManager.describeClientQuotas' checks;
    raises the KafkaError the whole response answers."""
    found: dict[str, Match] = {}
    for component in request.components:
        if component.match_type == MATCH_EXACT:
            if component.match is None:  # Optional.of(null): Kafka's NullPointerException
                raise KafkaError(KafkaError.default_message)
            match: Match = component.match
        elif component.match_type == MATCH_DEFAULT:
            match = None
        elif component.match_type == MATCH_SPECIFIED:
            match = ANY
        else:
            raise KafkaError(f"Unexpected match type: {component.match_type}")
        kind = component.entity_type
        if kind in (USER, CLIENT_ID, IP):
            if kind in found:
                word = "client" if kind == CLIENT_ID else kind
                raise InvalidRequestError(f"Duplicate {word} filter component entity type")
            found[kind] = match
        elif kind == "":
            raise InvalidRequestError("Unexpected empty filter component entity type")
        else:
            raise UnsupportedVersionError(f"Custom entity type '{kind}' not supported")
    if IP in found and (USER in found or CLIENT_ID in found):
        raise InvalidRequestError(
            "Invalid entity filter component combination, IP filter component should not be "
            "used with user or clientId filter component.")
    return QuotaFilter(found.get(USER), found.get(CLIENT_ID), found.get(IP), USER in found,
                       CLIENT_ID in found, IP in found, request.strict)


def _matches(present: bool, match: Match, name: str | None, strict: bool,
             has_part: bool) -> bool:
    """ZkAdminManager's `matches` of one part: `has_part` says whether the entity has it,
    `name` its name (None: the default)."""
    if not present:
        return not has_part or not strict
    if match is ANY:
        return has_part
    return has_part and name == match


def _name(znode_name: str) -> str | None:
    """A desanitized entity name as the response carries it: null for `<default>`."""
    return None if znode_name == zd.DEFAULT_ENTITY else znode_name


def _numbers(config: Mapping[str, str], keys: Mapping[str, str]) -> dict[str, float]:
    """fromProps: the quota keys of a config map, as doubles, in the map's order."""
    out: dict[str, float] = {}
    for key in java_properties_order([k for k in config if k in keys]):
        try:
            out[key] = float(config[key])
        except ValueError:
            raise KafkaError(f"Unexpected client quota configuration value: {key} -> "
                             f"{config[key]}") from None
    return out


def _entry(entity: Entity, values: dict[str, float]) -> DescribeEntry_:
    return DescribeEntry_(
        entity=[DescribeEntity_(entity_type=t, entity_name=n) for t, n in entity],
        values=[Value_(key=k, value=v) for k, v in values.items()])


class DescribeClientQuotasHandler:
    MIN_VERSION, MAX_VERSION = 0, 1

    def __init__(self, zk: AsyncZk) -> None:
        self.zk = zk

    async def __call__(self, ctx: RequestContext, request: DescribeClientQuotasRequest
                       ) -> DescribeClientQuotasResponse:
        if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
            return DescribeClientQuotasResponse(error_code=CLUSTER_DENIED, error_message=None,
                                                entries=None)
        try:
            quota_filter = parse_filter(request)
            entries = await self._user_client_entries(quota_filter)
            entries += await self._ip_entries(quota_filter)
        except KafkaError as exc:
            log.info("Error processing describe client quotas request: %s", exc)
            code, message = api_error(exc)
            return DescribeClientQuotasResponse(error_code=code, error_message=message,
                                                entries=None)
        return DescribeClientQuotasResponse(error_code=0, error_message=None, entries=entries)

    async def _user_client_entries(self, f: QuotaFilter) -> list[DescribeEntry_]:
        if f.has_ip:
            return []
        configs = await self.zk.call(self.zk.client.get_all_quota_entity_configs)
        entries = []
        for (user, client_id), config in sorted(configs.items(), key=_entity_order):
            user_name = None if user is None else _name(user)
            client_name = None if client_id is None else _name(client_id)
            if not (_matches(f.has_user, f.user, user_name, f.strict, user is not None)
                    and _matches(f.has_client_id, f.client_id, client_name, f.strict,
                                 client_id is not None)):
                continue
            values = _numbers(config, CLIENT_KEY_TYPES)
            if values:
                entity = ([(USER, user_name)] if user is not None else []) + (
                    [(CLIENT_ID, client_name)] if client_id is not None else [])
                entries.append(_entry(entity, values))
        return entries

    async def _ip_entries(self, f: QuotaFilter) -> list[DescribeEntry_]:
        if f.has_user or f.has_client_id or (not f.has_ip and f.strict):
            return []
        configs = await self.zk.call(self.zk.client.get_all_ip_quota_configs)
        entries = []
        for ip, config in sorted(configs.items()):
            name = _name(ip)
            if f.has_ip and f.ip is not ANY and f.ip != name:
                continue
            values = _numbers(config, IP_KEY_TYPES)
            if values:
                entries.append(_entry([(IP, name)], values))
        return entries


def _entity_order(item: tuple[tuple[str | None, str | None], object]) -> tuple[str, str]:
    user, client_id = item[0]
    return (user or "", client_id or "")


# ------------------------------------------------------------------------ AlterClientQuotas


@dataclass(frozen=True)
class Target:
    """Where an entry's changes go: a user and/or client-id entity, or an address."""

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None
    is_ip: bool = False


def _znode_name(name: str | None) -> str:
    return zd.DEFAULT_ENTITY if name is None else name


async def resolve_target(entity: Entity) -> Target:
    """parseAndSanitizeQuotaEntity and the entity combinations Kafka accepts."""
    if not entity:
        raise InvalidRequestError("Invalid empty client quota entity")
    parts: dict[str, str | None] = {}
    for kind, name in entity:
        if kind not in (USER, CLIENT_ID, IP):
            raise InvalidRequestError(f"Unhandled client quota entity type: {kind}")
        if name == "":
            raise InvalidRequestError(f"Empty {kind} not supported")
        parts[kind] = name
    if IP in parts and (USER in parts or CLIENT_ID in parts):
        raise InvalidRequestError("Invalid quota entity combination, IP entity should not be "
                                  "used with user/client ID entity.")
    if IP in parts:
        ip = _znode_name(parts[IP])
        if ip != zd.DEFAULT_ENTITY and not await valid_ip_entity(ip):
            raise InvalidRequestError(f"{ip} is not a valid IP or resolvable host.")
        return Target(ip=ip, is_ip=True)
    return Target(user=_znode_name(parts[USER]) if USER in parts else None,
                  client_id=_znode_name(parts[CLIENT_ID]) if CLIENT_ID in parts else None)


async def valid_ip_entity(ip: str) -> bool:
    """DynamicConfig.Ip.isValidIpEntity: an address, or a name that resolves."""
    try:
        ipaddress.ip_address(ip)
        return True
    except ValueError:
        pass
    try:
        await asyncio.get_running_loop().getaddrinfo(ip, None)
    except (OSError, UnicodeError):
        return False
    return True


def stored_value(key: str, value: float, key_types: Mapping[str, str],
                 user: bool = False) -> str:
    """The text a valid value is stored as; raises Kafka's error for an invalid one.
    `user`: the entity names a user, whose config keys include the SCRAM mechanisms."""
    kind = key_types.get(key)
    if kind is None:
        if user and key in SCRAM_MECHANISM_NAMES:
            # a user's STRING key: Kafka's IllegalStateException, UNKNOWN_SERVER_ERROR
            raise KafkaError("Unexpected config type STRING")
        raise InvalidRequestError(f"Invalid configuration key {key}")
    if not value > 0:  # KRaft's check (ZooKeeper mode stores these)
        raise InvalidRequestError(f"Quota {key} must be greater than 0")
    if kind == DOUBLE:
        return java_double(value)
    # Scala's (value + epsilon).toLong / .toInt: truncation, saturated at the type's bounds
    shifted = value + _EPSILON
    integral = _LIMITS[kind] if math.isinf(shifted) else min(int(shifted), _LIMITS[kind])
    if abs(integral - value) > _EPSILON:
        raise InvalidRequestError(f"Configuration {key} must be a {kind} value")
    return str(integral)


def planned_change(ops: list[tuple[str, float | None]], target: Target) -> dict[str, str | None]:
    """The entry's changes, key by key (None removes it), validated before any read."""
    key_types = IP_KEY_TYPES if target.is_ip else CLIENT_KEY_TYPES
    changes: dict[str, str | None] = {}
    for key, value in ops:
        changes[key] = None if value is None else stored_value(
            key, value, key_types, user=target.user is not None)
    return changes


def apply_changes(changes: Mapping[str, str | None]
                  ) -> Callable[[dict[str, str]], dict[str, str]]:
    """The compare-and-set's change: the entry's keys set or removed, the others kept."""
    def change(config: dict[str, str]) -> dict[str, str]:
        for key, text in changes.items():
            if text is None:
                config.pop(key, None)
            else:
                config[key] = text
        return config
    return change


class AlterClientQuotasHandler:
    MIN_VERSION, MAX_VERSION = 0, 1

    def __init__(self, zk: AsyncZk) -> None:
        self.zk = zk

    async def __call__(self, ctx: RequestContext, request: AlterClientQuotasRequest
                       ) -> AlterClientQuotasResponse:
        entries = _request_entries(request)
        if not ctx.authorize(AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
            return AlterClientQuotasResponse(entries=[
                _alter_entry(entity, CLUSTER_DENIED, None) for entity, _ in entries])
        answered = []
        for entity, ops in entries:
            try:
                await self._alter(entity, ops, request.validate_only)
            except KafkaError as exc:
                log.info("Error encountered while updating client quotas: %s", exc)
                code, message = api_error(exc)
                answered.append(_alter_entry(entity, code, message))
            except Exception:
                log.exception("Error encountered while updating client quotas")
                answered.append(_alter_entry(entity, KafkaError.code, None))
            else:
                answered.append(_alter_entry(entity, 0, None))
        return AlterClientQuotasResponse(entries=answered)

    async def _alter(self, entity: Entity,
                     ops: list[tuple[str, float | None]], validate_only: bool) -> None:
        target = await resolve_target(entity)
        changes = planned_change(ops, target)
        if validate_only:
            return
        client = self.zk.client
        if target.is_ip:
            assert target.ip is not None
            await self.zk.call(client.update_ip_quota_config, target.ip, apply_changes(changes))
        else:
            await self.zk.call(client.update_quota_entity_config, target.user,
                               target.client_id, apply_changes(changes))
        log.info("Altered the client quotas of %s: %s", entity, changes)



def _request_entries(request: AlterClientQuotasRequest
                     ) -> list[tuple[Entity, list[tuple[str, float | None]]]]:
    """The request's entries as Kafka's AlterClientQuotasRequest.entries builds them: an
    entity type named twice keeps its last name; ops with `remove` carry no value; an
    entity named by two entries is answered once, with the last entry's ops."""
    by_entity: dict[tuple[tuple[str, str | None], ...], list[tuple[str, float | None]]] = {}
    for entry in request.entries:
        parts = {e.entity_type: e.entity_name for e in entry.entity}
        ops = [(op.key, None if op.remove else op.value) for op in entry.ops]
        by_entity[tuple(parts.items())] = ops
    return [(list(entity), ops) for entity, ops in by_entity.items()]


def _alter_entry(entity: Entity, code: int, message: str | None) -> AlterEntry_:
    return AlterEntry_(error_code=code, error_message=message, entity=[
        AlterEntity_(entity_type=t, entity_name=n) for t, n in entity])

