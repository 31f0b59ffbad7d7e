"""The transaction tools against a real broker, with real transactional clients:
kafka-transactions.sh (list, describe, describe-producers, find-hanging, abort) on
confluent-kafka transactions and on a hanging transaction made by hand (a transactional
Produce from a producer no coordinator knows, accepted because this broker runs with
transaction.partition.verification.enable=false), the console consumer's read_committed,
the console producer refusing a transactional.id, the perf test's transactions, and
kafka-dump-log on the segments, markers, transaction index and __transaction_state the
broker wrote.

One broker for the module (its own ZooKeeper chroot, a three-partition transaction log)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.client.blocking import BlockingConnection
from moldau.coordinator.transaction.partitioning import transaction_partition_for
from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.produce_request import ProduceRequest
from moldau.protocol.records import SimpleRecord, build_batch

from .toolrun import Result, run, wait_for

TXN = "kafka-transactions.sh"
TXN_PARTITIONS = 3
PROPERTIES = {
    "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
    "transaction.partition.verification.enable": "false",
    "offsets.topic.num.partitions": "1",
    "num.partitions": "1",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
HOUR_MS = 3_600_000
LIST_HEADER = "TransactionalId\tCoordinator\tProducerId\tTransactionState\t"
HANGING_HEADER = ("Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\t"
                  "StartOffset\tLastTimestamp\tDuration(min)\t")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[BrokerProcess]:
    connect = zk_ensemble.connect_string + f"/txn-tools-{uuid.uuid4().hex[:12]}"
    process = BrokerProcess(str(tmp_path_factory.mktemp("txn-tools")), 1, connect,
                            properties=dict(PROPERTIES))
    process.start()
    try:
        yield process
    finally:
        assert process.stop() == 0


def tool(broker: BrokerProcess, *args: str) -> Result:
    return run(TXN, "--bootstrap-server", broker.bootstrap, *args)


def ok(broker: BrokerProcess, *args: str) -> str:
    result = tool(broker, *args)
    assert (result.code, result.err) == (0, ""), (result.code, result.out, result.err)
    return result.out


def cells(out: str) -> list[list[str]]:
    """The table's rows below the header, cells stripped of their padding."""
    return [[c.strip() for c in line.split("\t")[:-1]] for line in out.splitlines()[1:]]


def create_topic(broker: BrokerProcess, name: str, partitions: int = 1) -> None:
    made = run("kafka-topics.sh", "--bootstrap-server", broker.bootstrap, "--create",
               "--topic", name, "--partitions", str(partitions), "--replication-factor", "1")
    assert made.code == 0, made.err


def transactional_producer(broker: BrokerProcess, transactional_id: str) -> Any:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60000, "linger.ms": 0})
    producer.init_transactions(30)
    return producer


def consume(broker: BrokerProcess, topic: str, *args: str) -> Result:
    return run("kafka-console-consumer.sh", "--bootstrap-server", broker.bootstrap,
               "--topic", topic, "--from-beginning", "--timeout-ms", "3000", *args)


def hang(broker: BrokerProcess, topic: str, partition: int = 0) -> tuple[int, int]:
    """A transaction no coordinator knows: an idempotent producer id (InitProducerId
    without a transactional id) writes a transactional batch an hour old. The producer
    id and epoch."""
    host, port = broker.bootstrap.split(":")
    with BlockingConnection(host, int(port), client_id="hanging") as conn:
        init = conn.request_by_name("InitProducerId", 4, transactional_id=None,
                                    transaction_timeout_ms=60000, producer_id=-1,
                                    producer_epoch=-1)
        assert init.error_code == 0
        old = int(time.time() * 1000) - HOUR_MS
        batch = build_batch([SimpleRecord(None, b"stuck", (), old)],
                            producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                            base_sequence=0, is_transactional=True)
        answer = conn.request_by_name("Produce", 9, transactional_id="ghost", acks=-1,
                                      timeout_ms=10000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition, records=batch)])])
        assert answer.responses[0].partition_responses[0].error_code == 0
    return init.producer_id, init.producer_epoch


