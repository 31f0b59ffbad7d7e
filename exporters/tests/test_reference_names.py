"""Every name the reference lists (tests/data, copied from the project's metric-name
lists) mark as used by Strimzi's Kafka and ZooKeeper alert rules and its Kafka,
ZooKeeper and kafka_exporter dashboards, every name kafka_exporter serves and every name
Grafana dashboard 7589 queries is in one real scrape of the three exporters, except the
names below that cannot apply here, each with its reason (docs/metrics.md)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parent / "data"
DASHBOARDS = {"strimzi-kafka.json", "strimzi-zookeeper.json", "strimzi-kafka-exporter.json"}
NOT_APPLICABLE = {
    "container_last_seen": "Kubernetes (cAdvisor)",
    "container_cpu_usage_seconds_total": "Kubernetes (cAdvisor)",
    "container_memory_usage_bytes": "Kubernetes (cAdvisor)",
    "kubelet_volume_stats_available_bytes": "Kubernetes (kubelet)",
    "kubelet_volume_stats_capacity_bytes": "Kubernetes (kubelet)",
    "jvm_gc_collection_seconds_count": "JVM only (moldau_gc_* instead)",
    "jvm_gc_collection_seconds_sum": "JVM only (moldau_gc_* instead)",
    "jvm_memory_used_bytes": "JVM only",
    "jvm_threads_current": "JVM only",
    "up": "Prometheus's own sample for every target",
    "kafka_consumergroupzookeeper_lag_zookeeper": "consumer offsets kept in ZooKeeper "
    "(Kafka 0.8's consumers); Moldau keeps them in __consumer_offsets only",
    "kafka_exporter_build_info": "kafka_exporter's own build; moldau_lag_exporter_cluster_up "
    "reports the lag exporter",
}


def names(file: str, where: set[str] | None = None) -> set[str]:
    found = set()
    for line in (DATA / file).read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, used_in = line.partition("\t")
            if where is None or where & set(used_in.split(",")):
                found.add(name)
    return found


def test_the_names_kafka_dashboards_and_alerts_use_are_served(served: set[str]) -> None:
    wanted = (names("strimzi-kafka-alerts.txt") | names("strimzi-zookeeper-alerts.txt")
              | names("strimzi-dashboards.txt", DASHBOARDS) | names("kafka-exporter.txt")
              | names("grafana-7589.txt"))
    assert len(wanted) > 50
    missing = sorted(wanted - served - set(NOT_APPLICABLE))
    assert missing == [], f"used by Kafka dashboards or alerts, served by no exporter: {missing}"
    assert set(NOT_APPLICABLE) <= wanted  # each exception names a name really used
