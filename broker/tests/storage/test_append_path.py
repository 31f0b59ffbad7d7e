"""The append path's shortcuts keep Kafka's bytes and checks: a read-only batch is written
without a copy (its patched front from AppendInfo.head, in one pwritev), a writable one is
patched in place, anything else is copied once; the CRC-32C implementation is checked
before it is trusted; index entries stay one per index.interval.bytes."""

from __future__ import annotations

import errno
import os
import sys
import types

import pytest
from storage_helpers import T0, as_stored, batch, parse_log_file, read_offset_index

from moldau.errors import CorruptRecordError, KafkaStorageError
from moldau.protocol.records import RecordBatch
from moldau.storage import crc as crc_module
from moldau.storage import segment as segment_module
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog
from moldau.storage.validation import validate_for_leader

NOW = T0 + 1000


def open_log(tmp_path, **config) -> PartitionLog:
    return PartitionLog(str(tmp_path / "t-0"), LogConfig(retention_ms=-1, **config), sync=False)


def leader(raw, config=None, next_offset=5, epoch=3):
    return validate_for_leader(raw, next_offset, epoch, config or LogConfig(), NOW)


# --- what is copied, what is patched -------------------------------------------------------------


def test_read_only_batch_is_not_copied_and_its_front_goes_to_head():
    raw = batch(3, seed=1)
    info = leader(raw)
    assert info.head is not None and len(info.head) == 16
    assert isinstance(info.data, memoryview) and info.data.obj is raw  # the caller's bytes
    assert info.stored() == as_stored(raw, 5, 3)


def test_writable_batch_is_patched_in_place():
    frame = bytearray(b"xx" + batch(3, seed=2))  # records are a view into a request frame
    records = memoryview(frame)[2:]
    info = leader(records)
    assert info.head is None
    assert bytes(frame[2:]) == as_stored(bytes(records), 5, 3) == info.stored()


@pytest.mark.parametrize(
    "raw, config",
    [
        (batch(2, seed=3) + batch(2, seed=4), None),  # two batches: two fronts change
        (batch(2, seed=5), LogConfig(message_timestamp_type="LogAppendTime")),  # CRC too
    ],
    ids=["two-batches", "log-append-time"],
)
def test_read_only_input_that_changes_more_than_a_front_is_copied(raw, config):
    original = bytes(raw)
    info = leader(raw, config)
    assert info.head is None
    assert raw == original  # the caller's bytes are untouched
    assert info.stored() != original[: info.valid_bytes]


@pytest.mark.parametrize("kind", [bytes, bytearray, lambda b: memoryview(bytes(b))])
def test_every_buffer_kind_stores_kafkas_bytes(tmp_path, kind):
    raws = [batch(n, seed=n, value_size=300) for n in (1, 4, 2)]
    log = open_log(tmp_path)
    offset = 0
    for raw in raws:
        info = log.append_as_leader(kind(raw), 7, now=NOW)
        assert info.first_offset == offset
        offset = info.last_offset + 1
    expected = []
    offset = 0
    for raw in raws:
        expected.append(as_stored(raw, offset, 7))
        offset += RecordBatch(raw).records_count
    assert [b.data for b in parse_log_file(log.active_segment.log_path)] == expected
    log.close()


