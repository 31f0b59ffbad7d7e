"""Producer state of one partition (Kafka's ProducerStateManager).

For each producer id: its epoch and the metadata of its last five batches, so that a
retried batch is recognised as a duplicate (and answered with its original offsets), a
gap in sequence numbers is refused as OUT_OF_ORDER_SEQUENCE_NUMBER, and a zombie with an
older epoch is fenced with INVALID_PRODUCER_EPOCH. Snapshots (`<offset>.snapshot`, Kafka's
version-1 format) let a restart rebuild the state by scanning only the log after the
latest snapshot.

Transactions: a producer's first transactional batch opens its transaction here (its
first offset, kept in snapshots as `current_txn_first_offset`), and a marker
(`check_marker`, then `apply_marker` once written) closes it with a `CompletedTxn`; the
partition's open and unreplicated transactions, the first unstable offset and the LSO
computations are in `self.txns` (producer_txns.py). A producer that never writes a
transactional batch never touches any of it.
"""

from __future__ import annotations

import collections
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from moldau.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)

from .crc import crc32c
from .files import atomic_write
from .producer_txns import CompletedTxn, PartitionTransactions
from .segment_files import segment_file_name

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
# a transaction counts as late this long after transaction.max.timeout.ms (Kafka's
# ProducerStateManager.LATE_TRANSACTION_BUFFER_MS): past the coordinator's own timeout abort
LATE_TRANSACTION_BUFFER_MS = 5 * 60 * 1000
_INT32_MAX = 0x7FFFFFFF
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")  # see write_snapshot


class CorruptSnapshotError(ValueError):
    """A snapshot file fails its CRC or structure checks; it is deleted and ignored."""


