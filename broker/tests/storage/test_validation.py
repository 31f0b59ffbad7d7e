"""Produce-side validation (Kafka's LogValidator rules) and its effect on the log: every
rejected append leaves the log and its files exactly as they were."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from storage_helpers import T0, as_stored, batch, parse_log_file

from moldau.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from moldau.protocol.records import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    RecordBatch,
    build_batch,
    build_control_batch,
    iter_batches,
)
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog
from moldau.storage.validation import validate_for_follower, validate_for_leader

RECORDS = Path(__file__).resolve().parents[1] / "data" / "records"
NOW = T0 + 1000


def leader(raw, config=None, *, next_offset=0, epoch=7, now=NOW, from_client=True):
    return validate_for_leader(raw, next_offset=next_offset, leader_epoch=epoch,
                               config=config or LogConfig(), now_ms=now, from_client=from_client)


def stored(info) -> bytes:
    return info.stored()


def json_bytes(value):
    """A sidecar key/value as bytes, or (sha256, length) for big values."""
    if value is None or isinstance(value, str):
        return None if value is None else value.encode()
    if "hex" in value:
        return bytes.fromhex(value["hex"])
    return (value["sha256"], value["length"])


def comparable(data):
    if data is not None and len(data) > 1024:
        return (hashlib.sha256(data).hexdigest(), len(data))
    return data


# --- the fast path: offsets patched in place -----------------------------------------------------


def test_create_time_patches_only_offset_and_epoch_and_keeps_the_crc():
    raw = batch(5, timestamps=[T0, T0 - 50, T0 + 9, T0, T0 + 3], codec=3)
    info = leader(raw, next_offset=1234, epoch=9)
    out = stored(info)
    assert out == as_stored(raw, 1234, 9)
    assert out[17:21] == raw[17:21]  # the CRC bytes are untouched
    assert out[21:] == raw[21:]  # and so is everything the CRC covers
    assert (info.first_offset, info.last_offset, info.record_count) == (1234, 1238, 5)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 9, 1238)
    assert info.log_append_time == -1


def test_log_append_time_sets_type_and_timestamp_and_a_valid_crc():
    config = LogConfig(message_timestamp_type="LogAppendTime")
    raw = batch(4, timestamp=T0 - 10**9)  # far outside any bounds: not checked for append time
    info = leader(raw, config, next_offset=10, now=NOW)
    b = RecordBatch(stored(info))
    assert b.timestamp_type == LOG_APPEND_TIME and b.max_timestamp == NOW
    assert b.verify_crc() and b.crc != RecordBatch(raw).crc
    assert [r.timestamp for r in b.records()] == [NOW] * 4
    assert [r.offset for r in b.records()] == [10, 11, 12, 13]
    assert info.log_append_time == NOW and info.max_timestamp == NOW


def test_several_batches_get_contiguous_offsets():
    raws = [batch(3, seed=1), batch(1, seed=2), batch(2, seed=3)]
    info = leader(b"".join(raws), next_offset=50, epoch=1)
    assert [(h.base_offset, h.last_offset) for h in info.batches] == [(50, 52), (53, 53), (54, 55)]
    assert stored(info) == as_stored(raws[0], 50, 1) + as_stored(raws[1], 53, 1) + as_stored(
        raws[2], 54, 1)


# --- errors --------------------------------------------------------------------------------------


def flipped(raw: bytes, at: int) -> bytes:
    out = bytearray(raw)
    out[at] ^= 0x01
    return bytes(out)


def test_oversized_batch_is_record_too_large():
    raw = batch(5, value_size=200)
    with pytest.raises(RecordTooLargeError):
        leader(raw, LogConfig(max_message_bytes=len(raw) - 1))
    assert leader(raw, LogConfig(max_message_bytes=len(raw))).valid_bytes == len(raw)


def test_bad_crc_is_corrupt_message():
    raw = batch(3)
    for at in (21, 40, len(raw) - 1):  # attributes, header fields, record bytes
        with pytest.raises(CorruptRecordError):
            leader(flipped(raw, at))


def test_record_set_larger_than_a_segment_is_record_list_too_large():
    raws = [batch(3, value_size=100, seed=i) for i in range(3)]
    data = b"".join(raws)
    with pytest.raises(RecordBatchTooLargeError):
        leader(data, LogConfig(segment_bytes=len(data) - 1))
    # one batch above both limits: max.message.bytes is checked first, as in Kafka
    with pytest.raises(RecordTooLargeError):
        leader(raws[0], LogConfig(segment_bytes=100, max_message_bytes=100))


def test_compacted_topic_needs_keys():
    config = LogConfig(cleanup_policy=("compact",))
    with pytest.raises(InvalidRecordError, match="1 record errors in total") as refused:
        leader(build_batch([(b"a", b"1", (), T0), (None, b"2", (), T0)], compression=2), config)
    assert refused.value.record_errors == (
        (1, "Compacted topic cannot accept message without key in topic partition"),)
    assert leader(batch(3, codec=2), config).record_count == 3
    # a delete-policy topic takes null keys
    assert leader(batch(2, key=None)).record_count == 2


@pytest.mark.parametrize(
    "raw, why",
    [
        (build_batch([(b"k", b"v", (), T0)], base_offset=5), "baseOffset"),
        (build_batch([(b"k", b"v", (), T0)] * 2, last_offset_delta=5), "lastOffsetDelta"),
        (build_control_batch(1, producer_id=1, producer_epoch=0, coordinator_epoch=0), "control"),
        (b"", "no record batch"),
    ],
    ids=["base-offset", "last-offset-delta", "control", "empty"],  # stable for pytest-xdist
)
def test_client_batches_kafka_rejects(raw, why):
    with pytest.raises(InvalidRecordError, match=why):
        leader(raw)


def test_every_produced_batch_must_have_base_offset_zero():
    data = batch(1) + build_batch([(b"k", b"v", (), T0)], base_offset=3)
    with pytest.raises(InvalidRecordError):
        leader(data)
    assert leader(data, from_client=False).last_offset == 1  # the broker's own writes may


def test_truncated_records_are_corrupt():
    raw = batch(3)
    for cut in (5, 30, len(raw) - 1):
        with pytest.raises(CorruptRecordError):
            leader(raw[:cut])


def test_timestamp_bounds_for_create_time_topics():
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    leader(batch(1, timestamp=NOW - 1000), config)
    leader(batch(1, timestamp=NOW + 500), config)
    with pytest.raises(InvalidTimestampError):
        leader(batch(1, timestamp=NOW - 1001), config)
    with pytest.raises(InvalidTimestampError):
        leader(batch(1, timestamp=NOW + 501), config)
    # KIP-467: each record out of bounds is named, with Kafka's message; a keyless record
    # of a compacted topic is named with its key's error, which comes first
    mixed = build_batch([(b"k", b"v", (), NOW), (b"k", b"v", (), NOW - 5000),
                         (None, b"v", (), NOW + 900), (b"k", b"v", (), NOW + 600)])
    with pytest.raises(InvalidTimestampError, match=r"^One or more records have been rejected "
                       r"due to invalid timestamp$") as refused:
        leader(mixed, LogConfig(message_timestamp_before_max_ms=1000,
                                message_timestamp_after_max_ms=500,
                                cleanup_policy=("compact",)))
    errors = refused.value.record_errors
    assert [i for i, _ in errors] == [1, 2, 3]
    assert errors[0][1] == (f"Timestamp {NOW - 5000} of message with offset 1 is out of "
                            f"range. The timestamp should be within [{NOW - 1000}, {NOW + 500}]")
    assert "without key" in errors[1][1]
    # a LogAppendTime topic does not check producer timestamps (the topic's type decides)
    lat = LogConfig(message_timestamp_type="LogAppendTime", message_timestamp_before_max_ms=1000)
    assert leader(batch(1, timestamp=NOW - 10**6), lat).max_timestamp == NOW


# --- the slow paths: recompression and legacy conversion -----------------------------------------


def test_topic_codec_recompresses_a_batch_in_another_codec():
    raw = build_batch(
        [(b"k%d" % i, b"v" * i, [("h", b"x")], T0 + i) for i in range(6)],
        compression=3, producer_id=77, producer_epoch=2, base_sequence=40,
    )
    info = leader(raw, LogConfig(compression_type="gzip"), next_offset=100, epoch=4)
    b = RecordBatch(stored(info))
    assert b.compression == 1 and b.verify_crc()
    assert (b.base_offset, b.last_offset, b.partition_leader_epoch) == (100, 105, 4)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (77, 2, 40)
    original = [(r.key, r.value, r.headers, r.timestamp) for r in RecordBatch(raw).records()]
    assert [(r.key, r.value, r.headers, r.timestamp) for r in b.records()] == original
    # the same codec is the fast path: bytes kept
    same = leader(raw, LogConfig(compression_type="lz4"), next_offset=100, epoch=4)
    assert stored(same) == as_stored(raw, 100, 4)


@pytest.mark.parametrize(
    "codec, low, high",
    [("gzip", {"compression_gzip_level": 1}, {"compression_gzip_level": 9}),
     ("lz4", {"compression_lz4_level": 1}, {"compression_lz4_level": 17}),
     ("zstd", {"compression_zstd_level": 1}, {"compression_zstd_level": 19})],
)
def test_recompression_uses_the_topics_compression_level(codec, low, high):
    # compressible but not trivial values: the codec's effort shows in the size
    words = [b"alpha", b"beta", b"gamma", b"delta", b"epsilon", b"zeta", b"theta"]
    values = [b" ".join(words[(i * j) % 7] for j in range(400)) + b"%d" % i for i in range(40)]
    raw = build_batch([(None, v, [], T0 + i) for i, v in enumerate(values)])
    sizes = {}
    for name, levels in (("low", low), ("high", high)):
        info = leader(raw, LogConfig(compression_type=codec, **levels))
        records = [r.value for r in RecordBatch(stored(info)).records()]
        assert records == values  # a level changes the size, never the records
        sizes[name] = len(stored(info))
    assert sizes["high"] < sizes["low"]


def test_recompression_checks_the_producer_batch_first():
    raw = batch(4, codec=3)
    with pytest.raises(CorruptRecordError):
        leader(flipped(raw, len(raw) - 2), LogConfig(compression_type="gzip"))
    with pytest.raises(RecordTooLargeError):
        leader(raw, LogConfig(compression_type="gzip", max_message_bytes=len(raw) - 1))


LEGACY = sorted(p.stem for p in RECORDS.glob("confluent-magic*.bin"))


@pytest.mark.parametrize("name", LEGACY)
def test_legacy_message_sets_are_converted_to_one_v2_batch(name):
    raw = (RECORDS / f"{name}.bin").read_bytes()
    meta = json.loads((RECORDS / f"{name}.json").read_text())
    info = leader(raw, next_offset=500, epoch=3)
    batches = list(iter_batches(stored(info)))
    assert len(batches) == 1
    b = batches[0]
    assert b.verify_crc() and b.magic == 2
    assert (b.base_offset, b.last_offset, b.partition_leader_epoch) == (
        500, 500 + meta["count"] - 1, 3)
    # compression.type=producer keeps the producer's codec
    assert b.compression == {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}[meta["codec"]]
    got = [(comparable(r.key), comparable(r.value)) for r in b.records()]
    assert got == [(json_bytes(r["key"]), json_bytes(r["value"])) for r in meta["records"]]
    if meta["magic"] == 0:
        assert b.max_timestamp == -1  # magic 0 has no timestamps
    # a topic codec wins
    plain = RecordBatch(stored(leader(raw, LogConfig(compression_type="uncompressed"))))
    assert plain.compression == 0
    assert [(comparable(r.key), comparable(r.value)) for r in plain.records()] == got


def test_magic0_without_timestamps_passes_timestamp_bounds():
    raw = (RECORDS / "confluent-magic0-none.bin").read_bytes()
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)
    assert leader(raw, config).record_count == 20


def test_corrupt_legacy_set_is_corrupt_message():
    raw = (RECORDS / "confluent-magic1-none.bin").read_bytes()
    with pytest.raises(CorruptRecordError):
        leader(flipped(raw, 40))


# --- followers keep the leader's bytes -----------------------------------------------------------


def test_follower_keeps_bytes_and_checks_order_and_crc():
    data = as_stored(batch(3, seed=1), 10, 2) + as_stored(batch(2, seed=2), 13, 3)
    info = validate_for_follower(data, 10)
    assert stored(info) == data
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in info.batches] == [
        (10, 12, 2), (13, 14, 3)]
    with pytest.raises(InvalidRecordError):
        validate_for_follower(data, 11)
    with pytest.raises(CorruptRecordError):
        validate_for_follower(flipped(data, 30), 10)
    assert validate_for_follower(b"", 10).batches == []


# --- nothing reaches the log on any error --------------------------------------------------------


def snapshot(log: PartitionLog):
    files = {n: os.path.getsize(os.path.join(log.directory, n)) for n in os.listdir(log.directory)}
    return log.log_end_offset, [s.size for s in log.segments], files


REJECTS = [
    ("too large", lambda: batch(3, value_size=600, seed=9), LogConfig(max_message_bytes=1000),
     RecordTooLargeError),
    ("bad crc", lambda: flipped(batch(3, seed=9), 70), LogConfig(), CorruptRecordError),
    ("over segment", lambda: batch(3, value_size=600, seed=9), LogConfig(segment_bytes=1500),
     RecordBatchTooLargeError),
    ("null key", lambda: batch(2, key=None), LogConfig(cleanup_policy=("compact",)),
     InvalidRecordError),
    ("timestamp", lambda: batch(1, timestamp=0), LogConfig(message_timestamp_before_max_ms=10),
     InvalidTimestampError),
    ("truncated", lambda: batch(3)[:-4], LogConfig(), CorruptRecordError),
    ("recompress bad crc", lambda: flipped(batch(3, codec=3), 80),
     LogConfig(compression_type="gzip"), CorruptRecordError),
]


@pytest.mark.parametrize("name, make, config, error", REJECTS, ids=[r[0] for r in REJECTS])
def test_rejected_appends_write_nothing(tmp_path, name, make, config, error):
    log = PartitionLog(str(tmp_path / "t-0"), config, sync=False)
    for i in range(3):
        log.append_as_leader(batch(2, value_size=100, timestamp=NOW, seed=i), 1, now=NOW)
    before = snapshot(log)
    contents = [parse_log_file(s.log_path) for s in log.segments]
    with pytest.raises(error) as caught:
        log.append_as_leader(make(), 1, now=NOW)
    assert isinstance(caught.value, KafkaError) and caught.value.code > 0
    assert snapshot(log) == before
    assert [parse_log_file(s.log_path) for s in log.segments] == contents
    info = log.append_as_leader(batch(1, timestamp=NOW, seed=5), 1, now=NOW)  # still appendable
    assert info.first_offset == 6
    log.close()


def test_follower_append_larger_than_a_segment_is_rejected(tmp_path):
    data = as_stored(batch(4, value_size=400), 0, 1)
    log = PartitionLog(str(tmp_path / "t-0"), LogConfig(segment_bytes=len(data) - 1), sync=False)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_follower(data)
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    log.close()


def test_crc_is_castagnoli_over_attributes_to_end():
    # the independent check the other tests rely on
    raw = batch(2)
    assert struct.unpack_from(">I", raw, 17)[0] == crc32c(raw[21:])
    assert RecordBatch(raw).timestamp_type == CREATE_TIME
