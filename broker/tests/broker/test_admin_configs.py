"""Topic and broker configs at runtime: DescribeConfigs (sources, synonyms), AlterConfigs and
IncrementalAlterConfigs for topics, brokers (per broker and the cluster-wide default) and
broker loggers, with unmodified clients; the cluster default ("" resource name, what
`kafka-configs --entity-default` sends) through the raw protocol, since no Python client
can name it. The seeds' scenarios: lab 5a "Exploring Configuration" (precedence topic >
per-broker dynamic > cluster-wide dynamic > server.properties > default) and the activity
"Deleting a Broker Config" (`--delete-config min.insync.replicas`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from moldau.protocol.generated.alter_configs_request import AlterConfigsRequest
from moldau.protocol.generated.describe_configs_request import DescribeConfigsRequest
from moldau.protocol.generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)

from .conftest import start_broker
from .raw import connect, topic_name, wait_until

TIMEOUT = 30
SECRET = "moldau-test-encoder-secret"
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# DescribeConfigs sources
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT, LOGGER = 1, 2, 3, 4, 5, 6
INVALID_REQUEST, INVALID_CONFIG = 42, 40


@pytest.fixture(scope="module")
def broker(tmp_path_factory, zk_ensemble) -> Iterator[Any]:
    """A broker whose server.properties sets some dynamic keys, so every level of the
    precedence list can be seen."""
    process = start_broker(tmp_path_factory, zk_ensemble.connect_string, {
        "num.partitions": "1",
        "log.cleaner.threads": "1",
        "min.insync.replicas": "1",
        "log.retention.hours": "100",
        "password.encoder.secret": SECRET,
    })
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM\n{process.tail()}"


# --- the raw protocol (what kafka-configs sends) ----------------------------------------


def alter(broker: Any, rtype: int, name: str, ops: list[tuple[str, int, str | None]],
          validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs v1 on one resource: (error code, message)."""
    R = IncrementalAlterConfigsRequest
    body = R(resources=[R.AlterConfigsResource(
        resource_type=rtype, resource_name=name,
        configs=[R.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])],
        validate_only=validate_only)
    with connect(broker, TIMEOUT) as conn:
        (result,) = conn.request(44, 1, body).responses
    return result.error_code, result.error_message


def describe(broker: Any, rtype: int, name: str, keys: list[str] | None = None,
             version: int = 4) -> dict[str, Any]:
    """DescribeConfigs with synonyms: {name: entry}; raises on a resource error."""
    R = DescribeConfigsRequest
    body = R(resources=[R.DescribeConfigsResource(resource_type=rtype, resource_name=name,
                                                  configuration_keys=keys)],
             include_synonyms=version >= 1)
    with connect(broker, TIMEOUT) as conn:
        (result,) = conn.request(32, version, body).results
    if result.error_code:
        raise AssertionError((result.error_code, result.error_message))
    return {e.name: e for e in result.configs}


def describe_error(broker: Any, rtype: int, name: str) -> tuple[int, str | None]:
    R = DescribeConfigsRequest
    with connect(broker, TIMEOUT) as conn:
        (result,) = conn.request(32, 4, R(resources=[R.DescribeConfigsResource(
            resource_type=rtype, resource_name=name, configuration_keys=None)])).results
    return result.error_code, result.error_message


def synonyms(entry: Any) -> list[tuple[str, str | None, int]]:
    return [(s.name, s.value, s.source) for s in entry.synonyms]


def effective(broker: Any, rtype: int, name: str, key: str) -> tuple[str | None, int]:
    entry = describe(broker, rtype, name, [key])[key]
    return entry.value, entry.config_source


