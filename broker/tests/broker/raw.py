"""Helpers for the raw-protocol component tests: one request, one answer, through the
blocking client and the generated messages (no third-party client in the way)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import Any

from moldau.client.blocking import BlockingConnection
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.create_topics_request import CreateTopicsRequest
from moldau.protocol.generated.list_offsets_request import ListOffsetsRequest
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.protocol.generated.produce_request import ProduceRequest
from moldau.protocol.records import build_batch

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
API_VERSIONS, CREATE_TOPICS, INIT_PRODUCER_ID = 18, 19, 22
LATEST = -1


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def connect(broker: Any, timeout: float = 10.0) -> BlockingConnection:
    return BlockingConnection("127.0.0.1", broker.port, timeout=timeout)


def wait_until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    """Poll check() until it returns something true or the timeout; return its result."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def records(n: int, size: int = 10, prefix: bytes = b"v") -> bytes:
    """One v2 batch of n records with values of `size` bytes."""
    return build_batch([(None, (prefix * size)[:size]) for _ in range(n)])


def metadata(conn: BlockingConnection, topics: list[str] | None, version: int = 12,
             allow_auto_topic_creation: bool = True) -> Any:
    request = MetadataRequest(
        topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                            for t in topics])
    if version >= 4:
        request.allow_auto_topic_creation = allow_auto_topic_creation
    return conn.request(METADATA, version, request)


def round_trip(conn: BlockingConnection) -> None:
    """ApiVersions and Metadata answered on conn: the connection still works."""
    versions = conn.request(API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="moldau-tests", client_software_version="1.0"))
    assert versions.error_code == 0 and versions.api_keys
    answer = metadata(conn, [])
    assert answer.brokers, answer


def create_topic(conn: BlockingConnection, name: str, partitions: int = 1,
                 configs: dict[str, str] | None = None) -> None:
    """CreateTopics, then wait until Metadata shows a leader for every partition."""
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])
    answer = conn.request(CREATE_TOPICS, 4, CreateTopicsRequest(
        topics=[topic], timeout_ms=10_000, validate_only=False))
    assert answer.topics[0].error_code == 0, answer
    wait_leaders(conn, name)


def wait_leaders(conn: BlockingConnection, name: str, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        answer = metadata(conn, [name])
        topic = answer.topics[0]
        if topic.error_code == 0 and topic.partitions and all(
                p.error_code == 0 and p.leader_id >= 0 for p in topic.partitions):
            return topic
        assert time.monotonic() < deadline, f"no leaders for {name}: {answer}"
        time.sleep(0.05)


def produce_request(topic: str, data: bytes | None, *, acks: int = -1, partition: int = 0,
                    timeout_ms: int = 10_000) -> ProduceRequest:
    return ProduceRequest(
        transactional_id=None, acks=acks, timeout_ms=timeout_ms,
        topic_data=[ProduceRequest.TopicProduceData(
            name=topic, partition_data=[ProduceRequest.PartitionProduceData(
                index=partition, records=data)])])


def produce(conn: BlockingConnection, topic: str, data: bytes | None, *, version: int = 9,
            acks: int = -1, partition: int = 0) -> Any:
    """Produce one partition's records; the partition's response."""
    answer = conn.request(PRODUCE, version, produce_request(topic, data, acks=acks,
                                                            partition=partition))
    return answer.responses[0].partition_responses[0]


def latest_offset(conn: BlockingConnection, topic: str, partition: int = 0) -> int:
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=partition,
                                                    timestamp=LATEST)])])
    answer = conn.request(LIST_OFFSETS, 7, request)
    p = answer.topics[0].partitions[0]
    assert p.error_code == 0, answer
    return p.offset


def server_log(broker: Any) -> str:
    with open(os.path.join(broker.log_dir, "server.log"), errors="replace") as fh:
        return fh.read()


def wait_log(broker: Any, text: str, timeout: float = 5.0, start: int = 0) -> str:
    """Wait until server.log (from character `start`) holds text; return that part."""
    deadline = time.monotonic() + timeout
    while True:
        part = server_log(broker)[start:]
        if text in part:
            return part
        assert time.monotonic() < deadline, f"{text!r} not in server.log:\n{part[-3000:]}"
        time.sleep(0.05)
