"""Producer state: Kafka's epoch and sequence rules, duplicates, and snapshot files."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from moldau.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from moldau.storage.producer_state import (
    CorruptSnapshotError,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
)


def test_a_new_producer_may_start_at_any_sequence(tmp_path):
    # Kafka accepts any sequence from a producer it has no state for (its batches may have
    # been removed by retention).
    state = ProducerStateManager(str(tmp_path))
    state.check(7, epoch=0, first_seq=42, offset=0)


def test_sequences_must_follow_on(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.update(7, 0, 0, 4, last_offset=4, timestamp=1)
    state.check(7, epoch=0, first_seq=5, offset=5)
    with pytest.raises(OutOfOrderSequenceError, match=r"6 \(incoming seq\. number\), 4"):
        state.check(7, epoch=0, first_seq=6, offset=5)


def test_sequence_wraps_after_int32_max(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.update(7, 0, 2**31 - 10, 2**31 - 1, last_offset=9, timestamp=1)
    state.check(7, epoch=0, first_seq=0, offset=10)


def test_an_older_epoch_is_fenced_and_a_new_epoch_starts_at_zero(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.update(7, 3, 0, 0, last_offset=0, timestamp=1)
    with pytest.raises(InvalidProducerEpochError, match="smaller than the last seen epoch 3"):
        state.check(7, epoch=2, first_seq=1, offset=1)
    with pytest.raises(OutOfOrderSequenceError, match="new epoch"):
        state.check(7, epoch=4, first_seq=5, offset=1)
    state.check(7, epoch=4, first_seq=0, offset=1)


def test_pending_batches_of_the_same_request_count(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.update(7, 0, 0, 0, last_offset=0, timestamp=1)
    state.check(7, epoch=0, first_seq=3, offset=5, pending={7: (0, 2)})
    with pytest.raises(OutOfOrderSequenceError):
        state.check(7, epoch=0, first_seq=1, offset=5, pending={7: (0, 2)})


def test_the_last_five_batches_are_recognised_as_duplicates(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    for i in range(7):
        state.update(7, 0, i * 10, i * 10 + 9, last_offset=i * 10 + 9, timestamp=i)
    assert state.find_duplicate(7, 0, 60, 69).last_offset == 69
    assert state.find_duplicate(7, 0, 20, 29).first_offset == 20
    assert state.find_duplicate(7, 0, 10, 19) is None  # only five are kept
    assert state.find_duplicate(7, 1, 60, 69) is None  # another epoch
    assert state.find_duplicate(8, 0, 60, 69) is None


def test_snapshot_bytes_follow_kafkas_version_1_layout(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.update(1000, 2, 5, 9, last_offset=120, timestamp=1_700_000_000_000)
    data = encode_snapshot(state.producers.values())
    body = struct.pack(">i", 1) + struct.pack(
        ">qhiqiqiq", 1000, 2, 9, 120, 4, 1_700_000_000_000, -1, -1
    )
    assert data == struct.pack(">hI", 1, crc32c(body)) + body
    (entry,) = decode_snapshot(data)
    assert (entry.producer_id, entry.epoch, entry.last_seq) == (1000, 2, 9)
    assert entry.batches[-1].first_seq == 5


def test_snapshots_round_trip_through_files_and_skip_expired(tmp_path):
    state = ProducerStateManager(str(tmp_path), expiration_ms=1000)
    state.update(1, 0, 0, 4, last_offset=4, timestamp=10_000)
    state.update(2, 0, 0, 0, last_offset=5, timestamp=100)
    state.take_snapshot(6, sync=False)
    assert (tmp_path / "00000000000000000006.snapshot").exists()
    fresh = ProducerStateManager(str(tmp_path), expiration_ms=1000)
    assert fresh.load(0, 10, now_ms=10_500) == 6
    assert set(fresh.producers) == {1}  # producer 2 expired
    fresh.check(1, epoch=0, first_seq=5, offset=6)


def test_a_corrupt_or_out_of_range_snapshot_is_dropped(tmp_path):
    state = ProducerStateManager(str(tmp_path))
    state.update(1, 0, 0, 0, last_offset=0, timestamp=1)
    state.take_snapshot(3, sync=False)
    state.take_snapshot(8, sync=False)
    path = tmp_path / "00000000000000000003.snapshot"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptSnapshotError, match="CRC"):
        decode_snapshot(bytes(raw))
    # LEO 5: snapshot 8 is beyond the log and snapshot 3 is corrupt: replay from the start.
    assert state.load(0, 5, now_ms=2) == 0
    assert state.snapshot_offsets() == []
