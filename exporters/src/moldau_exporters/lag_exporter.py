"""Consumer lag and partition state for Prometheus under kafka_exporter's names, which
Grafana dashboard 7589 and Strimzi's alert rules query. It speaks only the Kafka
protocol (through librdkafka), so it watches any Kafka-compatible cluster:

    moldau-lag-exporter --bootstrap-server 127.0.0.1:9092 --listen 127.0.0.1:9308

Security settings (TLS, a SASL login) are librdkafka properties, in a file of KEY=VALUE
lines given with --client-config (a password goes there, never on the command line) or
one by one with --client-property; librdkafka checks them before the exporter starts.

On each scrape it reads the brokers and topics (Metadata), the partitions' earliest and
latest offsets (ListOffsets), the consumer groups, their members and committed offsets
(ListGroups, DescribeGroups, OffsetFetch). A group's lag on a partition is the latest
offset minus its committed offset; partitions without a committed offset have none.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from .client_config import ClientConfig, ClientConfigError, client_config
from .exposition import exposition, run
from .jmx_rules import Sample

if TYPE_CHECKING:  # confluent_kafka is imported when the exporter first scrapes
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

TIMEOUT_S = 10.0
UP = "moldau_lag_exporter_cluster_up"  # ours: kafka_exporter has no such sample


def _gauge(name: str, value: float, help_: str, **labels: object) -> Sample:
    return Sample(name, tuple((k, str(v)) for k, v in labels.items()), float(value), "GAUGE",
                  help_)


def collect(config: ClientConfig) -> list[Sample]:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient(config)
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    samples = [_gauge("kafka_brokers", len(metadata.brokers), "brokers in the cluster metadata")]
    for broker in metadata.brokers.values():
        samples.append(_gauge("kafka_broker_info", 1, "a broker of the cluster (the value is 1)",
                              address=f"{broker.host}:{broker.port}", id=broker.id))
    partitions = [TopicPartition(t, p) for t, meta in metadata.topics.items() if not meta.error
                  for p in meta.partitions]
    latest = _offsets(admin, partitions, OffsetSpec.latest())
    earliest = _offsets(admin, partitions, OffsetSpec.earliest())
    for topic, meta in sorted(metadata.topics.items()):
        if meta.error:
            continue
        samples.append(_gauge("kafka_topic_partitions", len(meta.partitions),
                              "partitions of the topic", topic=topic))
        for index, p in sorted(meta.partitions.items()):
            labels = {"partition": index, "topic": topic}
            samples += [
                _gauge("kafka_topic_partition_current_offset", latest.get((topic, index), -1),
                       "the partition's latest offset (log end)", **labels),
                _gauge("kafka_topic_partition_oldest_offset", earliest.get((topic, index), -1),
                       "the partition's earliest offset (log start)", **labels),
                _gauge("kafka_topic_partition_leader", p.leader,
                       "the broker leading the partition (-1: none)", **labels),
                _gauge("kafka_topic_partition_replicas", len(p.replicas),
                       "replicas of the partition", **labels),
                _gauge("kafka_topic_partition_in_sync_replica", len(p.isrs),
                       "in-sync replicas of the partition", **labels),
                _gauge("kafka_topic_partition_leader_is_preferred",
                       int(bool(p.replicas) and p.leader == p.replicas[0]),
                       "1 when the first assigned replica leads", **labels),
                _gauge("kafka_topic_partition_under_replicated_partition",
                       int(len(p.isrs) < len(p.replicas)),
                       "1 when the ISR is smaller than the replica set", **labels),
            ]
    groups = [g.group_id for g in admin.list_consumer_groups(request_timeout=TIMEOUT_S)
              .result(TIMEOUT_S).valid]
    described = admin.describe_consumer_groups(groups, request_timeout=TIMEOUT_S) if groups else {}
    for group in sorted(groups):
        description = described[group].result(TIMEOUT_S)
        samples.append(_gauge("kafka_consumergroup_members", len(description.members),
                              "members of the consumer group", consumergroup=group))
        committed = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=TIMEOUT_S)[group].result(
            TIMEOUT_S)
        samples += _group_samples(group, committed.topic_partitions, latest)
    return samples


def _offsets(admin: AdminClient, partitions: list[TopicPartition],
             spec: OffsetSpec) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    futures = admin.list_offsets({tp: spec for tp in partitions}, request_timeout=TIMEOUT_S)
    out = {}
    for tp, future in futures.items():
        try:
            out[(tp.topic, tp.partition)] = future.result(TIMEOUT_S).offset
        except Exception:  # a partition without a leader right now: no sample
            continue
    return out


def _group_samples(group: str, committed: list[TopicPartition],
                   latest: dict[tuple[str, int], int]) -> list[Sample]:
    samples: list[Sample] = []
    offset_sums: dict[str, int] = {}
    lag_sums: dict[str, int] = {}
    for tp in sorted(committed, key=lambda t: (t.topic, t.partition)):
        if tp.offset < 0:
            continue  # nothing committed for this partition
        labels = {"consumergroup": group, "partition": tp.partition, "topic": tp.topic}
        samples.append(_gauge("kafka_consumergroup_current_offset", tp.offset,
                              "the group's committed offset on the partition", **labels))
        offset_sums[tp.topic] = offset_sums.get(tp.topic, 0) + tp.offset
        end = latest.get((tp.topic, tp.partition))
        if end is not None:
            lag = max(end - tp.offset, 0)
            samples.append(_gauge("kafka_consumergroup_lag", lag,
                                  "latest offset minus the group's committed offset",
                                  **labels))
            lag_sums[tp.topic] = lag_sums.get(tp.topic, 0) + lag
    for topic, total in sorted(offset_sums.items()):
        samples.append(_gauge("kafka_consumergroup_current_offset_sum", total,
                              "the group's committed offsets summed over the topic",
                              consumergroup=group, topic=topic))
    for topic, total in sorted(lag_sums.items()):
        samples.append(_gauge("kafka_consumergroup_lag_sum", total,
                              "the group's lag summed over the topic",
                              consumergroup=group, topic=topic))
    return samples


def scrape_samples(config: ClientConfig) -> list[Sample]:
    """collect(), or nothing when the cluster cannot be read, and the UP gauge saying so."""
    try:
        samples = collect(config)
        up = 1.0
    except Exception:  # the cluster cannot be read: say so instead of failing
        samples, up = [], 0.0
    samples.append(_gauge(UP, up, "1 when the cluster could be read, else 0"))
    return samples


def scrape(config: ClientConfig) -> Callable[[], str]:
    """A scrape in the Prometheus text format (what /metrics answers), each time called."""
    return lambda: exposition(scrape_samples(config))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="moldau-lag-exporter", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--listen", default="127.0.0.1:9308", help="host:port to serve on")
    parser.add_argument("--client-config", metavar="FILE",
                        help="librdkafka properties, KEY=VALUE lines (security settings, "
                             "SASL login: the place for a password)")
    parser.add_argument("--client-property", action="append", default=[], metavar="KEY=VALUE",
                        help="a librdkafka property (wins over the file's; no secrets)")
    args = parser.parse_args(argv)
    try:
        config = client_config(args.bootstrap_server, args.client_config, args.client_property)
    except ClientConfigError as e:
        parser.error(str(e))
    return run(lambda: scrape_samples(config), args.listen)


if __name__ == "__main__":
    sys.exit(main())
