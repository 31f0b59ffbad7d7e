"""Record batches (magic 2): header view, iteration, patching, records, builder.

Besides unit tests on bytes written out by hand from Kafka's documented layout, the
decoder is checked against batches written by independent producers (kafka-python's
record builder, librdkafka via confluent-kafka) that are committed under
tests/data/records, and kafka-python's reader is checked against our builder.
"""

import hashlib
import itertools
import json
import struct
from pathlib import Path

import kafka.codec
import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from kafka.record.default_records import DefaultRecordBatch

from moldau.protocol import compression, legacy
from moldau.protocol import records as r
from moldau.protocol.errors import ProtocolError

DATA = Path(__file__).resolve().parent.parent / "data" / "records"
CODECS = [0, 1, 2, 3, 4]
T0 = 1_600_000_000_000


def golden_batch() -> bytes:
    """Two records written field by field from Kafka's documented v2 layout."""
    record0 = bytes(
        [
            0x00,  # attributes
            0x00,  # timestampDelta 0 (zigzag varlong)
            0x00,  # offsetDelta 0
            0x02,  # keyLength 1 (zigzag 2)
            *b"k",
            0x04,  # valueLength 2
            *b"v1",
            0x02,  # 1 header
            0x02,  # header key length 1
            *b"h",
            0x02,  # header value length 1
            *b"x",
        ]
    )
    record1 = bytes(
        [
            0x00,  # attributes
            0x90,  # timestampDelta 200: zigzag 400 = 0x190, varint 0x90 0x03
            0x03,
            0x02,  # offsetDelta 1
            0x01,  # keyLength -1: null key
            0x00,  # valueLength 0: empty value
            0x00,  # no headers
        ]
    )
    body = bytes([len(record0) * 2]) + record0 + bytes([len(record1) * 2]) + record1
    after_crc = (
        struct.pack(">h", 0)  # attributes
        + struct.pack(">i", 1)  # lastOffsetDelta
        + struct.pack(">q", T0)  # baseTimestamp
        + struct.pack(">q", T0 + 200)  # maxTimestamp
        + struct.pack(">q", 77)  # producerId
        + struct.pack(">h", 2)  # producerEpoch
        + struct.pack(">i", 9)  # baseSequence
        + struct.pack(">i", 2)  # recordsCount
        + body
    )
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # leader epoch + magic + crc + the rest
    return (
        struct.pack(">q", 1000)  # baseOffset
        + struct.pack(">i", batch_length)
        + struct.pack(">i", 5)  # partitionLeaderEpoch
        + struct.pack(">b", 2)  # magic
        + struct.pack(">I", crc)
        + after_crc
    )


GOLDEN_RECORDS = [
    r.SimpleRecord(b"k", b"v1", [("h", b"x")], T0),
    r.SimpleRecord(None, b"", [], T0 + 200),
]


def sample_records(n=10):
    return [
        r.SimpleRecord(
            None if i % 4 == 0 else b"key-%d" % i,
            None if i % 5 == 3 else b"value-%d-" % i * (i + 1),
            [("idx", str(i).encode()), ("none", None)] if i % 3 == 0 else [],
            T0 + (i * 7) % 13,
        )
        for i in range(n)
    ]


def as_tuples(records):
    return [(rec.key, rec.value, list(rec.headers), rec.timestamp) for rec in records]


# --- header ------------------------------------------------------------------------


def test_crc32c_is_castagnoli():
    assert crc32c(b"123456789") == 0xE3069283


def test_golden_header_fields():
    data = golden_batch()
    batch = r.RecordBatch(data)
    assert r.HEADER_SIZE == 61
    assert batch.base_offset == 1000
    assert batch.batch_length == len(data) - 12
    assert batch.size_in_bytes == len(data)
    assert batch.partition_leader_epoch == 5
    assert batch.magic == 2
    assert batch.crc == struct.unpack_from(">I", data, 17)[0]
    assert batch.attributes == 0
    assert batch.compression == 0
    assert batch.timestamp_type == r.CREATE_TIME
    assert not batch.is_transactional and not batch.is_control and not batch.has_delete_horizon
    assert batch.delete_horizon_ms is None
    assert batch.last_offset_delta == 1
    assert batch.last_offset == 1001
    assert batch.next_offset == 1002
    assert batch.base_timestamp == T0
    assert batch.max_timestamp == T0 + 200
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 2, 9)
    assert batch.last_sequence == 10
    assert batch.records_count == 2
    assert batch.verify_crc()
    assert batch.compute_crc() == batch.crc


