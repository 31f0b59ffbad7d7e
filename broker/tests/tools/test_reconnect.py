"""The tools ride out a broker they cannot reach for a while, as Kafka's clients do: the
console producer keeps its records until delivery.timeout.ms and then logs Kafka's
error line; kafka-topics waits for a broker that comes up; refused credentials still end
a tool at once. One real broker; its SSL and SASL listeners are advertised behind small
TCP relays (stall_proxy) the tests stall or take down; records are checked with
confluent-kafka over the broker's own PLAINTEXT listener."""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tls_material import make_tls_material

from moldau.devcluster.brokers import BrokerProcess, free_port

from .stall_proxy import StallProxy
from .toolrun import BIN, die_with_parent, run, wait_for

PRODUCER, TOPICS = "kafka-console-producer.sh", "kafka-topics.sh"
PLAIN_LOGIN = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
               'user_alice="alice-secret";')
# short client timings, so an outage of a few seconds spans several attempts
QUICK = {"socket.connection.setup.timeout.ms": "400",
         "socket.connection.setup.timeout.max.ms": "800",
         "reconnect.backoff.ms": "50", "reconnect.backoff.max.ms": "200"}


@dataclass
class Setup:
    broker: BrokerProcess
    ssl: StallProxy  # in front of the SSL listener
    sasl: StallProxy  # in front of the SASL_PLAINTEXT listener
    ssl_config: Path  # a client properties file for the SSL listener
    directory: Path

    @property
    def plaintext(self) -> str:
        return self.broker.bootstrap

    def properties(self, name: str, values: dict[str, str]) -> Path:
        path = self.directory / name
        path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
        return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[Setup]:
    tls = make_tls_material(tmp_path_factory.mktemp("reconnect-tls"))
    plain, secure, sasl = free_port(), free_port(), free_port()
    ssl_proxy, sasl_proxy = StallProxy(secure), StallProxy(sasl)
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        # clients learn the relays' addresses from the metadata, so every connection of
        # theirs goes through a relay
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://{ssl_proxy.address},"
                                f"SASL_PLAINTEXT://{sasl_proxy.address}",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_LOGIN,
        **tls.server_settings("PKCS12"),
        "num.partitions": "1", "offsets.topic.replication.factor": "1",
    }
    directory = tmp_path_factory.mktemp("reconnect")
    broker = BrokerProcess(str(directory / "broker"), 1,
                           f"{zk_ensemble.connect_string}/reconnect-{uuid.uuid4().hex[:8]}",
                           port=plain, properties=props)
    broker.start(wait=60)
    ssl_config = directory / "ssl.properties"
    ssl_config.write_text("security.protocol=SSL\n" + "".join(
        f"{k}={v}\n" for k, v in tls.client_settings(with_cert=False).items()))
    try:
        yield Setup(broker, ssl_proxy, sasl_proxy, ssl_config, directory)
    finally:
        ssl_proxy.close()
        sasl_proxy.close()
        assert broker.stop() == 0


@pytest.fixture(autouse=True)
def relays_forward(setup: Setup) -> Iterator[None]:
    yield
    setup.ssl.set_mode("forward")
    setup.sasl.set_mode("forward")


def _create(setup: Setup, topic: str) -> None:
    created = run(TOPICS, "--bootstrap-server", setup.plaintext, "--create", "--topic", topic)
    assert created.code == 0, created