def create_topic(broker: Any, name: str, configs: dict[str, str] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = client.create_topics([NewTopic(name, 1, 1, config=configs or {})],
                                   operation_timeout=TIMEOUT)
    futures[name].result(TIMEOUT)


def produce_error(broker: Any, topic: str, size: int, acks: str = "1") -> int | None:
    """Produce one record; the error code of its delivery (None: delivered)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks,
                         "message.timeout.ms": 10000, "retries": 0})
    errors: list[Any] = []
    producer.produce(topic, b"x" * size, partition=0,
                     on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(TIMEOUT)
    assert len(errors) == 1
    return None if errors[0] is None else errors[0].code()


# --- DescribeConfigs --------------------------------------------------------------------


def test_describe_configs_sources_synonyms_and_types(broker) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType
    from kafka.admin import ConfigResource as KResource
    from kafka.admin import ConfigResourceType, KafkaAdminClient

    name = topic_name("dc")
    create_topic(broker, name, {"segment.bytes": "1000000"})

    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, name)
    configs = client.describe_configs([resource])[resource].result(TIMEOUT)
    assert configs["segment.bytes"].value == "1000000"
    assert configs["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["retention.bytes"].is_read_only
    assert configs["retention.ms"].value == str(100 * 3600 * 1000)  # log.retention.hours=100
    # Kafka 3.9's tiered storage keys, off as on a broker without remote log storage
    for key in ("remote.storage.enable", "remote.log.copy.disable",
                "remote.log.delete.on.disable"):
        assert (configs[key].value, configs[key].source) == (
            "false", ConfigSource.DEFAULT_CONFIG.value), key

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        got = kp.describe_configs([KResource(ConfigResourceType.TOPIC, name,
                                             ["segment.bytes", "min.insync.replicas"])],
                                  include_synonyms=True, config_filter="all")
        segment = got["topic"][name]["segment.bytes"]
        assert [(s["name"], s["value"], s["source"]) for s in segment["synonyms"]] == [
            ("segment.bytes", "1000000", "DYNAMIC_TOPIC_CONFIG"),
            ("log.segment.bytes", "1073741824", "DEFAULT_CONFIG")]
        assert segment["config_type"] == "INT"
        isr = got["topic"][name]["min.insync.replicas"]
        assert isr["config_source"] == "STATIC_BROKER_CONFIG"  # from server.properties
        # retention.ms maps to log.retention.ms, unset: Kafka lists synonyms from that
        # key on (ConfigHelper.configSynonyms' dropWhile), so none, and calls the value
        # a default although log.retention.hours=100 in server.properties made it
        # (issue 41, item 11)
        retention = kp.describe_configs(
            [KResource(ConfigResourceType.TOPIC, name, ["retention.ms"])],
            include_synonyms=True, config_filter="all")["topic"][name]["retention.ms"]
        assert retention["config_source"] == "DEFAULT_CONFIG"
        assert retention["value"] == str(100 * 3600 * 1000)
        assert retention["synonyms"] == []
        got = kp.describe_configs([KResource(ConfigResourceType.BROKER, "1",
                                             ["log.cleaner.threads", "log.dirs"])],
                                  include_synonyms=True, config_filter="all")
        threads = got["broker"]["1"]["log.cleaner.threads"]
        assert (threads["value"], threads["config_source"], threads["read_only"]) == (
            "1", "STATIC_BROKER_CONFIG", False)
        assert got["broker"]["1"]["log.dirs"]["read_only"] is True
    finally:
        kp.close()

    broker_configs = describe(broker, BROKER, "1")
    assert broker_configs["ssl.keystore.password"].is_sensitive
    assert broker_configs["ssl.keystore.password"].value is None
    assert broker_configs["log.retention.hours"].value == "100"
    assert synonyms(broker_configs["log.retention.hours"]) == [
        ("log.retention.hours", "100", STATIC), ("log.retention.hours", "168", DEFAULT)]
    assert broker_configs["log.segment.bytes"].config_type == 3  # INT
    assert broker_configs["log.cleanup.policy"].config_type == 7  # LIST
    # v0 has is_default instead of sources
    old = describe(broker, TOPIC, name, ["segment.bytes", "retention.bytes"], version=0)
    assert (old["segment.bytes"].is_default, old["retention.bytes"].is_default) == (
        False, True)

    assert describe_error(broker, BROKER, "7") == (
        INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 7")
    # Kafka 3.9 answers an absent topic with an empty message (its client prints none)
    assert describe_error(broker, TOPIC, topic_name("absent")) == (3, "")
    assert describe_error(broker, TOPIC, "bad name!")[0] == 17


# --- topic overrides take effect, and deleting one falls back ---------------------------


def test_topic_override_applies_and_delete_falls_back(broker) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    name = topic_name("mmb")
    create_topic(broker, name)
    assert produce_error(broker, name, 2000) is None
    client = AdminClient({"bootstrap.servers": broker.bootstrap})

    def incremental(*entries: ConfigEntry) -> None:
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=list(entries))
        client.incremental_alter_configs([resource])[resource].result(TIMEOUT)

    incremental(ConfigEntry("max.message.bytes", "1000",
                            incremental_operation=AlterConfigOpType.SET),
                ConfigEntry("retention.ms", "86400000",
                            incremental_operation=AlterConfigOpType.SET))
    assert effective(broker, TOPIC, name, "max.message.bytes") == ("1000", TOPIC_CONFIG)
    # the broker applies the override without a restart: a larger batch is refused
    assert wait_until(lambda: produce_error(broker, name, 1500) == KafkaError.MSG_SIZE_TOO_LARGE)
    assert produce_error(broker, name, 200) is None

    incremental(ConfigEntry("max.message.bytes", None,
                            incremental_operation=AlterConfigOpType.DELETE))
    entry = describe(broker, TOPIC, name, ["max.message.bytes"])["max.message.bytes"]
    assert (entry.value, entry.config_source) == ("1048588", DEFAULT)
    assert synonyms(entry) == [("message.max.bytes", "1048588", DEFAULT)]
    assert effective(broker, TOPIC, name, "retention.ms") == ("86400000", TOPIC_CONFIG)
    assert wait_until(lambda: produce_error(broker, name, 1500) is None)

    # APPEND/SUBTRACT work on list configs only
    incremental(ConfigEntry("cleanup.policy", "compact",
                            incremental_operation=AlterConfigOpType.APPEND))
    # appended after the default, in order, as Kafka 3.9.1 shows it (compat java-client.admin)
    assert effective(broker, TOPIC, name, "cleanup.policy") == ("delete,compact", TOPIC_CONFIG)
    assert alter(broker, TOPIC, name, [("segment.bytes", APPEND, "1")]) == (
        INVALID_CONFIG, "Config value append is not allowed for config key: segment.bytes")
    assert alter(broker, TOPIC, name, [("segment.bytes", SET, "1")]) == (
        INVALID_CONFIG, f"Invalid config value for resource ConfigResource(type=TOPIC, "
        f"name='{name}'): Invalid value 1 for configuration segment.bytes: Value must be at "
        "least 14")
    assert alter(broker, TOPIC, name, [("no.such.key", SET, "1")]) == (
        INVALID_CONFIG, "Unknown topic config name: no.such.key")
    # no tiered storage, as a Kafka broker without remote.log.storage.system.enable says
    assert alter(broker, TOPIC, name, [("remote.storage.enable", SET, "true")]) == (
        INVALID_CONFIG, f"Invalid config value for resource ConfigResource(type=TOPIC, "
        f"name='{name}'): Tiered Storage functionality is disabled in the broker. Topic "
        "cannot be configured with remote log storage.")
    assert alter(broker, TOPIC, name, [("remote.storage.enable", SET, "false")]) == (0, None)
    assert effective(broker, TOPIC, name, "remote.storage.enable") == ("false", TOPIC_CONFIG)
    assert alter(broker, TOPIC, topic_name("absent"), [("retention.ms", SET, "1")])[0] == 3


def test_legacy_alter_configs_replaces_the_override_set(broker) -> None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource as AResource
    from aiokafka.admin.config_resource import ConfigResourceType as AType
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    name = topic_name("legacy")
    create_topic(broker, name, {"segment.bytes": "2000000", "retention.ms": "7200000"})
    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        result = kp.alter_configs([ConfigResource(ConfigResourceType.TOPIC, name,
                                                  {"retention.ms": "3600000"})],
                                  incremental=False)
        assert result == {"topic": {name: "OK"}}
    finally:
        kp.close()
    # kafka-python re-sends the other overrides itself (AlterConfigs replaces the set)
    assert effective(broker, TOPIC, name, "retention.ms") == ("3600000", TOPIC_CONFIG)
    assert effective(broker, TOPIC, name, "segment.bytes") == ("2000000", TOPIC_CONFIG)

    async def with_aiokafka() -> tuple[Any, Any]:
        client = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await client.start()
        try:
            altered = await client.alter_configs(
                [AResource(AType.TOPIC, name, {"retention.ms": "1800000"})])
            described = await client.describe_configs([AResource(AType.TOPIC, name)])
            return altered, described
        finally:
            await client.close()

    altered, described = asyncio.run(with_aiokafka())
    assert [r[0] for r in altered[0].resources] == [0]
    entries = {e[0]: e for e in described[0].resources[0][4]}
    assert entries["retention.ms"][1] == "1800000"
    # aiokafka sent retention.ms alone: the whole override set was replaced
    assert effective(broker, TOPIC, name, "segment.bytes") == ("1073741824", DEFAULT)

    # validate_only checks and writes nothing
    R = AlterConfigsRequest
    body = R(resources=[R.AlterConfigsResource(resource_type=TOPIC, resource_name=name,
                                               configs=[R.AlterableConfig(name="retention.ms",
                                                                          value="60000")])],
             validate_only=True)
    with connect(broker, TIMEOUT) as conn:
        assert conn.request(33, 2, body).responses[0].error_code == 0
    assert effective(broker, TOPIC, name, "retention.ms") == ("1800000", TOPIC_CONFIG)


# --- the seeds' scenarios ---------------------------------------------------------------


def test_lab_5a_configuration_precedence(broker) -> None:
    """Lab 5a: `kafka-configs --broker 1 --alter --add-config log.cleaner.threads=2`,
    `--broker-defaults`, `--delete-config`, topic `--add-config segment.bytes=1000000`:
    topic > per-broker dynamic > cluster-wide dynamic > server.properties > default."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    per_broker = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.cleaner.threads", "2", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("log.segment.bytes", "3000000",
                    incremental_operation=AlterConfigOpType.SET)])
    overridden, plain = topic_name("lab5a"), topic_name("lab5a-plain")
    create_topic(broker, overridden, {"segment.bytes": "1000000"})
    create_topic(broker, plain)
    try:
        assert effective(broker, BROKER, "1", "log.cleaner.threads") == ("1", STATIC)

        # --broker-defaults: the cluster-wide default beats server.properties
        assert alter(broker, BROKER, "", [("log.cleaner.threads", SET, "3"),
                                         ("log.segment.bytes", SET, "2000000")]) == (0, None)
        assert effective(broker, BROKER, "1", "log.cleaner.threads") == ("3", DYNAMIC_DEFAULT)
        defaults = describe(broker, BROKER, "")
        assert {n: (e.value, e.config_source) for n, e in defaults.items()} == {
            "log.cleaner.threads": ("3", DYNAMIC_DEFAULT),
            "log.segment.bytes": ("2000000", DYNAMIC_DEFAULT)}
        assert effective(broker, TOPIC, plain, "segment.bytes") == ("2000000", DYNAMIC_DEFAULT)

        # --broker 1: the per-broker value beats the cluster-wide default
        client.incremental_alter_configs([per_broker])[per_broker].result(TIMEOUT)
        threads = describe(broker, BROKER, "1", ["log.cleaner.threads"])["log.cleaner.threads"]
        assert (threads.value, threads.config_source) == ("2", DYNAMIC_BROKER)
        assert synonyms(threads) == [("log.cleaner.threads", "2", DYNAMIC_BROKER),
                                     ("log.cleaner.threads", "3", DYNAMIC_DEFAULT),
                                     ("log.cleaner.threads", "1", STATIC),
                                     ("log.cleaner.threads", "1", DEFAULT)]
        segment = describe(broker, TOPIC, plain, ["segment.bytes"])["segment.bytes"]
        assert (segment.value, segment.config_source) == ("3000000", DYNAMIC_BROKER)
        assert synonyms(segment) == [("log.segment.bytes", "3000000", DYNAMIC_BROKER),
                                     ("log.segment.bytes", "2000000", DYNAMIC_DEFAULT),
                                     ("log.segment.bytes", "1073741824", DEFAULT)]

        # the topic override beats every broker level
        segment = describe(broker, TOPIC, overridden, ["segment.bytes"])["segment.bytes"]
        assert (segment.value, segment.config_source) == ("1000000", TOPIC_CONFIG)
        assert synonyms(segment)[0] == ("segment.bytes", "1000000", TOPIC_CONFIG)

        # --delete-config walks back down the list
        assert alter(broker, BROKER, "1", [("log.cleaner.threads", DELETE, None)]) == (0, None)
        assert effective(broker, BROKER, "1", "log.cleaner.threads") == ("3", DYNAMIC_DEFAULT)
        assert alter(broker, BROKER, "", [("log.cleaner.threads", DELETE, None)]) == (0, None)
        assert effective(broker, BROKER, "1", "log.cleaner.threads") == ("1", STATIC)
        assert alter(broker, TOPIC, overridden, [("segment.bytes", DELETE, None)]) == (0, None)
        assert effective(broker, TOPIC, overridden, "segment.bytes") == (
            "3000000", DYNAMIC_BROKER)
    finally:
        alter(broker, BROKER, "1", [("log.cleaner.threads", DELETE, None),
                                    ("log.segment.bytes", DELETE, None)])
        alter(broker, BROKER, "", [("log.cleaner.threads", DELETE, None),
                                   ("log.segment.bytes", DELETE, None)])
    assert effective(broker, TOPIC, plain, "segment.bytes") == ("1073741824", DEFAULT)


