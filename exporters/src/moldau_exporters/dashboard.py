"""The Grafana dashboard of a Moldau site, generated from this code so that it queries
only names the exporters serve (tests/monitoring checks each expression):

    python -m moldau_exporters.dashboard > roles/monitoring/files/dashboards/moldau-overview.json

Rows: cluster health, throughput, request latency and idle shares, replication, consumer
lag, ZooKeeper, and the broker processes (Python's GC and event-loop lag stand in for
the JVM panels of Kafka dashboards).
"""

from __future__ import annotations

import json
import re
import sys
from typing import TypedDict

PROMQL_WORDS = {"sum", "count", "max", "min", "avg", "and", "or", "unless", "increase",
                "rate", "delta", "absent", "label_replace", "histogram_quantile"}

# (row title, [(panel title, kind, [PromQL, legend], unit)])
ROWS: list[tuple[str, list[tuple[str, str, list[tuple[str, str]], str]]]] = [
    ("Cluster", [
        ("Brokers", "stat", [("count(kafka_server_replicamanager_leadercount)", "")], "none"),
        ("Active controllers", "stat",
         [("sum(kafka_controller_kafkacontroller_activecontrollercount)", "")], "none"),
        ("Under-replicated partitions", "stat",
         [("sum(kafka_server_replicamanager_underreplicatedpartitions)", "")], "none"),
        ("Offline partitions", "stat",
         [("sum(kafka_controller_kafkacontroller_offlinepartitionscount)", "")], "none"),
        ("Under min ISR", "stat",
         [("sum(kafka_server_replicamanager_underminisrpartitioncount)", "")], "none"),
        ("Offline log dirs", "stat",
         [("sum(kafka_log_logmanager_offlinelogdirectorycount)", "")], "none"),
    ]),
    ("Throughput", [
        ("Messages in /s", "timeseries",
         [("sum by (instance) (rate(kafka_server_brokertopicmetrics_messagesin_total"
           "{topic=\"\"}[5m]))", "{{instance}}")], "ops"),
        ("Bytes in and out /s", "timeseries",
         [("sum(rate(kafka_server_brokertopicmetrics_bytesin_total{topic=\"\"}[5m]))", "in"),
          ("sum(rate(kafka_server_brokertopicmetrics_bytesout_total{topic=\"\"}[5m]))", "out")],
         "Bps"),
        ("Replication bytes /s", "timeseries",
         [("sum(rate(kafka_server_brokertopicmetrics_replicationbytesin_total[5m]))", "in"),
          ("sum(rate(kafka_server_brokertopicmetrics_replicationbytesout_total[5m]))",
           "out")], "Bps"),
        ("Requests /s by type", "timeseries",
         [("sum by (request) (rate(kafka_network_requestmetrics_requests_total[5m]))",
           "{{request}}")], "reqps"),
        ("Errors /s by request and error", "timeseries",
         [("sum by (request, error) (rate(kafka_network_requestmetrics_errors_total"
           "{error!=\"NONE\"}[5m]))", "{{request}} {{error}}")], "reqps"),
    ]),
    ("Requests", [
        ("Produce p99 total time", "timeseries",
         [("max by (instance) (kafka_network_requestmetrics_totaltimems"
           "{request=\"Produce\",quantile=\"0.99\"})", "{{instance}}")], "ms"),
        ("FetchConsumer p99 total time", "timeseries",
         [("max by (instance) (kafka_network_requestmetrics_totaltimems"
           "{request=\"FetchConsumer\",quantile=\"0.99\"})", "{{instance}}")], "ms"),
        ("Request handler idle", "timeseries",
         [("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent",
           "{{instance}}")], "percentunit"),
        ("Network processor idle", "timeseries",
         [("kafka_network_socketserver_networkprocessoravgidle_percent", "{{instance}}")],
         "percentunit"),
        ("Request queue", "timeseries",
         [("kafka_network_requestchannel_requestqueuesize", "{{instance}}")], "none"),
        ("Purgatory", "timeseries",
         [("sum by (delayedOperation) (kafka_server_delayedoperationpurgatory_"
           "numdelayedoperations)", "{{delayedOperation}}")], "none"),
        ("Connections", "timeseries",
         [("sum by (instance, listener) (kafka_server_socket_server_metrics_connection_count)",
           "{{instance}} {{listener}}")], "none"),
    ]),
    ("Replication", [
        ("ISR shrinks and expands /s", "timeseries",
         [("sum(rate(kafka_server_replicamanager_isrshrinks_total[5m]))", "shrinks"),
          ("sum(rate(kafka_server_replicamanager_isrexpands_total[5m]))", "expands")], "ops"),
        ("Follower max lag", "timeseries",
         [("kafka_server_replicafetchermanager_maxlag", "{{instance}}")], "none"),
        ("Leaders per broker", "timeseries",
         [("kafka_server_replicamanager_leadercount", "{{instance}}")], "none"),
        ("Log flush p99", "timeseries",
         [("kafka_log_logflushstats_logflushrateandtimems{quantile=\"0.99\"}", "{{instance}}")],
         "ms"),
    ]),
    ("Consumers", [
        ("Lag by group and topic", "timeseries",
         [("sum by (consumergroup, topic) (kafka_consumergroup_lag)",
           "{{consumergroup}} {{topic}}")], "none"),
        ("Consumed /s by group", "timeseries",
         [("sum by (consumergroup) (rate(kafka_consumergroup_current_offset[5m]))",
           "{{consumergroup}}")], "ops"),
        ("Produced /s by topic", "timeseries",
         [("sum by (topic) (rate(kafka_topic_partition_current_offset[5m]))", "{{topic}}")],
         "ops"),
    ]),
    ("ZooKeeper", [
        ("Average request latency", "timeseries",
         [("zookeeper_avgrequestlatency", "{{instance}}")], "ms"),
        ("Outstanding requests", "timeseries",
         [("zookeeper_outstandingrequests", "{{instance}}")], "none"),
        ("Alive connections", "timeseries",
         [("zookeeper_numaliveconnections", "{{instance}}")], "none"),
        ("Broker ZooKeeper latency p99", "timeseries",
         [("kafka_server_zookeeperclientmetrics_zookeeperrequestlatencyms{quantile=\"0.99\"}",
           "{{instance}}")], "ms"),
    ]),
    ("Broker processes", [
        ("CPU", "timeseries", [("rate(process_cpu_seconds_total[5m])", "{{instance}}")],
         "percentunit"),
        ("Resident memory", "timeseries",
         [("process_resident_memory_bytes", "{{instance}}")], "bytes"),
        ("Open files of the limit", "timeseries",
         [("process_open_fds / process_max_fds", "{{instance}}")], "percentunit"),
        ("Index mappings of vm.max_map_count", "timeseries",
         [("moldau_index_mappings / moldau_max_map_count", "{{instance}}")], "percentunit"),
        ("GC time /s by generation", "timeseries",
         [("sum by (instance, generation) (rate(moldau_gc_collection_seconds_total[5m]))",
           "{{instance}} gen{{generation}}")], "s"),
        ("Event loop lag p99", "timeseries",
         [("moldau_eventloop_lagms{quantile=\"0.99\"}", "{{instance}}")], "ms"),
    ]),
]


