"""A request whose handler fails gets an answer, not a closed connection (issue 41, item
13; Kafka's handleError): error_responses.py builds the error response of every API and
version, mirroring what the request named, and the dispatcher answers with it, logs the
failure once and serves the next request."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

from moldau.errors import NotEnoughReplicasError
from moldau.protocol._runtime import Message
from moldau.protocol.generated import (
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    ElectLeadersRequest,
    FetchRequest,
    FindCoordinatorRequest,
    ListOffsetsRequest,
    MetadataRequest,
    OffsetFetchRequest,
    ProduceRequest,
    RequestHeader,
)
from moldau.protocol.generated.api import APIS
from moldau.protocol.headers import decode_response, encode_request
from moldau.server.error_responses import error_response
from moldau.server.network import Session
from moldau.server.requests import RequestDispatcher

UNKNOWN = -1


def versions() -> list[tuple[int, int]]:
    return [(key, version) for key, spec in sorted(APIS.items())
            for version in range(spec.min_version, spec.max_version + 1)]


@pytest.mark.parametrize(("key", "version"), versions(),
                         ids=[f"{APIS[k].name}-v{v}" for k, v in versions()])
def test_every_api_and_version_has_an_error_response_that_encodes(key: int,
                                                                  version: int) -> None:
    response = error_response(key, version, APIS[key].request(), UNKNOWN)
    response.encode(version)


def produce() -> Any:
    P = ProduceRequest
    return P(acks=-1, timeout_ms=1000, topic_data=[
        P.TopicProduceData(name=t, partition_data=[P.PartitionProduceData(index=i)
                                                   for i in (0, 2)])
        for t in ("a", "b")])


def test_produce_answers_each_partition() -> None:
    response = error_response(0, 9, produce(), UNKNOWN)
    assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in response.responses] == [
        ("a", [(0, UNKNOWN, -1), (2, UNKNOWN, -1)]), ("b", [(0, UNKNOWN, -1), (2, UNKNOWN, -1)])]


def test_fetch_per_partition_before_v7_and_at_the_top_after() -> None:
    F = FetchRequest
    request = F(topics=[F.FetchTopic(topic="t", topic_id=uuid.uuid4(), partitions=[
        F.FetchPartition(partition=p) for p in (1, 3)])])
    old = error_response(1, 4, request, UNKNOWN)
    assert [(t.topic, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in old.responses] == [("t", [(1, UNKNOWN), (3, UNKNOWN)])]
    new = error_response(1, 13, request, UNKNOWN)
    assert (new.error_code, new.responses) == (UNKNOWN, [])


def test_metadata_answers_the_topics_not_the_brokers() -> None:
    M = MetadataRequest
    request = M(topics=[M.MetadataRequestTopic(name=n) for n in ("x", "y")])
    response = error_response(3, 9, request, UNKNOWN)
    assert [(t.name, t.error_code) for t in response.topics] == [("x", UNKNOWN), ("y", UNKNOWN)]
    assert response.brokers == []
    assert error_response(3, 9, M(topics=None), UNKNOWN).topics == []


def test_keys_named_otherwise_and_plain_value_arrays() -> None:
    L = ListOffsetsRequest
    listed = error_response(2, 7, L(replica_id=-1, topics=[L.ListOffsetsTopic(
        name="t", partitions=[L.ListOffsetsPartition(partition_index=4, timestamp=123)])]),
        UNKNOWN)
    part = listed.topics[0].partitions[0]
    assert (part.partition_index, part.error_code, part.timestamp, part.offset) == (
        4, UNKNOWN, -1, -1)
    groups = error_response(15, 5, DescribeGroupsRequest(groups=["g1", "g2"]), UNKNOWN)
    assert [(g.group_id, g.error_code) for g in groups.groups] == [("g1", UNKNOWN),
                                                                   ("g2", UNKNOWN)]
    found = error_response(10, 4, FindCoordinatorRequest(coordinator_keys=["g"]), UNKNOWN)
    assert [(c.key, c.error_code) for c in found.coordinators] == [("g", UNKNOWN)]
    assert error_response(10, 3, FindCoordinatorRequest(key="g"), UNKNOWN).error_code == UNKNOWN
    deleted = error_response(20, 5, DeleteTopicsRequest(topic_names=["t"]), UNKNOWN)
    assert [(r.name, r.error_code) for r in deleted.responses] == [("t", UNKNOWN)]
    E = ElectLeadersRequest
    elected = error_response(43, 0, E(topic_partitions=[
        E.TopicPartitions(topic="t", partitions=[0, 1])]), UNKNOWN)
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in elected.replica_election_results] == [("t", [(0, UNKNOWN), (1, UNKNOWN)])]
    D = DescribeConfigsRequest
    described = error_response(32, 4, D(resources=[D.DescribeConfigsResource(
        resource_type=2, resource_name="t")]), UNKNOWN)
    assert [(r.resource_type, r.resource_name, r.error_code) for r in described.results] == [
        (2, "t", UNKNOWN)]
    OF = OffsetFetchRequest
    fetched = error_response(9, 8, OF(groups=[OF.OffsetFetchRequestGroup(group_id="g")]),
                             UNKNOWN)
    assert [(g.group_id, g.error_code, g.topics) for g in fetched.groups] == [
        ("g", UNKNOWN, [])]


# --- the dispatcher -----------------------------------------------------------------------

class Listener:
    name = "PLAINTEXT"


class Connection:
    """What the dispatcher reads of a connection."""

    def __init__(self) -> None:
        self.session = Session()
        self.listener = Listener()
        self.id = "127.0.0.1:9092-127.0.0.1:50000-0"
        self.response_meta = None
        self.authenticating = None  # not a SASL connection mid-authentication


def frame(key: int, version: int, body: Message, correlation_id: int = 7) -> bytearray:
    header = RequestHeader(request_api_key=key, request_api_version=version,
                           correlation_id=correlation_id, client_id="tester")
    return bytearray(encode_request(header, body)[4:])


def answer(parts: Any, key: int, version: int) -> tuple[int, Any]:
    data = b"".join(bytes(p) for p in parts)
    return decode_response(data[4:], key, version)


def failing(ctx: Any, request: Any) -> Any:
    raise RuntimeError("a handler bug")


def test_a_failing_handler_answers_and_the_connection_serves_on(
        caplog: pytest.LogCaptureFixture) -> None:
    dispatcher = RequestDispatcher()
    dispatcher.register(3, failing, 0, 12)
    dispatcher.register(15, lambda ctx, request: (_ for _ in ()).throw(
        NotEnoughReplicasError("no")), 0, 5)
    conn = Connection()
    M = MetadataRequest
    with caplog.at_level(logging.INFO, logger="kafka.server.KafkaApis"):
        parts = dispatcher(conn, frame(3, 9, M(topics=[M.MetadataRequestTopic(name="t")])))
    correlation, response = answer(parts, 3, 9)
    assert correlation == 7
    assert [(t.name, t.error_code) for t in response.topics] == [("t", UNKNOWN)]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "api=Metadata" in errors[0].getMessage()
    assert errors[0].exc_info is not None  # the traceback, once
    # a KafkaError keeps its own code; the same connection is served again
    parts = dispatcher(conn, frame(15, 5, DescribeGroupsRequest(groups=["g"]), 8))
    correlation, described = answer(parts, 15, 5)
    assert (correlation, [(g.group_id, g.error_code) for g in described.groups]) == (
        8, [("g", NotEnoughReplicasError.code)])


def test_an_acks_0_producer_loses_its_connection_as_in_kafka() -> None:
    dispatcher = RequestDispatcher()
    dispatcher.register(0, failing, 3, 11)
    request = produce()
    request.acks = 0
    with pytest.raises(RuntimeError, match="a handler bug"):
        dispatcher(Connection(), frame(0, 9, request))  # type: ignore[arg-type]
    request.acks = -1
    response = answer(dispatcher(Connection(), frame(0, 9, request)), 0, 9)[1]  # type: ignore[arg-type]
    assert {p.error_code for t in response.responses for p in t.partition_responses} == {
        UNKNOWN}


def test_a_handler_failing_while_it_waits_answers_too() -> None:
    async def later(ctx: Any, request: Any) -> Any:
        raise RuntimeError("failed while waiting")

    async def dispatch() -> Any:
        dispatcher = RequestDispatcher()
        dispatcher.register(3, later, 0, 12)
        pending = dispatcher(Connection(), frame(3, 12, MetadataRequest(  # type: ignore[arg-type]
            topics=[MetadataRequest.MetadataRequestTopic(name="t")])))
        return await pending  # type: ignore[misc]

    correlation, response = answer(asyncio.run(dispatch()), 3, 12)
    assert (correlation, [(t.name, t.error_code) for t in response.topics]) == (
        7, [("t", UNKNOWN)])
