"""Request and response headers, whole frames, and the frame decoder.

Kafka's rules: request header v2 and response header v1 for flexible API versions, v1 and
v0 otherwise; request header v0 only for ControlledShutdown v0; ApiVersions responses
always use response header v0; the client id of header v2 stays a non-compact string.
The frame bytes are checked against kafka-python's header and message classes.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from moldau.protocol import headers
from moldau.protocol.errors import ProtocolError, UnsupportedVersionError
from moldau.protocol.framing import FrameDecoder, frame
from moldau.protocol.generated import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    ControlledShutdownRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    MetadataRequest,
    MetadataResponse,
    RequestHeader,
    ResponseHeader,
)
from moldau.protocol.generated.api import APIS

kp_header = pytest.importorskip("kafka.protocol.api_header", reason="kafka-python is missing")
from kafka.protocol.consumer import HeartbeatRequest as KpHeartbeatRequest  # noqa: E402
from kafka.protocol.consumer import HeartbeatResponse as KpHeartbeatResponse  # noqa: E402
from kafka.protocol.metadata import ApiVersionsRequest as KpApiVersionsRequest  # noqa: E402
from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse  # noqa: E402
from kafka.protocol.metadata import MetadataRequest as KpMetadataRequest  # noqa: E402
from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse  # noqa: E402
from kafka.protocol.old.api_versions import ApiVersionsResponse_v0 as OldApiVersionsV0  # noqa: E402

FAST = settings(max_examples=examples(30), deadline=None, database=None)
correlation_ids = st.integers(-(2**31), 2**31 - 1)
client_ids = st.none() | st.text(max_size=20)


def request(header: RequestHeader, body) -> bytes:
    """The payload of a request frame (without the size prefix)."""
    data = headers.encode_request(header, body)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    return data[4:]


# --- header versions --------------------------------------------------------------------------


def test_header_versions_follow_kafkas_rules():
    assert headers.request_header_version(7, 0) == 0  # ControlledShutdown v0
    assert headers.request_header_version(7, 1) == 1
    assert headers.request_header_version(7, 3) == 2
    assert headers.request_header_version(0, 8) == 1  # Produce v8
    assert headers.request_header_version(0, 9) == 2  # Produce v9: flexible
    assert headers.request_header_version(18, 2) == 1  # ApiVersions v2
    assert headers.request_header_version(18, 3) == 2
    assert headers.request_header_version(18, 99) == 2  # a newer client's probe
    assert headers.response_header_version(0, 8) == 0
    assert headers.response_header_version(0, 9) == 1
    for version in range(0, 10):
        assert headers.response_header_version(18, version) == 0  # ApiVersions: always v0
    with pytest.raises(UnsupportedVersionError, match="unknown API key 999"):
        headers.request_header_version(999, 0)


def test_every_api_uses_header_v2_exactly_in_its_flexible_versions():
    for key, spec in APIS.items():
        for version in range(spec.min_version, spec.max_version + 1):
            flexible = spec.request.FLEXIBLE_VERSIONS
            is_flexible = flexible is not None and flexible[0] <= version <= flexible[1]
            expected = 2 if is_flexible else 1
            if key == 7 and version == 0:
                expected = 0
            assert headers.request_header_version(key, version) == expected, (spec.name, version)
            response = 0 if key == 18 else (1 if is_flexible else 0)
            assert headers.response_header_version(key, version) == response, (spec.name, version)


# --- request headers on the wire -----------------------------------------------------------


def test_request_header_v0_has_no_client_id():
    header = RequestHeader(request_api_key=7, request_api_version=0, correlation_id=9,
                           client_id="ignored")
    body = ControlledShutdownRequest(broker_id=3)
    payload = request(header, body)
    assert payload == b"\x00\x07\x00\x00\x00\x00\x00\x09" + b"\x00\x00\x00\x03"
    decoded, decoded_body = headers.decode_request(payload)
    assert (decoded.request_api_key, decoded.request_api_version) == (7, 0)
    assert decoded.correlation_id == 9
    assert decoded.client_id == ""  # header v0 does not carry it: the default
    assert decoded_body == body


@FAST
@given(correlation_ids, client_ids)
def test_request_header_v1_and_v2_match_kafka_python(correlation_id, client_id):
    for version, flexible in ((1, False), (2, True)):
        ours = RequestHeader(request_api_key=3, request_api_version=12,
                             correlation_id=correlation_id, client_id=client_id).encode(version)
        theirs = kp_header.RequestHeader(request_api_key=3, request_api_version=12,
                                         correlation_id=correlation_id, client_id=client_id)
        assert ours == bytes(theirs.encode(flexible=flexible))
        back = RequestHeader.decode(ours, version)
        assert (back.correlation_id, back.client_id) == (correlation_id, client_id)


def test_client_id_stays_a_non_compact_string_in_header_v2():
    header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1,
                           client_id="ŝ")
    assert header.encode(2) == b"\x00\x12\x00\x03\x00\x00\x00\x01" + b"\x00\x02\xc5\x9d" + b"\x00"
    assert header.encode(1) == b"\x00\x12\x00\x03\x00\x00\x00\x01" + b"\x00\x02\xc5\x9d"
    null = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1,
                         client_id=None)
    assert null.encode(2).endswith(b"\xff\xff\x00")
    # A flexible header keeps tagged fields it does not know.
    data = header.encode(2)[:-1] + b"\x01\x05\x02hi"
    decoded = RequestHeader.decode(data, 2)
    assert decoded._unknown_tags == [(5, b"hi")]
    assert decoded.encode(2) == data


def kafka_python_requests():
    """(ours, theirs) request bodies with the same content, over header v1 and v2."""
    for version in range(0, 4):
        names = {"client_software_name": "moldau", "client_software_version": "1"}
        names = names if version >= 3 else {}  # added in v3
        yield ApiVersionsRequest(**names), KpApiVersionsRequest[version](**names), version
    for version in range(0, 13):
        topics = [] if version == 0 else None
        kp_kwargs = {"topics": topics}
        if version >= 4:
            kp_kwargs["allow_auto_topic_creation"] = True
        if version >= 8:
            kp_kwargs["include_topic_authorized_operations"] = False
        if 8 <= version <= 10:
            kp_kwargs["include_cluster_authorized_operations"] = False
        yield MetadataRequest(topics=topics), KpMetadataRequest[version](**kp_kwargs), version
    for version in range(0, 5):
        kp_kwargs = {"group_id": "g", "generation_id": 4, "member_id": "m"}
        if version >= 3:
            kp_kwargs["group_instance_id"] = None
        yield (HeartbeatRequest(group_id="g", generation_id=4, member_id="m",
                                group_instance_id=None),
               KpHeartbeatRequest[version](**kp_kwargs), version)


KP_REQUESTS = list(kafka_python_requests())


@pytest.mark.parametrize(("ours", "theirs", "version"), KP_REQUESTS,
                         ids=[f"{o.NAME}-v{v}" for o, _, v in KP_REQUESTS])
def test_request_frames_match_kafka_python(ours, theirs, version):
    theirs.with_header(correlation_id=77, client_id="cli€nt")
    expected = bytes(theirs.encode(header=True, framed=True))
    header = RequestHeader(request_api_key=ours.API_KEY, request_api_version=version,
                           correlation_id=77, client_id="cli€nt")
    assert headers.encode_request(header, ours) == expected
    decoded_header, body = headers.decode_request(expected[4:])
    assert decoded_header == header
    assert body == ours
    their_decoded = type(theirs).decode(expected[4:], version=version, header=True)
    assert their_decoded.header.correlation_id == 77
    assert their_decoded.header.client_id == "cli€nt"


# --- response headers ----------------------------------------------------------------------


def kafka_python_responses():
    for version in range(0, 4):
        keys = [ApiVersionsResponse.ApiVersion(api_key=0, min_version=0, max_version=11)]
        kp_keys = [KpApiVersionsResponse.ApiVersion(api_key=0, min_version=0, max_version=11)]
        kp_kwargs = {"error_code": 0, "api_keys": kp_keys}
        if version >= 1:
            kp_kwargs["throttle_time_ms"] = 0
        yield (ApiVersionsResponse(api_keys=keys), KpApiVersionsResponse[version](**kp_kwargs),
               version)
    for version in range(0, 13):
        kp_kwargs = {"brokers": [], "topics": []}
        if version >= 1:
            kp_kwargs["controller_id"] = -1
        if version >= 2:
            kp_kwargs["cluster_id"] = None
        if version >= 3:
            kp_kwargs["throttle_time_ms"] = 0
        if 8 <= version <= 10:
            kp_kwargs["authorized_operations"] = None  # INT32_MIN: "not requested"
        yield MetadataResponse(), KpMetadataResponse[version](**kp_kwargs), version
    for version in range(0, 5):
        kp_kwargs = {"error_code": 27}
        if version >= 1:
            kp_kwargs["throttle_time_ms"] = 0
        yield HeartbeatResponse(error_code=27), KpHeartbeatResponse[version](**kp_kwargs), version


KP_RESPONSES = list(kafka_python_responses())


@pytest.mark.parametrize(("ours", "theirs", "version"), KP_RESPONSES,
                         ids=[f"{o.NAME}-v{v}" for o, _, v in KP_RESPONSES])
def test_response_frames_match_kafka_python(ours, theirs, version):
    theirs.with_header(correlation_id=-5)
    expected = bytes(theirs.encode(header=True, framed=True))
    assert headers.encode_response(-5, ours.API_KEY, version, ours) == expected
    correlation_id, body = headers.decode_response(expected[4:], ours.API_KEY, version)
    assert correlation_id == -5
    assert body == ours


def test_response_header_layouts():
    assert ResponseHeader(correlation_id=258).encode(0) == b"\x00\x00\x01\x02"
    assert ResponseHeader(correlation_id=258).encode(1) == b"\x00\x00\x01\x02\x00"
    # ApiVersions v3 is flexible, but its response header is still v0: no tag byte.
    data = headers.encode_response(1, 18, 3, ApiVersionsResponse())
    assert data[4:8] == b"\x00\x00\x00\x01"
    assert data[8:] == ApiVersionsResponse().encode(3)
    # Produce v9 is flexible: response header v1 ends in an empty tag section.
    from moldau.protocol.generated import ProduceResponse

    data = headers.encode_response(1, 0, 9, ProduceResponse())
    assert data[4:9] == b"\x00\x00\x00\x01\x00"


# --- versions the broker does not know -------------------------------------------------------


def test_unknown_api_versions_version_keeps_the_header():
    """A newer client probes with ApiVersions v5: header v2 decodes (its client id is
    non-compact), the error says why and carries the header so the broker can answer."""
    header = RequestHeader(request_api_key=18, request_api_version=5, correlation_id=123,
                           client_id="newer-client")
    payload = header.encode(2) + b"\x07moldau\x021\x00"  # a v5 body nobody can parse
    with pytest.raises(UnsupportedVersionError, match="ApiVersions v5 is not supported") as info:
        headers.decode_request(payload)
    assert info.value.header.correlation_id == 123
    assert info.value.header.client_id == "newer-client"
    assert info.value.header.request_api_version == 5


def test_unsupported_version_of_other_apis():
    header = RequestHeader(request_api_key=0, request_api_version=12, correlation_id=1,
                           client_id="c")
    with pytest.raises(UnsupportedVersionError, match="Produce v12") as info:
        headers.decode_request(header.encode(2) + b"\x00")
    assert info.value.header.request_api_key == 0
    with pytest.raises(UnsupportedVersionError, match="Produce v-1"):
        headers.decode_request(b"\x00\x00\xff\xff\x00\x00\x00\x01\x00\x00")


def test_unknown_api_key():
    with pytest.raises(UnsupportedVersionError, match="unknown API key 1000"):
        headers.decode_request(b"\x03\xe8\x00\x00\x00\x00\x00\x01\x00\x00")


def test_unsupported_api_versions_response_is_v0_with_error_35():
    versions = {spec.key: (spec.min_version, spec.max_version) for spec in APIS.values()}
    data = headers.unsupported_api_versions_response(42, versions)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    payload = data[4:]
    # header v0, error 35, an int32-counted array of (int16 key, min, max), nothing else
    assert payload[:4] == b"\x00\x00\x00\x2a"
    assert payload[4:6] == b"\x00\x23"
    assert struct.unpack(">i", payload[6:10])[0] == len(versions)
    assert len(payload) == 10 + 6 * len(versions)
    rows = [struct.unpack(">hhh", payload[i : i + 6]) for i in range(10, len(payload), 6)]
    assert rows == sorted((k, lo, hi) for k, (lo, hi) in versions.items())
    # kafka-python reads it as v0, and also when it asked for a newer version
    v0 = KpApiVersionsResponse[0].decode(payload, header=True)
    assert (v0.header.correlation_id, v0.error_code) == (42, 35)
    assert [(k.api_key, k.min_version, k.max_version) for k in v0.api_keys] == rows
    theirs = KpApiVersionsResponse.decode(payload, version=3, header=True)
    assert theirs.header.correlation_id == 42
    assert theirs.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in theirs.api_keys] == rows
    old = OldApiVersionsV0.decode(payload[4:])
    assert old.error_code == 35
    assert [tuple(k) for k in old.api_keys] == rows


# --- the frame decoder -----------------------------------------------------------------------


@settings(max_examples=examples(100), deadline=None, database=None)
@given(st.lists(st.binary(max_size=40), max_size=8), st.data())
def test_frame_decoder_with_any_chunking(payloads, data):
    stream = b"".join(frame(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    decoder = FrameDecoder(max_frame_size=64)
    received = []
    for chunk in chunks:
        received += decoder.feed(memoryview(chunk) if len(chunk) % 2 else chunk)
    assert received == payloads
    assert decoder.pending == 0


def test_frame_decoder_keeps_a_partial_frame():
    decoder = FrameDecoder()
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.feed(b"\x00\x03ab") == []
    assert decoder.pending == 6
    assert decoder.feed(b"c\x00\x00\x00\x00") == [b"abc", b""]
    assert decoder.pending == 0


def test_frame_decoder_rejects_bad_sizes():
    with pytest.raises(ProtocolError, match="negative"):
        FrameDecoder().feed(b"\xff\xff\xff\xfe")
    with pytest.raises(ProtocolError, match="larger than the limit of 100 bytes"):
        FrameDecoder(max_frame_size=100).feed(b"\x00\x00\x00\x65")
    # the size is refused as soon as its four bytes arrive, before the payload
    decoder = FrameDecoder(max_frame_size=100)
    assert decoder.feed(frame(b"x" * 100)) == [b"x" * 100]
    with pytest.raises(ProtocolError):
        decoder.feed(b"\x7f\xff\xff\xff")


def test_frames_are_writable_so_batches_can_be_patched_in_place():
    from moldau.protocol.generated import ProduceRequest, RequestHeader
    from moldau.protocol.headers import decode_request, encode_request
    from moldau.protocol.records import build_batch, iter_batches, patch_batch

    body = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=build_batch([(b"k", b"v")]))])])
    header = RequestHeader(request_api_key=0, request_api_version=9, correlation_id=1,
                           client_id="c")
    (payload,) = FrameDecoder().feed(encode_request(header, body))
    _, request = decode_request(payload)
    records = request.topic_data[0].partition_data[0].records
    assert not records.readonly
    patch_batch(records, 42)
    assert next(iter(iter_batches(records))).base_offset == 42
    start = bytes(payload).find(bytes(records))  # the view patched the frame itself
    assert start > 0 and int.from_bytes(payload[start : start + 8], "big") == 42
