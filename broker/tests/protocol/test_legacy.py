"""Legacy message sets (magic 0 and 1): parsing, wrappers, CRCs, conversion to v2.

The captured kafka-python and librdkafka message sets under tests/data/records are
checked by test_records.test_captured_batches (which also converts them to v2).
"""

import struct
import zlib

import kafka.codec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from moldau.protocol import compression, legacy
from moldau.protocol import records as r
from moldau.protocol.errors import ProtocolError

T0 = 1_650_000_000_000


def message(offset, magic, key, value, *, attributes=0, timestamp=None, crc=None) -> bytes:
    """One entry written field by field from Kafka's documented v0/v1 layout."""
    body = struct.pack(">b", magic) + struct.pack(">b", attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for data in (key, value):
        body += struct.pack(">i", -1) if data is None else struct.pack(">i", len(data)) + data
    if crc is None:
        crc = zlib.crc32(body)
    msg = struct.pack(">I", crc) + body
    return struct.pack(">q", offset) + struct.pack(">i", len(msg)) + msg


def sample(n=6):
    return [
        (None if i == 0 else b"k%d" % i, None if i == 3 else b"value %d " % i * 20, (), T0 + i)
        for i in range(n)
    ]


# --- shallow parsing ---------------------------------------------------------------


def test_golden_magic0():
    blob = message(7, 0, b"key", b"value") + message(8, 0, None, None)
    assert legacy.detect_magic(blob) == 0
    first, second = legacy.iter_entries(blob)
    assert first == legacy.LegacyEntry(
        7, 0, 0, -1, b"key", b"value", zlib.crc32(blob[16:34]), 12 + 4 + 1 + 1 + 4 + 3 + 4 + 5
    )
    assert (second.key, second.value, second.timestamp_type) == (None, None, -1)
    assert list(legacy.iter_messages(blob)) == [
        legacy.LegacyMessage(7, -1, -1, b"key", b"value", 0),
        legacy.LegacyMessage(8, -1, -1, None, None, 0),
    ]


def test_golden_magic1():
    blob = message(3, 1, b"", b"v", timestamp=T0) + message(
        4, 1, b"k", b"", attributes=0x08, timestamp=T0 + 1
    )
    assert legacy.detect_magic(blob) == 1
    got = list(legacy.iter_messages(blob))
    assert got == [
        legacy.LegacyMessage(3, T0, legacy.CREATE_TIME, b"", b"v", 1),
        legacy.LegacyMessage(4, T0 + 1, legacy.LOG_APPEND_TIME, b"k", b"", 1),
    ]


def test_detect_magic():
    assert legacy.detect_magic(r.build_batch([(b"k", b"v")])) == 2
    with pytest.raises(ProtocolError, match="too short"):
        legacy.detect_magic(b"\x00" * 16)
    with pytest.raises(ProtocolError, match="unknown message format magic 7"):
        legacy.detect_magic(b"\x00" * 16 + b"\x07")


def test_crc_mismatch():
    blob = bytearray(message(0, 1, b"k", b"v", timestamp=T0))
    blob[-1] ^= 0x01
    with pytest.raises(ProtocolError, match="stored CRC"):
        list(legacy.iter_messages(blob))
    assert next(legacy.iter_messages(blob, verify_crc=False)).value == b"w"


def test_stated_crc_is_checked_not_recomputed():
    blob = message(0, 0, b"k", b"v", crc=12345)
    with pytest.raises(ProtocolError, match="stored CRC 12345"):
        list(legacy.iter_entries(blob))


@pytest.mark.parametrize(("magic", "minimum"), [(0, 14), (1, 22)])
def test_message_size_below_minimum(magic, minimum):
    blob = bytearray(message(0, magic, b"", b"", timestamp=T0))
    struct.pack_into(">i", blob, 8, minimum - 1)
    with pytest.raises(ProtocolError, match=f"below the minimum of {minimum}"):
        list(legacy.iter_entries(blob, verify_crc=False))


def test_negative_message_size():
    blob = bytearray(message(0, 0, b"", b""))
    struct.pack_into(">i", blob, 8, -1)
    with pytest.raises(ProtocolError, match="below the minimum"):
        list(legacy.iter_entries(blob))


@pytest.mark.parametrize(
    ("key_len", "message_text"),
    [(-2, "invalid key length -2"), (100, "invalid key length 100")],
)
def test_bad_key_lengths(key_len, message_text):
    blob = bytearray(message(0, 0, b"ab", b"v"))
    struct.pack_into(">i", blob, 18, key_len)
    with pytest.raises(ProtocolError, match=message_text):
        list(legacy.iter_entries(blob, verify_crc=False))


def test_bytes_after_value():
    blob = bytearray(message(0, 0, b"k", b"v") + b"\x00")
    struct.pack_into(">i", blob, 8, struct.unpack_from(">i", blob, 8)[0] + 1)
    with pytest.raises(ProtocolError, match="bytes after its value"):
        list(legacy.iter_entries(blob, verify_crc=False))


def test_truncated_and_partial():
    full = message(0, 1, b"k", b"v", timestamp=T0)
    blob = full + full
    for cut in range(len(full) + 1, len(blob)):
        with pytest.raises(ProtocolError, match="truncated"):
            list(legacy.iter_entries(blob[:cut]))
        assert len(list(legacy.iter_entries(blob[:cut], allow_partial=True))) == 1


def test_v2_batch_is_not_a_legacy_set():
    with pytest.raises(ProtocolError, match=r"moldau\.protocol\.records"):
        list(legacy.iter_entries(r.build_batch([(b"k", b"v")])))


# --- compressed wrappers -----------------------------------------------------------


def wrapper(offset, magic, inner: bytes, codec=compression.GZIP, attributes=0, timestamp=T0):
    payload = compression.compress(codec, inner, xerial=True)
    return message(offset, magic, None, payload, attributes=codec | attributes, timestamp=timestamp)


def inner_set(magic, offsets, timestamps=None):
    return b"".join(
        message(o, magic, b"k%d" % i, b"v%d" % i, timestamp=(timestamps or [T0] * 99)[i])
        for i, o in enumerate(offsets)
    )


def test_magic1_wrapper_relative_offsets():
    blob = wrapper(104, 1, inner_set(1, range(5)))
    assert [m.offset for m in legacy.iter_messages(blob)] == [100, 101, 102, 103, 104]


def test_magic1_wrapper_offset_zero_keeps_inner_offsets():
    blob = wrapper(0, 1, inner_set(1, range(3)))
    assert [m.offset for m in legacy.iter_messages(blob)] == [0, 1, 2]


def test_magic1_wrapper_offset_below_last_inner():
    blob = wrapper(2, 1, inner_set(1, range(5)))
    with pytest.raises(ProtocolError, match="below the last inner offset 4"):
        list(legacy.iter_messages(blob))


def test_magic0_wrapper_inner_offsets_are_absolute():
    blob = wrapper(52, 0, inner_set(0, [50, 51, 52]))
    assert [m.offset for m in legacy.iter_messages(blob)] == [50, 51, 52]


def test_magic1_wrapper_timestamps():
    inner = inner_set(1, range(3), [T0 + 5, T0 + 1, T0 + 9])
    create = list(legacy.iter_messages(wrapper(2, 1, inner, timestamp=T0 + 9)))
    assert [(m.timestamp, m.timestamp_type) for m in create] == [
        (T0 + 5, 0),
        (T0 + 1, 0),
        (T0 + 9, 0),
    ]
    appended = list(legacy.iter_messages(wrapper(2, 1, inner, attributes=0x08, timestamp=7)))
    assert [(m.timestamp, m.timestamp_type) for m in appended] == [(7, 1)] * 3


@pytest.mark.parametrize(
    ("blob", "text"),
    [
        (wrapper(0, 1, b""), "no inner messages"),
        (wrapper(0, 1, inner_set(0, [0])), "inner magic 0 does not match wrapper magic 1"),
        (wrapper(0, 1, wrapper(0, 1, inner_set(1, [0]))), "must not be compressed"),
        (message(0, 1, None, None, attributes=1, timestamp=T0), "null value"),
        (message(0, 1, None, b"not gzip", attributes=1, timestamp=T0), "corrupt gzip"),
        (wrapper(0, 0, inner_set(0, [0]), codec=compression.LZ4), "lz4 in magic 0"),
        (message(0, 1, None, b"x", attributes=4, timestamp=T0), "codec 4"),
        (message(0, 1, None, b"x", attributes=6, timestamp=T0), "codec 6"),
        (wrapper(0, 1, inner_set(1, [0])[:-2]), "truncated"),
    ],
    ids=[
        "empty",
        "magic-mismatch",
        "nested",
        "null-value",
        "corrupt",
        "magic0-lz4",
        "zstd",
        "unknown-codec",
        "truncated-inner",
    ],
)
def test_bad_wrappers(blob, text):
    with pytest.raises(ProtocolError, match=text):
        list(legacy.iter_messages(blob))


def test_wrapper_bomb_limit():
    blob = wrapper(0, 1, message(0, 1, None, bytes(2_000_000), timestamp=T0))
    assert len(blob) < 100_000
    with pytest.raises(ProtocolError, match="limit"):
        list(legacy.iter_messages(blob, max_decompressed_size=1_000_000))


def test_inner_crc_is_verified():
    inner = bytearray(inner_set(1, range(2)))
    inner[-1] ^= 0x01
    with pytest.raises(ProtocolError, match="stored CRC"):
        list(legacy.iter_messages(wrapper(1, 1, bytes(inner))))


# --- building, and kafka-python reading what we build ------------------------------

LEGACY_CODECS = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]