def test_golden_records():
    got = list(r.RecordBatch(golden_batch()).records())
    assert got == [
        r.Record(1000, T0, b"k", b"v1", [("h", b"x")]),
        r.Record(1001, T0 + 200, None, b"", []),
    ]


def test_builder_reproduces_golden_bytes():
    built = r.build_batch(
        GOLDEN_RECORDS,
        base_offset=1000,
        partition_leader_epoch=5,
        producer_id=77,
        producer_epoch=2,
        base_sequence=9,
    )
    assert built == golden_batch()


@pytest.mark.parametrize(
    ("attributes", "prop", "expected"),
    [
        (0x03, "compression", 3),
        (0x08, "timestamp_type", r.LOG_APPEND_TIME),
        (0x10, "is_transactional", True),
        (0x20, "is_control", True),
        (0x40, "has_delete_horizon", True),
        (0x40, "delete_horizon_ms", T0),
    ],
)
def test_attribute_bits(attributes, prop, expected):
    data = bytearray(golden_batch())
    struct.pack_into(">h", data, 21, attributes)
    assert getattr(r.RecordBatch(data), prop) == expected


def test_last_sequence_wraps_and_absent():
    data = bytearray(r.build_batch(sample_records(3), base_sequence=2**31 - 2, producer_id=1))
    assert r.RecordBatch(data).last_sequence == 0
    assert r.RecordBatch(r.build_batch(sample_records(3))).last_sequence == r.NO_SEQUENCE


def test_verify_crc_detects_every_covered_byte():
    data = golden_batch()
    for pos in range(21, len(data)):
        broken = bytearray(data)
        broken[pos] ^= 0x01
        assert not r.RecordBatch(broken).verify_crc(), pos


def test_crc_does_not_cover_offset_length_epoch_or_magic_fields():
    data = bytearray(golden_batch())
    for pos in (0, 7, 12, 15):
        data[pos] ^= 0xFF
    assert r.RecordBatch(data).verify_crc()


def test_view_rejects_bad_buffers():
    data = golden_batch()
    with pytest.raises(ProtocolError, match="shorter than"):
        r.RecordBatch(data[:60])
    with pytest.raises(ProtocolError, match="batchLength"):
        r.RecordBatch(data + b"\x00")
    legacy_like = bytearray(data)
    legacy_like[16] = 1
    with pytest.raises(ProtocolError, match="legacy message set"):
        r.RecordBatch(legacy_like)


# --- iteration ---------------------------------------------------------------------


def three_batches() -> list[bytes]:
    return [
        r.build_batch(sample_records(3), base_offset=0),
        r.build_batch(sample_records(5), base_offset=3, compression=compression.GZIP),
        r.build_batch(sample_records(1), base_offset=8, compression=compression.ZSTD),
    ]


def test_iterates_batches_back_to_back():
    parts = three_batches()
    it = r.iter_batches(b"".join(parts))
    batches = list(it)
    assert [b.base_offset for b in batches] == [0, 3, 8]
    assert [b.next_offset for b in batches] == [3, 8, 9]
    assert [b.compression for b in batches] == [0, 1, 4]
    assert [bytes(b.buffer) for b in batches] == parts
    assert all(b.verify_crc() for b in batches)
    assert not it.truncated and it.position == sum(map(len, parts))


def test_iterates_memoryview_and_empty():
    assert list(r.iter_batches(b"")) == []
    joined = bytearray(b"".join(three_batches()))
    assert len(list(r.iter_batches(memoryview(joined)))) == 3


def test_iteration_only_reads_headers():
    # A batch whose records are garbage still iterates: records are not decoded.
    data = bytearray(r.build_batch(sample_records(4)))
    data[70:90] = b"\xff" * 20
    (batch,) = r.iter_batches(data)
    assert batch.records_count == 4 and not batch.verify_crc()


@pytest.mark.parametrize("cut", [1, 5, 11, 12, 16, 17, 60, 61, -1])
def test_partial_trailing_batch(cut):
    parts = three_batches()
    full = parts[0] + parts[1]
    blob = full + parts[2][:cut]
    with pytest.raises(ProtocolError, match="truncated record batch"):
        list(r.iter_batches(blob))
    it = r.iter_batches(blob, allow_partial=True)
    assert [b.base_offset for b in it] == [0, 3]
    assert it.truncated
    assert it.position == len(full)
    assert list(it) == []  # stays stopped


