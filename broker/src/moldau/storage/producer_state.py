"""Idempotent producer state of one partition (Kafka's ProducerStateManager, without
transactions yet).

For each producer id: its epoch and the metadata of its last five batches, so that a
retried batch is recognised as a duplicate (and answered with its original offsets), a
gap in sequence numbers is refused as OUT_OF_ORDER_SEQUENCE_NUMBER, and a zombie with an
older epoch is fenced with INVALID_PRODUCER_EPOCH. Snapshots (`<offset>.snapshot`, Kafka's
version-1 format) let a restart rebuild the state by scanning only the log after the
latest snapshot.
"""

from __future__ import annotations

import collections
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from moldau.errors import InvalidProducerEpochError, OutOfOrderSequenceError

from .crc import crc32c
from .files import atomic_write
from .segment_files import segment_file_name

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
NUM_BATCHES_TO_RETAIN = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
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

    # --- validation and update --------------------------------------------------------

    def find_duplicate(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        entry = self.producers.get(producer_id)
        return entry.find_duplicate(epoch, first_seq, last_seq) if entry else None

    def check(self, producer_id: int, epoch: int, first_seq: int, offset: int,
              pending: dict[int, tuple[int, int]] | None = None) -> None:
        """Kafka's epoch and sequence rules for a batch a client produced to the leader.
        `pending` holds (epoch, last seq) of batches earlier in the same request."""
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
               last_offset: int, timestamp: int) -> None:
        """Record an appended batch (leader, follower and recovery alike)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if epoch != entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()
        entry.batches.append(BatchMetadata(first_seq, last_seq, last_offset, timestamp))
        entry.last_timestamp = max(entry.last_timestamp, timestamp)

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

    def load(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> int:
        """Load the latest usable snapshot at or below log_end_offset; returns the offset
        from which the log must be replayed (snapshot offset, or the log start)."""
        self.producers.clear()
        for offset in reversed(self.snapshot_offsets()):
            if offset > log_end_offset or offset < log_start_offset:
                os.remove(self.snapshot_path(offset))  # out of range: useless or stale
                continue
            try:
                with open(self.snapshot_path(offset), "rb") as f:
                    entries = decode_snapshot(f.read())
            except CorruptSnapshotError:
                os.remove(self.snapshot_path(offset))
                continue
            for entry in entries:
                if now_ms - entry.last_timestamp < self.expiration_ms:
                    self.producers[entry.producer_id] = entry
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


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    """Kafka's snapshot v1: version int16, crc uint32 (CRC-32C of what follows it), then an
    array of (producer id int64, epoch int16, last sequence int32, last offset int64,
    offset delta int32, timestamp int64, coordinator epoch int32, current txn first
    offset int64). Only each producer's last batch survives, as in Kafka."""
    body = bytearray()
    items = [e for e in entries if e.batches]
    body += struct.pack(">i", len(items))
    for e in items:
        last = e.batches[-1]
        body += _ENTRY.pack(
            e.producer_id, e.epoch, last.last_seq, last.last_offset,
            last.last_seq - last.first_seq, last.timestamp, e.coordinator_epoch,
            e.current_txn_first_offset,
        )
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
                              current_txn_first_offset=txn_first, last_timestamp=timestamp)
        entry.batches.append(BatchMetadata(last_seq - delta, last_seq, last_offset, timestamp))
        entries.append(entry)
    return entries