@dataclass(slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    last_offset: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - (self.last_seq - self.first_seq)


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: collections.deque[BatchMetadata] = field(
        default_factory=lambda: collections.deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1
    last_timestamp: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerStateManager:
    def __init__(self, directory: str, *, expiration_ms: int = 86_400_000) -> None:
        self.directory = directory
        self.expiration_ms = expiration_ms  # producer.id.expiration.ms
        self.producers: dict[int, ProducerEntry] = {}
        self.map_end_offset = 0  # the state reflects the log up to here
        self.txns = PartitionTransactions()

    # --- validation and update --------------------------------------------------------

    def find_duplicate(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        entry = self.producers.get(producer_id)
        return entry.find_duplicate(epoch, first_seq, last_seq) if entry else None

    def check(self, producer_id: int, epoch: int, first_seq: int, offset: int,
              pending: dict[int, tuple[int, int]] | None = None,
              is_transactional: bool | None = None, check_sequence: bool = True) -> None:
        """Kafka's epoch and sequence rules for a batch a client produced to the leader.
        `pending` holds (epoch, last seq) of batches earlier in the same request. A
        non-transactional batch (is_transactional False) from a producer with an open
        transaction is refused with INVALID_TXN_STATE. check_sequence False: a
        coordinator's batch, whose epoch alone is checked (Kafka's COORDINATOR origin)."""
        entry = self.producers.get(producer_id)
        current_epoch, last_seq = (
            pending[producer_id] if pending and producer_id in pending
            else (entry.epoch, entry.last_seq) if entry else (NO_PRODUCER_EPOCH, NO_SEQUENCE)
        )
        if epoch < current_epoch:
            raise InvalidProducerEpochError(
                f"epoch of producer {producer_id} at offset {offset} is {epoch}, which is "
                f"smaller than the last seen epoch {current_epoch}"
            )
        if check_sequence:
            self._check_sequence(producer_id, epoch, first_seq, offset, current_epoch,
                                 last_seq)
        # after the epoch and sequence checks, as Kafka's ProducerAppendInfo
        if is_transactional is False and entry is not None and entry.current_txn_first_offset >= 0:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {producer_id} at offset {offset} "
                f"in partition {os.path.basename(self.directory)}")

    @staticmethod
    def _check_sequence(producer_id: int, epoch: int, first_seq: int, offset: int,
                        current_epoch: int, last_seq: int) -> None:
        if epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"invalid sequence number for new epoch of producer {producer_id} at "
                    f"offset {offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                    f"{current_epoch} (current producer epoch)"
                )
        elif current_epoch != NO_PRODUCER_EPOCH and last_seq != NO_SEQUENCE and not (
            in_sequence(last_seq, first_seq)
        ):
            raise OutOfOrderSequenceError(
                f"out of order sequence number for producer {producer_id} at offset {offset}: "
                f"{first_seq} (incoming seq. number), {last_seq} (current end sequence number)"
            )

    def update(self, producer_id: int, epoch: int, first_seq: int, last_seq: int,
               last_offset: int, timestamp: int, *, first_offset: int = -1,
               is_transactional: bool = False) -> None:
        """Record an appended data batch (leader, follower and recovery alike); a
        transactional one opens its producer's transaction at first_offset unless one is
        open."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset, timestamp))
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        if is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.txns.start(producer_id, first_offset)

    # --- transaction markers ----------------------------------------------------------

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     offset: int) -> None:
        """Kafka's checks of a marker the coordinator writes (a follower applies what its
        leader wrote without them): an older producer epoch is INVALID_PRODUCER_EPOCH, an
        older coordinator epoch TRANSACTION_COORDINATOR_FENCED. A producer without an open
        transaction, or unknown here, may still get a marker."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"Epoch of producer {producer_id} at offset {offset} in "
                f"{os.path.basename(self.directory)} is {epoch}, which is smaller than the "
                f"last seen epoch {entry.epoch}")
        if entry.coordinator_epoch > coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"Invalid coordinator epoch for producerId {producer_id} at offset {offset} in "
                f"partition {os.path.basename(self.directory)}: {coordinator_epoch} (zombie), "
                f"{entry.coordinator_epoch} (current)")

    def apply_marker(self, producer_id: int, epoch: int, coordinator_epoch: int,
                     is_abort: bool, offset: int, timestamp: int) -> CompletedTxn | None:
        """Record a written marker at offset: the producer's transaction closes (the
        CompletedTxn, None when it had none open: such a marker changes no LSO and no txn
        index). The caller then writes an aborted transaction to the txn index with
        `txns.last_stable_offset(completed)` and calls `txns.complete(completed)`."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(producer_id, entry.current_txn_first_offset, offset,
                                     is_abort)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = -1
        entry.last_timestamp = timestamp
        return completed

    def first_unstable_offset(self) -> int | None:
        return self.txns.first_unstable_offset()

    def has_late_transaction(self, now_ms: int, max_transaction_timeout_ms: int) -> bool:
        """Kafka's hasLateTransaction (the ReplicaManager's
        PartitionsWithLateTransactionsCount): the producer of the earliest open transaction
        last wrote more than transaction.max.timeout.ms plus LATE_TRANSACTION_BUFFER_MS ago,
        so the coordinator should long have aborted it: it hangs. Computed when asked,
        from the same state Kafka samples after each append."""
        first = self.txns.first_undecided_offset()
        if first is None:
            return False
        entry = self.producers.get(self.txns.ongoing[first].producer_id)
        last = entry.last_timestamp if entry is not None else -1
        return last > 0 and now_ms - last > max_transaction_timeout_ms + LATE_TRANSACTION_BUFFER_MS

    def remove_expired(self, now_ms: int, expiration_ms: int | None = None) -> None:
        """Forget producers whose last batch is older than producer.id.expiration.ms (the
        broker's current value when given) and that have no open transaction."""
        if expiration_ms is not None:
            self.expiration_ms = expiration_ms
        expired = [
            pid for pid, e in self.producers.items()
            if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= self.expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]

    # --- snapshots --------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.directory, segment_file_name(offset, SNAPSHOT_SUFFIX))

    def snapshot_offsets(self) -> list[int]:
        return sorted(
            int(name[:20]) for name in os.listdir(self.directory)
            if name.endswith(SNAPSHOT_SUFFIX) and name[:20].isdigit()
        )

    def take_snapshot(self, offset: int, *, sync: bool = True) -> None:
        """Write the state as of `offset` (taken at roll and at clean shutdown)."""
        atomic_write(self.snapshot_path(offset), encode_snapshot(self.producers.values()),
                     sync=sync)

    def load(self, log_start_offset: int, log_end_offset: int, now_ms: int, *,
             prune: bool = True) -> int:
        """Load the latest usable snapshot at or below log_end_offset; returns the offset
        from which the log must be replayed (snapshot offset, or the log start). Snapshots
        out of range or corrupt are deleted, unless prune is False (a temporary state
        that recovery builds up to a segment, beside the real one)."""
        self.producers.clear()
        self.txns.clear()
        for offset in reversed(self.snapshot_offsets()):
            if offset > log_end_offset or offset < log_start_offset:
                if prune:
                    os.remove(self.snapshot_path(offset))  # out of range: useless or stale
                continue
            try:
                with open(self.snapshot_path(offset), "rb") as f:
                    entries = decode_snapshot(f.read())
            except CorruptSnapshotError:
                if prune:
                    os.remove(self.snapshot_path(offset))
                continue
            for entry in entries:
                # a producer with an open transaction never expires
                if (entry.current_txn_first_offset >= 0
                        or now_ms - entry.last_timestamp < self.expiration_ms):
                    self.producers[entry.producer_id] = entry
            self.txns.load([(e.producer_id, e.current_txn_first_offset)
                            for e in self.producers.values() if e.current_txn_first_offset >= 0])
            self.map_end_offset = offset
            return offset
        self.map_end_offset = log_start_offset
        return log_start_offset

    def delete_snapshots_below(self, offset: int) -> None:
        """Keep snapshots of live segments only (called as retention deletes segments)."""
        for snap in self.snapshot_offsets():
            if snap < offset:
                os.remove(self.snapshot_path(snap))

    def truncate(self) -> None:
        """Forget everything (truncation): the caller replays from a snapshot."""
        self.producers.clear()
        self.txns.clear()


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """Kafka's snapshot v1: version int16, crc uint32 (CRC-32C of what follows it), then an
    array of (producer id int64, epoch int16, last sequence int32, last offset int64,
    offset delta int32, timestamp int64, coordinator epoch int32, current txn first
    offset int64). Only each producer's last batch survives, as in Kafka; a producer
    known only from a marker (no batch at its epoch) is written with sequence and offset
    -1, as Kafka writes it."""
    body = bytearray()
    items = list(entries)
    body += struct.pack(">i", len(items))
    for e in items:
        if e.batches:
            last = e.batches[-1]
            fields = (last.last_seq, last.last_offset, last.last_seq - last.first_seq,
                      last.timestamp)
        else:
            fields = (NO_SEQUENCE, -1, 0, e.last_timestamp)
        body += _ENTRY.pack(e.producer_id, e.epoch, *fields, e.coordinator_epoch,
                            e.current_txn_first_offset)
    crc = crc32c(bytes(body))
    return struct.pack(">hI", SNAPSHOT_VERSION, crc) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerEntry]:
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError("snapshot file is too short")
    version, crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot version {version} is not {SNAPSHOT_VERSION}")
    if crc32c(data[6:]) != crc:
        raise CorruptSnapshotError("snapshot CRC does not match its content")
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptSnapshotError(f"snapshot claims {count} entries in {len(data)} bytes")
    entries = []
    for i in range(count):
        (pid, epoch, last_seq, last_offset, delta, timestamp, coordinator_epoch,
         txn_first) = _ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size)
        entry = ProducerEntry(pid, epoch, coordinator_epoch=coordinator_epoch,
                              current_txn_first_offset=max(txn_first, -1),
                              last_timestamp=timestamp)
        if last_offset >= 0:  # -1: no batch at this epoch (Kafka reads it the same way)
            entry.batches.append(BatchMetadata(last_seq - delta, last_seq, last_offset,
                                               timestamp))
        entries.append(entry)
    return entries
