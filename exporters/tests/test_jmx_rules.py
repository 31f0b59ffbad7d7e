"""The rule engine on its own: the JMX exporter's matching and naming rules."""

from __future__ import annotations

import pytest
from moldau_exporters.broker_exporter import default_rules
from moldau_exporters.exposition import exposition
from moldau_exporters.jmx_rules import RuleError, RuleSet

RULES = """
lowercaseOutputName: true
lowercaseOutputLabelNames: true
rules:
  - pattern: 'kafka\\.(\\w+)<type=(.+), name=(.+)PerSec, (.+)=(.+)><>Count'
    name: kafka_$1_$2_$3_total
    type: COUNTER
    help: "events of $3"
    labels: {"$4": "$5"}
  - pattern: 'kafka\\.(\\w+)<type=(.+), name=(.+)><>Value'
    name: kafka_$1_$2_$3
    type: GAUGE
    valueFactor: 0.001
"""


def test_first_matching_rule_names_the_sample() -> None:
    rules = RuleSet.from_yaml(RULES)
    samples = rules.apply("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,Topic=t",
                          {"Count": 42, "MeanRate": 1.5, "RateUnit": "SECONDS"})
    assert [(s.name, s.labels, s.value, s.help) for s in samples] == [
        ("kafka_server_brokertopicmetrics_bytesin_total", (("topic", "t"),), 42.0,
         "events of BytesIn")]
    gauge = rules.apply("kafka.log:type=Log,name=Size", {"Value": 5000})
    assert [(s.name, s.value, s.type) for s in gauge] == [("kafka_log_log_size", 5.0, "GAUGE")]
    assert rules.apply("java.lang:type=Memory", {"HeapMemoryUsage": 1}) == []


@pytest.mark.parametrize(("text", "message"), [
    ("rules: [{name: x}]", "needs a pattern and a name"),
    ("rules: [{pattern: 'a(', name: x}]", "bad pattern"),
    ("rules: [{pattern: a, name: x, type: HISTOGRAM}]", "type HISTOGRAM"),
    ("- just a list", "must be a mapping"),
])
def test_bad_rule_files_are_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        RuleSet.from_yaml(text)


def test_the_default_rules_give_the_jmx_exporters_kafka_names() -> None:
    rules = default_rules()
    cases = {
        ("kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=o", "Count"):
            ("kafka_server_brokertopicmetrics_messagesin_total", (("topic", "o"),)),
        ("kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Fetch,version=16",
         "Count"): ("kafka_network_requestmetrics_requests_total",
                    (("request", "Fetch"), ("version", "16"))),
        ("kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce", "99thPercentile"):
            ("kafka_network_requestmetrics_totaltimems", (("request", "Produce"),
                                                          ("quantile", "0.99"))),
        ("kafka.controller:type=KafkaController,name=ActiveControllerCount", "Value"):
            ("kafka_controller_kafkacontroller_activecontrollercount", ()),
        ("kafka.network:type=Acceptor,name=AcceptorBlockedPercent,listener=CLIENT", "Count"):
            ("kafka_network_acceptor_acceptorblockedpercent_count", (("listener", "CLIENT"),)),
        ("kafka.server:type=socket-server-metrics,listener=CLIENT,networkProcessor=0",
         "connection-creation-rate"):
            ("kafka_server_socket_server_metrics_connection_creation_rate",
             (("listener", "CLIENT"), ("networkProcessor", "0"))),
    }
    for (mbean, attribute), expected in cases.items():
        [sample] = rules.apply(mbean, {attribute: 1})
        assert (sample.name, sample.labels) == expected


def test_exposition_is_prometheus_text() -> None:
    rules = RuleSet.from_yaml(RULES)
    text = exposition(rules.apply("kafka.server:type=X,name=APerSec,t=a\"b", {"Count": 3}))
    assert text == ('# HELP kafka_server_x_a_total events of A\n'
                    '# TYPE kafka_server_x_a_total counter\n'
                    'kafka_server_x_a_total{t="a\\"b"} 3.0\n')


def test_the_certificate_expiry_of_a_listener_is_a_labelled_gauge() -> None:
    samples = default_rules().apply(
        "moldau:type=Tls,name=CertificateNotAfterSeconds,listener=SSL", {"Value": 1.8e9})
    assert [(s.name, s.labels, s.value, s.type) for s in samples] == [
        ("moldau_tls_certificate_not_after_seconds", (("listener", "SSL"),), 1.8e9, "GAUGE")]


def test_client_quota_beans_get_the_jmx_exporters_quota_names() -> None:
    """Kafka's quota sensors (a user tag, a client-id tag or both) as kafka_server_quota_*
    with the quota type as `resource`; queue-size and exempt-request-time, which those
    rules leave out, stay out."""
    rules = default_rules()
    cases = {
        ("kafka.server:type=Produce,client-id=clueful", "byte-rate"):
            ("kafka_server_quota_byte_rate", (("resource", "Produce"), ("clientId", "clueful"))),
        ("kafka.server:type=Request,user=alice,client-id=app", "request-time"):
            ("kafka_server_quota_request_time",
             (("resource", "Request"), ("user", "alice"), ("clientId", "app"))),
        ("kafka.server:type=Fetch,user=alice", "throttle-time"):
            ("kafka_server_quota_throttle_time", (("resource", "Fetch"), ("user", "alice"))),
        ("kafka.server:type=ControllerMutation,client-id=ops", "tokens"):
            ("kafka_server_quota_tokens", (("resource", "ControllerMutation"),
                                           ("clientId", "ops"))),
    }
    for (mbean, attribute), expected in cases.items():
        [sample] = rules.apply(mbean, {attribute: 1.0})
        assert (sample.name, sample.labels) == expected
    assert rules.apply("kafka.server:type=Produce", {"queue-size": 1}) == []
    assert rules.apply("kafka.server:type=Request", {"exempt-request-time": 1.0}) == []