def test_partial_first_batch():
    it = r.iter_batches(three_batches()[0][:40], allow_partial=True)
    assert list(it) == [] and it.truncated and it.position == 0


def test_every_truncation_of_a_batch_is_detected():
    data = r.build_batch(sample_records(4), compression=compression.LZ4)
    for cut in range(1, len(data)):
        with pytest.raises(ProtocolError):
            list(r.iter_batches(data[:cut]))


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 48])
def test_batch_length_below_minimum(length):
    data = bytearray(golden_batch())
    struct.pack_into(">i", data, 8, length)
    for partial in (False, True):
        with pytest.raises(ProtocolError, match="below the minimum of 49"):
            list(r.iter_batches(data, allow_partial=partial))


def test_batch_length_beyond_buffer():
    data = bytearray(golden_batch())
    struct.pack_into(">i", data, 8, 10_000)
    with pytest.raises(ProtocolError, match="truncated"):
        list(r.iter_batches(data))


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_reported_as_legacy(magic):
    blob = legacy.build_message_set([(b"k", b"v", (), 5)], magic=magic)
    with pytest.raises(ProtocolError, match=f"legacy message set \\(magic {magic}\\)"):
        list(r.iter_batches(blob))


@pytest.mark.parametrize("magic", [3, 127, 255])
def test_unknown_magic(magic):
    data = bytearray(golden_batch())
    data[16] = magic
    with pytest.raises(ProtocolError, match="unknown magic"):
        list(r.iter_batches(data))


# --- patching (produce path) -------------------------------------------------------


def test_patch_base_offset_and_epoch_keeps_crc():
    data = bytearray(r.build_batch(sample_records(5), compression=compression.SNAPPY))
    before = bytes(data[17:])
    assert r.patch_batch(data, 123_456, partition_leader_epoch=42) is False
    assert bytes(data[17:]) == before  # CRC and everything it covers untouched
    batch = r.RecordBatch(data)
    assert (batch.base_offset, batch.partition_leader_epoch) == (123_456, 42)
    assert batch.verify_crc()
    assert [rec.offset for rec in batch.records()] == list(range(123_456, 123_461))


def test_patch_without_epoch_leaves_epoch():
    data = bytearray(golden_batch())
    r.patch_batch(data, 7)
    assert r.RecordBatch(data).partition_leader_epoch == 5


def test_patch_log_append_time_recomputes_crc():
    data = bytearray(r.build_batch(sample_records(6), compression=compression.LZ4))
    old_crc = r.RecordBatch(data).crc
    assert r.patch_batch(data, 50, log_append_time=T0 + 99_999) is True
    batch = r.RecordBatch(data)
    assert batch.timestamp_type == r.LOG_APPEND_TIME
    assert batch.max_timestamp == T0 + 99_999
    assert batch.compression == compression.LZ4  # other attribute bits kept
    assert batch.crc != old_crc and batch.verify_crc()
    assert {rec.timestamp for rec in batch.records()} == {T0 + 99_999}
    # The same append time again changes nothing and skips the CRC.
    assert r.patch_batch(data, 60, log_append_time=T0 + 99_999) is False


def test_set_max_timestamp_no_change_is_free():
    data = bytearray(r.build_batch(sample_records(3)))
    batch = r.RecordBatch(data)
    assert r.set_max_timestamp(data, r.CREATE_TIME, batch.max_timestamp) is False
    assert r.set_max_timestamp(data, r.CREATE_TIME, batch.max_timestamp + 1) is True
    assert r.RecordBatch(data).verify_crc()


def test_patch_in_a_larger_buffer_and_through_the_view():
    parts = three_batches()
    blob = bytearray(b"".join(parts))
    batches = list(r.iter_batches(blob))
    assert batches[1].patch(1000, partition_leader_epoch=3, log_append_time=T0) is True
    assert batches[1].base_offset == 1000 and batches[1].max_timestamp == T0
    again = list(r.iter_batches(blob))
    assert [b.base_offset for b in again] == [0, 1000, 8]
    assert all(b.verify_crc() for b in again)
    r.patch_batch(blob, 2000, pos=len(parts[0]) + len(parts[1]))
    assert list(r.iter_batches(blob))[2].base_offset == 2000


