"""Response encoding (moldau.server.responses) and the request decoding fast path: file
ranges spliced into a Fetch answer, the tagged struct defaults the generated encoders
test field by field, and decode_request's cached codecs behaving as the first decode."""

from __future__ import annotations

import os
import tempfile

import pytest

from moldau.protocol.errors import ProtocolError
from moldau.protocol.generated import FetchResponse, ProduceRequest, RequestHeader
from moldau.protocol.headers import decode_request, decode_response, encode_request
from moldau.protocol.records import build_batch
from moldau.server.responses import FileRecords, encode_response_parts

FETCH = 1
RECORDS = build_batch([(None, b"value %d" % i) for i in range(3)])


def _fetch_response(records: object, **partition: object) -> FetchResponse:
    return FetchResponse(session_id=0, responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[FetchResponse.PartitionData(
            partition_index=0, high_watermark=3, records=records, **partition)])])


def test_a_file_range_is_spliced_where_its_bytes_belong() -> None:
    with tempfile.TemporaryFile() as fh:
        fh.write(b"x" * 10 + RECORDS)
        fh.flush()
        ranged = FileRecords(fh.fileno(), 10, len(RECORDS))
        parts = encode_response_parts(7, FETCH, 13, _fetch_response(ranged))
        assert [type(p) for p in parts] == [bytes, FileRecords, bytes]
        joined = b"".join(os.pread(p.fd, p.size, p.position) if isinstance(p, FileRecords)
                          else bytes(p) for p in parts)
    in_memory = encode_response_parts(7, FETCH, 13, _fetch_response(RECORDS))
    assert in_memory == [joined]  # the same frame, size prefix included
    correlation, body = decode_response(joined[4:], FETCH, 13)
    assert correlation == 7 and bytes(body.responses[0].partitions[0].records) == RECORDS


def test_a_file_range_cannot_be_encoded_into_plain_bytes() -> None:
    with pytest.raises(ProtocolError, match="cannot encode FetchResponse v13"):
        _fetch_response(FileRecords(0, 0, 10)).encode(13)


def test_tagged_struct_defaults_are_compared_by_value() -> None:
    plain = _fetch_response(RECORDS).encode(13)
    # an instance equal to the default, not the generated one: still no tagged field
    same = _fetch_response(RECORDS, diverging_epoch=FetchResponse.EpochEndOffset()).encode(13)
    assert same == plain
    diverging = FetchResponse.EpochEndOffset(epoch=4, end_offset=17)
    tagged = _fetch_response(RECORDS, diverging_epoch=diverging).encode(13)
    assert len(tagged) > len(plain)
    decoded = FetchResponse.decode(tagged, 13).responses[0].partitions[0]
    assert decoded.diverging_epoch == diverging
    with pytest.raises(ProtocolError, match="diverging_epoch is null"):
        _fetch_response(RECORDS, diverging_epoch=None).encode(13)


def _produce_frame(correlation_id: int) -> bytes:
    body = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=RECORDS)])])
    header = RequestHeader(request_api_key=0, request_api_version=9,
                           correlation_id=correlation_id, client_id="c")
    return encode_request(header, body)[4:]


def test_a_request_decodes_alike_before_and_after_its_codecs_are_cached() -> None:
    first = decode_request(_produce_frame(1))
    again = decode_request(_produce_frame(1))
    assert first[0] == again[0] and first[1] == again[1]
    truncated = _produce_frame(2)[:-20]
    with pytest.raises(ProtocolError, match="ProduceRequest v9: ") as cached:
        decode_request(truncated)
    assert "malformed or truncated" in str(cached.value) or "runs past" in str(cached.value)
    with pytest.raises(ProtocolError, match="RequestHeader v2: "):
        decode_request(_produce_frame(3)[:10])  # a client id cut short


def test_small_records_go_inline_and_large_ones_as_file_ranges() -> None:
    from moldau.server.handlers.fetch import INLINE_RECORDS_MAX, _records

    with tempfile.TemporaryFile() as fh:
        fh.write(b"-" * 5 + RECORDS + bytes(INLINE_RECORDS_MAX + 1))
        fh.flush()
        small = _records(fh.fileno(), 5, len(RECORDS))
        assert small == RECORDS  # copied into the answer: it joins the pass's one write
        large = _records(fh.fileno(), 5, INLINE_RECORDS_MAX + 1)
        assert isinstance(large, FileRecords) and len(large) == INLINE_RECORDS_MAX + 1
        # a small range past the end of the file (a segment cut short) stays a file range
        end = 5 + len(RECORDS) + INLINE_RECORDS_MAX + 1
        assert isinstance(_records(fh.fileno(), end - 10, 100), FileRecords)
