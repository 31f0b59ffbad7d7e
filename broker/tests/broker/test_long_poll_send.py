"""A long-polled fetch whose answer is larger than the client's socket takes at once: the
broker sends what fits with sendfile and the rest as the client drains the socket, and
the connection keeps its answers in order for the requests pipelined behind it."""

from __future__ import annotations

import os

from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.headers import decode_response
from moldau.protocol.records import build_batch, iter_batches

from .raw import API_VERSIONS, FETCH, connect, create_topic, produce, topic_name

BATCHES = 24
VALUE_BYTES = 1_000_000  # one record per batch, under message.max.bytes
WANTED = 20 * VALUE_BYTES  # the long poll's min_bytes: it ends only after most batches


def _long_poll(topic: str) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=30_000, min_bytes=WANTED, max_bytes=64 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
        rack_id="", topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                        partition_max_bytes=64 << 20)])])


def test_long_polled_fetch_larger_than_the_socket_takes(broker) -> None:
    topic = topic_name("long-poll-send")
    values = [os.urandom(VALUE_BYTES) for _ in range(BATCHES)]
    with connect(broker, timeout=60) as consumer, connect(broker) as producer:
        create_topic(producer, topic)
        fetch = consumer.send(FETCH, 12, _long_poll(topic))
        # pipelined behind the long poll: answered only after it, on the same connection
        versions = consumer.send(API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="moldau-tests", client_software_version="1.0"))
        for value in values:  # the consumer reads nothing meanwhile: its socket fills up
            answer = produce(producer, topic, build_batch([(None, value)]), acks=1)
            assert answer.error_code == 0, answer

        got, response = decode_response(consumer.read_frame(), FETCH, 12)
        assert got == fetch and response.error_code == 0
        partition = response.responses[0].partitions[0]
        assert partition.error_code == 0
        batches = list(iter_batches(partition.records))
        assert len(batches) * VALUE_BYTES >= WANTED
        assert [b.base_offset for b in batches] == list(range(len(batches)))
        for batch, value in zip(batches, values, strict=False):
            assert batch.verify_crc()
            assert next(iter(batch.records())).value == value

        got, answer = decode_response(consumer.read_frame(), API_VERSIONS, 3)
        assert got == versions and answer.error_code == 0
