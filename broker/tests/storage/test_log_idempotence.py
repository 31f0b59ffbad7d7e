"""Idempotent producers through the partition log: duplicates, fencing, sequence gaps,
and producer state that survives clean restarts, crashes and truncation."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from moldau.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from moldau.protocol.records import build_batch
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog

RECORDS = Path(__file__).resolve().parents[1] / "data" / "records"
PID = 4242


def produce(seq: int, count: int = 2, epoch: int = 0, pid: int = PID) -> bytes:
    return build_batch(
        [(b"k%d" % (seq + i), b"v%d" % (seq + i), (), None) for i in range(count)],  # now
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


def open_log(path: Path, **kwargs) -> PartitionLog:
    config = LogConfig(segment_bytes=kwargs.pop("segment_bytes", 1 << 20), retention_ms=-1)
    return PartitionLog(str(path / "t-0"), config, sync=False, **kwargs)


def sizes(log: PartitionLog) -> list[int]:
    return [os.path.getsize(s.log_path) for s in log.segments]


def test_a_retried_batch_gets_its_original_offsets_and_is_not_written(tmp_path):
    log = open_log(tmp_path)
    first = log.append_as_leader(produce(0), leader_epoch=0)
    log.append_as_leader(produce(2), leader_epoch=0)
    before = (log.log_end_offset, sizes(log))
    retry = log.append_as_leader(produce(0), leader_epoch=0)
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert retry.batches == []
    assert (log.log_end_offset, sizes(log)) == before


def test_a_gap_in_sequences_and_an_old_epoch_are_refused_with_nothing_written(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(produce(0, epoch=1), leader_epoch=0)
    before = (log.log_end_offset, sizes(log))
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(produce(5, epoch=1), leader_epoch=0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(produce(2, epoch=0), leader_epoch=0)
    assert (log.log_end_offset, sizes(log)) == before
    log.append_as_leader(produce(2, epoch=1), leader_epoch=0)  # in sequence: fine
    log.append_as_leader(produce(0, epoch=2), leader_epoch=0)  # a new epoch restarts at 0


def test_producer_state_survives_a_clean_restart_through_a_snapshot(tmp_path):
    log = open_log(tmp_path)
    first = log.append_as_leader(produce(0), leader_epoch=0)
    log.close()
    assert (tmp_path / "t-0" / f"{log.log_end_offset:020d}.snapshot").exists()
    log = open_log(tmp_path)
    assert log.append_as_leader(produce(0), leader_epoch=0).first_offset == first.first_offset
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(produce(7), leader_epoch=0)


def test_producer_state_is_rebuilt_from_the_log_after_a_crash(tmp_path):
    log = open_log(tmp_path, segment_bytes=400)
    infos = [log.append_as_leader(produce(seq), leader_epoch=0) for seq in range(0, 20, 2)]
    assert len(log.segments) > 2  # snapshots were taken at the rolls
    # Crash: no close(), so no snapshot at the log end; the last segment is replayed.
    for segment in log.segments:
        os.close(segment.fd)
        segment.fd = -1
    log = open_log(tmp_path, segment_bytes=400, clean_shutdown=False)
    retry = log.append_as_leader(produce(18), leader_epoch=0)
    assert retry.first_offset == infos[-1].first_offset and retry.batches == []
    log.append_as_leader(produce(20), leader_epoch=0)


def test_truncation_forgets_the_removed_batches(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(produce(0), leader_epoch=0)
    second = log.append_as_leader(produce(2), leader_epoch=0)
    log.truncate_to(second.first_offset)
    again = log.append_as_leader(produce(2), leader_epoch=1)  # not a duplicate any more
    assert again.batches and again.first_offset == second.first_offset


def test_librdkafka_idempotent_batches_are_deduplicated(tmp_path):
    data = (RECORDS / "confluent-zstd.bin").read_bytes()
    log = open_log(tmp_path)
    first = log.append_as_leader(data, leader_epoch=0)
    retry = log.append_as_leader(data, leader_epoch=0)
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == first.last_offset + 1


def test_producers_idle_past_the_expiration_are_forgotten_at_restart(tmp_path):
    log = open_log(tmp_path, producer_id_expiration_ms=60_000)
    old = build_batch([(b"k", b"v", (), 1_700_000_000_000)], producer_id=PID,
                      producer_epoch=0, base_sequence=0)
    log.append_as_leader(old, leader_epoch=0)
    log.close()
    log = open_log(tmp_path, producer_id_expiration_ms=60_000)
    assert PID not in log.producer_state.producers
    log.append_as_leader(produce(9), leader_epoch=0)  # unknown producer: any sequence


def test_isolation_levels_bound_reads_at_the_high_watermark(tmp_path):
    from moldau.storage.log import READ_COMMITTED, READ_UNCOMMITTED

    log = open_log(tmp_path)
    for seq in range(0, 6, 2):
        log.append_as_leader(produce(seq), leader_epoch=0)
    log.update_high_watermark(4)
    assert log.fetch_upper_bound(None) == 6  # a follower reads to the log end
    assert log.fetch_upper_bound(READ_UNCOMMITTED) == 4
    assert log.fetch_upper_bound(READ_COMMITTED) == log.last_stable_offset == 4
    data = log.read(0, 1 << 20, max_offset=log.fetch_upper_bound(READ_COMMITTED))
    assert data.slice.size == sum(os.path.getsize(s.log_path) for s in log.segments) * 2 // 3
