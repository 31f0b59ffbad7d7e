"""The request-path and runtime metrics of a real broker, driven over real connections:
RequestChannel queue sizes and the Fetch purgatory while a long-poll waits with a
request pipelined behind it, ResponseQueueTimeMs / ResponseSendTimeMs, ErrorsPerSec by
request and error, socket-server-metrics connection-count per listener,
LogFlushRateAndTimeMs (flush.messages=1), and the event loop's lag and GC figures."""

from __future__ import annotations

import uuid
from typing import Any

from broker.raw import (
    FETCH,
    METADATA,
    connect,
    create_topic,
    produce,
    records,
    wait_until,
)
from broker.test_limits import long_poll, read_responses, request_bytes
from confluent_kafka import Producer

from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.metadata_request import MetadataRequest

from .jmx import beans

RM = "kafka.network:type=RequestMetrics"


def value(port: int, name: str, attribute: str = "Value") -> Any:
    return beans(port, name)[name][attribute]


def test_a_waiting_fetch_is_in_the_purgatory_and_holds_the_request_behind_it(
        broker: tuple[BrokerProcess, int]) -> None:
    process, port = broker
    topic = f"polled-{uuid.uuid4().hex[:8]}"
    purgatory = "kafka.server:type=DelayedOperationPurgatory,name={},delayedOperation=Fetch"
    queue = "kafka.network:type=RequestChannel,name=RequestQueueSize"
    with connect(process) as conn, connect(process) as writer:
        create_topic(writer, topic)
        assert value(port, purgatory.format("NumDelayedOperations")) == 0
        assert value(port, queue) == 0
        # a long poll for data that is not there yet, and a Metadata request behind it
        conn.send_raw(request_bytes(FETCH, 11, long_poll(topic, 0, 20_000), 1)
                      + request_bytes(METADATA, 12, MetadataRequest(topics=[]), 2))
        assert wait_until(lambda: value(port, purgatory.format("NumDelayedOperations")) == 1)
        assert value(port, purgatory.format("PurgatorySize")) == 1
        assert value(port, queue) == 1  # the Metadata request waits its turn
        assert produce(writer, topic, records(1)).error_code == 0
        fetched, _ = read_responses(conn, [(1, FETCH, 11), (2, METADATA, 12)])
        assert fetched.responses[0].partitions[0].records
        assert value(port, purgatory.format("NumDelayedOperations")) == 0
        assert value(port, queue) == 0
    remote = value(port, f"{RM},name=RemoteTimeMs,request=FetchConsumer", "Max")
    total = value(port, f"{RM},name=TotalTimeMs,request=FetchConsumer", "Max")
    assert total >= remote > 0
    for name in ("ResponseQueueTimeMs", "ResponseSendTimeMs"):
        histogram = beans(port, f"{RM},name={name},request=FetchConsumer")[
            f"{RM},name={name},request=FetchConsumer"]
        assert histogram["Count"] >= 1 and histogram["Max"] >= 0


def test_errors_are_counted_by_request_and_error(broker: tuple[BrokerProcess, int]) -> None:
    process, port = broker
    topic = f"erring-{uuid.uuid4().hex[:8]}"
    none = f"{RM},name=ErrorsPerSec,request=Produce,error=NONE"
    unknown = f"{RM},name=ErrorsPerSec,request=Produce,error=UNKNOWN_TOPIC_OR_PARTITION"
    with connect(process) as conn:
        create_topic(conn, topic)
        counts = beans(port, f"{RM},name=ErrorsPerSec,*")
        ok_before = counts.get(none, {"Count": 0})["Count"]
        bad_before = counts.get(unknown, {"Count": 0})["Count"]
        for _ in range(3):
            assert produce(conn, topic, records(2)).error_code == 0
        for _ in range(2):  # partition 5 of a one-partition topic
            assert produce(conn, topic, records(1), partition=5).error_code == 3
    counts = beans(port, f"{RM},name=ErrorsPerSec,*")
    assert counts[none]["Count"] - ok_before == 3
    assert counts[unknown]["Count"] - bad_before == 2


def test_connection_count_per_listener(broker: tuple[BrokerProcess, int]) -> None:
    process, port = broker
    name = "kafka.server:type=socket-server-metrics,listener=PLAINTEXT,networkProcessor=0"

    def count() -> int:
        return value(port, name, "connection-count")

    before = count()
    opened = [connect(process) for _ in range(3)]
    for conn in opened:
        conn.request(METADATA, 12, MetadataRequest(topics=[]))  # surely accepted
    assert count() == before + 3
    for conn in opened:
        conn.close()
    assert wait_until(lambda: count() == before)


def test_log_flushes_are_timed(broker: tuple[BrokerProcess, int]) -> None:
    process, port = broker
    topic = f"flushed-{uuid.uuid4().hex[:8]}"
    flushes = "kafka.log:type=LogFlushStats,name=LogFlushRateAndTimeMs"
    before = value(port, flushes, "Count")
    with connect(process) as conn:
        create_topic(conn, topic, configs={"flush.messages": "1"})
        for _ in range(5):
            assert produce(conn, topic, records(1)).error_code == 0
    timer = beans(port, flushes)[flushes]
    assert timer["Count"] - before >= 5
    assert timer["Max"] > 0 and timer["LatencyUnit"] == "MILLISECONDS"


def test_event_loop_lag_and_gc_figures(broker: tuple[BrokerProcess, int]) -> None:
    process, port = broker
    lag = "moldau:type=EventLoop,name=LagMs"
    first = value(port, lag, "Count")
    assert wait_until(lambda: value(port, lag, "Count") >= first + 4, timeout=10)
    assert value(port, lag, "Max") >= 0
    # enough allocation to run the young generation's collector
    producer = Producer({"bootstrap.servers": process.bootstrap, "linger.ms": 5})
    topic = f"churn-{uuid.uuid4().hex[:8]}"
    for i in range(20_000):
        producer.produce(topic, b"%d" % i)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    collectors = beans(port, "moldau:type=GarbageCollector,*")
    gen0 = collectors["moldau:type=GarbageCollector,name=gen0"]
    assert gen0["CollectionCount"] > 0 and gen0["CollectionTime"] > 0
    # the startup heap is frozen out of the full collections (moldau.server.main)
    assert collectors["moldau:type=GarbageCollector,name=permanent"]["ObjectCount"] > 10_000
