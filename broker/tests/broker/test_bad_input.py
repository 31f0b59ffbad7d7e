"""Bad input never disturbs anything else: oversized and corrupt batches, unknown and
illegal topics, and malformed frames each get their Kafka error (or close only their own
connection, with the reason in server.log), while the log stays unchanged, the same or
other connections keep working, and the broker stays up."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol._runtime import ZERO_UUID
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.api_versions_response import ApiVersionsResponse
from moldau.protocol.generated.describe_quorum_request import DescribeQuorumRequest
from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.generated.init_producer_id_request import InitProducerIdRequest
from moldau.protocol.generated.list_offsets_request import ListOffsetsRequest
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.protocol.generated.offset_commit_request import OffsetCommitRequest
from moldau.protocol.generated.offset_fetch_request import OffsetFetchRequest
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.generated.response_header import ResponseHeader
from moldau.protocol.headers import encode_request
from moldau.protocol.legacy import build_message_set
from moldau.protocol.records import build_batch, iter_batches

from .conftest import start_broker
from .raw import (
    API_VERSIONS,
    FETCH,
    INIT_PRODUCER_ID,
    LATEST,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    connect,
    create_topic,
    latest_offset,
    metadata,
    produce,
    produce_request,
    records,
    round_trip,
    server_log,
    topic_name,
    wait_log,
)

MESSAGE_MAX_BYTES = 10_000
REQUEST_MAX_BYTES = 1024 * 1024
NONE, OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION = 0, 1, 2, 3
MESSAGE_TOO_LARGE = 10
INVALID_TIMESTAMP, INVALID_RECORD = 32, 87
INVALID_TOPIC_EXCEPTION, UNSUPPORTED_VERSION, OUT_OF_ORDER_SEQUENCE_NUMBER = 17, 35, 45
BATCH_HEADER_SIZE = 61  # a v2 batch's records start after its 61-byte header


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:
    """A broker with small limits and without auto topic creation."""
    process = start_broker(tmp_path_factory, zk_ensemble.connect_string, {
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "message.max.bytes": str(MESSAGE_MAX_BYTES),
        "socket.request.max.bytes": str(REQUEST_MAX_BYTES),
    })
    yield process
    assert "Traceback" not in server_log(process), server_log(process)[-5000:]
    assert process.stop() == 0, process.tail()


@pytest.fixture(scope="module")
def topic(strict: BrokerProcess) -> str:
    name = topic_name("bad-input")
    with connect(strict) as conn:
        create_topic(conn, name)
    return name


def assert_closed(conn, timeout: float = 5.0) -> None:
    """The broker closed conn: a read sees the end of the stream or a reset."""
    conn.sock.settimeout(timeout)
    try:
        data = conn.sock.recv(1024)
    except ConnectionResetError:
        return
    assert data == b"", f"expected the broker to close the connection, got {data!r}"


# --- 1. message.max.bytes ---------------------------------------------------------------

def test_message_too_large_leaves_the_log_unchanged(strict: BrokerProcess, topic: str) -> None:
    with connect(strict) as conn:
        first = produce(conn, topic, records(3))
        assert first.error_code == NONE, first
        end = latest_offset(conn, topic)
        assert end == first.base_offset + 3

        big = produce(conn, topic, records(1, size=MESSAGE_MAX_BYTES * 2))
        assert big.error_code == MESSAGE_TOO_LARGE, big
        assert big.base_offset == -1
        assert latest_offset(conn, topic) == end  # nothing written

        after = produce(conn, topic, records(1))  # the same connection keeps working
        assert (after.error_code, after.base_offset) == (NONE, end)
        assert latest_offset(conn, topic) == end + 1


def test_message_too_large_with_confluent_kafka(strict: BrokerProcess, topic: str) -> None:
    from confluent_kafka import KafkaError, Producer

    with connect(strict) as conn:
        end = latest_offset(conn, topic)
    # the client's own limit is larger, so it is the broker that refuses
    producer = Producer({"bootstrap.servers": strict.bootstrap, "message.max.bytes": 1_000_000,
                         "enable.idempotence": False, "retries": 0, "linger.ms": 0})
    results: list = []
    producer.produce(topic, b"x" * (MESSAGE_MAX_BYTES * 3),
                     on_delivery=lambda err, msg: results.append(err))
    assert producer.flush(15) == 0
    assert len(results) == 1 and results[0] is not None
    assert results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE, results[0]
    producer.produce(topic, b"small", on_delivery=lambda err, msg: results.append(
        err or msg.offset()))
    assert producer.flush(15) == 0
    assert results[1] == end  # the refused record took no offset
    with connect(strict) as conn:
        assert latest_offset(conn, topic) == end + 1


# --- 2. corrupt batches -------------------------------------------------------------------

def test_corrupt_batch_is_refused(strict: BrokerProcess, topic: str) -> None:
    batch = bytearray(records(5, size=50))
    batch[BATCH_HEADER_SIZE + 20] ^= 0xFF  # inside the records: the CRC-32C no longer matches
    with connect(strict) as conn:
        end = latest_offset(conn, topic)
        answer = produce(conn, topic, bytes(batch))
        assert answer.error_code == CORRUPT_MESSAGE, answer
        assert latest_offset(conn, topic) == end
        ok = produce(conn, topic, records(1))
        assert (ok.error_code, ok.base_offset) == (NONE, end)


# --- 3. unknown and illegal topics --------------------------------------------------------

def test_per_record_errors_name_the_refused_records(strict: BrokerProcess) -> None:
    """KIP-467: a batch of 100 records with 10 keyless ones, produced to a compacted
    topic, is refused with INVALID_RECORD naming those 10 (their index in the batch), so
    clients fail them and retry the other 90; records out of a CreateTime topic's
    timestamp bounds are named the same way under INVALID_TIMESTAMP. Nothing is kept."""
    now = int(time.time() * 1000)
    keyless = {3, 14, 25, 36, 47, 58, 69, 80, 91, 99}
    compacted, bounded = topic_name("kip467-compact"), topic_name("kip467-time")
    with connect(strict) as conn:
        create_topic(conn, compacted, configs={"cleanup.policy": "compact"})
        create_topic(conn, bounded, configs={"message.timestamp.before.max.ms": "60000"})
        batch = build_batch([(None if i in keyless else b"k%d" % i, b"v", (), now)
                             for i in range(100)])
        answer = produce(conn, compacted, batch, version=9)
        assert (answer.error_code, answer.base_offset) == (INVALID_RECORD, -1)
        assert [e.batch_index for e in answer.record_errors] == sorted(keyless)
        assert {e.batch_index_error_message for e in answer.record_errors} == {
            "Compacted topic cannot accept message without key in topic partition"}
        assert answer.error_message.startswith(
            "One or more records have been rejected due to 10 record errors in total, and "
            "only showing the first three errors at most: [RecordError(batchIndex=3, ")
        old = now - 3_600_000
        batch = build_batch([(b"k", b"v", (), old if i in (0, 2) else now) for i in range(4)])
        answer = produce(conn, bounded, batch, version=9)
        assert (answer.error_code, answer.base_offset) == (INVALID_TIMESTAMP, -1)
        assert [e.batch_index for e in answer.record_errors] == [0, 2]
        assert answer.record_errors[1].batch_index_error_message.startswith(
            f"Timestamp {old} of message with offset 2 is out of range. The timestamp should "
            "be within [")
        assert answer.error_message == (
            "One or more records have been rejected due to invalid timestamp")
        for name in (compacted, bounded):  # nothing was kept; the next batch is offset 0
            assert latest_offset(conn, name) == 0
            assert produce(conn, name, build_batch([(b"k", b"v", (), now)])).base_offset == 0


def test_unknown_topic_without_auto_create(strict: BrokerProcess) -> None:
    name = topic_name("missing")
    with connect(strict) as conn:
        for version in (1, 4, 12):
            answer = metadata(conn, [name], version=version)
            assert [(t.name, t.error_code) for t in answer.topics] == \
                [(name, UNKNOWN_TOPIC_OR_PARTITION)], (version, answer)
        assert produce(conn, name, records(1)).error_code == UNKNOWN_TOPIC_OR_PARTITION
        time.sleep(0.3)  # had it been created, its leader would be elected by now
        assert metadata(conn, [name]).topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
        round_trip(conn)


@pytest.mark.parametrize("name", ["bad/name", "a" * 250, "..", ".", "sp ace", "ümlaut"])
def test_illegal_topic_names(broker: BrokerProcess, name: str) -> None:
    with connect(broker) as conn:
        for version in (1, 12):
            answer = metadata(conn, [name], version=version)
            assert [(t.name, t.error_code) for t in answer.topics] == \
                [(name, INVALID_TOPIC_EXCEPTION)], answer
        listed = {t.name for t in metadata(conn, None).topics}
        assert name not in listed  # nothing was created
        round_trip(conn)


# --- 4. malformed frames: only that connection is closed ------------------------------------

def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header(api_key: int, version: int, header_version: int = 1, correlation: int = 7) -> bytes:
    out = bytearray()
    RequestHeader(request_api_key=api_key, request_api_version=version,
                  correlation_id=correlation, client_id="bad-input").encode_into(
        out, header_version)
    return bytes(out)


def _truncated_metadata() -> bytes:
    body = bytearray()
    MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="some-topic")],
                    allow_auto_topic_creation=True).encode_into(body, 4)
    return frame(header(METADATA, 4) + bytes(body[:-4]))


def _describe_quorum() -> bytes:
    """A well-formed request of an API the protocol has but a ZooKeeper-mode broker does
    not serve (DescribeQuorum, KRaft's; Kafka 3.9 in ZooKeeper mode lists it UNSUPPORTED)."""
    body = bytearray()
    DescribeQuorumRequest(topics=[]).encode_into(body, 0)
    return frame(header(55, 0, 2) + bytes(body))


BAD_FRAMES = {
    # (bytes to send, the reason server.log gives)
    "garbage": (b"\x00\x00\x00\x0c" + b"\xfe\xed\xfa\xce" * 3, "Closing connection"),
    "http": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "is larger than the limit"),
    "oversized": (struct.pack(">i", 2 * REQUEST_MAX_BYTES) + b"\0" * 100,
                  f"frame size {2 * REQUEST_MAX_BYTES} is larger than the limit"),
    "negative": (struct.pack(">i", -5) + b"\0" * 8, "frame size -5 is negative"),
    "unknown-api-key": (frame(header(999, 0) + b"\0" * 8), "unknown API key 999"),
    "above-protocol-version": (frame(header(METADATA, 40, 2)), "Metadata v40"),
    "unregistered-api": (_describe_quorum(), "DescribeQuorum v0 is not supported"),
    "truncated-body": (_truncated_metadata(), "runs past the end"),
    "short-header": (frame(b"\x00\x03"), "too short"),
    # shorter than an API key, and an API key of 0 (Produce, which has a fast path)
    "empty": (frame(b""), "too short"),
    "one-byte": (frame(b"\x00"), "too short"),
    "produce-short-header": (frame(b"\x00\x00\x00\x09"), "malformed or truncated"),
}


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_bad_frame_closes_only_its_connection(strict: BrokerProcess, topic: str,
                                              case: str) -> None:
    data, reason = BAD_FRAMES[case]
    log_start = len(server_log(strict))
    with connect(strict) as other, connect(strict) as bad:
        round_trip(other)
        bad.send_raw(data)
        assert_closed(bad)
        part = wait_log(strict, "Closing connection", start=log_start)
        assert reason in part, part[-2000:]
        round_trip(other)  # opened before, still served
        assert produce(other, topic, records(1)).error_code == NONE
    assert strict.running()


