"""kafka-run-class: the seeds' `kafka-run-class.sh <main class> args...` form, for the
classes whose tools Moldau has."""

from __future__ import annotations

import sys
from collections.abc import Sequence

# Kafka's main classes (3.9 names and the older kafka.* ones) -> tool names
CLASSES = {
    "kafka.tools.DumpLogSegments": "dump-log",
    "org.apache.kafka.tools.DumpLogSegments": "dump-log",
    "kafka.admin.TopicCommand": "topics",
    "org.apache.kafka.tools.TopicCommand": "topics",
    "kafka.admin.ConfigCommand": "configs",
    "kafka.admin.AclCommand": "acls",
    "kafka.admin.ConsumerGroupCommand": "consumer-groups",
    "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand": "consumer-groups",
    "kafka.tools.ConsoleProducer": "console-producer",
    "org.apache.kafka.tools.ConsoleProducer": "console-producer",
    "kafka.tools.ConsoleConsumer": "console-consumer",
    "org.apache.kafka.tools.consumer.ConsoleConsumer": "console-consumer",
    "kafka.tools.GetOffsetShell": "get-offsets",
    "org.apache.kafka.tools.GetOffsetShell": "get-offsets",
    "kafka.admin.DeleteRecordsCommand": "delete-records",
    "org.apache.kafka.tools.DeleteRecordsCommand": "delete-records",
    "kafka.admin.LogDirsCommand": "log-dirs",
    "org.apache.kafka.tools.LogDirsCommand": "log-dirs",
    "kafka.admin.BrokerApiVersionsCommand": "broker-api-versions",
    "kafka.admin.LeaderElectionCommand": "leader-election",
    "org.apache.kafka.tools.LeaderElectionCommand": "leader-election",
    "kafka.admin.ReassignPartitionsCommand": "reassign-partitions",
    "org.apache.kafka.tools.reassign.ReassignPartitionsCommand": "reassign-partitions",
    "org.apache.kafka.tools.ClusterTool": "cluster",
    "org.apache.kafka.tools.TransactionsCommand": "transactions",
    "org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka": "zookeeper-shell",
    "org.apache.zookeeper.ZooKeeperMain": "zookeeper-shell",
    "kafka.admin.ZkSecurityMigrator": "zookeeper-security-migration",
}


class RunClass:
    name = "run-class"

    def main(self, argv: Sequence[str] | None = None) -> int:
        from moldau.tools.registry import run_tool

        argv = list(sys.argv[1:] if argv is None else argv)
        if not argv:
            print("USAGE: kafka-run-class.sh [-daemon] [-name servicename] "
                  "[-loggc] classname [opts]", file=sys.stderr)
            return 1
        if argv[0] not in CLASSES:
            print(f"Error: Could not find or load main class {argv[0]}", file=sys.stderr)
            return 1
        return run_tool(CLASSES[argv[0]], argv[1:])


TOOL = RunClass()
