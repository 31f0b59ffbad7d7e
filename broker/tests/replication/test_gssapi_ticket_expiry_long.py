"""Kerberos tickets that expire under a replicating pair (make test-long): the KDC issues
2-minute tickets, the brokers re-authenticate their inter-broker sessions every 30 s
(connections.max.reauth.ms, KIP-368), and an acks=all producer with min.insync.replicas=2
writes for three minutes. Each broker must renew its TGT from its keytab before the first
one ends (sasl.kerberos.ticket.renew.window.factor) and re-authenticate with the new
tickets, so that no write fails, the ISR stays whole, and the controller still reaches the
other broker for a topic created at the end."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kdc import kdc_available
from metrics.jmx import broker_beans

from moldau.devcluster.brokers import BrokerProcess

from .gssapi_pair import gssapi_pair
from .inter_broker_check import assert_two_brokers_replicate

pytestmark = [
    pytest.mark.skipif(os.environ.get("MOLDAU_LONG") != "1", reason="make test-long only"),
    pytest.mark.skipif(not kdc_available(), reason="MIT Kerberos KDC not installed"),
]

TICKET_LIFETIME_S = 120
WRITE_FOR_S = 180
REFRESH_LINE = "TGT refresh sleeping until"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory,
         zk_ensemble) -> Iterator[tuple[list[BrokerProcess], str]]:
    with gssapi_pair(tmp_path_factory, zk_ensemble, "gssapi-expiry",
                     ticket_lifetime=f"{TICKET_LIFETIME_S}s",
                     properties={"connections.max.reauth.ms": "30000",
                                 "min.insync.replicas": "2"}) as started:
        yield started


def _sasl_counts(broker: BrokerProcess) -> dict[str, float]:
    """The SASL listener's socket-server-metrics, summed over its network processors."""
    found = broker_beans(broker,
                         "kafka.server:type=socket-server-metrics,listener=SASL_PLAINTEXT,*")
    totals: dict[str, float] = {}
    for bean_name, bean in found.items():
        if "networkProcessor=" not in bean_name:
            continue  # the listener's own bean counts connections, not logins
        for name, value in bean.items():
            if name.endswith("-total"):
                totals[name] = totals.get(name, 0) + value
    return totals


def test_replication_outlives_its_kerberos_tickets(pair) -> None:
    brokers, bootstrap = pair
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = f"expiry-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
    failures: list[str] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": 20000})

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    sent = 0
    deadline = time.monotonic() + WRITE_FOR_S
    while time.monotonic() < deadline:
        producer.produce(topic, f"v{sent}".encode(), on_delivery=delivered)
        sent += 1
        producer.poll(0.05)
    assert producer.flush(30) == 0
    assert failures == [], failures[:5]
    for partition in admin.list_topics(topic, timeout=10).topics[topic].partitions.values():
        assert sorted(partition.isrs) == [1, 2], partition
    for broker in brokers:
        counts = _sasl_counts(broker)
        # the other broker's sessions re-authenticated (every 30 s), none failed
        assert counts["successful-reauthentication-total"] >= 2, counts
        assert counts["failed-reauthentication-total"] == 0, counts
        assert counts["failed-authentication-total"] == 0, counts
        log = broker.tail(100_000)
        # the TGT was fetched again from the keytab before the first one ended
        assert log.count(REFRESH_LINE) >= 2, broker.tail(40)
        assert "Failed to refresh TGT" not in log
        assert "Failed authentication" not in log
    try:  # the controller's requests still reach the other broker, with fresh tickets
        assert_two_brokers_replicate(brokers, bootstrap, "expiry-after")
    except KafkaException as exc:  # pragma: no cover - the message says what broke
        pytest.fail(f"after the tickets expired: {exc}")
