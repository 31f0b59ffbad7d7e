"""The quota part of access_apply.py: the inventory's `kafka_quotas` checked, compared with
the quota keys in ZooKeeper (`/config/users/<u>`, `/config/users/<u>/clients/<c>`,
`/config/clients/<c>`, `/config/ips/<ip>`) and written through KafkaZkClient's quota entity
writers (zk_quota_ops: compare-and-set, Kafka's change notifications, a user's SCRAM
credentials kept), so every broker applies them without a restart.

  {"entity": {"user": "alice", "client-id": "app"}, "config": {"producer_byte_rate": 1048576}}
  {"entity": {"client-id": "<default>"}, "config": {"consumer_byte_rate": 10485760}}
  {"entity": {"ip": "10.0.0.7"}, "config": {"connection_creation_rate": 10}}

Entity types are Kafka's (`user`, `client-id`, `ip`; `<default>` is the default entity).
Values are compared as numbers, so `1048576` and Kafka's stored `1048576` or `1.048576E6`
are the same quota. Declared keys are set; quota keys the cluster has and the inventory
does not declare are kept and reported, removed only with `"quotas_exclusive": true`.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from dataclasses import dataclass

from moldau.cluster.zk_client import KafkaZkClient
from moldau.server.client_quota_configs import (
    CLIENT_QUOTA_KEYS,
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    DEFAULT,
    IP_QUOTA_KEYS,
    PRODUCER_BYTE_RATE,
)
from moldau.tools.scram_user import InputError

USER, CLIENT_ID, IP = "user", "client-id", "ip"
# Kafka's QuotaConfigs types: integral keys refuse fractions, and are stored as integers
_INTEGRAL = {PRODUCER_BYTE_RATE: "LONG", CONSUMER_BYTE_RATE: "LONG",
             CONNECTION_CREATION_RATE: "INT"}


@dataclass(frozen=True)
class QuotaEntity:
    """A user, a client id, a user's client id, or an address; `<default>` for a default."""

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None

    def document(self) -> dict[str, str]:
        names = {USER: self.user, CLIENT_ID: self.client_id, IP: self.ip}
        return {kind: name for kind, name in names.items() if name is not None}

    @property
    def keys(self) -> tuple[str, ...]:
        return IP_QUOTA_KEYS if self.ip is not None else CLIENT_QUOTA_KEYS


Quotas = dict[QuotaEntity, dict[str, float]]


def entity_order(entity: QuotaEntity) -> tuple[str, str, str]:
    """Users (with their client ids), client ids, then addresses: a stable report order."""
    return entity.user or "\uffff", entity.client_id or "", entity.ip or ""


def quota_entity(item: object, where: str) -> QuotaEntity:
    if not isinstance(item, dict) or not item:
        raise InputError(f"{where}: 'entity' must map user, client-id or ip to a name")
    unknown = sorted(set(item) - {USER, CLIENT_ID, IP})
    if unknown:
        raise InputError(f"{where}: unknown entity types {unknown} (known: user, client-id, "
                         "ip)")
    if not all(isinstance(name, str) and name for name in item.values()):
        raise InputError(f"{where}: entity names must be non-empty strings")
    if IP in item:
        if len(item) > 1:
            raise InputError(f"{where}: an ip entity cannot be combined with user or "
                             "client-id")
        ip = item[IP]
        if ip != DEFAULT:
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                raise InputError(f"{where}: {ip} is not a valid IP address") from None
        return QuotaEntity(ip=ip)
    return QuotaEntity(user=item.get(USER), client_id=item.get(CLIENT_ID))


