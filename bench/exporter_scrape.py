"""What one Prometheus scrape of a broker with many partitions costs, on each side: the
broker renders its MBeans as JSON (`/jmx`, moldau.metrics.http, on its event loop), and
the broker exporter, a process of its own, names them with the packaged rules and has
prometheus-client write the text format (moldau_exporters).

The MBeans are the broker's per-partition gauges (Log: 4, Partition: 6) of PARTITIONS
partitions, served by a provider as the broker's are, and the BrokerTopicMetrics meters of
their topics, in a real MetricsRegistry; the three steps are timed in this process,
interleaved.
"""

from __future__ import annotations

import json
import sys

import _support as s

ORDER = 48  # after the metrics overhead: the other cost of the metrics
PARTITIONS = 2000
TOPICS = 10
RUNS = 11  # each step takes tenths of a second: fewer runs than the default
METERS = ("MessagesInPerSec", "BytesInPerSec", "BytesOutPerSec", "TotalProduceRequestsPerSec",
          "TotalFetchRequestsPerSec", "FailedProduceRequestsPerSec",
          "FailedFetchRequestsPerSec", "BytesRejectedPerSec")
LOG_GAUGES = ("Size", "LogEndOffset", "LogStartOffset", "NumLogSegments")
PARTITION_GAUGES = ("UnderReplicated", "InSyncReplicasCount", "ReplicasCount", "UnderMinIsr",
                    "AtMinIsr", "LastStableOffsetLag")


def run() -> str:
    sys.path.insert(0, str(s.REPO / "broker" / "src"))
    from moldau_exporters.broker_exporter import default_rules
    from moldau_exporters.exposition import exposition

    from moldau.metrics.http import render
    from moldau.metrics.registry import MetricsRegistry, mbean_name

    clock = s.Stopwatch()
    registry = MetricsRegistry()
    per_topic = PARTITIONS // TOPICS
    for t in range(TOPICS):
        for meter in METERS:
            registry.meter("kafka.server", "BrokerTopicMetrics", meter, (("topic", f"t{t}"),))

    def partition_beans() -> dict[str, dict[str, object]]:
        beans: dict[str, dict[str, object]] = {}
        for t in range(TOPICS):
            for p in range(per_topic):
                tags = (("topic", f"t{t}"), ("partition", str(p)))
                for name in LOG_GAUGES:
                    beans[mbean_name("kafka.log", "Log", name, tags)] = {"Value": 1000 + p}
                for name in PARTITION_GAUGES:
                    beans[mbean_name("kafka.cluster", "Partition", name, tags)] = {"Value": 1}
        return beans

    registry.add_provider(partition_beans)
    rules = default_rules()
    _, body = render(registry, "/jmx")
    beans = json.loads(body)["beans"]

    def apply_rules() -> list:
        samples = []
        for bean in beans:
            samples.extend(rules.apply(bean["name"], {k: v for k, v in bean.items()
                                                      if k != "name"}))
        return samples

    samples = apply_rules()
    timings = s.measure({
        "broker: /jmx as JSON": lambda: render(registry, "/jmx"),
        "exporter: the rules": apply_rules,
        "exporter: prometheus-client's text": lambda: exposition(samples),
    }, runs=min(RUNS, s.RUNS))
    rows = [(name, s.fmt_time(t.median), f"{t.median / len(samples) * 1e6:.2f} us", s.fmt_loop(t))
            for name, t in timings.items()]
    exporter = timings["exporter: the rules"].median + timings[
        "exporter: prometheus-client's text"].median
    return "\n".join([
        "## Exporter scrape",
        "",
        f"One scrape of a broker with {PARTITIONS:,} partitions in {TOPICS} topics: "
        f"{len(beans):,} MBeans, {len(samples):,} samples (the broker's per-partition Log "
        "and Partition gauges and the topics' BrokerTopicMetrics meters in a real "
        "MetricsRegistry), each step timed in this process.",
        "",
        s.table(["step", "median", "per sample", "runs x loop"], rows),
        "",
        f"- The broker's share (its event loop): the JSON of `/jmx`. The exporter's "
        f"(a process of its own): {s.fmt_time(exporter)} a scrape, within Prometheus's "
        "default scrape timeout of 10 s by far.",
        "",
        s.environment(clock, ["prometheus-client", "pyyaml"]),
    ])


if __name__ == "__main__":
    print(run())