def _values(setup: Setup, topic: str) -> list[bytes]:
    """Every record of the topic's one partition, read by confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": setup.plaintext, "group.id": f"check-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < end and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                values.append(message.value())
        return values
    finally:
        consumer.close()


def _end_offset(setup: Setup, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": setup.plaintext, "group.id": "offsets"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def _producer(setup: Setup, topic: str, *properties: str,
              sync: bool = False) -> subprocess.Popen[str]:
    args = [str(BIN / PRODUCER), "--bootstrap-server", setup.ssl.address, "--topic", topic,
            "--producer.config", str(setup.ssl_config), "--timeout", "50",
            *(["--sync"] if sync else [])]
    for item in [*(f"{k}={v}" for k, v in QUICK.items()), *properties]:
        args += ["--producer-property", item]
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent)


def _write(producer: subprocess.Popen[str], lines: list[str]) -> None:
    assert producer.stdin is not None
    producer.stdin.write("".join(f"{line}\n" for line in lines))
    producer.stdin.flush()


def test_the_console_producer_rides_out_stalled_tls_handshakes(setup: Setup) -> None:
    topic = "stalled-handshakes"
    _create(setup, topic)
    producer = _producer(setup, topic)
    _write(producer, [f"before-{i}" for i in range(5)])
    wait_for(lambda: _end_offset(setup, topic) == 5, 30, "the first records")
    # the broker stops answering: connections break, new ones hang in the TLS handshake
    setup.ssl.set_mode("stall")
    _write(producer, [f"during-{i}" for i in range(5)])
    wait_for(lambda: setup.ssl.stalled >= 3, 30, "several handshakes that timed out")
    setup.ssl.set_mode("forward")
    _write(producer, [f"after-{i}" for i in range(5)])
    out, err = producer.communicate(timeout=60)
    assert (producer.returncode, out, err) == (0, "", "")
    expected = [f"{when}-{i}".encode() for when in ("before", "during", "after")
                for i in range(5)]
    assert _values(setup, topic) == expected  # all of them, once each, in order
    assert _end_offset(setup, topic) == 15


def test_records_past_delivery_timeout_get_kafkas_error_line(setup: Setup) -> None:
    topic = "past-delivery-timeout"
    _create(setup, topic)
    producer = _producer(setup, topic, "delivery.timeout.ms=2000",
                         "request.timeout.ms=1000")
    _write(producer, ["delivered"])
    wait_for(lambda: _end_offset(setup, topic) == 1, 30, "the first record")
    setup.ssl.set_mode("down")
    _write(producer, ["lost-value", ""])
    out, err = producer.communicate(timeout=60)
    # Kafka's console producer logs each record's failure and goes on: exit 0
    assert (producer.returncode, out) == (0, "")
    lines = err.splitlines()
    assert len(lines) == 4, err
    for (head, cause), size in zip([lines[0:2], lines[2:4]], (10, 0), strict=True):
        assert re.fullmatch(
            r"\[[-\d :,]+\] ERROR Error when sending message to topic past-delivery-timeout "
            rf"with key: null, value: {size} bytes with error: "
            r"\(org\.apache\.kafka\.clients\.producer\.internals\.ErrorLoggingCallback\)",
            head), err
        assert re.fullmatch(
            r"org\.apache\.kafka\.common\.errors\.TimeoutException: Expiring 2 record\(s\) "
            r"for past-delivery-timeout-0:\d+ ms has passed since batch creation", cause), err
    assert _values(setup, topic) == [b"delivered"]


def test_the_sync_producer_stops_at_the_first_expired_record(setup: Setup) -> None:
    topic = "sync-expiry"
    _create(setup, topic)
    producer = _producer(setup, topic, "delivery.timeout.ms=1500", "request.timeout.ms=1000",
                         sync=True)
    _write(producer, ["first"])
    wait_for(lambda: _end_offset(setup, topic) == 1, 30, "the first record")
    setup.ssl.set_mode("down")
    _write(producer, ["second", "third"])
    out, err = producer.communicate(timeout=60)
    # --sync: send().get() throws, Kafka's tool prints it and exits 1
    assert (producer.returncode, out) == (1, ""), err
    assert re.fullmatch(
        r"java\.util\.concurrent\.ExecutionException: org\.apache\.kafka\.common\.errors\."
        r"TimeoutException: Expiring 1 record\(s\) for sync-expiry-0:\d+ ms has passed since "
        r"batch creation\n", err), err
    assert _values(setup, topic) == [b"first"]


def test_kafka_topics_waits_for_a_broker_that_comes_up(setup: Setup) -> None:
    _create(setup, "comes-up")
    setup.ssl.set_mode("down")
    config = setup.properties("quick-ssl.properties", {
        **dict(line.split("=", 1) for line in setup.ssl_config.read_text().splitlines()),
        **QUICK})
    describe = subprocess.Popen(
        [str(BIN / TOPICS), "--bootstrap-server", setup.ssl.address, "--command-config",
         str(config), "--describe", "--topic", "comes-up"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    time.sleep(3)  # several refused attempts
    assert describe.poll() is None
    setup.ssl.set_mode("forward")
    out, err = describe.communicate(timeout=60)
    assert describe.returncode == 0, (out, err)
    assert out.startswith("Topic: comes-up\tTopicId: "), out


def test_an_unreachable_bootstrap_fails_after_default_api_timeout(setup: Setup) -> None:
    setup.ssl.set_mode("down")
    config = setup.properties("short-wait.properties", {
        **dict(line.split("=", 1) for line in setup.ssl_config.read_text().splitlines()),
        **QUICK, "default.api.timeout.ms": "1500"})
    listed = run(TOPICS, "--bootstrap-server", setup.ssl.address, "--command-config",
                 str(config), "--list")
    assert listed.code == 1
    assert listed.out == ("Error while executing topic command : Could not connect to any "
                          f"bootstrap server: {setup.ssl.address} (Connection refused)\n")


def test_refused_credentials_end_the_tool_at_once(setup: Setup) -> None:
    """Kafka's clients retry neither a refused SASL login nor another broker with it:
    one connection, the broker's message, exit 1 (default.api.timeout.ms is 60 s)."""
    _create(setup, "guarded")
    config = setup.properties("wrong-password.properties", {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                            'required username="alice" password="wrong";'})
    before = setup.sasl.accepted
    listed = run(TOPICS, "--bootstrap-server", setup.sasl.address, "--command-config",
                 str(config), "--list")
    assert listed.code == 1
    assert "Authentication failed: Invalid username or password" in listed.out, listed
    assert setup.sasl.accepted - before == 1
    produced = subprocess.run(
        [str(BIN / PRODUCER), "--bootstrap-server", setup.sasl.address, "--topic", "guarded",
         "--producer.config", str(config)], input="x\n", capture_output=True, text=True,
        timeout=60, preexec_fn=die_with_parent)
    assert produced.returncode == 1
    assert "Authentication failed: Invalid username or password" in produced.stderr
    assert setup.sasl.accepted - before == 2
    assert _end_offset(setup, "guarded") == 0
