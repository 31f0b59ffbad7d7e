"""Resource limits: many connections, running out of file descriptors, and
`queued.max.requests` against slow clients. Each limit is hit for real, and everything
else keeps being served."""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from moldau.client.blocking import BlockingConnection
from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.api_versions_request import ApiVersionsRequest
from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.generated.metadata_request import MetadataRequest
from moldau.protocol.generated.request_header import RequestHeader
from moldau.protocol.headers import decode_response, encode_request

from .conftest import start_broker
from .raw import (
    API_VERSIONS,
    FETCH,
    METADATA,
    PRODUCE,
    connect,
    create_topic,
    latest_offset,
    produce_request,
    records,
    round_trip,
    server_log,
    topic_name,
    wait_log,
)

QUEUED_MAX_REQUESTS = 4


@pytest.fixture(scope="module")
def bounded(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory, zk_ensemble.connect_string, {
        "num.partitions": "1", "queued.max.requests": str(QUEUED_MAX_REQUESTS)})
    yield process
    assert "Traceback" not in server_log(process)
    assert process.stop() == 0, process.tail()


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def request_bytes(api_key: int, version: int, body, correlation: int) -> bytes:
    return encode_request(RequestHeader(request_api_key=api_key, request_api_version=version,
                                        correlation_id=correlation, client_id="limits"), body)


def long_poll(topic: str, offset: int, max_wait_ms: int) -> FetchRequest:
    """A Fetch that waits max_wait_ms for data that does not come."""
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
        rack_id="", topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                        partition_max_bytes=1 << 20)])])


def read_responses(conn: BlockingConnection, expected: list[tuple[int, int, int]]) -> list:
    """Read the answers to pipelined requests [(correlation, api key, version)], in order."""
    answers = []
    for correlation, api_key, version in expected:
        got, body = decode_response(conn.read_frame(), api_key, version)
        assert got == correlation
        answers.append(body)
    return answers


# --- 5. many connections ------------------------------------------------------------------

def _raise_nofile(wanted: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))


def test_200_concurrent_connections(bounded: BrokerProcess) -> None:
    _raise_nofile(1024)
    conns = [BlockingConnection("127.0.0.1", bounded.port, timeout=20) for _ in range(200)]
    try:
        pipelined = request_bytes(API_VERSIONS, 3, ApiVersionsRequest(
            client_software_name="many", client_software_version="1"), 1) + request_bytes(
            METADATA, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False), 2)
        for conn in conns:  # everything is sent before anything is read
            conn.send_raw(pipelined)
        for conn in conns:
            versions, meta = read_responses(conn, [(1, API_VERSIONS, 3), (2, METADATA, 12)])
            assert versions.error_code == 0
            assert [b.node_id for b in meta.brokers] == [bounded.broker_id]
    finally:
        for conn in conns:
            conn.close()


# --- 6. queued.max.requests ---------------------------------------------------------------

def test_parked_requests_do_not_count_against_the_queue(bounded: BrokerProcess) -> None:
    """Long-poll fetches waiting for data are not queued requests (as in Kafka, a request
    in purgatory left the request queue): twice as many idle consumers as
    queued.max.requests must not stall other clients."""
    topic = topic_name("idle")
    with connect(bounded) as admin:
        create_topic(admin, topic)
    consumers = [connect(bounded) for _ in range(2 * QUEUED_MAX_REQUESTS)]
    try:
        for conn in consumers:
            conn.send(FETCH, 12, long_poll(topic, 0, 1500))
        time.sleep(0.2)  # every fetch is parked now
        with connect(bounded) as other:
            for _ in range(5):
                started = time.monotonic()
                round_trip(other)
                assert time.monotonic() - started < 0.5, "stalled behind parked fetches"
        for conn in consumers:
            assert read_responses(conn, [(1, FETCH, 12)])[0].error_code == 0
    finally:
        for conn in consumers:
            conn.close()


PRODUCERS = 8
REQUESTS_PER_PRODUCER = 16
VALUE_SIZE = 900_000  # a batch under message.max.bytes (1 MiB)