class Target(TypedDict):
    expr: str  # PromQL
    legendFormat: str
    refId: str


class Panel(TypedDict, total=False):
    """A Grafana panel, or a row (a row has no datasource, field config or targets)."""

    type: str
    title: str
    id: int
    gridPos: dict[str, int]
    collapsed: bool  # rows
    panels: list[Panel]  # rows
    datasource: dict[str, str]
    fieldConfig: dict[str, object]
    targets: list[Target]


class Dashboard(TypedDict):
    title: str
    uid: str
    schemaVersion: int
    tags: list[str]
    time: dict[str, str]
    refresh: str
    editable: bool
    templating: dict[str, list[dict[str, str]]]
    panels: list[Panel]


def dashboard() -> Dashboard:
    panels: list[Panel] = []
    y, next_id = 0, 1
    for row_title, row in ROWS:
        panels.append({"type": "row", "title": row_title, "id": next_id, "collapsed": False,
                       "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
        next_id += 1
        y += 1
        width = 4 if row and row[0][1] == "stat" else 8
        for i, (title, kind, targets, unit) in enumerate(row):
            x = (i * width) % 24
            if i and x == 0:
                y += 6
            panels.append({
                "type": kind, "title": title, "id": next_id,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "gridPos": {"x": x, "y": y, "w": width, "h": 6},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [{"expr": expr, "legendFormat": legend, "refId": chr(65 + n)}
                            for n, (expr, legend) in enumerate(targets)]})
            next_id += 1
        y += 6
    return {
        "title": "Moldau overview", "uid": "moldau-overview", "schemaVersion": 39,
        "tags": ["moldau", "kafka"], "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s", "editable": True,
        "templating": {"list": [{"name": "datasource", "type": "datasource",
                                 "query": "prometheus", "label": "Prometheus"}]},
        "panels": panels,
    }


def expr_names(expr: str) -> set[str]:
    """The metric names a PromQL expression queries (strings, label matchers, ranges and
    by/on clauses dropped; function and operator words left out)."""
    bare = re.sub(r'"[^"]*"|\{[^}]*\}|\[[^\]]*\]|\b(by|on|without)\s*\([^)]*\)', "", expr)
    return {n for n in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare)
            if n not in PROMQL_WORDS and not re.fullmatch(r"\d", n)}


def queried_names(board: Dashboard) -> set[str]:
    return {name for panel in board["panels"] for target in panel.get("targets", [])
            for name in expr_names(target["expr"])}


def main() -> int:
    json.dump(dashboard(), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
