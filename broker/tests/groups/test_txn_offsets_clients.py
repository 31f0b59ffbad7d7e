"""Exactly-once consume-transform-produce with a real client (confluent-kafka,
librdkafka): the consumer's offsets go into the producer's transaction
(send_offsets_to_transaction, i.e. AddOffsetsToTxn + TxnOffsetCommit), so a committed
transaction moves the group's committed offsets with its output and an aborted one moves
neither, also after the coordinator of the group's `__consumer_offsets` partition restarts
and loads it back (the markers in the log decide). One broker, KIP-890 verification on
(Kafka's default), the transaction state topic with one replica."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from broker.raw import connect, create_topic, server_log
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.offset_fetch_request import OffsetFetchRequest

from .conftest import start_group_broker
from .group_raw import ensure_coordinator, wait_for

SOURCE, SINK = "eos-source", "eos-sink"
RECORDS = 10
OFFSET_FETCH, UNSTABLE_OFFSET_COMMIT = 9, 88


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble) -> Iterator[BrokerProcess]:
    process = start_group_broker(
        tmp_path_factory, zk_ensemble.connect_string,
        **{"transaction.state.log.replication.factor": "1",
           "transaction.state.log.min.isr": "1",
           "transaction.state.log.num.partitions": "5"})
    with connect(process) as conn:
        create_topic(conn, SOURCE)
        create_topic(conn, SINK)
        ensure_coordinator(conn)
    yield process
    log = server_log(process)
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM\n{process.tail()}"
    assert "Traceback" not in log, log[-5000:]


def stable(broker: BrokerProcess, group: str) -> int:
    """The committed offset once stable: EndTxn answers when the transaction is decided,
    before its markers are written, so the offsets of a just committed transaction are
    unstable (88) for a moment; then the marker settles them."""
    def settled() -> tuple[int, int] | None:
        offset, error = committed(broker, group)
        return None if error == UNSTABLE_OFFSET_COMMIT else (offset, error)

    offset, error = wait_for(settled, "the transaction's marker", timeout=20)
    assert error == 0
    return int(offset)


def committed(broker: BrokerProcess, group: str) -> tuple[int, int]:
    """The group's offset of the source partition with RequireStable: (offset, error)."""
    with connect(broker, timeout=20.0) as conn:
        response = conn.request(OFFSET_FETCH, 7, OffsetFetchRequest(
            group_id=group, require_stable=True, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=SOURCE,
                                                           partition_indexes=[0])]))
    assert response.error_code == 0, response
    (partition,) = response.topics[0].partitions
    return partition.committed_offset, partition.error_code


def sink_values(bootstrap: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(SINK, 0, 0)])
        values: list[bytes] = []
        idle = 0
        while idle < 3:
            message = consumer.poll(1.0)
            if message is None:
                idle += 1
            elif message.error() is None:
                values.append(message.value() or b"")
        return values
    finally:
        consumer.close()


def test_consume_transform_produce_commits_offsets_with_the_transaction(
        broker: BrokerProcess) -> None:
    bootstrap = f"127.0.0.1:{broker.port}"
    group = f"eos-{uuid.uuid4().hex[:8]}"
    source = Producer({"bootstrap.servers": bootstrap})
    for i in range(RECORDS):
        source.produce(SOURCE, value=f"r{i}".encode())
    assert source.flush(20) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": bootstrap,
                         "transactional.id": f"eos-{uuid.uuid4().hex[:8]}"})
    try:
        producer.init_transactions(30)
        consumer.subscribe([SOURCE])

        def transform(count: int, commit: bool) -> None:
            batch: list[bytes] = []
            while len(batch) < count:
                message = consumer.poll(10.0)
                assert message is not None, "the source ran dry"
                error = message.error()
                if error is None:
                    batch.append(message.value() or b"")
                else:
                    assert error.code() == KafkaError._PARTITION_EOF
            producer.begin_transaction()
            for value in batch:
                producer.produce(SINK, value=value.upper())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 30)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)

        transform(4, commit=True)
        assert stable(broker, group) == 4
        transform(3, commit=False)  # its output and its offsets are dropped together
        assert stable(broker, group) == 4
    finally:
        consumer.close()

    assert sink_values(bootstrap) == [f"R{i}".encode() for i in range(4)]
    # the coordinator of the offsets partition restarts and loads it from the log
    broker.stop()
    broker.start()
    with connect(broker, timeout=20.0) as conn:
        ensure_coordinator(conn)
    assert committed(broker, group) == (4, 0)  # settled before the restart
    # the group resumes where the committed transaction left it
    resumed = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                        "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        resumed.subscribe([SOURCE])
        first = None
        for _ in range(30):
            first = resumed.poll(1.0)
            if first is not None and first.error() is None:
                break
        assert first is not None and first.error() is None
        assert (first.offset(), first.value()) == (4, b"r4")
    finally:
        resumed.close()
