"""The client quota configs a broker holds: the quota keys of `/config/users/...`,
`/config/clients/...` and `/config/ips/...`, loaded before the listeners open and kept
current by the config change notifications (Kafka's ClientIdConfigHandler,
UserConfigHandler and IpConfigHandler feeding the quota managers).

One writer (the quota config handler, which reads ZooKeeper) and several readers: the
client quota managers (server/quotas.py: which quota applies to a request) and the
connection limits (server/limits.py: `connection_creation_rate` per address). Readers
look values up when they need them and may subscribe to changes to drop what they
derived from the old values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

# Kafka's ConfigEntityName.DEFAULT: the default user, client id or address.
DEFAULT = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# The quota keys of a user, a client id or a user's client id (QuotaConfigs).
CLIENT_QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE,
                     CONTROLLER_MUTATION_RATE)
# The quota keys of an address.
IP_QUOTA_KEYS = (CONNECTION_CREATION_RATE,)


@dataclass(frozen=True)
class QuotaEntity:
    """A user, a client id or a user's client id, as a quota znode names it (desanitized):
    `DEFAULT` for a default entity, None for a part the entity does not have. The eight
    kinds Kafka resolves in order: (user, client), (user, DEFAULT client), (user, None),
    (DEFAULT user, client), (DEFAULT, DEFAULT), (DEFAULT, None), (None, client),
    (None, DEFAULT)."""

    user: str | None = None
    client_id: str | None = None


QuotaListener = Callable[["QuotaEntity | str"], None]


class ClientQuotaConfigs:
    """The live quota values. `set_client` and `set_ip` replace an entity's values whole
    (an empty map or None removes it) and tell every listener which entity changed: a
    QuotaEntity, or the address (or DEFAULT) of an ip quota."""

    def __init__(self) -> None:
        self._client: dict[QuotaEntity, dict[str, float]] = {}
        self._ip: dict[str, float] = {}
        self._listeners: list[QuotaListener] = []

    def client_quotas(self) -> Mapping[QuotaEntity, Mapping[str, float]]:
        return self._client

    def client_quota(self, entity: QuotaEntity, key: str) -> float | None:
        return self._client.get(entity, {}).get(key)

    def ip_connection_rates(self) -> Mapping[str, float]:
        """`connection_creation_rate` by address (or DEFAULT)."""
        return self._ip

    def set_client(self, entity: QuotaEntity, quotas: Mapping[str, float]) -> None:
        if quotas:
            self._client[entity] = dict(quotas)
        else:
            self._client.pop(entity, None)
        self._notify(entity)

    def set_ip(self, ip: str, rate: float | None) -> None:
        if rate is None:
            self._ip.pop(ip, None)
        else:
            self._ip[ip] = rate
        self._notify(ip)

    def on_change(self, listener: QuotaListener) -> None:
        self._listeners.append(listener)

    def _notify(self, what: QuotaEntity | str) -> None:
        for listener in self._listeners:
            listener(what)
