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
from .offsets_log import Entry, LoadedMarker, LoadedOffset
from .records import GroupRecord, OffsetAndMetadata, OffsetKey, TopicPartition
from .table import GroupTable
from .txn_offsets import PendingOffset, is_newer


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
    time) starts the loaded members' sessions.

    As Kafka's loadGroupsAndOffsets: the offsets of a transactional batch wait, per
    producer, for the producer's marker; a COMMIT makes them committed unless a later
    batch committed the partition already, an ABORT drops them, and the transactions
    still open at the log end stay pending in their groups (their marker comes later)."""
    committed: dict[OffsetKey, tuple[OffsetAndMetadata, int]] = {}
    open_txns: dict[int, dict[OffsetKey, tuple[OffsetAndMetadata, int]]] = {}
    records: dict[str, GroupRecord | None] = {}
    for entry in entries:
        if isinstance(entry, LoadedOffset):
            target = (committed if entry.producer_id < 0
                      else open_txns.setdefault(entry.producer_id, {}))
            if entry.value is None:
                target.pop(entry.key, None)
            else:
                target[entry.key] = (entry.value, entry.position)
        elif isinstance(entry, LoadedMarker):
            ended = open_txns.pop(entry.producer_id, {})
            if entry.commit:
                for key, (value, position) in ended.items():
                    current = committed.get(key)
                    if current is None or is_newer(position, current[1]):
                        committed[key] = (value, position)
        else:
            records[entry.key.group] = entry.value
    offsets: dict[str, dict[TopicPartition, tuple[OffsetAndMetadata, int]]] = {}
    for key, found in committed.items():
        offsets.setdefault(key.group, {})[(key.topic, key.partition)] = found
    pending: dict[str, dict[int, dict[TopicPartition, PendingOffset]]] = {}
    for producer_id, txn in open_txns.items():
        for key, (value, position) in txn.items():
            pending.setdefault(key.group, {}).setdefault(producer_id, {})[
                (key.topic, key.partition)] = PendingOffset(value, position)
    groups = []
    for group_id in set(offsets) | set(records) | set(pending):
        record = records.get(group_id)
        group_offsets = offsets.get(group_id, {})
        group_pending = pending.get(group_id, {})
        if record is None and not group_offsets and not group_pending:
            continue  # deleted, or only tombstones left
        group = (Group.from_record(group_id, record, now) if record is not None
                 else Group(group_id))
        for tp, (value, position) in group_offsets.items():
            group.put_offset(tp, value, position)
        for producer_id, txn_offsets in group_pending.items():
            group.txn_offsets.restore(producer_id, txn_offsets)
        groups.append(group)
    return groups
