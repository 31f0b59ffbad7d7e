"""Console scripts named like Kafka's (kafka-topics.sh, kafka-topics, ...)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from moldau.tools.registry import run_tool


def _entry(name: str) -> Callable[[], None]:
    def main() -> None:
        sys.exit(run_tool(name, sys.argv[1:]))
    main.__name__ = f"kafka_{name.replace('-', '_')}"
    return main


kafka_topics = _entry("topics")
kafka_configs = _entry("configs")
kafka_consumer_groups = _entry("consumer-groups")
kafka_console_producer = _entry("console-producer")
kafka_console_consumer = _entry("console-consumer")
kafka_cluster = _entry("cluster")
kafka_broker_api_versions = _entry("broker-api-versions")
kafka_get_offsets = _entry("get-offsets")
kafka_delete_records = _entry("delete-records")
kafka_log_dirs = _entry("log-dirs")
kafka_leader_election = _entry("leader-election")
kafka_preferred_replica_election = _entry("preferred-replica-election")
kafka_reassign_partitions = _entry("reassign-partitions")
zookeeper_shell = _entry("zookeeper-shell")
zookeeper_security_migration = _entry("zookeeper-security-migration")
kafka_dump_log = _entry("dump-log")
kafka_run_class = _entry("run-class")
kafka_producer_perf_test = _entry("producer-perf-test")
kafka_consumer_perf_test = _entry("consumer-perf-test")
kafka_mirror_maker = _entry("mirror-maker")

kafka_acls = _entry("acls")
kafka_transactions = _entry("transactions")
