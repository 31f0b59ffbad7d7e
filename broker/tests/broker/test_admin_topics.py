"""Topic administration against one Moldau broker with unmodified clients (confluent-kafka,
kafka-python, aiokafka) and, where no Python client exposes a field, the raw protocol:
CreateTopics (configs, validate_only, explicit assignment, Kafka's errors), DeleteTopics
(by name, by id, delete.topic.enable=false), CreatePartitions, DeleteRecords,
DescribeLogDirs, DescribeCluster and OffsetForLeaderEpoch."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from .conftest import start_broker
from .raw import connect, topic_name, wait_until

TIMEOUT = 30


def admin(broker: Any) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap})


def outcome(future: Any) -> Any:
    """The result of an admin future, or the KafkaError it failed with."""
    from confluent_kafka import KafkaException

    try:
        return future.result(TIMEOUT)
    except KafkaException as exc:
        return exc.args[0]


def produce(broker: Any, topic: str, count: int, partition: int = 0) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, f"value-{i}".encode(), partition=partition)
    assert producer.flush(TIMEOUT) == 0


# --- CreateTopics -----------------------------------------------------------------------


def test_create_topics_confluent(broker) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import ConfigResource, NewTopic, ResourceType

    client = admin(broker)
    plain, assigned, checked = topic_name("ct"), topic_name("ct-assign"), topic_name("ct-vo")
    futures = client.create_topics(
        [NewTopic(plain, 3, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"}),
         NewTopic(assigned, 2, replica_assignment=[[1], [1]])], operation_timeout=TIMEOUT)
    assert [outcome(f) for f in futures.values()] == [None, None]
    described = client.describe_topics(_collection([plain, assigned]))
    topics = {name: outcome(f) for name, f in described.items()}
    assert len(topics[plain].partitions) == 3
    assert [p.leader.id for p in topics[assigned].partitions] == [1, 1]
    configs = outcome(client.describe_configs([ConfigResource(ResourceType.TOPIC, plain)])
                      [ConfigResource(ResourceType.TOPIC, plain)])
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "compact"
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].source == 5  # DEFAULT_CONFIG

    # validate_only checks everything and creates nothing
    futures = client.create_topics([NewTopic(checked, 2, 1)], validate_only=True)
    assert outcome(futures[checked]) is None
    futures = client.create_topics([NewTopic(checked, 2, 3)], validate_only=True)
    assert outcome(futures[checked]).code() == KafkaError.INVALID_REPLICATION_FACTOR
    missing = outcome(client.describe_topics(_collection([checked]))[checked])
    assert missing.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    errors = {
        plain: NewTopic(plain, 1, 1),
        "bad name": NewTopic("bad name", 1, 1),
        "x" * 250: NewTopic("x" * 250, 1, 1),
        "rf3": NewTopic(topic_name("rf3"), 1, 3),
        "zero": NewTopic(topic_name("zero"), 0, 1),
        "unknown-config": NewTopic(topic_name("cfg"), 1, 1, config={"no.such.config": "1"}),
        "bad-value": NewTopic(topic_name("cfg"), 1, 1, config={"retention.ms": "soon"}),
    }
    futures = client.create_topics(list(errors.values()), operation_timeout=TIMEOUT)
    got = {label: outcome(futures[t.topic]) for label, t in errors.items()}
    assert got[plain].code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert got[plain].str() == f"Topic '{plain}' already exists."
    assert got["bad name"].code() == KafkaError.TOPIC_EXCEPTION
    assert "contains one or more characters other than ASCII alphanumerics" in got["bad name"].str()
    assert got["x" * 250].code() == KafkaError.TOPIC_EXCEPTION
    assert got["rf3"].code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert got["rf3"].str() == "Replication factor: 3 larger than available brokers: 1."
    assert got["zero"].code() == KafkaError.INVALID_PARTITIONS
    assert got["unknown-config"].code() == KafkaError.INVALID_CONFIG
    assert got["unknown-config"].str() == "Unknown topic config name: no.such.config"
    assert got["bad-value"].code() == KafkaError.INVALID_CONFIG
    assert got["bad-value"].str() == ("Invalid value soon for configuration retention.ms: "
                                      "Not a number of type LONG")

    # '.' and '_' collide (metric names): Kafka refuses the second topic
    dotted = topic_name("col.x")
    underscored = dotted.replace(".", "_")
    assert outcome(client.create_topics([NewTopic(dotted, 1, 1)],
                                        operation_timeout=TIMEOUT)[dotted]) is None
    collided = outcome(client.create_topics([NewTopic(underscored, 1, 1)])[underscored])
    assert collided.code() == KafkaError.TOPIC_EXCEPTION
    assert collided.str() == f"Topic '{underscored}' collides with existing topic: {dotted}"


def _collection(names: list[str]) -> Any:
    from confluent_kafka import TopicCollection

    return TopicCollection(names)


def test_create_topics_kafka_python_defaults_and_configs(broker) -> None:
    from kafka.admin import KafkaAdminClient

    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        name, defaults = topic_name("kp"), topic_name("kp-defaults")
        response = client.create_topics(
            {name: {"num_partitions": 2, "replication_factor": 1,
                    "configs": {"segment.bytes": "1000000"}},
             defaults: {}},  # -1/-1: the broker's num.partitions and default.replication.factor
            timeout_ms=TIMEOUT * 1000)
        by_name = {t["name"]: t for t in response["topics"]}
        assert by_name[name]["error_code"] == 0
        assert by_name[name]["num_partitions"] == 2  # CreateTopics v5+ answers these
        assert by_name[name]["replication_factor"] == 1
        segment = by_name[name]["configs"]["segment.bytes"]
        assert (segment["value"], segment["config_source"]) == ("1000000",
                                                              "DYNAMIC_TOPIC_CONFIG")
        assert by_name[name]["configs"]["retention.bytes"]["config_source"] == "DEFAULT_CONFIG"
        assert by_name[defaults]["num_partitions"] == 1
        assert by_name[name]["topic_id"] not in (None, "00000000-0000-0000-0000-000000000000")

        again = client.create_topics({name: {}, topic_name("kp-rf"): {"replication_factor": 5}},
                                     raise_errors=False)
        errors = {t["error_code"]: t["error_message"] for t in again["topics"]}
        assert errors == {36: f"Topic '{name}' already exists.",
                          38: "Replication factor: 5 larger than available brokers: 1."}
        described = client.describe_topics([name])
        assert len(described[0]["partitions"]) == 2
    finally:
        client.close()


def test_aiokafka_create_partitions_delete(broker) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic

    name = topic_name("aio")

    async def scenario() -> None:
        client = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await client.start()
        try:
            created = await client.create_topics([NewTopic(name, 2, 1)])
            assert [t[1] for t in created.topic_errors] == [0]
            grown = await client.create_partitions({name: NewPartitions(4)})
            assert [r[1] for r in grown.topic_errors] == [0]
            described = await client.describe_topics([name])
            assert len(described[0]["partitions"]) == 4
            deleted = await client.delete_topics([name])
            assert [t[1] for t in deleted.topic_error_codes] == [0]
        finally:
            await client.close()

    asyncio.run(scenario())


# --- CreatePartitions -------------------------------------------------------------------


def test_create_partitions(broker) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewPartitions, NewTopic

    client = admin(broker)
    name = topic_name("cp")
    assert outcome(client.create_topics([NewTopic(name, 3, 1)],
                                        operation_timeout=TIMEOUT)[name]) is None
    # validate_only changes nothing
    assert outcome(client.create_partitions([NewPartitions(name, 10)], validate_only=True)
                   [name]) is None
    assert outcome(client.create_partitions([NewPartitions(name, 5)],
                                            operation_timeout=TIMEOUT)[name]) is None
    topic = outcome(client.describe_topics(_collection([name]))[name])
    assert [p.id for p in topic.partitions] == [0, 1, 2, 3, 4]
    assert all(p.leader.id == 1 for p in topic.partitions)
    produce(broker, name, 3, partition=4)  # the new partitions take records at once

    same = outcome(client.create_partitions([NewPartitions(name, 5)])[name])
    assert same.code() == KafkaError.INVALID_PARTITIONS
    assert same.str() == "Topic already has 5 partitions."
    fewer = outcome(client.create_partitions([NewPartitions(name, 2)])[name])
    assert fewer.code() == KafkaError.INVALID_PARTITIONS
    assert fewer.str() == "Topic currently has 5 partitions, which is higher than the " \
                          "requested 2."
    unknown_broker = outcome(client.create_partitions(
        [NewPartitions(name, 6, replica_assignment=[[7]])])[name])
    assert unknown_broker.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert outcome(client.create_partitions(
        [NewPartitions(name, 6, replica_assignment=[[1]])], operation_timeout=TIMEOUT)
        [name]) is None
    absent = topic_name("none")
    futures = client.create_partitions([NewPartitions(absent, 2)])
    missing = outcome(futures[absent])
    assert missing.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    topic = outcome(client.describe_topics(_collection([name]))[name])
    assert len(topic.partitions) == 6


# --- DeleteTopics -----------------------------------------------------------------------


def test_delete_topics_by_name_and_id(broker) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic
    from kafka.admin import KafkaAdminClient

    client = admin(broker)
    first, second = topic_name("del"), topic_name("del-id")
    futures = client.create_topics([NewTopic(first, 2, 1), NewTopic(second, 1, 1)],
                                   operation_timeout=TIMEOUT)
    assert [outcome(f) for f in futures.values()] == [None, None]
    produce(broker, first, 5)
    assert outcome(client.delete_topics([first], operation_timeout=TIMEOUT)[first]) is None
    gone = outcome(client.describe_topics(_collection([first]))[first])
    assert gone.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    never = topic_name("never")
    futures = client.delete_topics([never])
    unknown = outcome(futures[never])
    assert unknown.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    # DeleteTopics v6 by topic id (kafka-python sends uuid.UUID ids as ids)
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        topic_id = uuid.UUID(kp.describe_topics([second])[0]["topic_id"])
        response = kp.delete_topics([topic_id], timeout_ms=TIMEOUT * 1000)
        result = response["topics"][0]
        assert (result["name"], result["error_code"]) == (second, 0)
        unknown_id = kp.delete_topics([uuid.uuid4()], raise_errors=False)
        assert unknown_id["topics"][0]["error_code"] == 100  # UNKNOWN_TOPIC_ID
    finally:
        kp.close()
    assert wait_until(lambda: outcome(client.describe_topics(_collection([second]))[second])
                      .code() == KafkaError.UNKNOWN_TOPIC_OR_PART)
    # the name is free again: the topic can be created anew, empty
    assert outcome(client.create_topics([NewTopic(first, 1, 1)],
                                        operation_timeout=TIMEOUT)[first]) is None


def test_delete_topic_disabled(tmp_path_factory, zk_ensemble) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    process = start_broker(tmp_path_factory, zk_ensemble.connect_string,
                           {"delete.topic.enable": "false"})
    try:
        client = admin(process)
        name = topic_name("keep")
        assert outcome(client.create_topics([NewTopic(name, 1, 1)],
                                            operation_timeout=TIMEOUT)[name]) is None
        refused = outcome(client.delete_topics([name], operation_timeout=TIMEOUT)[name])
        assert refused.code() == KafkaError.TOPIC_DELETION_DISABLED
        kept = outcome(client.describe_topics(_collection([name]))[name])
        assert len(kept.partitions) == 1
    finally:
        assert process.stop() == 0, process.tail()


# --- DeleteRecords ----------------------------------------------------------------------


def test_delete_records(broker) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition
    from confluent_kafka.admin import NewTopic
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    client = admin(broker)
    name = topic_name("dr")
    assert outcome(client.create_topics([NewTopic(name, 2, 1)],
                                        operation_timeout=TIMEOUT)[name]) is None
    produce(broker, name, 10, partition=0)
    produce(broker, name, 4, partition=1)
    result = outcome(client.delete_records([TopicPartition(name, 0, 4)])[
        TopicPartition(name, 0, 4)])
    assert result.low_watermark == 4
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10) == (4, 10)
    finally:
        consumer.close()
    beyond = outcome(client.delete_records([TopicPartition(name, 0, 11)])[
        TopicPartition(name, 0, 11)])
    assert beyond.code() == KafkaError.OFFSET_OUT_OF_RANGE

    # kafka-python: -1 deletes up to the high watermark
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        deleted = kp.delete_records({KTopicPartition(name, 1): -1})
        assert deleted[KTopicPartition(name, 1)]["low_watermark"] == 4
    finally:
        kp.close()

    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.structs import TopicPartition as ATopicPartition

    async def with_aiokafka() -> dict[Any, int]:
        aio = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await aio.start()
        try:
            return await aio.delete_records({ATopicPartition(name, 0): RecordsToDelete(7)})
        finally:
            await aio.close()

    assert asyncio.run(with_aiokafka()) == {ATopicPartition(name, 0): 7}


# --- DescribeLogDirs, DescribeCluster ---------------------------------------------------


def test_describe_log_dirs(broker) -> None:
    from kafka.admin import KafkaAdminClient

    from moldau.protocol.generated.describe_log_dirs_request import DescribeLogDirsRequest

    name = topic_name("ld")
    produce(broker, name, 20)  # auto-created with one partition
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        dirs = client.describe_log_dirs()
    finally:
        client.close()
    (entry,) = dirs
    assert entry["broker"] == 1
    (log_dir,) = entry["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == broker.data_dir
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    topics = {t["name"]: t["partitions"] for t in log_dir["topics"]}
    (partition,) = topics[name]
    assert partition["partition_index"] == 0
    assert partition["partition_size"] > 20 * len(b"value-0")
    assert (partition["offset_lag"], partition["is_future_key"]) == (0, False)

    # v0 has no sizes of the file system; a filter by partition
    with connect(broker, TIMEOUT) as conn:
        response = conn.request(35, 0, DescribeLogDirsRequest(
            topics=[DescribeLogDirsRequest.DescribableLogDirTopic(topic=name, partitions=[0])]))
    (result,) = response.results
    wanted = [t for t in result.topics if t.partitions]
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in wanted] == [(name, [0])]


def test_describe_cluster(broker) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from kafka.admin import KafkaAdminClient

    client = admin(broker)  # keep it alive while its future runs (librdkafka asks Metadata)
    described = outcome(client.describe_cluster())
    assert described.controller.id == 1
    assert [(n.id, n.host, n.port) for n in described.nodes] == [
        (1, "127.0.0.1", broker.port)]
    assert described.cluster_id

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)  # DescribeCluster itself
    try:
        info = kp.describe_cluster()
    finally:
        kp.close()
    assert info["cluster_id"] == described.cluster_id
    assert info["controller_id"] == 1
    assert info["brokers"] == [{"broker_id": 1, "host": "127.0.0.1", "port": broker.port,
                                "rack": None}]
    assert set(info["authorized_operations"]) == {
        "CREATE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE"}

    async def with_aiokafka() -> dict[str, Any]:
        client = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await client.start()
        try:
            return await client.describe_cluster()
        finally:
            await client.close()

    aio_info = asyncio.run(with_aiokafka())
    assert aio_info["controller_id"] == 1
    assert aio_info["cluster_id"] == described.cluster_id

    from moldau.protocol.generated.describe_cluster_request import DescribeClusterRequest

    # v1 asked for the controller endpoints: MISMATCHED_ENDPOINT_TYPE
    with connect(broker, TIMEOUT) as conn:
        response = conn.request(60, 1, DescribeClusterRequest(endpoint_type=2))
    assert response.error_code == 114


# --- OffsetForLeaderEpoch ---------------------------------------------------------------


def test_offset_for_leader_epoch(broker) -> None:
    from moldau.protocol.generated.offset_for_leader_epoch_request import (
        OffsetForLeaderEpochRequest as Request,
    )

    name = topic_name("ofle")
    produce(broker, name, 6)

    def ask(topic: str, leader_epoch: int, current: int = -1) -> Any:
        body = Request(replica_id=-1, topics=[Request.OffsetForLeaderTopic(
            topic=topic, partitions=[Request.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=current, leader_epoch=leader_epoch)])])
        with connect(broker, TIMEOUT) as conn:
            return conn.request(23, 4, body).topics[0].partitions[0]

    latest = ask(name, 0, current=0)
    assert (latest.error_code, latest.leader_epoch, latest.end_offset) == (0, 0, 6)
    above = ask(name, 3)  # an epoch this log never had: undefined
    assert (above.error_code, above.leader_epoch, above.end_offset) == (0, -1, -1)
    assert ask(name, 0, current=4).error_code == 75  # UNKNOWN_LEADER_EPOCH (ours is 0)
    assert ask(topic_name("none"), 0).error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION


# --- routing: the controller APIs ------------------------------------------------------


def test_topic_admin_apis_answer_not_controller_off_the_controller() -> None:
    """CreateTopics, DeleteTopics and CreatePartitions are served by the active controller
    only; another broker answers NOT_CONTROLLER for every topic (the single broker is
    always its own controller, so this calls the handlers directly)."""
    from types import SimpleNamespace

    from moldau.protocol.generated.create_partitions_request import CreatePartitionsRequest
    from moldau.protocol.generated.create_topics_request import CreateTopicsRequest
    from moldau.protocol.generated.delete_topics_request import DeleteTopicsRequest
    from moldau.server.handlers.topics import (
        CreatePartitionsHandler,
        CreateTopicsHandler,
        DeleteTopicsHandler,
    )

    follower = SimpleNamespace(active=False)  # a controller that is not the active one
    config: Any = {"delete.topic.enable": True}
    unused: Any = None  # not reached before the controller check
    ctx = SimpleNamespace(api_version=6, authorize=lambda *_: True)
    created = asyncio.run(CreateTopicsHandler(
        config, unused, unused, unused, unused, lambda: follower)(ctx, CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(name="a", num_partitions=1,
                                                       replication_factor=1)])))
    deleted = asyncio.run(DeleteTopicsHandler(config, unused, unused, lambda: follower)(
        ctx, DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name="a")],
                                 timeout_ms=1000)))
    grown = asyncio.run(CreatePartitionsHandler(unused, unused, unused, lambda: follower)(
        ctx, CreatePartitionsRequest(
            topics=[CreatePartitionsRequest.CreatePartitionsTopic(name="a", count=2)])))
    assert [t.error_code for t in created.topics] == [41]
    assert [t.error_code for t in deleted.responses] == [41]
    assert [t.error_code for t in grown.results] == [41]


def test_an_assignment_naming_an_absent_broker_creates_offline_partitions(broker) -> None:
    """Kafka's ZooKeeper mode takes brokers that are not registered: the partition exists
    without a leader until that broker arrives, and CreateTopics times out waiting for it."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    from moldau.protocol.generated.metadata_request import MetadataRequest

    client = admin(broker)
    name = topic_name("ct-offline")
    futures = client.create_topics([NewTopic(name, 2, replica_assignment=[[1], [7]])],
                                   operation_timeout=2, request_timeout=15)
    error = outcome(futures[name])
    assert error is not None and error.code() == KafkaError.REQUEST_TIMED_OUT
    with connect(broker, TIMEOUT) as conn:
        response = conn.request(3, 12, MetadataRequest(topics=[
            MetadataRequest.MetadataRequestTopic(name=name)]))
    partitions = {p.partition_index: p for p in response.topics[0].partitions}
    assert (partitions[0].error_code, partitions[0].leader_id) == (0, 1)
    assert (partitions[1].error_code, partitions[1].leader_id) == (5, -1)  # LEADER_NOT_AVAILABLE
    assert partitions[1].replica_nodes == [7] and partitions[1].offline_replicas == [7]