def test_patch_with_invalid_length_for_crc():
    data = bytearray(golden_batch())
    struct.pack_into(">i", data, 8, 5000)
    with pytest.raises(ProtocolError, match="batchLength"):
        r.patch_batch(data, 1, log_append_time=1)


def test_patch_readonly_buffer_fails_loudly():
    with pytest.raises(TypeError):
        r.patch_batch(golden_batch(), 1)


# --- record decoding ---------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_records_round_trip_each_codec(codec):
    records = sample_records(30)
    data = r.build_batch(records, base_offset=77, compression=codec)
    batch = r.RecordBatch(data)
    assert batch.compression == codec and batch.verify_crc()
    got = list(batch.records())
    assert [rec.offset for rec in got] == list(range(77, 107))
    assert as_tuples(got) == as_tuples(records)
    assert batch.max_timestamp == max(rec.timestamp for rec in records)


def test_xerial_snappy_batch():
    data = r.build_batch(sample_records(40), compression=compression.SNAPPY, xerial_snappy=True)
    assert data[61:69] == compression.XERIAL_MAGIC
    assert as_tuples(r.RecordBatch(data).records()) == as_tuples(sample_records(40))


def test_records_are_decoded_lazily():
    # Record 1 has an invalid header key: record 0 comes out before the failure.
    good = r.build_batch(
        [
            r.SimpleRecord(b"a", b"1", [("ok", b"")], T0),
            r.SimpleRecord(b"b", b"2", [("zz", b"")], T0),
        ]
    )
    data = bytearray(good)
    pos = data.rindex(b"zz")
    data[pos : pos + 2] = b"\xff\xfe"
    it = r.RecordBatch(data).records()
    assert next(it).key == b"a"
    with pytest.raises(ProtocolError, match=r"record 1 .*UTF-8"):
        next(it)


def test_compressed_records_decompress_on_first_next():
    data = bytearray(r.build_batch(sample_records(5), compression=compression.GZIP))
    data[70:80] = b"\x00" * 10
    it = r.RecordBatch(data).records()  # no error yet
    with pytest.raises(ProtocolError, match="gzip"):
        next(it)


def test_decompressed_size_limit_applies_to_records():
    records = [r.SimpleRecord(None, bytes(100_000), [], T0)]
    data = r.build_batch(records, compression=compression.ZSTD)
    assert len(list(r.RecordBatch(data).records())) == 1
    with pytest.raises(ProtocolError, match="limit"):
        list(r.RecordBatch(data).records(max_decompressed_size=50_000))


def test_empty_batch():
    data = r.build_batch([], base_offset=10, last_offset_delta=4, compression=compression.GZIP)
    batch = r.RecordBatch(data)
    assert batch.records_count == 0 and batch.compression == 0
    assert batch.base_timestamp == r.NO_TIMESTAMP and batch.last_offset == 14
    assert list(batch.records()) == []


def test_offset_gaps_and_delete_horizon():
    data = r.build_batch(
        sample_records(3), base_offset=100, offset_deltas=[0, 5, 9], delete_horizon_ms=T0 - 50
    )
    batch = r.RecordBatch(data)
    assert batch.delete_horizon_ms == T0 - 50 == batch.base_timestamp
    got = list(batch.records())
    assert [rec.offset for rec in got] == [100, 105, 109] and batch.last_offset == 109
    assert [rec.timestamp for rec in got] == [rec.timestamp for rec in sample_records(3)]


def test_builder_accepts_tuples_and_default_timestamp():
    data = r.build_batch([(b"k", b"v"), (None, b"w", [("h", None)], 5)])
    got = list(r.RecordBatch(data).records())
    assert got[0].timestamp > T0 and got[1].timestamp == 5
    assert got[1].headers == [("h", None)]


def _records_blob(*records: bytes, count=None, codec=0) -> bytes:
    """A batch whose record section is given as raw bytes (each with its length)."""
    body = b"".join(records)
    if codec:
        body = compression.compress(codec, body)
    head = bytearray(61)
    r.HEADER.pack_into(
        head,
        0,
        0,
        49 + len(body),
        -1,
        2,
        0,
        codec,
        max(len(records) - 1, 0),
        T0,
        T0,
        -1,
        -1,
        -1,
        len(records) if count is None else count,
    )
    data = head + body
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    return bytes(data)


