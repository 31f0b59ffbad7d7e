"""The exporter against a real broker: the names it serves are the Prometheus JMX
exporter's Kafka names (the reference list in tests/data, copied from
the project's metric-name reference lists), and they move with real traffic."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from moldau_exporters.broker_exporter import PROCESS_SAMPLES

from moldau.devcluster.brokers import BrokerProcess, free_port

REFERENCE = Path(__file__).parent / "data" / "jmx-exporter-kafka.txt"
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$")


@pytest.fixture(scope="module")
def exporter(broker: tuple[BrokerProcess, int]) -> Iterator[str]:
    _, metrics_port = broker
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moldau_exporters.broker_exporter",
         "--broker-metrics", f"http://127.0.0.1:{metrics_port}", "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


def scrape(url: str) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            match = SAMPLE.match(line)
            assert match, line
            samples[(match.group(1), match.group(2) or "")] = float(match.group(3))
    return samples


def reference_names() -> set[str]:
    return {line.split("\t")[0] for line in REFERENCE.read_text().splitlines()
            if line and not line.startswith("#")}


def test_every_broker_metric_has_a_name_kafka_dashboards_know(broker, exporter: str) -> None:
    process, _ = broker
    topic = f"exported-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": process.bootstrap, "acks": "all"})
    producer.produce(topic, b"first")
    assert producer.flush(20) == 0
    key = ("kafka_server_brokertopicmetrics_messagesin_total", f'{{topic="{topic}"}}')
    before = scrape(exporter)[key]
    for i in range(300):
        producer.produce(topic, b"%d" % i)
    assert producer.flush(20) == 0
    samples = scrape(exporter)
    assert samples[key] - before == 300
    assert samples[("jmx_scrape_error", "")] == 0
    assert samples[("kafka_controller_kafkacontroller_activecontrollercount", "")] == 1
    assert samples[("kafka_server_replicamanager_underreplicatedpartitions", "")] == 0
    known = reference_names() | {"jmx_scrape_error", "jmx_scrape_duration_seconds"} | {
        name for name, _, _ in PROCESS_SAMPLES.values()} | MOLDAU_NAMES
    assert 0 < samples[("process_open_fds", "")] < samples[("process_max_fds", "")]
    unknown = sorted({name for name, _ in samples} - known)
    assert unknown == [], f"names no Kafka dashboard knows: {unknown}"
    served = {name for name, _ in samples}
    assert sorted(REQUEST_PATH_NAMES - served) == []
    assert sorted(MOLDAU_NAMES - served) == []
    assert samples[("kafka_network_requestmetrics_errors_total",
                    '{error="NONE",request="Produce"}')] >= 2
    assert samples[("kafka_server_socket_server_metrics_connection_count",
                    '{listener="PLAINTEXT",networkProcessor="0"}')] >= 1


# Moldau's own names (docs/metrics.md): Python's counterparts of the JVM's GC figures,
# the requests the fast Produce path answered, and the index mappings with their limit.
MOLDAU_NAMES = {"moldau_eventloop_lagms", "moldau_eventloop_lagms_count",
                "moldau_gc_collections_total", "moldau_gc_collection_seconds_total",
                "moldau_produce_fast_path_requests_total", "moldau_index_mappings",
                "moldau_max_map_count"}
# Served by any broker, whatever it hosts (a follower adds fetcherlagmetrics_consumerlag).
REQUEST_PATH_NAMES = {
    "kafka_network_requestchannel_requestqueuesize",
    "kafka_network_requestchannel_responsequeuesize",
    "kafka_network_requestmetrics_responsequeuetimems",
    "kafka_network_requestmetrics_responsesendtimems",
    "kafka_network_requestmetrics_errors_total",
    "kafka_server_delayedoperationpurgatory_purgatorysize",
    "kafka_server_delayedoperationpurgatory_numdelayedoperations",
    "kafka_server_replicafetchermanager_maxlag",
    "kafka_server_socket_server_metrics_connection_count",
    "kafka_server_socket_server_metrics_connection_creation_total",
    "kafka_server_socket_server_metrics_connection_close_rate",
    "kafka_network_acceptor_acceptorblockedpercent_count",
    "kafka_log_logflushstats_logflushrateandtimems_count",
}


def test_a_broker_that_cannot_be_read_is_an_error_sample_not_a_failure() -> None:
    from moldau_exporters.broker_exporter import default_rules
    from moldau_exporters.broker_exporter import scrape as scrape_text

    text = scrape_text(f"http://127.0.0.1:{free_port()}", default_rules(), timeout=2)
    assert "jmx_scrape_error 1.0" in text.splitlines()
