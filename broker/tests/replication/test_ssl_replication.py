"""Replication over an SSL inter-broker listener: each broker has a PLAINTEXT listener for
the test's clients and an SSL one with client certificates required, which is the only
endpoint brokers know of each other (inter.broker.listener.name=SSL). acks=all writes
succeed only when followers fetch over TLS, and their logs end byte-identical."""

from __future__ import annotations

import filecmp
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from tls_material import TlsMaterial, make_tls_material

from moldau.devcluster.brokers import BrokerProcess, free_port

from .conftest import CLUSTER_PROPERTIES, Cluster, running


@pytest.fixture(scope="module")
def ssl_cluster(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[Cluster]:
    tls: TlsMaterial = make_tls_material(tmp_path_factory.mktemp("tls"))
    connect = zk_ensemble.connect_string + f"/moldau-ssl-{uuid.uuid4().hex[:12]}"
    brokers = {}
    for i in (1, 2, 3):
        plain, secure = free_port(), free_port()
        brokers[i] = BrokerProcess(
            str(tmp_path_factory.mktemp(f"sslbroker{i}")), i, connect, port=plain,
            properties={**CLUSTER_PROPERTIES,
                        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}",
                        "inter.broker.listener.name": "SSL",
                        "ssl.keystore.type": "PKCS12",
                        "ssl.keystore.location": str(tls.server_p12),
                        "ssl.keystore.password": tls.store_password,
                        "ssl.truststore.type": "PEM",
                        "ssl.truststore.location": str(tls.ca_cert),
                        "ssl.client.auth": "required"})
    with running(Cluster(brokers, connect)) as cluster:
        yield cluster


def test_followers_replicate_over_the_ssl_listener(ssl_cluster: Cluster) -> None:
    topic = ssl_cluster.create_topic("over-tls", partitions=3, **{"min.insync.replicas": "3"})
    producer = Producer({"bootstrap.servers": ssl_cluster.bootstrap, "acks": "all"})
    errors: list[Any] = []
    for i in range(600):
        producer.produce(topic, value=b"v%d" % i, partition=i % 3,
                         on_delivery=lambda err, _m: errors.append(err) if err else None)
    assert producer.flush(30) == 0
    assert errors == []  # min.insync.replicas 3: every record reached both followers

    def segment(broker_id: int, partition: int) -> str:
        return os.path.join(ssl_cluster.brokers[broker_id].data_dir, f"{topic}-{partition}",
                            "00000000000000000000.log")

    for partition in range(3):
        ssl_cluster.wait_for(lambda p=partition: filecmp.cmp(segment(1, p), segment(2, p),
                                                             shallow=False)
                             and filecmp.cmp(segment(1, p), segment(3, p), shallow=False),
                             20, f"identical replicas of partition {partition}")
