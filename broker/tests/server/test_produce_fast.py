"""The fast Produce path's parser and encoder against the generated codec: it must read
exactly the requests it takes and write byte for byte what the general path writes."""

from __future__ import annotations

from typing import Any

import pytest

from moldau.protocol.generated import ProduceRequest, ProduceResponse, RequestHeader
from moldau.protocol.headers import encode_request
from moldau.protocol.records import build_batch
from moldau.server.handlers.produce_fast import SingleProduce, encode_success, parse
from moldau.server.handlers.produce_fast_many import ManyProduce, encode_successes
from moldau.server.responses import encode_response_parts

Topic = ProduceRequest.TopicProduceData
Partition = ProduceRequest.PartitionProduceData
BATCH = build_batch([(b"key", b"value")])


def frame(version: int = 10, *, client_id: str | None = "rdkafka", acks: int = 1,
          transactional_id: str | None = None, topics: list[Any] | None = None,
          header_tags: dict[int, bytes] | None = None) -> bytearray:
    """A ProduceRequest as the socket server hands it over: without its size prefix."""
    header = RequestHeader(request_api_key=0, request_api_version=version,
                           correlation_id=42, client_id=client_id)
    if header_tags:
        header._unknown_tags = list(header_tags.items())
    body = ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=1500,
                          topic_data=topics if topics is not None else [
                              Topic(name="orders", partition_data=[
                                  Partition(index=3, records=BATCH)])])
    return bytearray(encode_request(header, body)[4:])


@pytest.mark.parametrize("version", [9, 10, 11])
def test_it_reads_the_one_partition_request_of_each_flexible_version(version: int) -> None:
    data = frame(version)
    request = parse(data)
    assert isinstance(request, SingleProduce)
    assert (request.version, request.correlation_id, request.acks, request.topic,
            request.partition) == (version, 42, 1, "orders", 3)
    assert bytes(request.records) == BATCH
    assert request.size == len(data)
    assert str(data[10:10 + request.client_id_length], "utf-8") == "rdkafka"


def test_it_reads_every_partition_of_one_topic_in_order() -> None:
    """Kafka's Java producer sends a broker the batches of all its partitions there in
    one request."""
    other = build_batch([(b"k", b"v" * 300)] * 3)
    request = parse(frame(11, topics=[Topic(name="orders", partition_data=[
        Partition(index=4, records=BATCH), Partition(index=1, records=other),
        Partition(index=0, records=b"")])]))
    assert isinstance(request, ManyProduce)
    assert (request.version, request.correlation_id, request.acks, request.topic) == (
        11, 42, 1, "orders")
    assert [(index, bytes(records)) for index, records in request.partitions] == [
        (4, BATCH), (1, other), (0, b"")]


def test_acks_and_timeout_are_read_for_the_handler_to_judge() -> None:
    request = parse(frame(acks=-1))
    assert request is not None and (request.acks, request.timeout_ms) == (-1, 1500)


def tagged(item: Any) -> Any:
    item._unknown_tags = [(7, b"x")]
    return item


@pytest.mark.parametrize("case", [
    "version 8", "transactional", "a partition twice", "two topics", "no topics",
    "no partitions", "null records", "null records second", "header tags",
    "partition tags", "second partition tags", "topic tags", "long name",
])
def test_every_other_shape_is_left_to_the_general_path(case: str) -> None:
    one = Partition(index=0, records=BATCH)
    data = {
        "version 8": lambda: frame(8),
        "transactional": lambda: frame(transactional_id="tx-1"),
        "a partition twice": lambda: frame(topics=[Topic(name="t", partition_data=[
            one, Partition(index=1, records=BATCH), Partition(index=0, records=BATCH)])]),
        "two topics": lambda: frame(topics=[Topic(name="a", partition_data=[one]),
                                            Topic(name="b", partition_data=[one])]),
        "no topics": lambda: frame(topics=[]),
        "no partitions": lambda: frame(topics=[Topic(name="t", partition_data=[])]),
        "null records": lambda: frame(topics=[Topic(name="t", partition_data=[
            Partition(index=0, records=None)])]),
        "null records second": lambda: frame(topics=[Topic(name="t", partition_data=[
            one, Partition(index=1, records=None)])]),
        "header tags": lambda: frame(header_tags={3: b"y"}),
        "partition tags": lambda: frame(topics=[Topic(name="t", partition_data=[
            tagged(Partition(index=0, records=BATCH))])]),
        "second partition tags": lambda: frame(topics=[Topic(name="t", partition_data=[
            one, tagged(Partition(index=1, records=BATCH))])]),
        "topic tags": lambda: frame(topics=[tagged(Topic(name="t", partition_data=[one]))]),
        "long name": lambda: frame(topics=[Topic(name="n" * 200, partition_data=[one])]),
    }[case]()
    assert parse(data) is None


@pytest.mark.parametrize("partitions", [1, 3])
def test_truncated_or_padded_requests_are_refused_without_an_exception(
        partitions: int) -> None:
    data = frame(topics=[Topic(name="t", partition_data=[
        Partition(index=i, records=BATCH) for i in range(partitions)])])
    assert parse(data) is not None
    for end in range(len(data)):
        assert parse(data[:end]) is None
    assert parse(data + b"\x00") is None


def test_a_produce_request_without_a_client_id_is_read() -> None:
    request = parse(frame(client_id=None))
    assert request is not None and request.client_id_length == -1


def generated(version: int, response: Any) -> bytes:
    return b"".join(bytes(part) for part in encode_response_parts(  # type: ignore[arg-type]
        99, 0, version, response))


@pytest.mark.parametrize("version", [9, 10, 11])
@pytest.mark.parametrize("name", ["orders", "x" * 200])
def test_the_success_response_is_what_the_generated_encoder_writes(version: int,
                                                                  name: str) -> None:
    response = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name=name, partition_responses=[ProduceResponse.PartitionProduceResponse(
            index=5, error_code=0, base_offset=123_456_789_012, log_append_time_ms=-1,
            log_start_offset=17)])])
    assert bytes(encode_success(99, name, 5, 123_456_789_012, -1, 17)) == generated(
        version, response)


@pytest.mark.parametrize("version", [9, 10, 11])
@pytest.mark.parametrize("name", ["orders", "x" * 200])
@pytest.mark.parametrize("partitions", [2, 130])  # 130: a two-byte array length
@pytest.mark.parametrize("throttle_ms", [0, 250])
def test_the_success_response_of_several_partitions_is_the_generated_encoders(
        version: int, name: str, partitions: int, throttle_ms: int) -> None:
    appended = [(5 + i, 123_456_789_012 + i, -1 if i % 2 else 1_700_000_000_000 + i, 17 + i)
                for i in range(partitions)]
    response = ProduceResponse(throttle_time_ms=throttle_ms, responses=[
        ProduceResponse.TopicProduceResponse(name=name, partition_responses=[
            ProduceResponse.PartitionProduceResponse(
                index=index, error_code=0, base_offset=base, log_append_time_ms=append_time,
                log_start_offset=start)
            for index, base, append_time, start in appended])])
    assert bytes(encode_successes(99, name, appended, throttle_ms)) == generated(
        version, response)
