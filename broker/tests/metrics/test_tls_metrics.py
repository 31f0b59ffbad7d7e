"""A broker with an SSL listener reports when the certificate it serves expires
(`moldau:type=Tls,name=CertificateNotAfterSeconds,listener=SSL`, read by the
certificate-expiry alert through the broker exporter), and nothing for PLAINTEXT."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from cryptography import x509
from tls_material import make_tls_material

from moldau.devcluster.brokers import BrokerProcess, free_port

from .jmx import beans


def test_the_served_certificates_expiry_is_a_metric(tmp_path_factory: pytest.TempPathFactory,
                                                     zk_ensemble: Any) -> None:
    tls = make_tls_material(tmp_path_factory.mktemp("tls"))
    plain, secure, metrics = free_port(), free_port(), free_port()
    broker = BrokerProcess(
        str(tmp_path_factory.mktemp("tlsmetrics")), 1,
        zk_ensemble.connect_string + f"/tlsmetrics-{uuid.uuid4().hex[:8]}", port=plain,
        properties={"listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}",
                    **tls.server_settings()},
        env={"MOLDAU_METRICS_PORT": str(metrics)})
    broker.start()
    try:
        found = beans(metrics, "moldau:type=Tls,*")
    finally:
        assert broker.stop() == 0
    served = x509.load_pem_x509_certificate(tls.server_cert.read_bytes())
    assert found == {"moldau:type=Tls,name=CertificateNotAfterSeconds,listener=SSL": {
        "name": "moldau:type=Tls,name=CertificateNotAfterSeconds,listener=SSL",
        "Value": served.not_valid_after_utc.timestamp()}}
