"""Kafka 3.9's znode payloads: exact bytes of known Kafka writes, round trips, old versions."""

import json
import uuid

import pytest

from moldau.cluster import zk_data as zd
from moldau.cluster.zk_data import (
    BrokerRegistration,
    EndPoint,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
)

TOPIC_ID = uuid.UUID("7b3c2f8e-1d4a-4e5b-9c6d-0a1b2c3d4e5f")


def test_paths() -> None:
    assert zd.broker_path(3) == "/brokers/ids/3"
    assert zd.topic_path("t") == "/brokers/topics/t"
    assert zd.partition_state_path("t", 2) == "/brokers/topics/t/partitions/2/state"
    assert zd.delete_topic_path("t") == "/admin/delete_topics/t"
    assert zd.config_entity_path("topics", "t") == "/config/topics/t"
    assert zd.CONFIG_CHANGE_CREATE_PATH == "/config/changes/config_change_"
    assert zd.PERSISTENT_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes",
        "/admin/delete_topics", "/brokers/seqid", "/isr_change_notification",
        "/latest_producer_id_block", "/log_dir_event_notification",
        "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips",
    )


def test_kafka_uuid_strings() -> None:
    assert zd.uuid_to_str(zd.ZERO_UUID) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert zd.uuid_to_str(zd.ONE_UUID) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert zd.uuid_from_str("AAAAAAAAAAAAAAAAAAAAAQ") == zd.METADATA_TOPIC_ID
    for _ in range(200):
        value = zd.random_uuid()
        text = zd.uuid_to_str(value)
        assert value not in zd.RESERVED_UUIDS and not text.startswith("-")
        assert len(text) == 22 and zd.uuid_from_str(text) == value
    cluster_id = zd.generate_cluster_id()
    assert len(cluster_id) == 22 and zd.uuid_from_str(cluster_id)


def test_sanitize_like_kafka() -> None:
    assert zd.sanitize("alice") == "alice"
    assert zd.sanitize("user@example.com") == "user%40example.com"
    assert zd.sanitize("a b*c~d") == "a%20b%2Ac%7Ed"
    assert zd.desanitize("a%20b%2Ac%7Ed") == "a b*c~d"


# -- /brokers/ids ------------------------------------------------------------------------------


def test_broker_registration_bytes_as_kafka_writes_them() -> None:
    # A Kafka 3.x broker with one PLAINTEXT listener (zookeeper-shell get /brokers/ids/0).
    reg = BrokerRegistration(0, [("PLAINTEXT", "localhost", 9092, "PLAINTEXT")],
                             timestamp=1700000000000)
    assert reg.encode() == (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,'
        b'"host":"localhost","version":5,"timestamp":"1700000000000"}'
    )


def test_broker_registration_without_plaintext_and_with_rack() -> None:
    reg = BrokerRegistration(
        2,
        [("SSL", "b2.example", 9093, "SSL"), ("INTERNAL", "10.0.0.2", 9094, "SASL_PLAINTEXT"),
         ("V6", "::1", 9095, "SASL_SSL")],
        rack="r1", jmx_port=9999, timestamp=5,
    )
    data = reg.encode()
    obj = json.loads(data)
    assert obj["host"] is None and obj["port"] == -1  # no PLAINTEXT endpoint
    assert obj["endpoints"] == ["SSL://b2.example:9093", "INTERNAL://10.0.0.2:9094",
                                "V6://[::1]:9095"]
    assert list(obj) == ["features", "listener_security_protocol_map", "endpoints", "rack",
                         "jmx_port", "port", "host", "version", "timestamp"]
    assert list(obj["listener_security_protocol_map"]) == ["SSL", "INTERNAL", "V6"]
    assert BrokerRegistration.decode(2, data) == reg


