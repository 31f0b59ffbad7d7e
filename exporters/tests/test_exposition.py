"""Samples through prometheus-client: the names, labels, values and types the exporters
served before the library wrote the text, and /metrics in the text format 0.0.4."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from moldau_exporters.exposition import exposition, serve
from moldau_exporters.jmx_rules import Sample
from prometheus_client.parser import text_string_to_metric_families

SAMPLES = [
    Sample("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "t"),), 42, "COUNTER",
           "events"),
    # a histogram's count: a COUNTER rule whose name has no _total
    Sample("kafka_network_requestmetrics_totaltimems_count", (("request", "Produce"),), 7,
           "COUNTER", ""),
    Sample("kafka_network_requestmetrics_totaltimems",
           (("request", "Produce"), ("quantile", "0.99")), 1.5, "GAUGE", ""),
    # one name, two label sets (a quota bean with a client id, another with a user too)
    Sample("kafka_server_quota_byte_rate", (("resource", "Produce"), ("clientId", "a")), 10,
           "GAUGE", ""),
    Sample("kafka_server_quota_byte_rate",
           (("resource", "Produce"), ("user", "u"), ("clientId", "b")), 20, "GAUGE", ""),
    Sample("zookeeper_packetsreceived", (), 3, "COUNTER", "mntr zk_packets_received"),
    Sample("jmx_scrape_error", (), 0, "GAUGE", "1 if the broker's MBeans could not be read"),
]


def served(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def types(text: str) -> dict[str, str]:
    return {line.split()[2]: line.split()[3] for line in text.splitlines()
            if line.startswith("# TYPE ")}


def test_every_sample_keeps_its_name_labels_and_value() -> None:
    text = exposition(SAMPLES)
    assert served(text) == {(s.name, frozenset(s.labels)): float(s.value) for s in SAMPLES}


def test_counters_named_total_are_counters_the_others_untyped() -> None:
    text = exposition(SAMPLES)
    assert types(text) == {
        "kafka_server_brokertopicmetrics_messagesin_total": "counter",
        "kafka_network_requestmetrics_totaltimems_count": "untyped",
        "kafka_network_requestmetrics_totaltimems": "gauge",
        "kafka_server_quota_byte_rate": "gauge",
        "zookeeper_packetsreceived": "untyped",
        "jmx_scrape_error": "gauge",
    }
    assert "kafka_network_requestmetrics_totaltimems_count{request=\"Produce\"} 7.0" in \
        text.splitlines()


@pytest.fixture
def server() -> Iterator[str]:
    httpd = serve(lambda: list(SAMPLES), "127.0.0.1", 0)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_metrics_answers_the_text_format_even_to_an_openmetrics_scraper(server: str) -> None:
    request = urllib.request.Request(server + "/metrics", headers={
        "Accept": "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = answer.read().decode()
    assert "# EOF" not in text
    assert served(text) == served(exposition(SAMPLES))


def test_other_paths_are_not_found(server: str) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(server + "/jmx", timeout=10)
    assert refused.value.code == 404
