"""What removes committed offsets without a request asking (Kafka's cleanupGroupMetadata
callers): the retention check every `offsets.retention.check.interval.ms` (KIP-211's
rules for when an offset expires), and the deletion of the topics they belong to."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from .config import log, now_ms
from .group import Group, GroupState
from .offsets import OffsetManager
from .records import OffsetAndMetadata, TopicPartition
from .table import GroupTable


class OffsetCleanup:
    def __init__(self, table: GroupTable, offsets: OffsetManager) -> None:
        self._table = table
        self._offsets = offsets
        self._expiry: asyncio.TimerHandle | None = None

    # --- deleted topics -------------------------------------------------------------

    def on_partitions_deleted(self, partitions: Iterable[TopicPartition]) -> None:
        gone = set(partitions)
        if gone and self._table.active:
            self._table.tasks.spawn(self._remove_deleted(gone))

    async def _remove_deleted(self, gone: set[TopicPartition]) -> None:
        now = now_ms()
        for group in list(self._table.groups.values()):
            stale = [tp for tp in group.offsets if tp in gone]
            pending = [tp for tp in gone if group.txn_offsets.has_partition(tp)]
            if not (stale or pending) or group.is_in(GroupState.DEAD):
                continue
            error = await self._offsets.remove_offsets(group, stale, now, pending=pending)
            if error:
                log.warning("Could not remove the offsets of deleted partitions from group "
                            "%s: error %d", group.group_id, error)
            else:
                log.info("Removed %d offsets of deleted partitions from group %s",
                         len(stale), group.group_id)

    # --- expiry ---------------------------------------------------------------------

    def ensure_expiry_timer(self) -> None:
        if self._expiry is None and self._table.active:
            self._expiry = self._table.loop.call_later(
                self._table.config.offsets_retention_check_interval_ms / 1000,
                self._on_expiry_tick)

    def stop(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()

    def _on_expiry_tick(self) -> None:
        self._expiry = None
        self._table.tasks.spawn(self._expire_offsets())
        self.ensure_expiry_timer()

    async def _expire_offsets(self) -> None:
        """Drop expired offsets; an Empty group left without offsets is removed."""
        now = now_ms()
        retention = self._table.config.offsets_retention_ms
        removed_total = 0
        for group in list(self._table.groups.values()):
            if group.is_in(GroupState.DEAD):
                continue
            expired = expired_offsets(group, now, retention)
            error = await self._offsets.remove_offsets(group, expired, now)
            if error:
                log.warning("Could not expire offsets of group %s: error %d", group.group_id,
                            error)
                continue
            removed_total += len(expired)
        if removed_total:
            log.info("Removed %d expired offsets", removed_total)


def expired_offsets(group: Group, now: int, retention: int) -> list[TopicPartition]:
    """The group's offsets past retention (KIP-211): standalone offsets count from their
    commit, an Empty group's from when it became Empty, a Stable consumer group's (from
    their commit) only for topics it does not subscribe to, other groups' never; an
    explicit expire timestamp (old OffsetCommit versions) wins over retention, and a
    commit in flight never expires."""
    def expired(base: Callable[[OffsetAndMetadata], int],
                keep_topics: set[str] | frozenset[str] = frozenset()) -> list[TopicPartition]:
        out = []
        for tp, offset in group.offsets.items():
            if tp[0] in keep_topics or tp in group.pending_offsets:
                continue
            if offset.expire_timestamp is not None:
                if now >= offset.expire_timestamp:
                    out.append(tp)
            elif now - base(offset) >= retention:
                out.append(tp)
        return out

    if group.protocol_type is None:
        return expired(lambda o: o.commit_timestamp)  # standalone offsets
    if group.is_in(GroupState.EMPTY):
        state_ts = group.state_timestamp
        return expired(lambda o: state_ts if state_ts >= 0 else o.commit_timestamp)
    if (group.protocol_type == "consumer" and group.subscribed_topics is not None
            and group.is_in(GroupState.STABLE)):
        return expired(lambda o: o.commit_timestamp, group.subscribed_topics)
    return []
