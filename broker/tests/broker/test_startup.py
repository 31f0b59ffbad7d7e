"""Startup: what stops a broker with a clear message, and broker id generation; and the
compacted-topic rule that needs the records read (a keyless record is refused)."""

from __future__ import annotations

import time
import uuid

from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.storage import checkpoints


def _failed_start(tmp_path, zk_connect: str, props: dict[str, str]) -> tuple[int, str]:
    broker = BrokerProcess(str(tmp_path / "b"), 1, zk_connect, properties=props)
    broker.start(wait=None)
    assert broker.process is not None
    code = broker.process.wait(60)
    return code, broker.tail(200)


def test_an_invalid_value_stops_startup_naming_the_key(tmp_path, zk_ensemble) -> None:
    code, output = _failed_start(tmp_path, zk_ensemble.connect_string + "/bad-config",
                                 {"message.max.bytes": "lots"})
    assert code == 1
    assert "message.max.bytes" in output and "lots" in output


def test_an_authorizer_moldau_cannot_load_stops_startup(tmp_path, zk_ensemble) -> None:
    # fail closed: Kafka 3 no longer has SimpleAclAuthorizer and refuses to start; a broker
    # that started without the authorizer asked for would allow every client everything
    code, output = _failed_start(tmp_path, zk_ensemble.connect_string + "/authorizer",
                                 {"authorizer.class.name":
                                  "kafka.security.auth.SimpleAclAuthorizer"})
    assert code == 1
    assert "authorizer.class.name" in output
    assert "ClassNotFoundException: kafka.security.auth.SimpleAclAuthorizer" in output


def test_unreachable_zookeeper_exits_after_the_connection_timeout(tmp_path) -> None:
    started = time.monotonic()
    code, output = _failed_start(tmp_path, f"127.0.0.1:{free_port()}",
                                 {"zookeeper.connection.timeout.ms": "2000"})
    took = time.monotonic() - started
    assert code == 1
    assert "Timed out waiting for connection" in output
    assert took < 30


def test_generated_broker_id_is_above_the_reserved_range_and_kept(tmp_path,
                                                                  zk_ensemble) -> None:
    connect = zk_ensemble.connect_string + f"/gen-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(str(tmp_path / "b"), -1, connect)
    broker.write_config()
    broker.broker_id = 1001  # what /brokers/seqid gives first above reserved.broker.max.id
    broker.start()
    try:
        meta = checkpoints.read_meta_properties(broker.data_dir)
        assert meta is not None and meta.broker_id == 1001
    finally:
        assert broker.stop() == 0
    broker.start()  # the id now comes from meta.properties
    assert broker.stop() == 0


def test_compacted_topic_refuses_records_without_a_key(broker) -> None:
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"compacted-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[
        topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0})
    outcomes: list = []
    producer.produce(topic, b"no key", on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(30)  # alone in its batch: Kafka refuses a whole batch
    producer.produce(topic, b"keyed", b"k", on_delivery=lambda err, msg: outcomes.append(
        (err, msg.offset())))
    producer.flush(30)
    assert outcomes[0] is not None and outcomes[0].code() == KafkaError.INVALID_RECORD
    assert outcomes[1] == (None, 0)  # nothing of the refused batch was written
