"""Which `__consumer_offsets` partitions this coordinator serves, following their
leadership (Kafka's GroupCoordinator onElection and onResignation, with
GroupMetadataManager's loadGroupsAndOffsets): an elected partition is read back into
the group table, and until then its groups answer COORDINATOR_LOAD_IN_PROGRESS; a
resigned one's groups are dropped, and their members find the new coordinator."""

from __future__ import annotations

import time
from collections.abc import Iterable

from moldau.errors import NotCoordinatorError

from .cleanup import OffsetCleanup
from .config import log
from .group import Group
from .membership import Membership
from .offsets_log import Entry
from .records import GroupKey, GroupRecord, OffsetAndMetadata, OffsetKey, TopicPartition
from .table import GroupTable


class PartitionLoader:
    def __init__(self, table: GroupTable, membership: Membership,
                 cleanup: OffsetCleanup) -> None:
        self._table = table
        self._membership = membership
        self._cleanup = cleanup

    def expect_elections(self, partitions: Iterable[int]) -> None:
        table = self._table
        table.expected.update(p for p in partitions if p not in table.owned)

    def end_expected(self, partitions: Iterable[int]) -> None:
        self._table.expected.difference_update(partitions)

    def on_elected(self, partition: int) -> None:
        table = self._table
        table.expected.discard(partition)
        if partition in table.owned or partition in table.loading:
            return
        table.loading.add(partition)
        table.tasks.spawn(self._load(partition))

    def on_resigned(self, partition: int) -> None:
        table = self._table
        table.expected.discard(partition)
        table.loading.discard(partition)
        if partition not in table.owned:
            return
        table.owned.discard(partition)
        for group_id in [g for g in table.groups if table.partition_of(g) == partition]:
            self._membership.unload(table.groups.pop(group_id), NotCoordinatorError.code)
        log.info("Unloaded the groups of __consumer_offsets-%d", partition)

    async def _load(self, partition: int) -> None:
        table = self._table
        started = time.monotonic()
        try:
            entries = await table.offsets_log.load(partition)
        except Exception as exc:
            log.error("Loading __consumer_offsets-%d failed: %s", partition, exc)
            table.loading.discard(partition)
            return
        if partition not in table.loading:
            return  # resigned while loading
        for group in rebuild_groups(entries, table.loop.time()):
            table.groups[group.group_id] = group
            self._membership.adopt(group)
        table.loading.discard(partition)
        table.owned.add(partition)
        self._cleanup.ensure_expiry_timer()
        log.info("Finished loading offsets and group metadata from __consumer_offsets-%d in "
                 "%d milliseconds", partition, (time.monotonic() - started) * 1000)


def rebuild_groups(entries: Iterable[Entry], now: float) -> list[Group]:
    """The groups a partition's records describe, the last record of each key winning: a
    group tombstone without offsets left means the group was deleted. `now` (event-loop
    time) starts the loaded members' sessions."""
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    records: dict[str, GroupRecord | None] = {}
    for entry in entries:
        if isinstance(entry[0], OffsetKey):
            key, value = entry
            group_offsets = offsets.setdefault(key.group, {})
            if value is None:
                group_offsets.pop((key.topic, key.partition), None)
            else:
                group_offsets[(key.topic, key.partition)] = value
        elif isinstance(entry[0], GroupKey):
            group_key, record = entry
            records[group_key.group] = record
    groups = []
    for group_id in set(offsets) | set(records):
        record = records.get(group_id)
        group_offsets = offsets.get(group_id, {})
        if record is None and group_id in records and not group_offsets:
            continue  # deleted
        group = (Group.from_record(group_id, record, now) if record is not None
                 else Group(group_id))
        group.offsets = dict(group_offsets)
        if not group.members and not group.offsets and record is None:
            continue
        groups.append(group)
    return groups
