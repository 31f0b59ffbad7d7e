"""What `inter.broker.protocol.version` gates: the request versions brokers send each other.

Kafka keeps a rolling upgrade safe by pinning the inter-broker protocol (IBP) while old and
new brokers mix, then raising it in a second roll. Moldau reads the same values and sends
Kafka's request version for each (ControllerChannelManager, ReplicaFetcherThread and
MetadataVersion of Kafka 3.9). Moldau speaks 2.8 and later: older IBPs predate its
registration format and are refused at startup.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kafka 3.9's production IBPs from 2.8 on, oldest first
KNOWN_VERSIONS = (
    "2.8-IV0", "2.8-IV1",
    "3.0-IV0", "3.0-IV1", "3.1-IV0", "3.2-IV0",
    "3.3-IV0", "3.3-IV1", "3.3-IV2", "3.3-IV3",
    "3.4-IV0", "3.5-IV0", "3.5-IV1", "3.5-IV2",
    "3.6-IV0", "3.6-IV1", "3.6-IV2",
    "3.7-IV0", "3.7-IV1", "3.7-IV2", "3.7-IV3", "3.7-IV4",
    "3.8-IV0", "3.9-IV0",
)
_RANK = {v: i for i, v in enumerate(KNOWN_VERSIONS)}


class UnknownProtocolVersionError(ValueError):
    pass


def parse(value: str) -> str:
    """The canonical IBP for a configured value: "3.9" means its latest step ("3.9-IV0")."""
    value = value.strip()
    if value in _RANK:
        return value
    steps = [v for v in KNOWN_VERSIONS if v.split("-")[0] == value]
    if steps:
        return steps[-1]
    raise UnknownProtocolVersionError(
        f"Version {value} is not a valid version; Moldau supports "
        f"{KNOWN_VERSIONS[0]} to {KNOWN_VERSIONS[-1]}")


def at_least(ibp: str, floor: str) -> bool:
    return _RANK[ibp] >= _RANK[floor]


@dataclass(frozen=True)
class InterBrokerVersions:
    leader_and_isr: int
    update_metadata: int
    stop_replica: int
    fetch: int
    offset_for_leader_epoch: int
    controlled_shutdown: int


def versions_for(ibp: str) -> InterBrokerVersions:
    ibp = parse(ibp)
    ge = lambda floor: at_least(ibp, floor)  # noqa: E731
    return InterBrokerVersions(
        leader_and_isr=7 if ge("3.4-IV0") else 6 if ge("3.2-IV0") else 5 if ge("2.8-IV1") else 4,
        update_metadata=8 if ge("3.4-IV0") else 7 if ge("2.8-IV1") else 6,
        stop_replica=4 if ge("3.4-IV0") else 3,
        fetch=(17 if ge("3.9-IV0") else 16 if ge("3.7-IV4") else 15 if ge("3.5-IV1")
               else 14 if ge("3.5-IV0") else 13 if ge("3.1-IV0") else 12),
        offset_for_leader_epoch=4,
        controlled_shutdown=3,
    )