def test_client_disconnecting_mid_request(strict: BrokerProcess, topic: str) -> None:
    with connect(strict) as other:
        end = latest_offset(other, topic)
        for cut in (2, 10, 60):  # inside the size prefix, the header, the records
            full = encode_request(RequestHeader(
                request_api_key=0, request_api_version=9, correlation_id=1, client_id="cut"),
                produce_request(topic, records(3)))
            with socket.create_connection(("127.0.0.1", strict.port)) as sock:
                sock.sendall(full[:cut])
            round_trip(other)
        assert latest_offset(other, topic) == end  # no half request was appended
    assert strict.running()


def test_api_versions_above_max_answers_v0_and_keeps_the_connection(
        strict: BrokerProcess) -> None:
    with connect(strict) as conn:
        body = bytearray()
        ApiVersionsRequest(client_software_name="future-client",
                           client_software_version="9.9").encode_into(body, 3)
        conn.send_raw(frame(header(API_VERSIONS, 127, 2, correlation=42) + bytes(body)))
        payload = memoryview(conn.read_frame())
        response_header, pos = ResponseHeader.decode_from(payload, 0, 0)  # always header v0
        assert response_header.correlation_id == 42
        answer = ApiVersionsResponse.decode(payload[pos:], 0)
        assert answer.error_code == UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        assert keys[18] == (0, 4) and keys[0] == (0, 11) and keys[1] == (0, 17)
        round_trip(conn)  # the connection stays open
        # an in-range version we do not serve gets the same answer
        assert conn.request(API_VERSIONS, 0, ApiVersionsRequest()).error_code == NONE