def _rec(body: bytes) -> bytes:
    assert len(body) < 64
    return bytes([len(body) * 2]) + body


OK_RECORD = _rec(b"\x00\x00\x00\x02k\x02v\x00")


def test_hand_made_record_section_decodes():
    got = list(r.RecordBatch(_records_blob(OK_RECORD, OK_RECORD)).records())
    assert [(x.key, x.value) for x in got] == [(b"k", b"v")] * 2


MALFORMED = {
    "count-above-records": (_records_blob(OK_RECORD, count=2), "truncated"),
    "count-below-records": (_records_blob(OK_RECORD, OK_RECORD, count=1), "bytes remain"),
    "negative-count": (_records_blob(OK_RECORD, count=-1), "negative record count"),
    "record-length-beyond-batch": (_records_blob(b"\x7e" + OK_RECORD[1:]), "runs past"),
    "negative-record-length": (_records_blob(b"\x03" + OK_RECORD[1:]), "length -2"),
    "key-length-minus-2": (
        _records_blob(_rec(b"\x00\x00\x00\x03k\x02v\x00")),
        "key has negative length -2",
    ),
    "value-beyond-record": (
        _records_blob(_rec(b"\x00\x00\x00\x02k\x40v\x00")),
        "value of 32 bytes .* runs past the record end",
    ),
    "negative-header-count": (
        _records_blob(_rec(b"\x00\x00\x00\x02k\x02v\x01")),
        "invalid header count -1",
    ),
    "header-count-too-large": (
        _records_blob(_rec(b"\x00\x00\x00\x02k\x02v\x7e")),
        "invalid header count 63",
    ),
    "null-header-key": (
        _records_blob(_rec(b"\x00\x00\x00\x02k\x02v\x02\x01\x00")),
        "header key is null",
    ),
    "invalid-utf8-header-key": (
        _records_blob(_rec(b"\x00\x00\x00\x02k\x02v\x02\x02\xc3\x00")),
        "UTF-8",
    ),
    "bytes-after-fields": (
        _records_blob(_rec(b"\x00\x00\x00\x02k\x02v\x00\x00")),
        "does not match its fields",
    ),
    "missing-header-count": (_records_blob(_rec(b"\x00\x00\x00\x02k\x02v")), "truncated"),
    "oversized-varlong": (
        _records_blob(_rec(b"\x00" + b"\xff" * 11 + b"\x01")),
        "longer than 10 bytes",
    ),
    "oversized-varint": (
        _records_blob(_rec(b"\x00\x00" + b"\xff" * 5 + b"\x01")),
        "longer than 5 bytes",
    ),
    "header-value-beyond-record": (
        _records_blob(_rec(b"\x00\x00\x00\x02k\x02v\x02\x02h\x7e")),
        "header value of 63 bytes",
    ),
    "oversized-record-length": (_records_blob(b"\x80\x80\x80\x80\x80\x01"), "longer than 5"),
    "truncated-record-length": (_records_blob(b"\x80"), "truncated"),
    "compressed-count-above-records": (
        _records_blob(OK_RECORD, count=2, codec=compression.LZ4),
        "truncated",
    ),
}


@pytest.mark.parametrize(("blob", "message"), MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_records(blob, message):
    batch = r.RecordBatch(blob)
    assert batch.verify_crc()  # well-formed header and CRC: the records are the problem
    with pytest.raises(ProtocolError, match=message):
        list(batch.records())


# --- control batches ---------------------------------------------------------------


@pytest.mark.parametrize("control_type", [r.CONTROL_ABORT, r.CONTROL_COMMIT])
def test_control_batch_round_trip(control_type):
    data = r.build_control_batch(
        control_type,
        producer_id=9,
        producer_epoch=4,
        coordinator_epoch=17,
        base_offset=500,
        timestamp=T0,
    )
    batch = r.RecordBatch(data)
    assert batch.is_control and batch.is_transactional and batch.verify_crc()
    (marker,) = batch.control_records()
    assert marker == r.ControlRecord(500, T0, 0, control_type, 0, 17)
    (record,) = batch.records()
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 17)