@pytest.mark.parametrize(("magic", "codec"), LEGACY_CODECS)
def test_build_message_set_round_trip(magic, codec):
    blob = legacy.build_message_set(sample(), magic=magic, compression=codec, base_offset=20)
    got = list(legacy.iter_messages(blob))
    assert [m.offset for m in got] == list(range(20, 26))
    assert [(m.key, m.value) for m in got] == [(k, v) for k, v, _, _ in sample()]
    expected_ts = [-1] * 6 if magic == 0 else [ts for *_, ts in sample()]
    assert [m.timestamp for m in got] == expected_ts


@pytest.mark.parametrize(("magic", "codec"), LEGACY_CODECS)
def test_kafka_python_reads_our_message_sets(magic, codec):
    if codec == compression.SNAPPY and not kafka.codec.has_snappy():
        pytest.skip("kafka-python needs python-snappy to read snappy")
    blob = legacy.build_message_set(sample(), magic=magic, compression=codec, base_offset=20)
    got = [msg for batch in MemoryRecords(blob) for msg in batch]
    assert all(msg.validate_crc() for msg in got)
    assert [(m.offset, m.key, m.value) for m in got] == [
        (20 + i, k, v) for i, (k, v, _, _) in enumerate(sample())
    ]
    if magic == 1:
        assert [m.timestamp for m in got] == [ts for *_, ts in sample()]


