"""The four clients over an SSL listener with client certificates (mutual TLS), next to a
PLAINTEXT listener on the same broker; a client without a certificate is refused."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest
from tls_material import TlsMaterial, make_tls_material

from moldau.devcluster.brokers import BrokerProcess, free_port


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def ssl_broker(tmp_path_factory, zk_ensemble, tls: TlsMaterial) -> Iterator[tuple]:
    plain, secure = free_port(), free_port()
    props = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(tls.server_p12),
        "ssl.keystore.password": tls.store_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca_cert),
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=.*$/$1/L,DEFAULT",
        "num.partitions": "1",
    }
    broker = BrokerProcess(str(tmp_path_factory.mktemp("sslbroker")), 1,
                           zk_ensemble.connect_string + f"/ssl-{uuid.uuid4().hex[:8]}",
                           port=plain, properties=props)
    broker.start()
    yield broker, f"127.0.0.1:{secure}"
    assert broker.stop() == 0


def test_confluent_kafka_over_mutual_tls(ssl_broker, tls: TlsMaterial) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    _, bootstrap = ssl_broker
    common = {"bootstrap.servers": bootstrap, "security.protocol": "SSL",
              "ssl.ca.location": str(tls.ca_cert),
              "ssl.certificate.location": str(tls.client_cert),
              "ssl.key.location": str(tls.client_key)}
    topic = f"tls-ck-{uuid.uuid4().hex[:6]}"
    producer = Producer({**common, "compression.type": "zstd"})
    for i in range(20):
        producer.produce(topic, f"v{i}".encode(), f"k{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**common, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 20 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(20)]


def test_kafka_python_and_aiokafka_over_mutual_tls(ssl_broker, tls: TlsMaterial) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from kafka import KafkaProducer

    _, bootstrap = ssl_broker
    topic = f"tls-py-{uuid.uuid4().hex[:6]}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL",
                             ssl_cafile=str(tls.ca_cert), ssl_certfile=str(tls.client_cert),
                             ssl_keyfile=str(tls.client_key))
    offsets = [producer.send(topic, f"kp{i}".encode()).get(timeout=30).offset
               for i in range(5)]
    producer.close()
    assert offsets == list(range(5))

    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    context.load_cert_chain(str(tls.client_cert), str(tls.client_key))

    async def run() -> list[bytes]:
        aio_producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL",
                                        ssl_context=context)
        await aio_producer.start()
        try:
            for i in range(5):
                await aio_producer.send_and_wait(topic, f"aio{i}".encode())
        finally:
            await aio_producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, security_protocol="SSL",
                                    ssl_context=context, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            values: list[bytes] = []
            deadline = time.monotonic() + 30
            while len(values) < 10 and time.monotonic() < deadline:
                for msgs in (await consumer.getmany(timeout_ms=1000)).values():
                    values.extend(m.value for m in msgs)
            return values
        finally:
            await consumer.stop()

    expected = [f"kp{i}".encode() for i in range(5)] + [f"aio{i}".encode() for i in range(5)]
    assert asyncio.run(run()) == expected


def test_kcat_over_mutual_tls(ssl_broker, tls: TlsMaterial) -> None:
    kcat = shutil.which("kcat")
    assert kcat
    _, bootstrap = ssl_broker
    topic = f"tls-kcat-{uuid.uuid4().hex[:6]}"
    ssl_args = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={tls.ca_cert}",
                "-X", f"ssl.certificate.location={tls.client_cert}",
                "-X", f"ssl.key.location={tls.client_key}"]
    subprocess.run([kcat, "-b", bootstrap, *ssl_args, "-P", "-t", topic],
                   input=b"one\ntwo\n", check=True, timeout=60)
    out = subprocess.run([kcat, "-b", bootstrap, *ssl_args, "-C", "-t", topic, "-e"],
                         capture_output=True, check=True, timeout=60).stdout
    assert out.split() == [b"one", b"two"]


def test_client_without_certificate_is_refused_and_plaintext_still_works(
        ssl_broker, tls: TlsMaterial) -> None:
    from moldau.client.blocking import BlockingConnection
    from moldau.protocol.generated.metadata_request import MetadataRequest

    broker, bootstrap = ssl_broker
    host, port = bootstrap.split(":")
    context = ssl.create_default_context(cafile=str(tls.ca_cert))  # no client certificate
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)), \
            BlockingConnection(host, int(port), ssl_context=context, timeout=5) as conn:
        conn.request(3, 1, MetadataRequest(topics=[]))
    with BlockingConnection("127.0.0.1", broker.port) as conn:
        response = conn.request(3, 1, MetadataRequest(topics=[]))
        assert [b.node_id for b in response.brokers] == [1]