def quota_value(key: str, value: object, where: str) -> float:
    """A declared value as a number, refused as AlterClientQuotas refuses it."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"{where}: Invalid value {value} for configuration {key}: Not a "
                         "number")
    try:
        number = float(value)
    except ValueError:
        raise InputError(f"{where}: Invalid value {value} for configuration {key}: Not a "
                         f"number of type {_INTEGRAL.get(key, 'DOUBLE')}") from None
    if not math.isfinite(number):
        raise InputError(f"{where}: Invalid value {value} for configuration {key}")
    if key in _INTEGRAL and not number.is_integer():
        raise InputError(f"{where}: Configuration {key} must be a "
                         f"{_INTEGRAL[key].capitalize()} value")
    if number <= 0:
        raise InputError(f"{where}: Invalid value {value} for configuration {key}: must be "
                         "greater than 0")
    return number


def declared_quotas(document: object, source: str) -> Quotas:
    """The `quotas` list: one entry per entity, each key a known quota of its entity."""
    if not isinstance(document, list):
        raise InputError(f"{source}: 'quotas' must be a list")
    quotas: Quotas = {}
    for index, item in enumerate(document):
        where = f"{source}: quota #{index + 1}"
        if not isinstance(item, dict) or set(item) != {"entity", "config"}:
            raise InputError(f"{where}: expected an object with 'entity' and 'config'")
        entity = quota_entity(item["entity"], where)
        config = item["config"]
        if not isinstance(config, dict) or not config:
            raise InputError(f"{where}: 'config' must map quota keys to values")
        for key in config:
            if key not in entity.keys:
                raise InputError(f"{where}: Invalid configuration key {key} (valid for "
                                 f"{'an ip' if entity.ip else 'this'} entity: "
                                 f"{', '.join(entity.keys)})")
        if entity in quotas:
            raise InputError(f"{where}: entity {entity.document()} is declared more than once")
        quotas[entity] = {key: quota_value(key, value, where) for key, value in config.items()}
    return quotas


# ----------------------------------------------------------------------- cluster side


def stored_quotas(zk: KafkaZkClient) -> Quotas:
    """The quota keys of every entity in ZooKeeper (a user's credentials left out; a value
    that is not a number is left out too: it is no quota a broker applies)."""
    found: Quotas = {}
    entities = [(QuotaEntity(user=user, client_id=client), config)
                for (user, client), config in zk.get_all_quota_entity_configs().items()]
    entities += [(QuotaEntity(ip=ip), config)
                 for ip, config in zk.get_all_ip_quota_configs().items()]
    for entity, config in entities:
        values = {}
        for key in entity.keys:
            try:
                values[key] = float(config[key])
            except (KeyError, ValueError):
                continue
        if values:
            found[entity] = values
    return found


@dataclass(frozen=True)
class QuotaPlan:
    set: Quotas  # keys to write (new or other value)
    remove: dict[QuotaEntity, frozenset[str]]
    undeclared: Quotas  # what the cluster has beyond the declaration (removed or not)
    kept: int


def plan_quotas(current: Mapping[QuotaEntity, Mapping[str, float]],
                desired: Mapping[QuotaEntity, Mapping[str, float]], exclusive: bool
                ) -> QuotaPlan:
    to_set = {entity: changed for entity, values in desired.items()
              if (changed := {key: value for key, value in values.items()
                              if current.get(entity, {}).get(key) != value})}
    undeclared = {entity: extra for entity, values in current.items()
                  if (extra := {key: value for key, value in values.items()
                                if key not in desired.get(entity, {})})}
    kept = sum(len(values) for values in desired.values()) \
        - sum(len(values) for values in to_set.values())
    remove = {entity: frozenset(values) for entity, values in undeclared.items()} \
        if exclusive else {}
    return QuotaPlan(to_set, remove, undeclared, kept)


def stored_form(key: str, value: float) -> str:
    """How Kafka stores a value: integral keys as integers, the others as Java doubles."""
    return str(int(value)) if key in _INTEGRAL else repr(value)


def apply_quotas(zk: KafkaZkClient, plan: QuotaPlan) -> None:
    """One compare-and-set write per entity that changes (its other keys kept)."""
    for entity in sorted(plan.set.keys() | plan.remove.keys(), key=entity_order):
        values = plan.set.get(entity, {})
        removed = plan.remove.get(entity, frozenset())

        def change(config: dict[str, str], values: Mapping[str, float] = values,
                   removed: frozenset[str] = removed) -> dict[str, str]:
            for key in removed:
                config.pop(key, None)
            config.update({key: stored_form(key, value) for key, value in values.items()})
            return config

        if entity.ip is not None:
            zk.update_ip_quota_config(entity.ip, change)
        else:
            zk.update_quota_entity_config(entity.user, entity.client_id, change)


def quota_documents(quotas: Mapping[QuotaEntity, Mapping[str, float]]
                    ) -> list[dict[str, object]]:
    """Entries in the inventory's form (integral keys as integers), for the report."""
    return [{"entity": entity.document(),
             "config": {key: int(value) if key in _INTEGRAL else value
                        for key, value in sorted(quotas[entity].items())}}
            for entity in sorted(quotas, key=entity_order)]


def removal_documents(remove: Mapping[QuotaEntity, frozenset[str]]) -> list[dict[str, object]]:
    return [{"entity": entity.document(), "keys": sorted(keys)}
            for entity, keys in sorted(remove.items(), key=lambda item: entity_order(item[0]))]
