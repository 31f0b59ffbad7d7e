"""A real broker serves its metrics on the JMX-like endpoint (MOLDAU_METRICS_PORT) under
Kafka's MBean names, and they move with real client traffic: N records produced with
librdkafka make MessagesInPerSec of the topic grow by exactly N, and the requests show in
RequestMetrics (Fetch split into FetchConsumer and FetchFollower, as in Kafka)."""

from __future__ import annotations

import os
import resource
import socket
import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from moldau.devcluster.brokers import BrokerProcess

from .jmx import beans

RECORDS = 500


def value(port: int, name: str, attribute: str = "Count") -> Any:
    return beans(port, name)[name][attribute]


def test_metrics_move_with_produced_and_fetched_records(broker: tuple[BrokerProcess, int]
                                                        ) -> None:
    process, port = broker
    topic = f"metered-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": process.bootstrap, "acks": "all"})
    producer.produce(topic, b"first")  # creates the topic (auto-create)
    assert producer.flush(20) == 0
    messages_in = f"kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic={topic}"
    before = value(port, messages_in)
    for i in range(RECORDS):
        producer.produce(topic, b"v%03d" % i)
    assert producer.flush(20) == 0
    assert value(port, messages_in) - before == RECORDS
    assert value(port, "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec") >= \
        RECORDS + 1
    bytes_in = value(port, f"kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,"
                           f"topic={topic}")
    assert bytes_in > RECORDS * 4  # the values, plus batch and record overhead

    consumer = Consumer({"bootstrap.servers": process.bootstrap, "group.id": f"g-{topic}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    read, deadline = 0, time.monotonic() + 20
    while read < RECORDS + 1 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            read += 1
    consumer.close()
    assert read == RECORDS + 1
    out = beans(port, "kafka.server:type=BrokerTopicMetrics,*")
    assert out[f"kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec,topic={topic}"][
        "Count"] >= bytes_in
    assert out[f"kafka.server:type=BrokerTopicMetrics,name=TotalFetchRequestsPerSec,"
               f"topic={topic}"]["Count"] > 0
    meter = out[messages_in]
    assert {"MeanRate", "OneMinuteRate", "FiveMinuteRate", "FifteenMinuteRate"} <= set(meter)
    requests = beans(port, "kafka.network:type=RequestMetrics,*")
    produce_rates = [b for n, b in requests.items()
                     if n.startswith("kafka.network:type=RequestMetrics,name=RequestsPerSec,"
                                     "request=Produce,version=")]
    assert produce_rates and sum(b["Count"] for b in produce_rates) >= 1
    total = requests["kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce"]
    assert total["Count"] >= 1 and total["Max"] >= total["50thPercentile"] >= 0
    assert requests["kafka.network:type=RequestMetrics,name=RemoteTimeMs,"
                    "request=FetchConsumer"]["Count"] >= 1


def test_state_gauges_and_bad_requests(broker: tuple[BrokerProcess, int]) -> None:
    process, port = broker
    replica_manager = beans(port, "kafka.server:type=ReplicaManager,*")
    assert replica_manager["kafka.server:type=ReplicaManager,name=PartitionCount"][
        "Value"] >= 1
    assert replica_manager["kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions"][
        "Value"] == 0
    controller = beans(port, "kafka.controller:type=KafkaController,*")
    assert controller["kafka.controller:type=KafkaController,name=ActiveControllerCount"][
        "Value"] == 1
    assert controller["kafka.controller:type=KafkaController,name=GlobalTopicCount"][
        "Value"] >= 1
    # garbage on the endpoint gets an error and leaves the broker serving
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"\x00\x01garbage\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    request = urllib.request.Request(f"http://127.0.0.1:{port}/jmx", method="POST", data=b"x")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 405
    assert process.healthy()


def test_process_figures_and_index_mappings(broker: tuple[BrokerProcess, int]) -> None:
    """moldau:type=Process holds the broker's own descriptors, limit and start time, and
    moldau:type=Memory the index mappings its /proc/<pid>/maps shows, and the limit."""
    process, port = broker
    producer = Producer({"bootstrap.servers": process.bootstrap, "acks": "all"})
    producer.produce(f"mapped-{uuid.uuid4().hex[:8]}", b"one")  # an active segment at least
    assert producer.flush(20) == 0
    pid = process.pid()
    assert pid is not None
    figures = beans(port, "moldau:type=Process")["moldau:type=Process"]
    soft, _hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    assert figures["MaxFileDescriptors"] == soft
    # a descriptor or two may come and go with connections between the two reads
    assert abs(figures["OpenFileDescriptors"] - len(os.listdir(f"/proc/{pid}/fd"))) <= 2
    assert figures["CpuSeconds"] > 0 and figures["ResidentMemoryBytes"] > 0
    assert figures["VirtualMemoryBytes"] >= figures["ResidentMemoryBytes"]
    assert abs(figures["StartTimeSeconds"] - process_start(pid)) < 1
    memory = beans(port, "moldau:type=Memory,*")
    with open(f"/proc/{pid}/maps") as maps:
        mapped = sum(1 for line in maps if line.rstrip().endswith((".index", ".timeindex")))
    assert memory["moldau:type=Memory,name=IndexMappings"]["Value"] == mapped >= 2
    with open("/proc/sys/vm/max_map_count") as limit:
        assert memory["moldau:type=Memory,name=MaxMapCount"]["Value"] == int(limit.read())


def process_start(pid: int) -> float:
    """When the process started (seconds since the epoch), from /proc as the kernel has it."""
    with open(f"/proc/{pid}/stat") as stat:
        start_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as host:
        boot = next(float(line.split()[1]) for line in host if line.startswith("btime "))
    return boot + start_ticks / os.sysconf("SC_CLK_TCK")


def test_transaction_metrics_follow_real_transactions(broker: tuple[BrokerProcess, int]
                                                      ) -> None:
    """librdkafka's transactional producer commits a transaction, then leaves one open
    whose records carry a timestamp 30 minutes old: its partition's LastStableOffsetLag is
    its 5 records and it counts in PartitionsWithLateTransactionsCount (its producer last
    wrote longer than transaction.max.timeout.ms + 5 minutes ago, as Kafka judges it);
    the abort clears both. The coordinator's partition loads are timed and the marker
    channel's queues are empty."""
    process, port = broker
    suffix = uuid.uuid4().hex[:8]
    committed, hanging = f"txn-ok-{suffix}", f"txn-late-{suffix}"
    admin = AdminClient({"bootstrap.servers": process.bootstrap})
    for future in admin.create_topics([NewTopic(committed, 1, 1),
                                       NewTopic(hanging, 1, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": process.bootstrap,
                         "transactional.id": f"metered-{suffix}"})
    producer.init_transactions(60)  # creates and loads __transaction_state
    producer.begin_transaction()
    for i in range(10):
        producer.produce(committed, b"%d" % i)
    producer.commit_transaction(30)

    loads = beans(port, "kafka.server:type=transaction-coordinator-metrics")[
        "kafka.server:type=transaction-coordinator-metrics"]
    assert loads["partition-load-time-max"] >= loads["partition-load-time-avg"] > 0, loads
    lag_of = {t: f"kafka.cluster:type=Partition,name=LastStableOffsetLag,topic={t},partition=0"
              for t in (committed, hanging)}
    late = "kafka.server:type=ReplicaManager,name=PartitionsWithLateTransactionsCount"
    wait_until(lambda: value(port, lag_of[committed], "Value") == 0, "the COMMIT marker")
    assert value(port, late, "Value") == 0

    thirty_minutes_ago = int(time.time() * 1000) - 30 * 60 * 1000
    producer.begin_transaction()
    for i in range(5):
        producer.produce(hanging, b"late %d" % i, timestamp=thirty_minutes_ago)
    assert producer.flush(20) == 0
    assert value(port, lag_of[hanging], "Value") == 5
    assert value(port, late, "Value") == 1
    manager = beans(port, "kafka.server:type=ReplicaManager,*")
    assert manager["kafka.server:type=ReplicaManager,name=ProducerIdCount"]["Value"] >= 1
    # the leader verified the transaction's partitions with its coordinator (KIP-890)
    verification = beans(port, "kafka.server:type=AddPartitionsToTxnManager,*")
    assert verification["kafka.server:type=AddPartitionsToTxnManager,"
                        "name=VerificationTimeMs"]["Count"] >= 2
    assert verification["kafka.server:type=AddPartitionsToTxnManager,"
                        "name=VerificationFailureRate"]["Count"] == 0
    channel = beans(port, "kafka.coordinator.transaction:type=TransactionMarkerChannelManager,*")
    assert {name.rsplit("=", 1)[1]: bean["Value"] for name, bean in channel.items()} == {
        "UnknownDestinationQueueSize": 0, "LogAppendRetryQueueSize": 0}

    producer.abort_transaction(30)
    wait_until(lambda: value(port, lag_of[hanging], "Value") == 0, "the ABORT marker")
    assert value(port, late, "Value") == 0
    assert process.healthy()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