def test_broker_registration_decodes_old_versions() -> None:
    v1 = b'{"version":1,"host":"h1","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    reg = BrokerRegistration.decode(1, v1)
    assert reg.endpoints == [EndPoint("PLAINTEXT", "h1", 9092, "PLAINTEXT")]
    assert reg.jmx_port == 9999 and reg.timestamp == 2233345666 and reg.version == 1
    v3 = (b'{"version":3,"host":"h1","port":9092,"jmx_port":-1,"timestamp":"1",'
          b'"endpoints":["PLAINTEXT://h1:9092","SSL://h1:9093"],"rack":"dc1"}')
    reg = BrokerRegistration.decode(1, v3)
    assert reg.rack == "dc1"
    assert reg.endpoints[1] == EndPoint("SSL", "h1", 9093, "SSL")
    v4 = (b'{"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
          b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],"rack":"dc1",'
          b'"jmx_port":9999,"host":"host1","timestamp":"2233345666","port":9093,"version":4}')
    reg = BrokerRegistration.decode(7, v4)
    assert reg.endpoint("CLIENT") == EndPoint("CLIENT", "host1", 9092, "SSL")
    assert reg.endpoint("REPLICATION") == EndPoint("REPLICATION", "host1", 9093, "PLAINTEXT")
    v5 = (b'{"features":{"metadata.version":{"min_version":1,"max_version":21}},'
          b'"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
          b'"endpoints":["PLAINTEXT://:9092"],"jmx_port":-1,"port":9092,"host":null,'
          b'"version":5,"timestamp":"1"}')
    reg = BrokerRegistration.decode(3, v5)
    assert reg.features == {"metadata.version": {"min_version": 1, "max_version": 21}}
    assert reg.endpoints == [EndPoint("PLAINTEXT", None, 9092, "PLAINTEXT")]
    assert BrokerRegistration.decode(3, reg.encode()) == reg


# -- /brokers/topics ---------------------------------------------------------------------------


def test_topic_assignment_bytes_as_kafka_writes_them() -> None:
    ta = TopicAssignment({0: [1, 2], 1: [2, 3], 2: [3, 1]}, TOPIC_ID)
    assert ta.encode() == (
        b'{"partitions":{"0":[1,2],"1":[2,3],"2":[3,1]},"topic_id":"'
        + zd.uuid_to_str(TOPIC_ID).encode()
        + b'","adding_replicas":{},"removing_replicas":{},"version":3}'
    )
    assert TopicAssignment.decode(ta.encode()) == ta


def test_topic_assignment_partition_order_is_scala_hash_order() -> None:
    # 20 partitions: a 32-slot Scala HashMap; "11".."19" hash to the low slots.
    ta = TopicAssignment({p: [1] for p in range(20)})
    keys = list(json.loads(ta.encode())["partitions"])
    assert keys == [str(p) for p in (*range(11, 20), *range(10), 10)]
    assert TopicAssignment.decode(ta.encode()).partitions == ta.partitions


def test_topic_assignment_reassignment_and_old_versions() -> None:
    ta = TopicAssignment({0: [1, 2, 3]}, TOPIC_ID, adding_replicas={0: [3], 1: []},
                         removing_replicas={0: [1]})
    obj = json.loads(ta.encode())
    assert obj["adding_replicas"] == {"0": [3]} and obj["removing_replicas"] == {"0": [1]}
    back = TopicAssignment.decode(ta.encode(), zk_version=4)
    assert back.adding_replicas == {0: [3]} and back.zk_version == 4
    v1 = TopicAssignment.decode(b'{"version":1,"partitions":{"0":[1],"1":[2]}}')
    assert v1.topic_id is None and v1.partitions == {0: [1], 1: [2]} and v1.version == 1
    assert v1.adding_replicas == {}
    v2 = TopicAssignment.decode(
        b'{"version":2,"partitions":{"0":[1]},"adding_replicas":{},"removing_replicas":{}}')
    assert v2.topic_id is None and v2.version == 2
    assert json.loads(v2.encode())["version"] == 3 and b"topic_id" not in v2.encode()
    assert TopicAssignment.decode(b"").partitions == {}


# -- partition state ---------------------------------------------------------------------------