def segment(broker: BrokerProcess, partition_dir: str, suffix: str = ".log") -> str:
    return os.path.join(broker.data_dir, partition_dir, "00000000000000000000" + suffix)


# --- list, describe, describe-producers on a confluent-kafka transaction ----------------

def test_a_real_transaction_through_list_describe_and_describe_producers(
        broker: BrokerProcess) -> None:
    create_topic(broker, "txn-out", 2)
    producer = transactional_producer(broker, "tool-app")
    producer.begin_transaction()
    for i in range(3):
        producer.produce("txn-out", value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0

    listed = ok(broker, "list")
    assert listed.splitlines()[0] == LIST_HEADER
    (row,) = [r for r in cells(listed) if r[0] == "tool-app"]
    assert row[1] == "1" and row[3] == "Ongoing"
    producer_id = row[2]

    described = ok(broker, "describe", "--transactional-id", "tool-app")
    assert described.splitlines()[0].split("\t")[:-1] == [
        "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
        "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
        "TopicPartitions"]
    ((coordinator, tid, pid, _epoch, state, timeout, start, duration, partitions),) = \
        cells(described)
    assert (coordinator, tid, pid, state, timeout, partitions) == (
        "1", "tool-app", producer_id, "Ongoing", "60000", "txn-out-0")
    assert int(start) > 0 and int(duration) >= 0

    producers = ok(broker, "describe-producers", "--topic", "txn-out", "--partition", "0")
    assert producers.splitlines()[0] == ("ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\t"
                                         "LastSequence\tLastTimestamp\t"
                                         "CurrentTransactionStartOffset\t")
    ((pid, _epoch, _coordinator_epoch, last_sequence, _ts, start_offset),) = cells(producers)
    assert (pid, last_sequence, start_offset) == (producer_id, "2", "0")
    on_broker = ok(broker, "describe-producers", "--topic", "txn-out", "--partition", "0",
                   "--broker-id", "1")
    assert cells(on_broker)[0][0] == producer_id

    # the coordinator lists txn-out-0: open, but not hanging, however old
    assert ok(broker, "find-hanging", "--topic", "txn-out",
              "--max-transaction-timeout", "0") == HANGING_HEADER + "\n"

    producer.commit_transaction(30)
    committed = ok(broker, "describe", "--transactional-id", "tool-app")
    # Kafka keeps the last transaction's start time once it is complete
    assert [cells(committed)[0][i] for i in (4, 5, 8)] == ["CompleteCommit", "60000", ""]
    after = cells(ok(broker, "describe-producers", "--topic", "txn-out", "--partition", "0"))
    assert after[0][0] == producer_id and after[0][5] == "None"
    assert int(after[0][2]) >= 0  # the marker's coordinator epoch
    # ListTransactions v1's duration filter: nothing has run for an hour
    assert ok(broker, "list", "--duration-filter", str(HOUR_MS)) == LIST_HEADER + "\n"


def test_describe_and_describe_producers_errors(broker: BrokerProcess) -> None:
    unknown = tool(broker, "describe", "--transactional-id", "no-such-id")
    assert (unknown.code, unknown.out) == (1, "")
    assert unknown.err == (
        "Failed to describe transaction state of transactional-id `no-such-id`: "
        "DescribeTransactions request for transactionalId `no-such-id` failed because the ID "
        "could not be found. Enable debug logging for additional detail.\n")
    config = os.path.join(broker.directory, "short-timeout.properties")
    with open(config, "w") as fh:
        fh.write("default.api.timeout.ms=1500\n")
    missing = run(TXN, "--bootstrap-server", broker.bootstrap, "--command-config", config,
                  "describe-producers", "--topic", "no-such-topic", "--partition", "0")
    assert missing.code == 1
    assert missing.err.startswith("Failed to describe producers for partition "
                                  "no-such-topic-0 on leader: Timed out")
    assert missing.err.count("\n") == 1


# --- a hanging transaction: find-hanging, abort, the dumps ----------------------------

def test_find_and_abort_a_hanging_transaction(broker: BrokerProcess) -> None:
    create_topic(broker, "hang-out")
    producer_id, epoch = hang(broker, "hang-out")

    producers = cells(ok(broker, "describe-producers", "--topic", "hang-out", "--partition",
                         "0"))
    assert producers == [[str(producer_id), str(epoch), "-1", "0", producers[0][4], "0"]]
    # the LSO is stuck: read_committed sees nothing
    stuck = consume(broker, "hang-out", "--isolation-level", "read_committed")
    assert (stuck.code, stuck.out) == (0, "")

    by_topic = ok(broker, "find-hanging", "--topic", "hang-out")
    assert by_topic.splitlines()[0].replace(" ", "") == HANGING_HEADER  # padded to the rows
    ((topic, partition, pid, pepoch, coordinator_epoch, start, _last, minutes),) = \
        cells(by_topic)
    assert (topic, partition, pid, pepoch, coordinator_epoch, start) == (
        "hang-out", "0", str(producer_id), str(epoch), "-1", "0")
    assert int(minutes) >= 59
    by_broker = cells(ok(broker, "find-hanging", "--broker-id", "1"))
    assert ["hang-out", "0", str(producer_id)] in [r[:3] for r in by_broker]
    assert cells(ok(broker, "find-hanging", "--topic", "hang-out", "--partition", "0")) == \
        cells(by_topic)

    assert ok(broker, "abort", "--topic", "hang-out", "--partition", "0",
              "--start-offset", "0") == ""
    assert cells(ok(broker, "describe-producers", "--topic", "hang-out", "--partition",
                    "0"))[0][5] == "None"
    assert ok(broker, "find-hanging", "--topic", "hang-out") == HANGING_HEADER + "\n"
    again = tool(broker, "abort", "--topic", "hang-out", "--partition", "0",
                 "--start-offset", "0")
    assert (again.code, again.err) == (
        1, "Could not find any open transactions starting at offset 0 on partition "
           "hang-out-0\n")

    # the aborted record stays invisible to read_committed, and the LSO moves on
    committed = transactional_producer(broker, "after-hang")
    committed.begin_transaction()
    committed.produce("hang-out", value=b"after", partition=0)
    committed.commit_transaction(30)
    read = consume(broker, "hang-out", "--isolation-level", "read_committed",
                   "--max-messages", "1")
    assert (read.code, read.out) == (0, "after\n")
    everything = consume(broker, "hang-out", "--max-messages", "2")
    assert everything.out == "stuck\nafter\n"

    # the marker and the transaction index, as kafka-dump-log prints them
    dumped = run("kafka-dump-log.sh", "--files", segment(broker, "hang-out-0"),
                 "--print-data-log")
    assert dumped.code == 0, dumped.err
    assert any(line.startswith("| offset: 1 ") and line.endswith(
        "endTxnMarker: ABORT coordinatorEpoch: 0") for line in dumped.out.splitlines())
    index = run("kafka-dump-log.sh", "--files", segment(broker, "hang-out-0", ".txnindex"))
    assert index.out.splitlines()[1:] == [
        f"version: 0 producerId: {producer_id} firstOffset: 0 lastOffset: 1 "
        "lastStableOffset: 2"]


def test_abort_by_producer_fields(broker: BrokerProcess) -> None:
    create_topic(broker, "hang-fields")
    producer_id, epoch = hang(broker, "hang-fields")
    # the coordinator epoch DescribeProducers shows for it (-1) is sent as 0
    assert ok(broker, "abort", "--topic", "hang-fields", "--partition", "0", "--producer-id",
              str(producer_id), "--producer-epoch", str(epoch), "--coordinator-epoch",
              "-1") == ""
    assert ok(broker, "find-hanging", "--topic", "hang-fields") == HANGING_HEADER + "\n"
    missing = tool(broker, "abort", "--topic", "hang-fields", "--partition", "0",
                   "--producer-id", str(producer_id))
    assert (missing.code, missing.err) == (1, "Missing required argument --producer-epoch\n")


# --- the client tools -----------------------------------------------------------------

def test_console_consumer_read_committed(broker: BrokerProcess) -> None:
    create_topic(broker, "rc")
    producer = transactional_producer(broker, "rc-app")
    for values, commit in ((["c1", "c2"], True), (["a1"], False), (["c3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce("rc", value=value.encode(), partition=0)
        assert producer.flush(30) == 0  # written before the abort, not purged by it
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    committed = consume(broker, "rc", "--isolation-level", "read_committed",
                        "--max-messages", "3")
    assert (committed.code, committed.out) == (0, "c1\nc2\nc3\n")
    by_property = consume(broker, "rc", "--consumer-property",
                          "isolation.level=read_committed", "--max-messages", "3")
    assert by_property.out == "c1\nc2\nc3\n"
    uncommitted = consume(broker, "rc", "--max-messages", "4")
    assert uncommitted.out == "c1\nc2\na1\nc3\n"
    bad = consume(broker, "rc", "--isolation-level", "serializable")
    assert bad.code == 1 and "Traceback" not in bad.err
    assert "Invalid value serializable for configuration isolation.level" in bad.err


def test_console_producer_refuses_a_transactional_id(broker: BrokerProcess) -> None:
    create_topic(broker, "console-txn")
    produced = run("kafka-console-producer.sh", "--bootstrap-server", broker.bootstrap,
                   "--topic", "console-txn", "--producer-property", "transactional.id=cp",
                   stdin="one\ntwo\n")
    assert (produced.code, produced.out) == (1, "")
    assert produced.err == ("java.lang.IllegalStateException: Cannot add partition "
                            "console-txn-0 to transaction before completing a call to "
                            "initTransactions\n")
    ends = run("kafka-get-offsets.sh", "--bootstrap-server", broker.bootstrap, "--topic",
               "console-txn")
    assert ends.out == "console-txn:0:0\n"


def test_producer_perf_test_in_transactions(broker: BrokerProcess) -> None:
    create_topic(broker, "perf-txn")
    produced = run("kafka-producer-perf-test.sh", "--topic", "perf-txn", "--num-records",
                   "400", "--record-size", "50", "--throughput", "2000", "--producer-props",
                   f"bootstrap.servers={broker.bootstrap}", "--transactional-id", "perf-app",
                   "--transaction-duration-ms", "50")
    assert produced.code == 0, produced.err
    assert produced.out.splitlines()[-1].startswith("400 records sent, ")
    described = cells(ok(broker, "describe", "--transactional-id", "perf-app"))
    assert described[0][4] == "CompleteCommit"
    read = consume(broker, "perf-txn", "--isolation-level", "read_committed",
                   "--max-messages", "400")
    assert len(read.out.splitlines()) == 400
    # several transactions: each commit left a marker in the log
    dumped = run("kafka-dump-log.sh", "--files", segment(broker, "perf-txn-0"),
                 "--deep-iteration")
    markers = [line for line in dumped.out.splitlines() if "endTxnMarker: COMMIT" in line]
    assert len(markers) >= 2


def test_dump_the_transaction_log(broker: BrokerProcess) -> None:
    create_topic(broker, "logged")
    producer = transactional_producer(broker, "logged-app")
    producer.begin_transaction()
    producer.produce("logged", value=b"x", partition=0)
    producer.commit_transaction(30)
    path = segment(broker, f"__transaction_state-{transaction_partition_for('logged-app', 3)}")

    def states() -> list[str]:
        dumped = run("kafka-dump-log.sh", "--files", path, "--transaction-log-decoder")
        assert dumped.code == 0, dumped.err
        return [line.split(" payload: ", 1)[1] for line in dumped.out.splitlines()
                if "key: transaction_metadata::transactionalId=logged-app " in line]
    found = wait_for(lambda: (s := states()) and "state=CompleteCommit" in s[-1] and s,
                     30, "the CompleteCommit record")
    assert [s.split("state=")[1].split(",")[0] for s in found] == [
        "Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert "partitions=[logged-0]" in found[1]
    assert found[0].startswith("producerId:") and found[0].endswith("txnTimeoutMs=60000")
