"""Replica placement for new topics and added partitions: Kafka's
AdminUtils.assignReplicasToBrokers (ZooKeeper mode, Kafka 3.9).

Without racks, leaders go round-robin over the broker list from a start index and each
follower sits at a shift from its leader that grows by one every lap of the list. With
`broker.rack` on every broker, the list is first rearranged to alternate racks, and a
follower is skipped while its rack already holds a replica and some rack holds none (or
while its broker already holds one and some broker holds none), so that a partition
spans min(replication factor, racks) racks. Kafka picks the start index and the shift at
random; fixed ones give Kafka's placement exactly.

Moldau adds the host (`moldau.broker.host`, a Moldau extension) as a failure domain below
the rack, for servers that run several brokers. A broker without one is its own host, so
while no two brokers share a host the placement is Kafka's, byte for byte. When some do,
the placement walks a list that alternates racks and, inside each rack, hosts; a
follower is skipped while its rack is taken and a rack is free (Kafka's rule), then while
its host is taken and some eligible broker's host is free, then while the broker is
taken. Without racks the hosts play the racks' part. A partition thus spans
min(replication factor, hosts) hosts whenever each host's brokers share one rack (the
rack rule wins otherwise); leaders still go round robin over every broker.

The order of the broker list matters for the rack-unaware placement, so this module also
reproduces the order in which Kafka hands the live brokers over (`zk_metadata_cache_order`,
for CreateTopics) next to the sorted one of AdminZkClient.getBrokerMetadatas
(`broker_metadatas`, for CreatePartitions).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from moldau.errors import InvalidPartitionsError, InvalidReplicationFactorError, KafkaError


class BrokerMetadata(NamedTuple):
    """org.apache.kafka.admin.BrokerMetadata: a broker id and its `broker.rack`, if any,
    plus Moldau's `moldau.broker.host` (None: the broker is a host of its own)."""

    id: int
    rack: str | None = None
    host: str | None = None


class AdminOperationError(KafkaError):
    """Kafka's AdminOperationException. It is no ApiException, so a response carries
    UNKNOWN_SERVER_ERROR (code -1) and no message for it; the message is for the log."""


class RackAwareMode(enum.Enum):
    """kafka.admin.RackAwareMode: how getBrokerMetadatas treats rack information."""

    ENFORCED = "enforced"  # keep racks; refuse a cluster where only some brokers have one
    SAFE = "safe"          # keep racks only if every broker has one
    DISABLED = "disabled"  # drop racks: the rack-unaware placement is forced


MIXED_RACKS = "Not all brokers have rack information for replica rack aware assignment."
MIXED_RACKS_ENFORCED = ("Not all brokers have rack information. Add --disable-rack-aware in "
                        "command line to make replica assignment without rack information.")

BrokerLike = (BrokerMetadata | tuple[int, str | None] | tuple[int, str | None, str | None]
              | int)


def _metadata(broker: BrokerLike) -> BrokerMetadata:
    # A bare id is a broker without a rack (older callers pass plain ids).
    if isinstance(broker, int):
        return BrokerMetadata(broker, None)
    return BrokerMetadata(*broker)


def broker_metadatas(brokers: Iterable[BrokerLike],
                     mode: RackAwareMode = RackAwareMode.ENFORCED) -> list[BrokerMetadata]:
    """AdminZkClient.getBrokerMetadatas, which CreatePartitions uses: the brokers sorted
    by id, racks kept, dropped or refused as the mode says."""
    metas = [_metadata(b) for b in brokers]
    with_rack = sum(1 for b in metas if b.rack is not None)
    mixed = 0 < with_rack < len(metas)
    if mode is RackAwareMode.ENFORCED and mixed:
        raise AdminOperationError(MIXED_RACKS_ENFORCED)
    if mode is RackAwareMode.DISABLED or (mode is RackAwareMode.SAFE and mixed):
        # Hosts stay: disabling rack awareness does not allow two replicas on one server.
        metas = [BrokerMetadata(b.id, None, b.host) for b in metas]
    return sorted(metas, key=lambda b: b.id)