def test_partition_state_bytes_as_kafka_writes_them() -> None:
    state = PartitionState(leader=1, leader_epoch=0, isr=[1], controller_epoch=1)
    data = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}'
    assert state.encode() == data
    assert PartitionState.decode(data) == state


def test_partition_state_leader_recovery_state_is_kept() -> None:
    state = PartitionState(leader=2, leader_epoch=5, isr=[2], controller_epoch=3,
                           leader_recovery_state=zd.LEADER_RECOVERY_RECOVERING)
    data = state.encode()
    assert json.loads(data)["leader_recovery_state"] == 1
    assert PartitionState.decode(data) == state
    kafka = b'{"controller_epoch":3,"leader":2,"version":1,"leader_epoch":5,"isr":[2],' \
            b'"leader_recovery_state":1}'
    assert PartitionState.decode(kafka) == state


# -- configs and notifications -----------------------------------------------------------------


def test_entity_config() -> None:
    assert zd.encode_entity_config({"cleanup.policy": "compact"}) == (
        b'{"version":1,"config":{"cleanup.policy":"compact"}}')
    assert zd.encode_entity_config({}) == b'{"version":1,"config":{}}'
    cfg = {"retention.ms": "1000", "segment.bytes": "1048576", "cleanup.policy": "delete"}
    data = zd.encode_entity_config(cfg)
    # java.util.Properties order (checked against a JVM + Jackson run of the same keys).
    assert data == (b'{"version":1,"config":{"cleanup.policy":"delete","retention.ms":"1000",'
                    b'"segment.bytes":"1048576"}}')
    assert zd.decode_entity_config(data) == cfg
    assert zd.decode_entity_config(None) == {} and zd.decode_entity_config(b"") == {}
    assert zd.decode_entity_config(b'{"version":1}') == {}


def test_config_change_notifications() -> None:
    assert zd.encode_config_change("topics/foo") == b'{"version":2,"entity_path":"topics/foo"}'
    assert zd.decode_config_change(b'{"version":2,"entity_path":"topics/foo"}') == (
        "topics", "foo")
    assert zd.decode_config_change(
        b'{"version":2,"entity_path":"users/alice/clients/app"}') == ("users", "alice/clients/app")
    assert zd.decode_config_change(
        b'{"version":1,"entity_type":"topics","entity_name":"foo"}') == ("topics", "foo")
    with pytest.raises(ValueError):
        zd.decode_config_change(b'{"version":3,"entity_path":"topics/foo"}')
    assert zd.sequence_number("config_change_0000000042") == 42


def test_controller_cluster_id_producer_ids() -> None:
    assert zd.encode_controller(1, 1700000000000) == (
        b'{"version":2,"brokerid":1,"timestamp":"1700000000000","kraftControllerEpoch":-1}')
    assert zd.decode_controller(b'{"version":1,"brokerid":4,"timestamp":"1"}') == 4
    assert zd.decode_controller_kraft_epoch(zd.encode_controller(1, 1)) == -1
    assert zd.encode_controller_epoch(7) == b"7" and zd.decode_controller_epoch(b"7") == 7
    assert zd.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert zd.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    block = ProducerIdBlock(1, 0)
    assert block.encode() == b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}'
    assert ProducerIdBlock.decode(block.encode()) == block
    assert block.next_block_first == 1000


def test_admin_and_notification_payloads() -> None:
    data = zd.encode_isr_change([("t", 0)])
    assert data == b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert zd.decode_isr_change(data) == {("t", 0)}
    assert zd.encode_log_dir_event(3) == b'{"version":1,"broker":3,"event":1}'
    assert zd.decode_log_dir_event(zd.encode_log_dir_event(3)) == 3
    assert zd.decode_preferred_replica_election(zd.encode_preferred_replica_election(
        [("t", 1)])) == {("t", 1)}
    assert zd.decode_reassignment(zd.encode_reassignment({("t", 0): [1, 2]})) == {
        ("t", 0): [1, 2]}
