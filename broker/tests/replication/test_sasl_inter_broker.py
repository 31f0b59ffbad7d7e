"""Two brokers whose inter-broker listener is SASL_PLAINTEXT with SCRAM-SHA-512: the
controller's requests, the replica fetchers and the controlled shutdown all authenticate
as the `broker` user, bootstrapped into ZooKeeper before either broker starts (as
`kafka-configs --zookeeper` does in Kafka 3.9)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from moldau.cluster.zk_client import KafkaZkClient
from moldau.devcluster.brokers import BrokerProcess, free_port
from moldau.security.sasl.scram_credentials import ScramMechanism, derive_credential

from .inter_broker_check import assert_two_brokers_replicate

BROKER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
               'username="broker" password="broker-secret";')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zk_ensemble) -> Iterator[tuple[list[BrokerProcess], str]]:
    connect = zk_ensemble.connect_string + f"/sasl-ib-{uuid.uuid4().hex[:8]}"
    zk = KafkaZkClient(connect)
    zk.start()
    try:
        zk.ensure_path("/config/users")
        credential = derive_credential(ScramMechanism.SCRAM_SHA_512, "broker-secret", 4096)
        zk.update_user_config("broker", lambda c: {**c, "SCRAM-SHA-512":
                                                   credential.to_config_value()})
    finally:
        zk.close()
    brokers = []
    for broker_id in (1, 2):
        plain, sasl = free_port(), free_port()
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
            "num.partitions": "1", "default.replication.factor": "2",
            "offsets.topic.replication.factor": "2",
        }
        broker = BrokerProcess(str(tmp_path_factory.mktemp(f"saslib{broker_id}")), broker_id,
                               connect, port=plain, properties=props)
        broker.start(wait=60)
        brokers.append(broker)
    yield brokers, f"127.0.0.1:{brokers[0].port}"
    for broker in reversed(brokers):
        assert broker.stop() == 0, broker.tail()


def test_replication_and_controller_requests_over_scram(cluster) -> None:
    brokers, bootstrap = cluster
    assert_two_brokers_replicate(brokers, bootstrap, "sasl-rf2")
