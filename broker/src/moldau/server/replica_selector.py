"""Fetching from the closest replica (KIP-392): which replica a consumer should read from.

With `replica.selector.class` set to Kafka's RackAwareReplicaSelector, a leader answers a
consumer that names its rack (`client.rack`, Fetch v11+) with a preferred read replica:
itself when it is in the consumer's rack, else an in-sync replica in that rack that
already holds the fetch offset (the most caught up, the lowest id on a tie). The client
then fetches from that follower, which serves reads up to its own high watermark.
LeaderSelector (and no selector) keeps consumers on the leader.
"""

from __future__ import annotations

from collections.abc import Mapping

from moldau.replication.replica_manager import Partition

from .config import RACK_AWARE_SELECTOR
from .metadata_cache import BrokerEndpoints

NO_PREFERENCE = -1


def preferred_read_replica(selector: str | None, partition: Partition, client_rack: str,
                           fetch_offset: int, brokers: Mapping[int, BrokerEndpoints]) -> int:
    """The replica a consumer in client_rack should fetch from, or NO_PREFERENCE (the
    leader itself)."""
    if selector != RACK_AWARE_SELECTOR or not client_rack:
        return NO_PREFERENCE
    leader = brokers.get(partition.broker_id)  # this broker leads the partition
    if leader is not None and leader.rack == client_rack:
        return NO_PREFERENCE
    candidates = []
    for replica_id in partition.state.isr:
        follower = partition.followers.get(replica_id)
        broker = brokers.get(replica_id)
        if (follower is not None and broker is not None and broker.rack == client_rack
                and follower.log_end_offset >= fetch_offset):
            candidates.append((-follower.log_end_offset, replica_id))
    return min(candidates)[1] if candidates else NO_PREFERENCE
