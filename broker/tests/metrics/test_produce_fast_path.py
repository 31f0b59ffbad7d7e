"""The fast Produce path (moldau.server.handlers.produce_fast) in a real broker: librdkafka's
acks=1 and acks=all requests take it, their records read back whole and in order, the
request metrics count them as the general path would, and requests it does not take
(another version, an error) are answered by the general path."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from broker.raw import connect, create_topic, latest_offset, produce, records
from confluent_kafka import Consumer, Producer

from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.produce_request import ProduceRequest

from .jmx import beans

RM = "kafka.network:type=RequestMetrics"
FAST = "moldau:type=ProduceFastPath,name=RequestsPerSec"
NONE = f"{RM},name=ErrorsPerSec,request=Produce,error=NONE"
CORRUPT = f"{RM},name=ErrorsPerSec,request=Produce,error=CORRUPT_MESSAGE"


def count(port: int, name: str) -> int:
    bean = beans(port, name).get(name)
    return int(bean["Count"]) if bean else 0


def produce_requests(port: int) -> int:
    return sum(int(bean["Count"]) for bean in beans(
        port, f"{RM},name=RequestsPerSec,request=Produce,*").values())


@pytest.mark.parametrize("settings", [
    {"acks": 1, "enable.idempotence": False},
    {},  # librdkafka's defaults: acks=all, and (here) idempotence
], ids=["acks=1", "acks=all, idempotent"])
def test_librdkafka_requests_take_it_and_read_back_whole(
        broker: tuple[BrokerProcess, int], settings: dict[str, Any]) -> None:
    process, port = broker
    topic = f"fast-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 0,
                         "enable.idempotence": True, **settings})
    producer.produce(topic, b"first")  # creates the topic (auto-creation)
    assert producer.flush(30) == 0
    fast0, none0, requests0 = count(port, FAST), count(port, NONE), produce_requests(port)
    sent = [(f"k{i}".encode(), f"value-{i}".encode() * (i % 7 + 1)) for i in range(200)]
    for key, value in sent:
        producer.produce(topic, value, key=key, headers=[("h", key)])
        producer.poll(0)
    assert producer.flush(30) == 0
    handled = count(port, FAST) - fast0
    assert handled > 0
    # every Produce request since succeeded and is counted once, by either path
    assert count(port, NONE) - none0 == produce_requests(port) - requests0 >= handled

    consumer = Consumer({"bootstrap.servers": process.bootstrap, "group.id": topic,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    while len(got) < len(sent) + 1:
        message = consumer.poll(10)
        assert message is not None, f"only {len(got)} records came back"
        assert message.error() is None
        got.append(message)
    consumer.close()
    assert [m.offset() for m in got] == list(range(len(sent) + 1))
    assert [(m.key(), m.value()) for m in got[1:]] == sent
    assert [m.headers() for m in got[1:]] == [[("h", key)] for key, _ in sent]


def test_requests_it_does_not_take_are_answered_by_the_general_path(
        broker: tuple[BrokerProcess, int]) -> None:
    process, port = broker
    topic = f"general-{uuid.uuid4().hex[:8]}"
    with connect(process) as conn:
        create_topic(conn, topic)
        fast0 = count(port, FAST)
        # version 8, and an unknown partition: not the fast path's to answer
        assert produce(conn, topic, records(2), version=8, acks=-1).base_offset == 0
        for acks in (1, -1):
            assert produce(conn, topic, records(1), version=10, acks=acks,
                           partition=5).error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        assert count(port, FAST) == fast0
        # the same requests in version 10 on a partition that exists are the fast path's
        for acks, offset in ((1, 2), (-1, 5)):
            answer = produce(conn, topic, records(3), version=10, acks=acks)
            assert (answer.error_code, answer.base_offset) == (0, offset)
        assert count(port, FAST) == fast0 + 2


def test_a_failed_append_is_answered_by_the_fast_path_as_the_general_path_answers_it(
        broker: tuple[BrokerProcess, int]) -> None:
    """Validation patches a batch's offsets in the frame before a later check can fail
    it, so the fast path answers its own failed appends (handing the frame on, the
    general path read the patched batch and refused its base offset instead)."""
    process, port = broker
    topic = f"failed-{uuid.uuid4().hex[:8]}"
    corrupt = bytearray(records(2))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    with connect(process) as conn:
        create_topic(conn, topic)
        assert produce(conn, topic, records(1), version=10).base_offset == 0
        fast0 = count(port, FAST)
        answers = {version: produce(conn, topic, bytes(corrupt), version=version)
                   for version in (10, 8)}
        assert count(port, FAST) == fast0 + 1  # v10 answered by the fast path
        fast, general = answers[10], answers[8]
        assert (fast.error_code, fast.base_offset) == (2, -1), fast  # CORRUPT_MESSAGE
        assert (fast.error_code, fast.error_message, fast.record_errors) == (
            general.error_code, general.error_message, general.record_errors)
        assert produce(conn, topic, records(1), version=10).base_offset == 1  # nothing kept


def produce_many(conn: Any, topic: str, batches: dict[int, bytes], version: int,
                 acks: int = -1) -> dict[int, Any]:
    """One request with a batch for each partition, as Kafka's Java producer sends a
    broker its partitions' batches; each partition's response by index."""
    answer = conn.request(0, version, ProduceRequest(
        transactional_id=None, acks=acks, timeout_ms=10_000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=i, records=data)
            for i, data in batches.items()])]))
    [topic_answer] = answer.responses
    return {p.index: p for p in topic_answer.partition_responses}


@pytest.mark.parametrize("acks", [1, -1])
def test_requests_for_several_partitions_take_it_and_fail_each_partition_alone(
        broker: tuple[BrokerProcess, int], acks: int) -> None:
    """Several partitions of one topic in one request (Kafka's Java producer) take the
    fast path: each appended, a corrupt batch failing its partition alone as in the
    general path, and ErrorsPerSec counting each partition's answer."""
    process, port = broker
    topic = f"many-{uuid.uuid4().hex[:8]}"
    corrupt = bytearray(records(2))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    with connect(process) as conn:
        create_topic(conn, topic, partitions=3)
        fast0, none0, corrupt0 = count(port, FAST), count(port, NONE), count(port, CORRUPT)
        answers = produce_many(conn, topic, {2: records(3), 0: records(1), 1: records(2)},
                               11, acks)
        assert [(i, a.error_code, a.base_offset) for i, a in sorted(answers.items())] == [
            (0, 0, 0), (1, 0, 0), (2, 0, 0)]
        assert count(port, FAST) == fast0 + 1
        assert count(port, NONE) == none0 + 3  # one per partition, as the general path
        fast = produce_many(conn, topic, {0: records(1), 1: bytes(corrupt), 2: records(1)},
                            11, acks)
        general = produce_many(conn, topic, {0: records(1), 1: bytes(corrupt),
                                             2: records(1)}, 8, acks)
        assert count(port, FAST) == fast0 + 2  # v11 by the fast path, v8 by the general
        assert [(fast[i].error_code, fast[i].base_offset) for i in (0, 1, 2)] == [
            (0, 1), (2, -1), (0, 3)]
        assert [(general[i].error_code, general[i].base_offset) for i in (0, 1, 2)] == [
            (0, 2), (2, -1), (0, 4)]
        assert (fast[1].error_message, fast[1].record_errors) == (
            general[1].error_message, general[1].record_errors)
        assert count(port, CORRUPT) == corrupt0 + 2
        assert count(port, NONE) == none0 + 3 + 4
        assert [latest_offset(conn, topic, i) for i in (0, 1, 2)] == [3, 2, 5]


def test_a_request_naming_a_partition_it_cannot_take_goes_whole_to_the_general_path(
        broker: tuple[BrokerProcess, int]) -> None:
    """A partition beyond the topic's: nothing is appended by the fast path, and the
    general path answers the request, appending the partitions that exist."""
    process, port = broker
    topic = f"beyond-{uuid.uuid4().hex[:8]}"
    with connect(process) as conn:
        create_topic(conn, topic, partitions=2)
        fast0 = count(port, FAST)
        answers = produce_many(conn, topic, {0: records(2), 7: records(1), 1: records(1)},
                               11)
        assert count(port, FAST) == fast0
        assert [(i, a.error_code, a.base_offset) for i, a in sorted(answers.items())] == [
            (0, 0, 0), (1, 0, 0), (7, 3, -1)]  # UNKNOWN_TOPIC_OR_PARTITION
        assert [latest_offset(conn, topic, i) for i in (0, 1)] == [2, 1]