def test_build_log_append_time():
    blob = legacy.build_message_set(
        sample(3), magic=1, timestamp_type=legacy.LOG_APPEND_TIME, log_append_time=99
    )
    assert {(m.timestamp, m.timestamp_type) for m in legacy.iter_messages(blob)} == {(99, 1)}
    packed = legacy.build_message_set(
        sample(3), magic=1, compression=1, timestamp_type=1, log_append_time=99
    )
    assert {(m.timestamp, m.timestamp_type) for m in legacy.iter_messages(packed)} == {(99, 1)}


def test_build_rejects_what_the_format_cannot_carry():
    with pytest.raises(ValueError):
        legacy.build_message_set(sample(), magic=2)
    with pytest.raises(ValueError):
        legacy.build_message_set(sample(), magic=1, compression=compression.ZSTD)
    with pytest.raises(ValueError):
        legacy.build_message_set(sample(), magic=0, compression=compression.LZ4)
    with pytest.raises(ValueError):
        legacy.build_message_set([(b"k", b"v")], magic=1)  # magic 1 needs a timestamp


# --- conversion to v2 --------------------------------------------------------------


@pytest.mark.parametrize("target", [0, 1, 2, 3, 4])
@pytest.mark.parametrize(("magic", "codec"), LEGACY_CODECS)
def test_convert_to_v2(magic, codec, target):
    blob = legacy.build_message_set(sample(), magic=magic, compression=codec, base_offset=500)
    batch = r.RecordBatch(legacy.convert_to_v2(blob, compression=target))
    assert batch.verify_crc() and batch.compression == target
    assert batch.base_offset == 0 and batch.records_count == 6
    got = list(batch.records())
    assert [x.offset for x in got] == list(range(6))
    assert [(x.key, x.value, x.headers) for x in got] == [(k, v, []) for k, v, _, _ in sample()]
    expected_ts = [-1] * 6 if magic == 0 else [ts for *_, ts in sample()]
    assert [x.timestamp for x in got] == expected_ts
    if target != compression.SNAPPY or kafka.codec.has_snappy():
        theirs = list(DefaultRecordBatch(bytes(batch.buffer)))
        assert [(x.offset, x.key, x.value) for x in theirs] == [
            (i, k, v) for i, (k, v, _, _) in enumerate(sample())
        ]


