"""A client that pipelines acks=all produce requests (librdkafka's default: up to a million
in flight per connection) must not stall replication. The broker read the requests
queued behind the first one into memory, they filled queued.max.requests, and the
full bound then stopped the leader reading its followers' fetches: the first produce
waited for replication that waited for it, until replica.lag.time.max.ms dropped the
followers from the ISR (a 30 s stall with Kafka's defaults, found by the replicated
peers benchmark). The bound now parks only the connections that hold queued requests,
never one whose requests are all handled, as a follower's are."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.client.blocking import BlockingConnection
from moldau.protocol.generated.produce_request import ProduceRequest
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.headers import decode_response, encode_request
from moldau.protocol.records import build_batch

from .conftest import Cluster, make_cluster, running

PRODUCE = 0
QUEUED_MAX_REQUESTS = 20
PIPELINED = 200  # ten times the bound, all sent before any answer is read
REPLICA_LAG_S = 20  # the stall ended only when the followers left the ISR


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[Cluster]:
    cluster = make_cluster(tmp_path_factory, zk_ensemble,
                           **{"queued.max.requests": str(QUEUED_MAX_REQUESTS),
                              "replica.lag.time.max.ms": str(REPLICA_LAG_S * 1000)})
    with running(cluster) as started:
        yield started


def _produce(topic: str, value: bytes, correlation: int) -> bytes:
    body = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=30_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0,
                                                records=build_batch([(None, value)]))])])
    header = RequestHeader(request_api_key=PRODUCE, request_api_version=9,
                           correlation_id=correlation, client_id="pipelining")
    return encode_request(header, body)


def test_pipelined_acks_all_produces_do_not_stall_replication(bounded: Cluster) -> None:
    topic = bounded.create_topic(f"pipelined-{uuid.uuid4().hex[:6]}", partitions=1,
                                 **{"min.insync.replicas": "2"})
    leader = bounded.partitions(topic)[0].leader
    conn = BlockingConnection("127.0.0.1", bounded.brokers[leader].port, timeout=60)
    try:
        values = [f"record-{i}".encode() * 50 for i in range(PIPELINED)]
        started = time.monotonic()
        conn.send_raw(b"".join(_produce(topic, v, i + 1) for i, v in enumerate(values)))
        offsets = []
        for i in range(PIPELINED):
            got, answer = decode_response(conn.read_frame(), PRODUCE, 9)
            partition = answer.responses[0].partition_responses[0]
            assert (got, partition.error_code) == (i + 1, 0), partition
            offsets.append(partition.base_offset)
        elapsed = time.monotonic() - started
    finally:
        conn.close()
    assert offsets == sorted(offsets) and len(set(offsets)) == PIPELINED
    # a stall lasts until the followers leave the ISR; replication itself takes
    # milliseconds per request
    assert elapsed < REPLICA_LAG_S / 2, f"{PIPELINED} produces took {elapsed:.1f} s"
    isr = bounded.partitions(topic)[0].isrs
    assert sorted(isr) == sorted(bounded.brokers), f"the followers left the ISR: {isr}"