def test_control_record_by_hand():
    key = struct.pack(">hh", 0, 1)
    value = struct.pack(">hi", 0, 3)
    body = b"\x00\x00\x00" + bytes([len(key) * 2]) + key + bytes([len(value) * 2]) + value
    blob = bytearray(_records_blob(_rec(body + b"\x00")))
    struct.pack_into(">h", blob, 21, 0x30)
    struct.pack_into(">I", blob, 17, crc32c(bytes(blob[21:])))
    (marker,) = r.RecordBatch(blob).control_records()
    assert (marker.control_type, marker.coordinator_epoch) == (r.CONTROL_COMMIT, 3)


def test_control_key_and_value_errors():
    with pytest.raises(ProtocolError, match="4 bytes"):
        r.parse_control_key(b"\x00\x00")
    with pytest.raises(ProtocolError, match="4 bytes"):
        r.parse_control_key(None)
    with pytest.raises(ProtocolError, match="negative version"):
        r.parse_control_key(struct.pack(">hh", -1, 0))
    with pytest.raises(ProtocolError, match="6 bytes"):
        r.parse_end_txn_marker(b"\x00\x00\x00")
    # Types other than ABORT/COMMIT (KRaft's) carry other values: not decoded as markers.
    other = r.decode_control_record(r.Record(0, 0, struct.pack(">hh", 0, 2), b"", []))
    assert other.control_type == 2 and other.coordinator_epoch is None


def test_control_records_on_a_data_batch():
    with pytest.raises(ProtocolError, match="not a control batch"):
        list(r.RecordBatch(golden_batch()).control_records())


# --- properties --------------------------------------------------------------------

header_names = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8)
record_strategy = st.builds(
    r.SimpleRecord,
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=300),
    headers=st.lists(st.tuples(header_names, st.none() | st.binary(max_size=10)), max_size=3),
    timestamp=st.integers(0, 2**50),
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(CODECS),
    records=st.lists(record_strategy, min_size=1, max_size=15),
    base_offset=st.integers(0, 2**62),
    producer=st.tuples(
        st.integers(-1, 2**62), st.integers(-1, 2**15 - 1), st.integers(-1, 2**31 - 16)
    ),
)
def test_build_then_decode_property(codec, records, base_offset, producer):
    data = r.build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
    )
    (batch,) = r.iter_batches(data)
    assert batch.verify_crc() and batch.compression == codec
    assert batch.records_count == len(records) and batch.last_offset_delta == len(records) - 1
    got = list(batch.records())
    assert [x.offset for x in got] == list(range(base_offset, base_offset + len(records)))
    assert as_tuples(got) == as_tuples(records)
    if codec != compression.SNAPPY or kafka.codec.has_snappy():
        theirs = DefaultRecordBatch(data)
        assert theirs.validate_crc()
        assert [(x.key, x.value, x.headers, x.timestamp) for x in theirs] == as_tuples(records)


def _mutated_inputs():
    base = [
        r.build_batch(sample_records(4)),
        r.build_batch(sample_records(4), compression=compression.GZIP),
        r.build_batch(sample_records(4), compression=compression.SNAPPY, xerial_snappy=True),
        r.build_batch(sample_records(4), compression=compression.LZ4),
        r.build_batch(sample_records(4), compression=compression.ZSTD),
    ]
    return st.sampled_from(base)


@settings(max_examples=examples(300), deadline=None)
@given(
    original=_mutated_inputs(),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 10_000),
)
def test_damaged_batches_raise_protocol_error_only(original, edits, cut):
    data = bytearray(original)
    for pos, value in edits:
        data[pos % len(data)] = value
    if cut is not None:
        data = data[: cut % (len(data) + 1)]
    try:
        for batch in r.iter_batches(data, allow_partial=bool(cut)):
            batch.verify_crc()
            for record in batch.records(max_decompressed_size=1 << 20):
                assert record.offset is not None
    except ProtocolError:
        pass


# --- kafka-python (independent implementation) reads our batches -------------------


def _needs_snappy(codec):
    if codec == compression.SNAPPY and not kafka.codec.has_snappy():
        pytest.skip("kafka-python needs python-snappy to read snappy")


@pytest.mark.parametrize("xerial", [False, True])
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batches(codec, xerial):
    _needs_snappy(codec)
    records = sample_records(25)
    data = r.build_batch(
        records,
        base_offset=9,
        compression=codec,
        xerial_snappy=xerial,
        producer_id=5,
        producer_epoch=1,
        base_sequence=0,
        is_transactional=True,
    )
    theirs = DefaultRecordBatch(data)
    assert theirs.validate_crc()
    assert theirs.compression_type == codec and theirs.is_transactional
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (5, 1, 0)
    got = list(theirs)
    assert [x.offset for x in got] == list(range(9, 34))
    assert [(x.key, x.value, x.headers, x.timestamp) for x in got] == as_tuples(records)