def test_convert_renumbers_meaningless_producer_offsets():
    # Old producers send offset 0 for every message; the broker assigns real ones.
    blob = b"".join(message(0, 1, b"k", b"v%d" % i, timestamp=T0) for i in range(3))
    batch = r.RecordBatch(legacy.convert_to_v2(blob, base_offset=10))
    assert [x.offset for x in batch.records()] == [10, 11, 12]
    with pytest.raises(ProtocolError, match="not strictly increasing"):
        legacy.convert_to_v2(blob, keep_offsets=True)


def test_convert_keeps_offsets_with_gaps():
    blob = b"".join(message(o, 1, b"k", b"v", timestamp=T0) for o in (40, 41, 45))
    batch = r.RecordBatch(legacy.convert_to_v2(blob, keep_offsets=True))
    assert batch.base_offset == 40 and batch.last_offset == 45
    assert [x.offset for x in batch.records()] == [40, 41, 45]


def test_convert_keeps_log_append_time():
    blob = legacy.build_message_set(
        sample(3), magic=1, compression=1, timestamp_type=1, log_append_time=T0 + 77
    )
    batch = r.RecordBatch(legacy.convert_to_v2(blob))
    assert batch.timestamp_type == r.LOG_APPEND_TIME and batch.max_timestamp == T0 + 77
    assert {x.timestamp for x in batch.records()} == {T0 + 77}


def test_convert_empty_set():
    with pytest.raises(ProtocolError, match="empty"):
        legacy.convert_to_v2(b"")


# --- damaged input only ever raises ProtocolError -----------------------------------

_BASES = [legacy.build_message_set(sample(4), magic=m, compression=c) for m, c in LEGACY_CODECS]


@settings(max_examples=examples(300), deadline=None)
@given(
    original=st.sampled_from(_BASES),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 10_000),
    verify=st.booleans(),
)
def test_damaged_message_sets_raise_protocol_error_only(original, edits, cut, verify):
    data = bytearray(original)
    for pos, value in edits:
        data[pos % len(data)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    try:
        for msg in legacy.iter_messages(data, verify_crc=verify, max_decompressed_size=1 << 20):
            assert msg.offset is not None
        legacy.convert_to_v2(data, verify_crc=verify, max_decompressed_size=1 << 20)
    except ProtocolError:
        pass