# --- 7. idempotent producer: retries and sequence gaps ------------------------------------

def test_idempotent_retry_and_sequence_gap(strict: BrokerProcess, topic: str) -> None:
    with connect(strict) as conn:
        ids = conn.request(INIT_PRODUCER_ID, 4, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1,
            producer_epoch=-1))
        assert ids.error_code == NONE and ids.producer_id >= 0, ids
        pid, epoch = ids.producer_id, ids.producer_epoch

        def batch(sequence: int, n: int) -> bytes:
            return build_batch([(None, b"idem-%d" % (sequence + i)) for i in range(n)],
                               producer_id=pid, producer_epoch=epoch, base_sequence=sequence)

        end = latest_offset(conn, topic)
        first = batch(0, 3)
        answer = produce(conn, topic, first)
        assert (answer.error_code, answer.base_offset) == (NONE, end)
        retried = produce(conn, topic, first)  # the same batch again: a client retry
        assert (retried.error_code, retried.base_offset) == (NONE, end)
        assert latest_offset(conn, topic) == end + 3  # not duplicated

        gap = produce(conn, topic, batch(5, 1))  # 3 and 4 are missing
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, gap
        assert latest_offset(conn, topic) == end + 3

        second = produce(conn, topic, batch(3, 2))
        assert (second.error_code, second.base_offset) == (NONE, end + 3)
        again = produce(conn, topic, first)  # an old retry (within the last 5 batches)
        assert (again.error_code, again.base_offset) == (NONE, end)
        assert latest_offset(conn, topic) == end + 5