def assign_replicas(brokers: Sequence[BrokerLike], partitions: int, replication_factor: int,
                    start_index: int = -1, next_replica_shift: int = -1,
                    first_partition: int = 0) -> dict[int, list[int]]:
    """Partition id -> replicas (preferred leader first) for `partitions` partitions
    numbered from `first_partition`, on `brokers` in the order given.

    A negative start_index is drawn at random, as Kafka does. A negative
    next_replica_shift is the start index when that is fixed (Kafka has one
    `fixedStartIndex` for both) and random otherwise."""
    # Kafka's checks, in Kafka's order and words.
    if partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}.")
    metas = [_metadata(b) for b in brokers]
    with_rack = sum(1 for b in metas if b.rack is not None)
    hosts = host_keys(metas)
    hosts_shared = len(set(hosts.values())) < len(metas)
    if with_rack == 0 and not hosts_shared:
        order = [b.id for b in metas]
        racks: dict[int, str] | None = None
    elif 0 < with_rack < len(metas):
        raise AdminOperationError(MIXED_RACKS)
    elif with_rack == 0:
        # No racks, but servers with several brokers: the hosts are the top domain.
        racks = None
        order = domain_alternated_brokers(None, hosts)
    else:
        racks = {b.id: b.rack for b in metas if b.rack is not None}
        order = domain_alternated_brokers(racks, hosts)

    n = len(order)
    start = start_index if start_index >= 0 else random.randrange(n)
    if next_replica_shift >= 0:
        shift = next_replica_shift
    else:
        shift = start_index if start_index >= 0 else random.randrange(n)
    current = max(0, first_partition)
    result: dict[int, list[int]] = {}
    for _ in range(partitions):
        # One more step of shift per lap, so that laps do not repeat the same followers.
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start) % n
        if racks is None and not hosts_shared:
            result[current] = [order[first]] + [
                order[_replica_index(first, shift, j, n)]
                for j in range(replication_factor - 1)]
        else:
            result[current] = _domain_aware_replicas(order, racks, hosts, first, shift,
                                                     replication_factor)
        current += 1
    return result


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    # Followers never land on the leader: the offset runs over 1..n-1.
    return (first + 1 + (shift + j) % (n - 1)) % n


def _domain_aware_replicas(order: list[int], racks: Mapping[int, str] | None,
                           hosts: Mapping[int, str], first: int, shift: int,
                           replication_factor: int) -> list[int]:
    leader = order[first]
    replicas = [leader]
    racks_used = {racks[leader]} if racks is not None else set()
    hosts_used = {hosts[leader]}
    brokers_used = {leader}
    # Kafka scales the shift by the rack count on the rack-alternated list; without
    # racks the hosts are the top domain and their count takes that part.
    rack_count = len(set(racks.values())) if racks is not None else 0
    host_count = len(set(hosts.values()))
    scale = rack_count if racks is not None else host_count
    n = len(order)

    def rack_blocks(broker: int) -> bool:
        # Kafka's rule: a broker whose rack already has a replica while some rack has none.
        return (racks is not None and racks[broker] in racks_used
                and len(racks_used) < rack_count)

    k = 0
    for _ in range(replication_factor - 1):
        # A host already used is skipped only while a broker the rack rule allows has a
        # free host: with hosts that span racks the rack rule wins, and the walk ends.
        # (With a host per broker this is the broker rule below: not worth the scan.)
        host_free = host_count < n and len(hosts_used) < host_count and any(
            hosts[b] not in hosts_used and not rack_blocks(b) for b in order)
        while True:
            broker = order[_replica_index(first, shift * scale, k, n)]
            k += 1
            if rack_blocks(broker):
                continue
            if host_free and hosts[broker] in hosts_used:
                continue
            # Kafka's last rule: a broker that has a replica while some broker has none.
            if broker in brokers_used and len(brokers_used) < n:
                continue
            replicas.append(broker)
            if racks is not None:
                racks_used.add(racks[broker])
            hosts_used.add(hosts[broker])
            brokers_used.add(broker)
            break
    return replicas


def host_keys(brokers: Iterable[BrokerMetadata]) -> dict[int, str]:
    """Broker id -> its host's identity: the `moldau.broker.host` value, or a name of its
    own for a broker without one (no host name can equal it: it holds a NUL)."""
    return {b.id: b.host if b.host is not None else f"\0broker-{b.id}" for b in brokers}