def test_kafka_python_reads_patched_log_append_time_and_control_batches():
    data = bytearray(r.build_batch(sample_records(3), compression=compression.GZIP))
    r.patch_batch(data, 40, partition_leader_epoch=2, log_append_time=T0 + 5)
    theirs = DefaultRecordBatch(bytes(data))
    assert theirs.validate_crc() and theirs.base_offset == 40 and theirs.leader_epoch == 2
    assert [(x.offset, x.timestamp, x.timestamp_type) for x in theirs] == [
        (40 + i, T0 + 5, 1) for i in range(3)
    ]
    marker = r.build_control_batch(
        r.CONTROL_ABORT, producer_id=1, producer_epoch=0, coordinator_epoch=2
    )
    (control,) = DefaultRecordBatch(marker)
    assert control.abort and DefaultRecordBatch(marker).is_control_batch


# --- captured batches from other producers (tests/data/records) ---------------------


def _expected_bytes(spec):
    """Sidecar forms: null, a UTF-8 string, {"hex": ...} or {"sha256": ..., "length": n}."""
    if spec is None or isinstance(spec, str):
        return None if spec is None else spec.encode("utf-8")
    if "hex" in spec:
        return bytes.fromhex(spec["hex"])
    return spec


def _matches(actual: bytes | None, spec) -> bool:
    expected = _expected_bytes(spec)
    if isinstance(expected, dict):
        return (
            actual is not None
            and len(actual) == expected["length"]
            and hashlib.sha256(actual).hexdigest() == expected["sha256"]
        )
    return actual == expected


def _check_records(got, sidecar, *, with_headers=True):
    expected = sidecar["records"]
    assert len(got) == sidecar["count"] == len(expected)
    for index, (record, spec) in enumerate(zip(got, expected, strict=True)):
        assert _matches(record.key, spec["key"]), (index, "key", record.key)
        assert _matches(record.value, spec["value"]), (index, "value")
        if with_headers:
            assert len(record.headers) == len(spec["headers"]), index
            for (name, value), (exp_name, exp_value) in zip(
                record.headers, spec["headers"], strict=True
            ):
                assert name == exp_name and _matches(value, exp_value), (index, name)
        if "offset" in spec:
            assert record.offset == spec["offset"], index
        if "timestamp" in spec:
            assert record.timestamp == spec["timestamp"], index


CAPTURES = sorted(DATA.glob("*.bin"))


def test_captures_are_present():
    names = {p.stem for p in CAPTURES}
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        assert f"kafka-python-{codec}" in names
    for p in CAPTURES:
        assert p.with_suffix(".json").exists(), f"{p.name} has no .json sidecar"


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_captured_batches(path):
    data = path.read_bytes()
    sidecar = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
    codec = compression.codec_id(sidecar["codec"])
    magic = sidecar["magic"]
    assert legacy.detect_magic(data) == magic
    if magic == 2:
        it = r.iter_batches(data)
        batches = list(it)
        assert it.position == len(data) and not it.truncated
        if "batches" in sidecar:
            assert len(batches) == sidecar["batches"]
        for batch in batches:
            assert batch.verify_crc(), f"bad CRC in batch at offset {batch.base_offset}"
            assert batch.compression == codec
            for field, value in sidecar.get("batch", {}).items():
                assert getattr(batch, field) == value, field
        got = list(itertools.chain.from_iterable(b.records() for b in batches))
        _check_records(got, sidecar)
        return
    entries = list(legacy.iter_entries(data))
    if "batches" in sidecar:
        assert len(entries) == sidecar["batches"]
    assert all(entry.compression == codec for entry in entries)
    _check_records(list(legacy.iter_messages(data)), sidecar, with_headers=False)
    # ...and the same records after conversion to one v2 batch, offsets kept.
    converted = r.RecordBatch(legacy.convert_to_v2(data, keep_offsets=True, compression=codec))
    assert converted.verify_crc() and converted.compression == codec
    _check_records(list(converted.records()), sidecar, with_headers=False)
