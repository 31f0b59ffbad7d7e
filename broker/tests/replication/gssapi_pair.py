"""Two brokers whose inter-broker listener is SASL_PLAINTEXT with GSSAPI against a real MIT
KDC (tests/kdc.py): each logs in from its own keytab as `kafka/localhost@REALM` (the two
share the host, so the principal; the second keytab holds the same keys), and clients
use their PLAINTEXT listeners. The principal the brokers see of each other is
`User:kafka`."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kdc import REALM, TestKdc

from moldau.devcluster.brokers import BrokerProcess, free_port

KRB5_JAAS = ('com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true '
             'storeKey=true keyTab="{keytab}" principal="kafka/localhost@' + REALM + '";')


@contextlib.contextmanager
def gssapi_pair(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any, name: str,
                ticket_lifetime: str = "10h", properties: dict[str, str] | None = None
                ) -> Iterator[tuple[list[BrokerProcess], str]]:
    """The started pair and a PLAINTEXT bootstrap address; `properties` are added to each
    broker's. Each serves its metrics on a port of its own (MOLDAU_METRICS_PORT)."""
    directory = tmp_path_factory.mktemp(f"kdc-{name}")
    kdc = TestKdc(directory, ticket_lifetime=ticket_lifetime)
    kdc.start()
    connect = zk_ensemble.connect_string + f"/{name}-{uuid.uuid4().hex[:8]}"
    brokers: list[BrokerProcess] = []
    try:
        kdc.add_principal("kafka/localhost")
        for broker_id in (1, 2):
            keytab = kdc.export_keytab("kafka/localhost",
                                       directory / f"broker{broker_id}.keytab",
                                       new_keys=broker_id == 1)
            plain, sasl = free_port(), free_port()
            props = {
                "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},"
                                        f"SASL_PLAINTEXT://localhost:{sasl}",
                "inter.broker.listener.name": "SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "GSSAPI",
                "sasl.mechanism.inter.broker.protocol": "GSSAPI",
                "sasl.kerberos.service.name": "kafka",
                "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
                    KRB5_JAAS.format(keytab=keytab),
                "num.partitions": "1", "default.replication.factor": "2",
                "offsets.topic.replication.factor": "2",
                **(properties or {}),
            }
            broker = BrokerProcess(str(tmp_path_factory.mktemp(f"{name}{broker_id}")),
                                   broker_id, connect, port=plain, properties=props,
                                   env={**kdc.env(directory / f"broker{broker_id}.ccache"),
                                        "MOLDAU_METRICS_PORT": str(free_port())})
            broker.start(wait=60)
            brokers.append(broker)
        yield brokers, f"127.0.0.1:{brokers[0].port}"
    finally:
        for broker in reversed(brokers):
            assert broker.stop() == 0, broker.tail()
        kdc.stop()