def test_deleting_a_broker_config(broker) -> None:
    """In-class activity "Deleting a Broker Config": after `kafka-configs --broker 1
    --alter --delete-config min.insync.replicas` the value is the cluster-wide dynamic
    default if set, else server.properties, else Kafka's default. And it is live: with a
    default of 2 a one-broker ISR refuses acks=all."""
    from confluent_kafka import KafkaError

    name = topic_name("minisr")
    create_topic(broker, name)
    try:
        assert alter(broker, BROKER, "", [("min.insync.replicas", SET, "2")]) == (0, None)
        assert alter(broker, BROKER, "1", [("min.insync.replicas", SET, "3")]) == (0, None)
        assert effective(broker, BROKER, "1", "min.insync.replicas") == ("3", DYNAMIC_BROKER)
        assert effective(broker, TOPIC, name, "min.insync.replicas") == ("3", DYNAMIC_BROKER)
        assert wait_until(lambda: produce_error(broker, name, 10, acks="all")
                          == KafkaError.NOT_ENOUGH_REPLICAS)

        assert alter(broker, BROKER, "1", [("min.insync.replicas", DELETE, None)]) == (0, None)
        assert effective(broker, BROKER, "1", "min.insync.replicas") == ("2", DYNAMIC_DEFAULT)
        assert alter(broker, BROKER, "", [("min.insync.replicas", DELETE, None)]) == (0, None)
        assert effective(broker, BROKER, "1", "min.insync.replicas") == ("1", STATIC)
        assert wait_until(lambda: produce_error(broker, name, 10, acks="all") is None)
    finally:
        alter(broker, BROKER, "1", [("min.insync.replicas", DELETE, None)])
        alter(broker, BROKER, "", [("min.insync.replicas", DELETE, None)])

    # Kafka in Action 10.4: --add-config segment.ms=60000, then --delete-config segment.ms
    assert alter(broker, TOPIC, name, [("segment.ms", SET, "60000")]) == (0, None)
    assert effective(broker, TOPIC, name, "segment.ms") == ("60000", TOPIC_CONFIG)
    assert alter(broker, TOPIC, name, [("segment.ms", DELETE, None)]) == (0, None)
    assert effective(broker, TOPIC, name, "segment.ms") == ("604800000", DEFAULT)


