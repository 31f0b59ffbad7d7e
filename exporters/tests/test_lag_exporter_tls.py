"""The lag exporter over TLS, as a site with only an SSL listener runs it: the installed
`moldau-lag-exporter` with librdkafka's TLS settings (`--client-property`) reads a broker
whose SSL listener requires client certificates and serves kafka_exporter's names over
HTTP; without a certificate it reports the cluster down instead of failing."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from broker_process import mutual_tls_broker
from moldau_exporters.lag_exporter import UP
from tls_material import TlsMaterial, make_tls_material

from moldau.devcluster.brokers import free_port

EXPORTER = str(Path(sys.executable).parent / "moldau-lag-exporter")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("lag-tls"))


@pytest.fixture(scope="module")
def ssl_bootstrap(tmp_path_factory, zk_ensemble, tls: TlsMaterial) -> Iterator[str]:
    broker, bootstrap = mutual_tls_broker(tmp_path_factory, zk_ensemble.connect_string, tls,
                                          "lag-tls")
    yield bootstrap
    assert broker.stop() == 0


def scrape_exporter(bootstrap: str, properties: dict[str, str]) -> str:
    """Start the exporter, scrape it once it answers, stop it."""
    port = free_port()
    args = [EXPORTER, "--bootstrap-server", bootstrap, "--listen", f"127.0.0.1:{port}"]
    for key, value in properties.items():
        args += ["--client-property", f"{key}={value}"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                            timeout=30) as response:
                    return response.read().decode()
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.2)
    finally:
        process.terminate()
        process.wait(10)


def value(text: str, name: str) -> float | None:
    """The value of an unlabelled sample in an exposition, None when absent."""
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return None


def test_lag_exporter_reads_a_mutual_tls_listener(ssl_bootstrap: str,
                                                  tls: TlsMaterial) -> None:
    text = scrape_exporter(ssl_bootstrap, tls.confluent_config())
    assert value(text, UP) == 1, text[-2000:]
    assert value(text, "kafka_brokers") == 1


def test_without_a_client_certificate_the_cluster_is_reported_down(
        ssl_bootstrap: str, tls: TlsMaterial) -> None:
    settings = {**tls.confluent_config(with_cert=False),
                "socket.connection.setup.timeout.ms": "2000"}
    text = scrape_exporter(ssl_bootstrap, settings)
    assert value(text, UP) == 0
    assert value(text, "kafka_brokers") is None
