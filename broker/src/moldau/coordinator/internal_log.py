"""What both coordinators do with their internal topic (`__consumer_offsets`,
`__transaction_state`): append a batch to a partition this broker leads and wait until
the ISR has it (acks=all), turn a failed append into the code their callers answer, and
read a partition back, batch by batch, when its leadership arrives."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING

from moldau.errors import (
    CoordinatorNotAvailableError,
    KafkaError,
    NotCoordinatorError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    UnknownServerError,
    UnknownTopicOrPartitionError,
)
from moldau.protocol.records import RecordBatch, iter_batches

if TYPE_CHECKING:
    from moldau.replication.replica_manager import Partition, ReplicaManager
    from moldau.storage.log import PartitionLog

# The mapping both of Kafka's coordinators apply to a failed append of their records
# (GroupMetadataManager and TransactionStateManager); each adds its own for the rest.
COORDINATOR_APPEND_ERRORS: Mapping[type[KafkaError], type[KafkaError]] = {
    UnknownTopicOrPartitionError: CoordinatorNotAvailableError,
    NotEnoughReplicasError: CoordinatorNotAvailableError,
    NotEnoughReplicasAfterAppendError: CoordinatorNotAvailableError,
    RequestTimedOutError: CoordinatorNotAvailableError,
    NotLeaderOrFollowerError: NotCoordinatorError,
}


def coordinator_error(exc: KafkaError,
                      mapping: Mapping[type[KafkaError], type[KafkaError]]) -> int:
    """The code a coordinator's caller answers for a failed append; an error without a
    code of its own is UNKNOWN_SERVER_ERROR."""
    mapped = mapping.get(type(exc))
    if mapped is None and not exc.code > 0:
        mapped = UnknownServerError
    return (mapped or type(exc)).code


async def append_replicated(replica_manager: Callable[[], ReplicaManager], topic: str,
                            index: int, batch: bytes, timeout_ms: int) -> int:
    """Append the coordinator's batch to the partition it leads and wait for the high
    watermark to pass it; the batch's first offset. Raises the KafkaError of a refused
    append, of a partition whose leadership moved meanwhile, or RequestTimedOutError."""
    rm = replica_manager()
    partition: Partition = rm.leader_partition(topic, index, True)
    if len(partition.state.isr) < partition.log.config.min_insync_replicas:
        raise NotEnoughReplicasError(f"the ISR of {partition.name} is too small")
    info = partition.log.append_as_leader(batch, partition.leader_epoch, from_client=False)
    partition.maybe_increment_high_watermark()
    partition.appended()
    needed = info.last_offset + 1
    deadline = time.monotonic() + timeout_ms / 1000
    while partition.log.high_watermark < needed:
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(f"{partition.name} moved while appending")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RequestTimedOutError(f"the ISR of {partition.name} did not reach offset "
                                       f"{needed}")
        await rm.wait_for_change([partition], remaining)
    return info.first_offset


async def read_batches(partition_log: PartitionLog, buffer_size: int
                       ) -> AsyncIterator[list[RecordBatch]]:
    """The partition's batches from its log start to its log end, `buffer_size` bytes of
    them at a time. As in Kafka, not only up to the high watermark: what a new leader
    holds beyond it is the latest state, committed once the followers catch up. Yields
    to the event loop between reads, so a large partition does not stall the broker."""
    offset = partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        buffer = partition_log.read_bytes(partition_log.read(offset, buffer_size))
        batches = list(iter_batches(buffer, allow_partial=True)) if buffer else []
        if not batches:
            return
        offset = batches[-1].next_offset
        yield batches
        await asyncio.sleep(0)