def test_corrupt_read_only_batch_is_rejected_with_nothing_written(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(batch(2, seed=1), 0, now=NOW)
    size = os.path.getsize(log.active_segment.log_path)
    bad = bytearray(batch(2, seed=2))
    bad[-1] ^= 0x01  # a flipped bit in the last record
    with pytest.raises(CorruptRecordError, match="CRC-32C"):
        log.append_as_leader(bytes(bad), 0, now=NOW)
    assert os.path.getsize(log.active_segment.log_path) == size
    assert log.log_end_offset == 2
    log.close()


def test_short_pwritev_is_completed_from_the_patched_bytes(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    real_pwrite = os.pwrite

    def short_v(fd, buffers, offset):
        return real_pwrite(fd, b"".join(bytes(b) for b in buffers)[:30], offset)

    monkeypatch.setattr(segment_module.os, "pwritev", short_v)
    monkeypatch.setattr(segment_module.os, "pwrite",
                        lambda fd, data, off: real_pwrite(fd, bytes(data[:50]), off))
    raw = batch(3, seed=9)
    log.append_as_leader(raw, 4, now=NOW)
    monkeypatch.undo()
    assert [b.data for b in parse_log_file(log.active_segment.log_path)] == [as_stored(raw, 0, 4)]
    log.close()


def test_eio_from_pwritev_cuts_back_and_keeps_the_log(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    log.append_as_leader(batch(2, seed=1), 0, now=NOW)
    size = os.path.getsize(log.active_segment.log_path)

    def eio(*_args):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(segment_module.os, "pwritev", eio)
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(batch(2, seed=2), 0, now=NOW)
    monkeypatch.undo()
    assert os.path.getsize(log.active_segment.log_path) == size
    assert log.log_end_offset == 2
    log.append_as_leader(batch(2, seed=2), 0, now=NOW)
    assert log.log_end_offset == 4
    log.close()


# --- index upkeep --------------------------------------------------------------------------------


@pytest.mark.parametrize("value_size, interval", [(100, 4096), (16_000, 4096), (3000, 8192)])
def test_one_index_entry_per_interval_bytes(tmp_path, value_size, interval):
    # Kafka's rule: an entry when more than index.interval.bytes have gone by since the last
    log = open_log(tmp_path, index_interval_bytes=interval)
    sizes = []
    for i in range(60):
        raw = batch(1, seed=i, value_size=value_size)
        sizes.append(len(raw))
        log.append_as_leader(raw, 0, now=NOW)
    expected = []
    since = position = 0
    for offset, size in enumerate(sizes):
        if since > interval:
            expected.append((offset, position))
            since = 0
        since += size
        position += size
    segment = log.active_segment
    assert read_offset_index(segment.offset_index.path, 0, segment.offset_index.entries) == (
        expected
    )
    log.close()


def test_the_time_index_grows_only_with_the_max_timestamp(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=0)
    for i, ts in enumerate([T0, T0, T0 + 5, T0 + 5, T0 + 2, T0 + 9]):
        log.append_as_leader(batch(1, seed=i, timestamp=ts), 0, now=NOW)
    index = log.active_segment.time_index
    assert [tuple(index.entry(n)) for n in range(index.entries)] == [
        (T0, 0), (T0 + 5, 2), (T0 + 9, 5)
    ]
    assert index.last_timestamp == T0 + 9
    log.close()


# --- the CRC-32C implementation ------------------------------------------------------------------


def test_the_crc_in_use_gives_the_standard_check_value():
    assert crc_module.crc32c(crc_module.CHECK_INPUT) == crc_module.CHECK_VALUE
    data = bytearray(os.urandom(5000))
    from crc32c import crc32c as reference

    for start, end in ((0, 5000), (21, 5000), (3, 77)):
        assert crc_module.crc32c(memoryview(data)[start:end]) == reference(data[start:end])


@pytest.mark.parametrize(
    "module, expected",
    [
        (types.SimpleNamespace(crc32c=lambda data, value=0: 0), "crc32c"),  # wrong answers
        (None, "crc32c"),  # not installed
        (types.SimpleNamespace(crc32c=lambda data, value=0: 1 // 0), "crc32c"),  # raises
    ],
    ids=["wrong", "missing", "broken"],
)
def test_an_unsound_or_missing_fast_crc_falls_back(monkeypatch, module, expected):
    monkeypatch.setitem(sys.modules, "crc32c_rs", module)
    function, name = crc_module._pick()
    assert name == expected
    assert function(crc_module.CHECK_INPUT) == crc_module.CHECK_VALUE