def domain_alternated_brokers(racks: Mapping[int, str] | None,
                              hosts: Mapping[int, str]) -> list[int]:
    """The list the placement walks when hosts are shared: Kafka's rack-alternated list
    whose racks each alternate their hosts (hosts in the order of their lowest broker id,
    each host's brokers by id); without racks, the hosts alternated. With one broker per
    host this is Kafka's list (each rack's brokers by id)."""
    if racks is None:
        return _host_alternated(sorted(hosts), hosts)
    alternated = rack_alternated_brokers(racks)
    by_rack: dict[str, list[int]] = {}
    for broker_id in alternated:
        by_rack.setdefault(racks[broker_id], []).append(broker_id)
    queues = {rack: iter(_host_alternated(sorted(ids), hosts)) for rack, ids in by_rack.items()}
    # Kafka's list visits the racks in a fixed rotation; keep it, take each rack's brokers
    # in host-alternated order instead of by id.
    return [next(queues[racks[broker_id]]) for broker_id in alternated]


def _host_alternated(ids: list[int], hosts: Mapping[int, str]) -> list[int]:
    # ids sorted: hosts come in the order of their lowest id, each host's brokers by id.
    by_host: dict[str, list[int]] = {}
    for broker_id in ids:
        by_host.setdefault(hosts[broker_id], []).append(broker_id)
    return _interleaved(list(by_host.values()))


def _interleaved(queues: list[list[int]]) -> list[int]:
    """The first of each queue in turn, then the second of each, and so on."""
    result: list[int] = []
    for depth in range(max(map(len, queues), default=0)):
        result.extend(q[depth] for q in queues if depth < len(q))
    return result


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """AdminUtils.getRackAlternatedBrokerList: one broker from each rack in turn (racks
    in name order, each rack's brokers by id), so that a round-robin walk over the list
    changes rack at every step for as long as it can."""
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    # Java compares strings by UTF-16 code unit; big-endian UTF-16 bytes sort the same way.
    names = sorted(by_rack, key=lambda r: r.encode("utf-16-be"))
    return _interleaved([sorted(by_rack[name]) for name in names])


# --- the order of Kafka's live broker list ----------------------------------------------

_INDEX_MASK = 0x3FFFFFFF


def _long_map_slot(key: int, mask: int) -> int:
    # scala.collection.mutable.LongMap.toIndex: part of the MurmurHash3 32-bit finalizer.
    u = key & 0xFFFFFFFFFFFFFFFF
    h = (u ^ (u >> 32)) & 0xFFFFFFFF
    x = ((h ^ (h >> 16)) * 0x85EBCA6B) & 0xFFFFFFFF
    return (x ^ (x >> 13)) & mask


def _long_map_seek_empty(keys: list[int], key: int, mask: int) -> int:
    e = _long_map_slot(key, mask)
    x = 0
    while keys[e] != 0:
        x += 1
        e = (e + 2 * (x + 1) * x - 3) & mask
    return e


def zk_metadata_cache_order(broker_ids: Iterable[int],
                            buffer_size: int | None = None) -> list[int]:
    """The order of ZkMetadataCache.getAliveBrokers, which is the broker list CreateTopics
    (and auto-creation) hands to the placement in ZooKeeper mode: the values of a Scala
    mutable.LongMap, which iterates broker 0 first and then its open-addressing slots.

    `buffer_size` is the size the map is built with: the number of live brokers in the
    previous metadata snapshot (by default the current number, as in a steady cluster).
    The brokers go in by ascending id; Kafka inserts them in the order of the controller's
    UpdateMetadata, which only matters when two ids probe for the same slot."""
    ids = sorted(set(broker_ids))
    size_hint = len(ids) if buffer_size is None else buffer_size
    if size_hint < 0:
        mask = 0x7
    else:
        # Java's 1 << 32 is 1 << 0, which makes a hint of 0 give the smallest table too.
        mask = (((1 << ((size_hint - 1).bit_length() if size_hint > 0 else 0)) - 1)
                & _INDEX_MASK) | 0x7
    keys = [0] * (mask + 1)
    has_zero = False
    size = 0
    for key in ids:
        if key == 0:  # LongMap keeps key 0 outside the table and yields it first
            has_zero = True
            continue
        keys[_long_map_seek_empty(keys, key, mask)] = key
        size += 1
        if size > 0.5 * mask:  # imbalanced: repack into a table twice the size
            new_mask = ((mask << 1) + 1) & _INDEX_MASK
            while new_mask > 8 and 8 * size < new_mask:
                new_mask >>= 1
            old, mask = keys, new_mask
            keys = [0] * (mask + 1)
            for k in old:
                if k != 0:
                    keys[_long_map_seek_empty(keys, k, mask)] = k
    return ([0] if has_zero else []) + [k for k in keys if k != 0]