def test_dynamic_broker_defaults_reach_every_topic(broker) -> None:
    """A dynamic log.* key changes the default of every topic without an override (here
    message.max.bytes, enforced at once, and log.retention.ms)."""
    from confluent_kafka import KafkaError

    name = topic_name("dyn")
    create_topic(broker, name)
    try:
        assert alter(broker, BROKER, "", [("message.max.bytes", SET, "1000"),
                                         ("log.retention.ms", SET, "7200000")]) == (0, None)
        assert effective(broker, TOPIC, name, "max.message.bytes") == ("1000", DYNAMIC_DEFAULT)
        retention = describe(broker, TOPIC, name, ["retention.ms"])["retention.ms"]
        assert (retention.value, retention.config_source) == ("7200000", DYNAMIC_DEFAULT)
        assert synonyms(retention) == [("log.retention.ms", "7200000", DYNAMIC_DEFAULT),
                                       ("log.retention.hours", "100", STATIC),
                                       ("log.retention.hours", "168", DEFAULT)]
        assert wait_until(lambda: produce_error(broker, name, 1500)
                          == KafkaError.MSG_SIZE_TOO_LARGE)
    finally:
        alter(broker, BROKER, "", [("message.max.bytes", DELETE, None),
                                   ("log.retention.ms", DELETE, None)])
    assert effective(broker, TOPIC, name, "max.message.bytes") == ("1048588", DEFAULT)
    assert wait_until(lambda: produce_error(broker, name, 1500) is None)


