"""What an append did (Kafka's LogAppendInfo): offsets, timestamps, sizes, the batches
written and their producers' idempotence fields, built by the validation of the batches."""

from __future__ import annotations

from dataclasses import dataclass, field

from moldau.errors import InvalidRecordError
from moldau.protocol.errors import ProtocolError
from moldau.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    NO_SEQUENCE,
    RecordBatch,
)

from .segment_positions import BatchHeader, batch_header

_INT32_MAX = 0x7FFFFFFF


# (control type, coordinator epoch) of a transaction marker: CONTROL_ABORT or CONTROL_COMMIT
EndTxnMarker = tuple[int, int]


@dataclass(slots=True)
class ProducerBatch:
    """The idempotence fields of one appended batch, for the producer state; a control
    batch also carries its transaction marker (None: an empty control batch, which the
    cleaner leaves behind, or a control type that is no marker)."""

    producer_id: int
    producer_epoch: int
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int
    is_transactional: bool
    is_control: bool = False
    marker: EndTxnMarker | None = None


@dataclass(slots=True)
class AppendInfo:
    """What an append did (Kafka's LogAppendInfo)."""

    first_offset: int = -1
    last_offset: int = -1
    max_timestamp: int = -1
    offset_of_max_timestamp: int = -1
    log_append_time: int = -1
    record_count: int = 0
    valid_bytes: int = 0
    batches: list[BatchHeader] = field(default_factory=list)
    producer_batches: list[ProducerBatch] = field(default_factory=list)
    data: bytearray | memoryview | bytes = b""  # the bytes to write (patched in place)
    # None, or the bytes written in place of data's first len(head) bytes: the patched
    # front of a read-only batch that was not copied (see validate_for_leader)
    head: bytes | None = None

    def stored(self) -> bytes:
        """The bytes the append writes (valid_bytes of them), as they land on disk."""
        data = bytes(self.data[: self.valid_bytes])
        return data if self.head is None else self.head + data[len(self.head) :]


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """Sequence of the last record; sequences wrap from INT32_MAX to 0."""
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    return (base_sequence + last_offset_delta) & _INT32_MAX


def add_batch(info: AppendInfo, batch: RecordBatch, position: int) -> None:
    """Describe one more validated batch (at position in the append) in info."""
    info.batches.append(batch_header(batch, position))
    info.last_offset = batch.last_offset
    info.record_count += batch.records_count
    info.valid_bytes += batch.size_in_bytes
    if batch.max_timestamp > info.max_timestamp:
        info.max_timestamp = batch.max_timestamp
        info.offset_of_max_timestamp = batch.last_offset
    if batch.producer_id >= 0:
        info.producer_batches.append(
            ProducerBatch(
                batch.producer_id,
                batch.producer_epoch,
                batch.base_sequence,
                batch.last_sequence,
                batch.base_offset,
                batch.last_offset,
                batch.max_timestamp,
                batch.is_transactional,
                batch.is_control,
                end_txn_marker(batch) if batch.is_control else None,
            )
        )


def end_txn_marker(batch: RecordBatch) -> EndTxnMarker | None:
    """The marker of a control batch, from its first record (as Kafka reads it). Raises
    InvalidRecordError when the control record does not decode."""
    try:
        for record in batch.control_records():
            if record.control_type in (CONTROL_ABORT, CONTROL_COMMIT):
                assert record.coordinator_epoch is not None  # decoded for these types
                return record.control_type, record.coordinator_epoch
            return None
    except ProtocolError as exc:
        raise InvalidRecordError(f"invalid control batch at offset {batch.base_offset}: "
                                 f"{exc}") from None
    return None

