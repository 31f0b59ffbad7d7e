"""kafka-cluster: cluster-id (Kafka 3.9's ClusterTool; unregister is KRaft-only)."""

from __future__ import annotations

from moldau.tools.common import admin_from
from moldau.tools.kafka_errors import check
from moldau.tools.options import Opt, Options, UsageError
from moldau.tools.runner import ArgumentError, Tool

OPTIONS = [
    Opt("bootstrap-server", "A list of host/port pairs to use for establishing the connection "
        "to the Kafka cluster.", ""),
    Opt("config", "A property file containing configurations for the Admin client.",
        ""),
]


def run(options: Options) -> int:
    command = options.args[:1]
    if command != ["cluster-id"]:
        if command == ["unregister"]:
            raise ArgumentError("The unregister command is only available for KRaft clusters")
        raise UsageError("usage: kafka-cluster [-h] {cluster-id,unregister} ...\n"
                         "argument command: invalid choice: "
                         f"'{command[0] if command else ''}' (choose from 'cluster-id', "
                         "'unregister')")
    if not options.has("bootstrap-server"):
        raise ArgumentError("Must specify --bootstrap-server")
    if options.get("config"):
        options.values["command-config"] = [options.get("config")]
    with admin_from(options) as admin:
        answer = admin.call("DescribeCluster", 0, include_cluster_authorized_operations=False)
        check(answer.error_code, answer.error_message)
        print(f"Cluster ID: {answer.cluster_id}")
    return 0


TOOL = Tool("cluster", "The Kafka cluster tool.", OPTIONS, run)
