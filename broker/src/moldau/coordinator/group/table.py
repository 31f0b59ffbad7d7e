"""The group table every part of the coordinator shares: the groups this broker
coordinates, which `__consumer_offsets` partitions it serves them from (owned, loading,
about to be elected), the check each request makes against that (Kafka's
validateGroupStatus), and the one way to write a group's records back to its partition.

Only the partition loader changes which partitions are owned (and loads or drops their
groups); membership and offsets add and remove single groups."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from moldau.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidGroupIdError,
    NotCoordinatorError,
)
from moldau.protocol.records import NO_SEQUENCE

from ..tasks import BackgroundTasks
from .config import CoordinatorConfig, log
from .group import Group
from .offsets_log import OffsetsLog, TxnProducer
from .records import group_metadata_key, group_metadata_value, partition_for


class GroupTable:
    def __init__(self, config: CoordinatorConfig, offsets_log: OffsetsLog,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self.offsets_log = offsets_log
        self.loop = loop
        self.tasks = BackgroundTasks(log, "Group coordinator task")
        self.groups: dict[str, Group] = {}
        self.owned: set[int] = set()  # offsets partitions loaded and served here
        self.loading: set[int] = set()
        # offsets partitions that a LeaderAndIsr being applied makes this broker lead
        self.expected: set[int] = set()
        # whether this broker's metadata names it the leader of an offsets partition
        # (the broker sets it; a LeaderAndIsr may not have reached the coordinator yet)
        self.named_leader: Callable[[int], bool] = lambda _partition: False
        self.active = True

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_partitions)

    def check_active(self) -> None:
        if not self.active:
            raise CoordinatorNotAvailableError("the group coordinator is not active")

    def check_group(self, group_id: str | None, *, allow_empty_id: bool = False) -> None:
        """Is this the group's coordinator, and ready? Raises the error to answer."""
        if group_id is None or (group_id == "" and not allow_empty_id):
            raise InvalidGroupIdError(f"the group id {group_id!r} is not valid")
        self.check_active()
        partition = self.partition_of(group_id)
        if partition in self.owned:
            return
        # A client that another broker's fresher metadata sends here, before this broker
        # has taken the partition on, must retry rather than look elsewhere: librdkafka
        # gives up a manual assignment's offset fetch on NOT_COORDINATOR for good.
        if (partition in self.loading or partition in self.expected
                or self.named_leader(partition)):
            raise CoordinatorLoadInProgressError(
                f"the coordinator is loading partition {partition} of the offsets topic")
        raise NotCoordinatorError(f"this broker is not the coordinator of {group_id}")

    # --- writes ----------------------------------------------------------------------

    async def append(self, group_id: str, records: list[tuple[bytes, bytes | None]], *,
                     base_sequence: int = NO_SEQUENCE) -> int:
        """Write to the group's partition and wait for the ISR; 0 or Kafka's error code
        for a failed offset or group write."""
        partition = self.partition_of(group_id)
        if partition not in self.owned:
            return NotCoordinatorError.code
        return await self.offsets_log.append(partition, records, base_sequence=base_sequence)

    async def write(self, group_id: str, records: list[tuple[bytes, bytes | None]], *,
                    base_sequence: int = NO_SEQUENCE, producer: TxnProducer | None = None
                    ) -> tuple[int, int]:
        """append(), also answering the base offset of the batch (-1 when it failed): the
        position that orders offset commits; a producer makes it a transactional batch."""
        partition = self.partition_of(group_id)
        if partition not in self.owned:
            return NotCoordinatorError.code, -1
        return await self.offsets_log.write(partition, records, base_sequence=base_sequence,
                                            producer=producer)

    async def store_group(self, group: Group, assignment: dict[str, bytes]) -> int:
        record = group_metadata_value(group.to_record(assignment))
        return await self.append(group.group_id, [(group_metadata_key(group.group_id),
                                                   record)])

    async def store_empty_group(self, group: Group) -> None:
        """A group whose rebalance left it Empty is stored so; nobody waits for the write."""
        error = await self.store_group(group, {})
        if error:
            log.warning("Failed to write the empty group metadata of %s: error %d",
                        group.group_id, error)