def test_queued_max_requests_bounds_memory(bounded: BrokerProcess) -> None:
    """Slow clients pipeline large produce requests behind a parked fetch: the broker stops
    reading once queued.max.requests requests wait, so its memory stays bounded and the
    clients' sends block; once the fetches complete everything is answered in order."""
    idle, target = topic_name("idle"), topic_name("bulk")
    with connect(bounded) as admin:
        create_topic(admin, idle)
        create_topic(admin, target)
    pid = bounded.pid()
    assert pid is not None
    batch = records(1, size=VALUE_SIZE)
    payload = b"".join(request_bytes(PRODUCE, 9, produce_request(target, batch, acks=1), i + 2)
                       for i in range(REQUESTS_PER_PRODUCER))
    total = PRODUCERS * len(payload)
    conns = [BlockingConnection("127.0.0.1", bounded.port, timeout=30)
             for _ in range(PRODUCERS)]
    for conn in conns:  # keep what the kernel buffers on our side small and predictable
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)
    sent = [False] * PRODUCERS
    answers: list[list] = [[] for _ in range(PRODUCERS)]
    errors: list[BaseException] = []

    def client(i: int) -> None:
        try:
            conns[i].sock.sendall(payload)  # blocks while the broker does not read
            sent[i] = True
            answers[i] = read_responses(conns[i], [(1, FETCH, 12)] + [
                (c + 2, PRODUCE, 9) for c in range(REQUESTS_PER_PRODUCER)])
        except BaseException as exc:
            errors.append(exc)

    baseline = rss_kib(pid)
    for conn in conns:  # each connection is busy with a fetch that waits 2 s
        conn.send_raw(request_bytes(FETCH, 12, long_poll(idle, 0, 2000), 1))
    threads = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(PRODUCERS)]
    for thread in threads:
        thread.start()
    peak = baseline
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:
        peak = max(peak, rss_kib(pid))
        time.sleep(0.02)
    assert not any(sent), "the broker read everything: its sends did not block"
    grown_mib = (peak - baseline) / 1024
    # queued.max.requests frames, plus at most one read and one partial frame per connection
    assert grown_mib < 40, f"broker RSS grew by {grown_mib:.0f} MiB of {total >> 20} MiB sent"
    with connect(bounded) as other:  # other clients are served meanwhile
        round_trip(other)
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert all(sent)
    for got in answers:
        assert [a.responses[0].partition_responses[0].error_code for a in got[1:]] == \
            [0] * REQUESTS_PER_PRODUCER
    with connect(bounded) as conn:
        assert latest_offset(conn, target) == PRODUCERS * REQUESTS_PER_PRODUCER
    for conn in conns:
        conn.close()


# --- 5. running out of file descriptors ---------------------------------------------------

NOFILE = 128


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_running_out_of_file_descriptors(tmp_path_factory: pytest.TempPathFactory,
                                         zk_ensemble) -> None:
    process = BrokerProcess(str(tmp_path_factory.mktemp("broker")), 1,
                            f"{zk_ensemble.connect_string}/moldau-{uuid.uuid4().hex[:12]}",
                            properties={"num.partitions": "1"}, rlimit_nofile=NOFILE)
    process.start()
    try:
        _out_of_fds(process)
    finally:
        assert process.stop() == 0, process.tail()


def _answered(conn: BlockingConnection, timeout: float) -> bool:
    conn.sock.settimeout(timeout)
    try:
        round_trip(conn)
        return True
    except (OSError, ConnectionError):
        return False


def _out_of_fds(broker: BrokerProcess) -> None:
    pid = broker.pid()
    assert pid is not None
    free = NOFILE - open_fds(pid)
    assert 10 < free < NOFILE, free
    served: list[BlockingConnection] = []
    refused: list[BlockingConnection] = []
    try:
        while len(served) < NOFILE:
            conn = BlockingConnection("127.0.0.1", broker.port, timeout=5)
            if not _answered(conn, 1.0):
                refused.append(conn)
                break
            served.append(conn)
        assert refused, f"{len(served)} connections served with a limit of {NOFILE} files"
        assert len(served) >= free - 5
        wait_log(broker, "Too many open files")
        for conn in served:  # the existing connections keep being served
            conn.sock.settimeout(5)
            round_trip(conn)
        # freeing descriptors lets the broker accept again (it retries every second)
        for conn in served[:5]:
            conn.close()
        del served[:5]
        refused[0].sock.settimeout(5)
        refused[0].read_frame()  # the late answer to the request that waited
        round_trip(refused[0])
        with connect(broker) as late:
            round_trip(late)
    finally:
        for conn in served + refused:
            with contextlib.suppress(OSError):
                conn.close()
    assert broker.running()