# --- what cannot change, and passwords ----------------------------------------------------


def test_broker_config_changes_kafka_refuses(broker) -> None:
    assert alter(broker, BROKER, "1", [("log.dirs", SET, "/elsewhere")]) == (
        INVALID_REQUEST, "Cannot update these configs dynamically: Set(log.dirs)")
    assert alter(broker, BROKER, "1", [("ssl.keystore.location", SET, "/k.p12")]) == (
        INVALID_REQUEST, "These security configs can be dynamically updated only per-listener "
        "using the listener prefix: Set(ssl.keystore.location)")
    assert alter(broker, BROKER, "", [(
        "listener.name.plaintext.ssl.keystore.location", SET, "/k.p12")]) == (
        INVALID_REQUEST, "Cannot update these configs at default cluster level, broker id "
        "must be specified: Set(listener.name.plaintext.ssl.keystore.location)")
    assert alter(broker, BROKER, "2", [("log.cleaner.threads", SET, "2")]) == (
        INVALID_REQUEST, "Unexpected broker id, expected 1, but received 2")
    assert alter(broker, BROKER, "1", [("log.cleaner.threads", SET, "many")]) == (
        INVALID_REQUEST, "Invalid value many for configuration log.cleaner.threads: Not a "
        "number of type INT")
    assert alter(broker, BROKER, "1", [("log.cleaner.threads", APPEND, "2")]) == (
        INVALID_CONFIG, "Config value append is not allowed for config key: "
        "log.cleaner.threads")
    # validate_only: accepted, not applied
    assert alter(broker, BROKER, "1", [("log.cleaner.threads", SET, "4")],
                 validate_only=True) == (0, None)
    assert effective(broker, BROKER, "1", "log.cleaner.threads") == ("1", STATIC)


