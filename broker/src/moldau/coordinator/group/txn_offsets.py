"""A group's offsets committed inside open transactions (Kafka's GroupMetadata
pendingTransactionalOffsetCommits), and the rule that decides which of two commits of a
partition is the committed one.

TxnOffsetCommit writes a transactional batch to the group's `__consumer_offsets`
partition; its offsets stay here, per producer, invisible to OffsetFetch, until the
transaction's marker reaches that partition: COMMIT makes them the committed offsets,
ABORT drops them. A committed offset remembers the log offset of the batch that wrote it
(Kafka's CommitRecordMetadataAndOffset.appendedBatchOffset): a commit replaces it only if
its own batch is later in the log, so a transaction that commits after a plain commit of
the same partition was written does not bring an older position back, and a reload from
the log (which compares the same positions) ends in the same state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .records import OffsetAndMetadata, TopicPartition

UNKNOWN_POSITION = -1  # a commit whose batch offset is not known (yet)


@dataclass(slots=True)
class PendingOffset:
    offset: OffsetAndMetadata
    # the base offset of the batch that holds it, once the append is acknowledged
    position: int = UNKNOWN_POSITION


def is_newer(position: int, than: int) -> bool:
    """Kafka's olderThan, inverted: a commit at `position` replaces one at `than`. An
    unknown position counts as the newest: its batch is in the log before anything that
    completes it (the append happens before the coordinator awaits replication)."""
    return position == UNKNOWN_POSITION or than == UNKNOWN_POSITION or than < position


class TransactionalOffsets:
    """Per producer id, the offsets its open transaction committed for one group."""

    __slots__ = ("_by_producer",)

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[TopicPartition, PendingOffset]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_producer)

    @property
    def producers(self) -> set[int]:
        return set(self._by_producer)

    def of(self, producer_id: int) -> dict[TopicPartition, PendingOffset]:
        return dict(self._by_producer.get(producer_id, {}))

    def has_partition(self, tp: TopicPartition) -> bool:
        return any(tp in offsets for offsets in self._by_producer.values())

    # --- a TxnOffsetCommit's life ---------------------------------------------------

    def prepare(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata]
                ) -> dict[TopicPartition, PendingOffset]:
        """Before the append: the offsets are pending (OffsetFetch's RequireStable sees
        them) but have no position yet. Returns the entries they replace, for failed()."""
        pending = self._by_producer.setdefault(producer_id, {})
        replaced = {tp: pending[tp] for tp in offsets if tp in pending}
        for tp, offset in offsets.items():
            pending[tp] = PendingOffset(offset)
        return replaced

    def appended(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
                 position: int) -> None:
        """The batch is replicated at `position`; a partition that another commit of the
        same transaction replaced meanwhile keeps the newer one."""
        pending = self._by_producer.get(producer_id)
        if pending is None:
            return  # completed or removed meanwhile
        for tp, offset in offsets.items():
            entry = pending.get(tp)
            if entry is not None and entry.offset == offset:
                entry.position = position

    def failed(self, producer_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
               replaced: dict[TopicPartition, PendingOffset]) -> None:
        """The append failed (the client retries, maybe with another coordinator): the
        entries prepare() replaced come back, so a refused commit (a zombie's stale
        epoch, which Kafka's verification refuses before preparing anything) leaves the
        transaction's earlier offsets pending."""
        pending = self._by_producer.get(producer_id)
        if pending is None:
            return
        for tp, offset in offsets.items():
            entry = pending.get(tp)
            if entry is None or entry.offset != offset:
                continue  # replaced meanwhile
            if tp in replaced:
                pending[tp] = replaced[tp]
            else:
                del pending[tp]
        if not pending:
            del self._by_producer[producer_id]

    def complete(self, producer_id: int) -> dict[TopicPartition, PendingOffset]:
        """The producer's marker: its pending offsets leave (the caller applies them for a
        COMMIT)."""
        return self._by_producer.pop(producer_id, {})

    def restore(self, producer_id: int, offsets: dict[TopicPartition, PendingOffset]) -> None:
        """Offsets of a transaction still open when the partition was loaded."""
        self._by_producer.setdefault(producer_id, {}).update(offsets)

    def remove_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """OffsetDelete, DeleteGroups and deleted topics take pending commits of these
        partitions with them (Kafka's removeOffsets). A producer left without any keeps
        its (empty) entry until its marker, as in Kafka: the group is not yet offsetless."""
        gone = set(partitions)
        for pending in self._by_producer.values():
            for tp in gone.intersection(pending):
                del pending[tp]
