"""The metric types and names, on a fake clock (unit tests of moldau.metrics.registry)."""

from __future__ import annotations

import math

import pytest

from moldau.metrics.http import render
from moldau.metrics.registry import TICK_S, MetricsRegistry, matches, mbean_name


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_mbean_names_are_kafkas() -> None:
    assert mbean_name("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec",
                      [("topic", "orders")]) == \
        "kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=orders"


def test_a_meter_counts_and_its_averages_follow_the_rate() -> None:
    clock = Clock()
    registry = MetricsRegistry(clock)
    meter = registry.meter("kafka.server", "BrokerTopicMetrics", "MessagesInPerSec")
    for _ in range(120):  # 10 minutes at 100 events per second
        meter.mark(int(100 * TICK_S))
        clock.now += TICK_S
        registry.tick()
    attributes = meter.attributes(clock.now)
    assert attributes["Count"] == 60000
    assert attributes["MeanRate"] == pytest.approx(100)
    assert attributes["OneMinuteRate"] == pytest.approx(100)
    for _ in range(12):  # one quiet minute: the 1-minute average falls most
        clock.now += TICK_S
        registry.tick()
    after = meter.attributes(clock.now)
    assert after["OneMinuteRate"] == pytest.approx(100 / math.e, rel=0.01)
    assert after["OneMinuteRate"] < after["FiveMinuteRate"] < after["FifteenMinuteRate"] < 100


def test_a_timer_keeps_percentiles_of_its_durations() -> None:
    registry = MetricsRegistry(Clock())
    timer = registry.timer("kafka.network", "RequestMetrics", "TotalTimeMs",
                           [("request", "Produce")])
    for ms in range(1, 1001):
        timer.update(float(ms))
    attributes = timer.attributes(0.0)
    assert attributes["Count"] == 1000
    assert (attributes["Min"], attributes["Max"]) == (1.0, 1000.0)
    assert attributes["Mean"] == pytest.approx(500.5)
    assert attributes["50thPercentile"] == pytest.approx(500.5)
    assert attributes["99thPercentile"] == pytest.approx(990.99)


def test_one_name_one_kind() -> None:
    registry = MetricsRegistry(Clock())
    registry.meter("kafka.server", "X", "Y")
    with pytest.raises(TypeError):
        registry.timer("kafka.server", "X", "Y")


@pytest.mark.parametrize(("query", "hit"), [
    ("kafka.server:*", True),
    ("*:*", True),
    ("kafka.server:type=BrokerTopicMetrics,*", True),
    ("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t", True),
    ("kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec", False),  # exact: topic too
    ("kafka.server:type=ReplicaManager,*", False),
    ("kafka.controller:*", False),
])
def test_queries_match_as_jmx_patterns(query: str, hit: bool) -> None:
    name = "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t"
    assert matches(query, name) is hit


def test_the_endpoint_renders_json_and_refuses_other_paths() -> None:
    registry = MetricsRegistry(Clock())
    registry.gauge("kafka.server", "ReplicaManager", "PartitionCount", lambda: 7)
    registry.gauge("kafka.server", "ReplicaManager", "Broken", lambda: 1 / 0)
    status, body = render(registry, "/jmx?qry=kafka.server:type=ReplicaManager,*")
    assert status == 200
    assert b'"Value": 7' in body and b'"Error": "division by zero"' in body
    assert render(registry, "/other")[0] == 404