def test_listener_password_is_encrypted_in_zookeeper(broker, zk_ensemble) -> None:
    from moldau.cluster.zk_client import KafkaZkClient
    from moldau.server.dynamic_config import PasswordEncoder

    key = "listener.name.plaintext.ssl.key.password"
    assert alter(broker, BROKER, "", [(key, SET, "s3cret")])[0] == INVALID_REQUEST
    assert alter(broker, BROKER, "1", [(key, SET, "s3cret")]) == (0, None)
    try:
        entry = describe(broker, BROKER, "1", [key])[key]
        assert (entry.value, entry.is_sensitive, entry.config_source) == (
            None, True, DYNAMIC_BROKER)
        chroot = "/" + broker.zookeeper_connect.split("/", 1)[1]
        zk = KafkaZkClient(zk_ensemble.connect_string, chroot)
        zk.start()
        try:
            stored = zk.get_entity_config("brokers", "1")[key]
        finally:
            zk.close()
        assert "s3cret" not in stored
        assert stored.startswith("keyFactoryAlgorithm:PBKDF2WithHmacSHA512,")
        assert PasswordEncoder(SECRET).decode(stored) == "s3cret"
    finally:
        assert alter(broker, BROKER, "1", [(key, DELETE, None)]) == (0, None)


# --- broker loggers ---------------------------------------------------------------------