# --- 8. every advertised version round-trips ----------------------------------------------

def _advertised(conn) -> dict[int, tuple[int, int]]:
    answer = conn.request(API_VERSIONS, 3, ApiVersionsRequest(
        client_software_name="moldau-tests", client_software_version="1.0"))
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def test_every_advertised_version_round_trips(strict: BrokerProcess) -> None:
    """Each version of the core APIs is answered sensibly. A handler that sets a response
    field its version cannot carry makes the encoder raise and the connection close:
    this test finds those."""
    name = topic_name("versions")
    now = int(time.time() * 1000)
    with connect(strict) as conn:
        create_topic(conn, name)
        topic_id = metadata(conn, [name]).topics[0].topic_id
        advertised = _advertised(conn)
        assert advertised[PRODUCE] == (0, 11) and advertised[FETCH] == (0, 17)
        assert advertised[LIST_OFFSETS] == (0, 9) and advertised[METADATA] == (0, 12)
        assert advertised[API_VERSIONS] == (0, 4) and advertised[INIT_PRODUCER_ID] == (0, 5)

        # Produce: v0-1 carry magic 0 message sets, v2 magic 1, v3+ v2 batches
        expected = 0
        for version in range(0, 12):
            if version <= 2:
                magic = 0 if version < 2 else 1
                data = build_message_set([(b"k", b"p%d" % version, [], now)], magic=magic)
            else:
                data = build_batch([(b"k", b"p%d" % version, [], now)])
            answer = produce(conn, name, data, version=version)
            assert (answer.error_code, answer.base_offset) == (NONE, expected), (version, answer)
            if version >= 5:
                assert answer.log_start_offset == 0
            expected += 1
            failed = produce(conn, name, data, version=version, partition=5)  # error path
            assert (failed.error_code, failed.base_offset) == \
                (UNKNOWN_TOPIC_OR_PARTITION, -1), (version, failed)
        assert latest_offset(conn, name) == expected

        def fetch(version: int, offset: int, partition: int = 0) -> Any:
            request = FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                rack_id="", topics=[FetchRequest.FetchTopic(
                    topic=name if version <= 12 else "",
                    topic_id=topic_id if version >= 13 else ZERO_UUID,
                    partitions=[FetchRequest.FetchPartition(
                        partition=partition, fetch_offset=offset,
                        partition_max_bytes=1 << 20)])])
            return conn.request(FETCH, version, request).responses[0].partitions[0]

        for version in range(4, 17):
            part = fetch(version, 3)
            assert (part.error_code, part.high_watermark) == (NONE, expected), (version, answer)
            values = [r.value for b in iter_batches(bytes(part.records)) for r in b.records()]
            assert values[0] == b"p3", (version, values)
            assert values[-1] == b"p11"
            assert fetch(version, 10**6).error_code == OFFSET_OUT_OF_RANGE
            assert fetch(version, 0, partition=5).error_code == UNKNOWN_TOPIC_OR_PARTITION

        for version in range(0, 10):
            wanted = ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=LATEST)
            if version == 0:
                wanted.max_num_offsets = 1
            answer = conn.request(LIST_OFFSETS, version, ListOffsetsRequest(
                replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                    name=name, partitions=[wanted])]))
            part = answer.topics[0].partitions[0]
            assert part.error_code == NONE, (version, answer)
            got = part.old_style_offsets if version == 0 else [part.offset]
            assert got == [expected], (version, answer)
            earliest = ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-2)
            answer = conn.request(LIST_OFFSETS, version, ListOffsetsRequest(
                replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                    name=name, partitions=[earliest])]))
            part = answer.topics[0].partitions[0]
            assert (part.old_style_offsets if version == 0 else [part.offset]) == [0]
            unknown = ListOffsetsRequest.ListOffsetsPartition(partition_index=5, timestamp=-2)
            answer = conn.request(LIST_OFFSETS, version, ListOffsetsRequest(
                replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                    name=name, partitions=[unknown])]))
            assert answer.topics[0].partitions[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
        latest_tiered = ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-5)
        answer = conn.request(LIST_OFFSETS, 9, ListOffsetsRequest(
            replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=name, partitions=[latest_tiered])]))
        part = answer.topics[0].partitions[0]  # no remote storage: none, as Kafka 3.9
        assert (part.error_code, part.offset, part.leader_epoch) == (NONE, -1, -1), answer

        # OffsetCommit v0 and OffsetFetch v0 keep offsets in ZooKeeper, as Kafka 3.9 does
        assert advertised[8] == (0, 9) and advertised[9] == (0, 9)
        group, C, F = f"{name}-v0", OffsetCommitRequest, OffsetFetchRequest
        answer = conn.request(8, 0, C(group_id=group, topics=[C.OffsetCommitRequestTopic(
            name=name, partitions=[C.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=5, committed_metadata="m")])]))
        assert answer.topics[0].partitions[0].error_code == NONE, answer
        answer = conn.request(9, 0, F(group_id=group, topics=[F.OffsetFetchRequestTopic(
            name=name, partition_indexes=[0, 1])]))
        assert [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                for p in answer.topics[0].partitions] == [
            (0, 5, "", NONE), (1, -1, "", UNKNOWN_TOPIC_OR_PARTITION)], answer

        for version in range(0, 13):
            answer = metadata(conn, [name], version=version)
            assert [b.node_id for b in answer.brokers] == [strict.broker_id], answer
            topic = answer.topics[0]
            assert (topic.error_code, topic.name) == (NONE, name), (version, answer)
            assert [(p.partition_index, p.leader_id) for p in topic.partitions] == \
                [(0, strict.broker_id)]
            everything = metadata(conn, [] if version == 0 else None, version=version)
            assert name in {t.name for t in everything.topics}, version
            missing = metadata(conn, [topic_name("missing")], version=version).topics[0]
            assert missing.error_code == UNKNOWN_TOPIC_OR_PARTITION, (version, missing)

        for version in range(0, 5):
            request = ApiVersionsRequest()
            if version >= 3:
                request = ApiVersionsRequest(client_software_name="moldau-tests",
                                             client_software_version="1.0")
            answer = conn.request(API_VERSIONS, version, request)
            assert answer.error_code == NONE, (version, answer)
            assert {k.api_key: (k.min_version, k.max_version)
                    for k in answer.api_keys} == advertised

        for version in range(0, 6):
            request = InitProducerIdRequest(transactional_id=None,
                                            transaction_timeout_ms=60_000)
            answer = conn.request(INIT_PRODUCER_ID, version, request)
            assert answer.error_code == NONE and answer.producer_id >= 0, (version, answer)
            assert answer.producer_epoch == 0
            if version >= 3:  # KIP-360: the same producer bumps its epoch
                request.producer_id, request.producer_epoch = answer.producer_id, 0
                bumped = conn.request(INIT_PRODUCER_ID, version, request)
                assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == \
                    (NONE, answer.producer_id, 1), (version, bumped)
        round_trip(conn)
