"""Malformed input: whatever bytes arrive, decoding raises ProtocolError (or its subclass
UnsupportedVersionError) with a message that says what is wrong, and nothing else escapes.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from moldau.protocol import generated as messages
from moldau.protocol import headers
from moldau.protocol.errors import ProtocolError, UnsupportedVersionError
from moldau.protocol.framing import FrameDecoder
from moldau.protocol.generated import (
    ApiVersionsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
    RequestHeader,
)
from moldau.protocol.primitives import write_uvarint

try:
    from . import strategies
except ImportError:
    import strategies

CLASSES = [getattr(messages, name) for name in messages.__all__]
PAIRS = [(c, v) for c in CLASSES for v in range(c.VALID_VERSIONS[0], c.VALID_VERSIONS[1] + 1)]


def produce_v3() -> bytes:
    """A ProduceRequest v3 with one topic and one partition, and where its parts are."""
    msg = ProduceRequest(transactional_id="tx", acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="topic", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=b"RECORDS")])])
    return msg.encode(3)


# layout of produce_v3(): 0-1 txn id length, 2-3 "tx", 4-5 acks, 6-9 timeout,
# 10-13 topic count, 14-15 name length, 16-20 "topic", 21-24 partition count,
# 25-28 index, 29-32 records length, 33-39 records
PRODUCE = produce_v3()


def patched(data: bytes, at: int, new: bytes) -> bytes:
    return data[:at] + new + data[at + len(new) :]


# --- truncation and trailing bytes --------------------------------------------------------


def test_every_prefix_of_every_default_message_is_rejected():
    """A strict prefix of a valid encoding can never decode: for every class and version."""
    checked = 0
    for cls, version in PAIRS:
        data = cls().encode(version)
        for end in range(len(data)):
            with pytest.raises(ProtocolError, match=f"{cls.NAME} v{version}"):
                cls.decode(data[:end], version)
            checked += 1
    assert checked > 5000


def test_prefixes_of_a_populated_request():
    for end in range(len(PRODUCE)):
        with pytest.raises(ProtocolError, match="ProduceRequest v3"):
            ProduceRequest.decode(PRODUCE[:end], 3)
    assert ProduceRequest.decode(PRODUCE, 3).topic_data[0].partition_data[0].records == b"RECORDS"


def test_trailing_bytes():
    with pytest.raises(ProtocolError, match="ProduceRequest v3: 2 unexpected bytes"):
        ProduceRequest.decode(PRODUCE + b"\x00\x00", 3)
    header = RequestHeader(request_api_key=0, request_api_version=3, correlation_id=1,
                           client_id="c")
    payload = header.encode(1) + PRODUCE
    assert headers.decode_request(payload)[1] == ProduceRequest.decode(PRODUCE, 3)
    # A whole request frame tolerates bytes after the body, as Kafka's parser does
    # (librdkafka 2.16 sends some); a lone message decode does not (above).
    assert headers.decode_request(payload + b"\x00")[1] == ProduceRequest.decode(PRODUCE, 3)


# --- lengths -------------------------------------------------------------------------------


def test_string_longer_than_the_buffer():
    with pytest.raises(ProtocolError, match="name of 200 bytes at byte 16 runs past the end"):
        ProduceRequest.decode(patched(PRODUCE, 14, b"\x00\xc8"), 3)


def test_records_longer_than_the_buffer():
    with pytest.raises(ProtocolError, match="records of 8 bytes at byte 33 runs past the end"):
        ProduceRequest.decode(patched(PRODUCE, 29, b"\x00\x00\x00\x08"), 3)


def test_string_shorter_than_declared_leaves_garbage():
    with pytest.raises(ProtocolError):
        ProduceRequest.decode(patched(PRODUCE, 14, b"\x00\x01"), 3)


def test_array_count_that_cannot_fit():
    # Bounded before allocating: each topic takes at least 6 bytes, and 29 are left.
    for count in (b"\x00\x00\x00\x05", b"\x7f\xff\xff\xff"):
        with pytest.raises(ProtocolError, match="cannot fit in the remaining bytes"):
            ProduceRequest.decode(patched(PRODUCE, 10, count), 3)
    # A count that fits the bound but not the data runs out of bytes.
    with pytest.raises(ProtocolError, match="ProduceRequest v3: malformed or truncated"):
        ProduceRequest.decode(patched(PRODUCE, 10, b"\x00\x00\x00\x02"), 3)


def test_negative_sizes():
    with pytest.raises(ProtocolError, match="topic_data is null at byte 14, but it is not null"):
        ProduceRequest.decode(patched(PRODUCE, 10, b"\xff\xff\xff\xff"), 3)
    with pytest.raises(ProtocolError, match="name is null at byte 16, but it is not nullable"):
        ProduceRequest.decode(patched(PRODUCE, 14, b"\xff\xff"), 3)
    with pytest.raises(ProtocolError, match="transactional_id has invalid length -2 at byte 2"):
        ProduceRequest.decode(patched(PRODUCE, 0, b"\xff\xfe"), 3)
    with pytest.raises(ProtocolError, match="records has invalid length -5"):
        ProduceRequest.decode(patched(PRODUCE, 29, b"\xff\xff\xff\xfb"), 3)
    with pytest.raises(ProtocolError, match="topics has invalid length -2"):
        MetadataRequest.decode(b"\xff\xff\xff\xfe", 1)
    # -1 is null where the field is nullable
    assert ProduceRequest.decode(b"\xff\xff" + PRODUCE[4:], 3).transactional_id is None
    assert MetadataRequest.decode(b"\xff\xff\xff\xff", 1).topics is None


def test_null_in_compact_non_nullable_fields():
    data = ApiVersionsRequest(client_software_name="a", client_software_version="b").encode(3)
    assert data == b"\x02a\x02b\x00"
    with pytest.raises(ProtocolError, match="client_software_name is null at byte 1"):
        ApiVersionsRequest.decode(b"\x00\x02b\x00", 3)
    # Produce v9: a null (0) compact topic array
    with pytest.raises(ProtocolError, match="topic_data is null at byte 8, but it is not nullable"):
        ProduceRequest.decode(b"\x00\x00\x01\x00\x00\x00\x00\x00\x00", 9)


def test_null_records_where_records_are_not_nullable():
    cls = messages.FetchSnapshotResponse
    partition = cls.PartitionSnapshot(unaligned_records=b"data")
    msg = cls(topics=[cls.TopicSnapshot(name="t", partitions=[partition])])
    data = msg.encode(0)
    assert cls.decode(data, 0) == msg
    at = data.index(b"\x05data")  # compact length 4 + 1
    null = data[:at] + b"\x00" + data[at + 5 :]
    with pytest.raises(ProtocolError, match="unaligned_records is null"):
        cls.decode(null, 0)


def test_compact_string_longer_than_kafka_allows():
    length = bytearray()
    write_uvarint(length, 0x8000 + 1)  # 32768 bytes: one more than Kafka's limit
    data = bytes(length) + b"a" * 0x8000 + b"\x02b\x00"
    with pytest.raises(ProtocolError, match="invalid length 32768"):
        ApiVersionsRequest.decode(data, 3)


# --- varints -------------------------------------------------------------------------------


def test_varint_longer_than_five_bytes():
    with pytest.raises(ProtocolError, match="longer than 5 bytes"):
        ApiVersionsRequest.decode(b"\x80\x80\x80\x80\x80\x01" + b"\x02b\x00", 3)


def test_varint_that_overflows_32_bits():
    with pytest.raises(ProtocolError, match="overflows 32 bits"):
        ApiVersionsRequest.decode(b"\xff\xff\xff\xff\x7f" + b"\x02b\x00", 3)


def test_truncated_varint():
    with pytest.raises(ProtocolError, match="truncated varint"):
        ApiVersionsRequest.decode(b"\x02a\x02b\x80", 3)  # tag count cut short


# --- tagged fields -------------------------------------------------------------------------


def test_tagged_field_size_disagrees_with_its_value():
    base = FetchRequest(cluster_id="abc").encode(12)
    assert base.endswith(b"\x01\x00\x04\x04abc")
    with pytest.raises(ProtocolError, match="tagged field 0 declares 1 bytes more"):
        FetchRequest.decode(base[:-6] + b"\x00\x05\x04abc\x00", 12)
    with pytest.raises(ProtocolError, match="tagged field 0 value runs past its declared size"):
        FetchRequest.decode(base[:-6] + b"\x00\x03\x04abc", 12)


def test_tagged_field_size_past_the_end():
    base = FetchRequest().encode(12)
    assert base.endswith(b"\x00")
    with pytest.raises(ProtocolError, match="tagged field of 100 bytes"):
        FetchRequest.decode(base[:-1] + b"\x01\x09\x64abc", 12)


# --- text ------------------------------------------------------------------------------------


def test_invalid_utf8():
    for bad in (b"\xff\xfe\xfd\xfc\xfb", b"top\xc3", b"\xed\xa0\x80ab"):  # the last: a surrogate
        with pytest.raises(ProtocolError, match=r"ProduceRequest v3: malformed.*utf-8"):
            ProduceRequest.decode(patched(PRODUCE, 16, bad), 3)
    with pytest.raises(ProtocolError, match="utf-8"):
        ApiVersionsRequest.decode(b"\x02\x80\x02b\x00", 3)


# --- requests, versions and frames -------------------------------------------------------------


def test_unknown_api_key_and_unsupported_versions():
    with pytest.raises(UnsupportedVersionError, match="unknown API key 200"):
        headers.decode_request(b"\x00\xc8\x00\x00\x00\x00\x00\x01\xff\xff")
    with pytest.raises(UnsupportedVersionError, match="unknown API key -1"):
        headers.decode_request(b"\xff\xff\x00\x00\x00\x00\x00\x01\xff\xff")
    with pytest.raises(UnsupportedVersionError, match="Produce v99 is not supported"):
        headers.decode_request(b"\x00\x00\x00\x63\x00\x00\x00\x01\xff\xff\x00")
    with pytest.raises(UnsupportedVersionError, match="has no version 12"):
        ProduceRequest.decode(b"", 12)
    with pytest.raises(UnsupportedVersionError, match="has no version -1"):
        ProduceRequest.decode_from(memoryview(b""), 0, -1)


def test_short_or_truncated_requests():
    with pytest.raises(ProtocolError, match="too short for a header"):
        headers.decode_request(b"\x00\x00\x00")
    with pytest.raises(ProtocolError, match="RequestHeader v1"):
        headers.decode_request(b"\x00\x00\x00\x03\x00\x00")
    with pytest.raises(ProtocolError, match="ProduceRequest v3"):
        headers.decode_request(b"\x00\x00\x00\x03\x00\x00\x00\x01\xff\xff" + PRODUCE[:-1])


def test_bad_frame_sizes():
    with pytest.raises(ProtocolError, match="frame size -1 is negative"):
        FrameDecoder().feed(b"\xff\xff\xff\xff")
    with pytest.raises(ProtocolError, match="frame size 2147483647 is larger than the limit"):
        FrameDecoder().feed(b"\x7f\xff\xff\xff")


# --- fuzzing ---------------------------------------------------------------------------------

FUZZED = [
    messages.ProduceRequest, messages.FetchRequest, messages.MetadataRequest,
    messages.ApiVersionsRequest, messages.OffsetCommitRequest, messages.JoinGroupRequest,
    messages.CreateTopicsRequest, messages.FetchResponse,
    messages.ConsumerGroupMemberMetadataValue,
]
FUZZ_PAIRS = [(c, v) for c in FUZZED for v in range(c.VALID_VERSIONS[0], c.VALID_VERSIONS[1] + 1)]
FUZZ = settings(
    max_examples=examples(150),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def mutated(draw, data: bytes) -> bytes:
    """data with a few bytes flipped, inserted or deleted."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "set"]))
        at = draw(st.integers(0, len(buf)))
        if op == "insert" or not buf:
            buf[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete":
            del buf[min(at, len(buf) - 1) : at + draw(st.integers(1, 4))]
        elif op == "flip":
            at = min(at, len(buf) - 1)
            buf[at] ^= 1 << draw(st.integers(0, 7))
        else:
            at = min(at, len(buf) - 1)
            buf[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
    return bytes(buf)


def decode_or_protocol_error(decode, data):
    try:
        decode(data)
    except ProtocolError as exc:
        assert str(exc)
        return False
    return True


@FUZZ
@given(st.data())
def test_fuzz_mutated_messages(data):
    cls, version = data.draw(st.sampled_from(FUZZ_PAIRS), label="pair")
    valid = data.draw(strategies.message(cls, version)).encode(version)
    bad = data.draw(mutated(valid), label="mutated")
    decode_or_protocol_error(lambda b: cls.decode(b, version), bad)


@FUZZ
@given(st.data())
def test_fuzz_mutated_requests(data):
    cls, version = data.draw(st.sampled_from([p for p in FUZZ_PAIRS if p[0].API_KEY is not None
                                               and p[0].NAME.endswith("Request")]))
    header = RequestHeader(request_api_key=cls.API_KEY, request_api_version=version,
                           correlation_id=data.draw(st.integers(0, 1000)),
                           client_id=data.draw(st.none() | st.text(max_size=5)))
    body = data.draw(strategies.message(cls, version))
    payload = headers.encode_request(header, body)[4:]
    bad = data.draw(mutated(payload), label="mutated")
    decode_or_protocol_error(headers.decode_request, bad)


@settings(max_examples=examples(100), deadline=None, database=None)
@given(st.sampled_from(FUZZ_PAIRS), st.binary(max_size=64))
def test_fuzz_random_bytes(pair, raw):
    cls, version = pair
    decode_or_protocol_error(lambda b: cls.decode(b, version), raw)
    decode_or_protocol_error(headers.decode_request, raw)
