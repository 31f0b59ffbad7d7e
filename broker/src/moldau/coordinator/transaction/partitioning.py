"""Which `__transaction_state` partition holds a transactional id: Kafka's
`Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`, Java's
String.hashCode over UTF-16 code units. It is the rule `__consumer_offsets` uses for group
ids, so the group coordinator's implementation serves both."""

from __future__ import annotations

from moldau.coordinator.group.records import java_string_hash, partition_for

TRANSACTION_STATE_TOPIC = "__transaction_state"
DEFAULT_PARTITIONS = 50  # transaction.state.log.num.partitions

__all__ = ["DEFAULT_PARTITIONS", "TRANSACTION_STATE_TOPIC", "java_string_hash",
           "transaction_partition_for"]


def transaction_partition_for(transactional_id: str,
                              partitions: int = DEFAULT_PARTITIONS) -> int:
    """The partition of transactional_id (the coordinator is that partition's leader)."""
    return partition_for(transactional_id, partitions)