def test_broker_logger_levels_change_at_runtime(broker) -> None:
    from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient

    kp = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    resource = ConfigResource(ConfigResourceType.BROKER_LOGGER, "1", ["kafka.controller"])
    try:
        levels = kp.describe_configs([resource], config_filter="all")["broker_logger"]["1"]
        assert levels["kafka.controller"]["value"] == "INFO"
        assert levels["kafka.controller"]["config_source"] == "DYNAMIC_BROKER_LOGGER_CONFIG"
        kp.alter_configs([ConfigResource(ConfigResourceType.BROKER_LOGGER, "1", {
            "kafka.controller": (AlterConfigOp.SET, "DEBUG")})], raise_on_unknown=False)
        levels = kp.describe_configs([resource], config_filter="all")["broker_logger"]["1"]
        assert levels["kafka.controller"]["value"] == "DEBUG"
    finally:
        kp.close()
    assert alter(broker, BROKER_LOGGER, "1", [("kafka.controller", SET, "LOUD")]) == (
        INVALID_CONFIG, "Cannot set the log level of kafka.controller to LOUD as it is not a "
        "supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN")
    assert alter(broker, BROKER_LOGGER, "1", [("no.such.logger", SET, "INFO")]) == (
        INVALID_CONFIG, "Logger no.such.logger does not exist!")
    assert alter(broker, BROKER_LOGGER, "1", [("root", DELETE, None)]) == (
        INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
    assert alter(broker, BROKER_LOGGER, "1", [("kafka.controller", DELETE, None)]) == (0, None)
    assert effective(broker, BROKER_LOGGER, "1", "kafka.controller") == ("INFO", LOGGER)
    # legacy AlterConfigs knows no BROKER_LOGGER (KIP-412 is incremental only)
    R = AlterConfigsRequest
    with connect(broker, TIMEOUT) as conn:
        (result,) = conn.request(33, 2, R(resources=[R.AlterConfigsResource(
            resource_type=BROKER_LOGGER, resource_name="1",
            configs=[R.AlterableConfig(name="kafka.controller", value="DEBUG")])])).responses
    assert (result.error_code, result.error_message) == (INVALID_REQUEST,
                                                         "Unknown resource type 8")
