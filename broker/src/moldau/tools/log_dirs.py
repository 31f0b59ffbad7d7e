"""kafka-log-dirs --describe: each broker's log directories and replica sizes
(DescribeLogDirs), as Kafka's JSON document."""

from __future__ import annotations

import json

from moldau.protocol.generated.describe_log_dirs_request import DescribeLogDirsRequest
from moldau.protocol.generated.describe_log_dirs_response import DescribeLogDirsResponse
from moldau.tools.admin import Admin
from moldau.tools.common import admin_from, bootstrap_opts
from moldau.tools.kafka_errors import error_name
from moldau.tools.options import Opt, Options, UsageError, require
from moldau.tools.runner import ArgumentError, Tool

OPTIONS = [
    *bootstrap_opts("Admin Client", "REQUIRED: the server(s) to use for bootstrapping",
                    "The server(s) to use for bootstrapping", "Admin client property file"),
    Opt("describe", "Describe the specified log directories on the specified brokers."),
    Opt("topic-list", "The list of topics to be queried in the form \"topic1,topic2,topic3\". "
        "All topics will be queried if no topic list is specified", "Topic list",
        default=""),
    Opt("broker-list", 'The list of brokers to be queried in the form "0,1,2". All brokers in '
        "the cluster will be queried if no broker list is specified (default: )", "Broker list"),
]


def _partitions(result: DescribeLogDirsResponse.DescribeLogDirsResult,
                topics: set[str]) -> list[dict[str, object]]:
    return [{"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size,
             "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
            for t in result.topics if not topics or t.name in topics
            for p in t.partitions]


def run(options: Options) -> int:
    if not options.has("describe"):
        raise UsageError('Missing required argument "[describe]"')
    require(options, "bootstrap-server")
    topics = {t for t in options.get("topic-list").split(",") if t}
    with admin_from(options) as admin:
        live = sorted(b.node_id for b in admin.metadata([]).brokers)
        if options.get("broker-list"):
            try:
                wanted = [int(b) for b in options.get("broker-list").split(",")]
            except ValueError:
                raise ArgumentError(f"Invalid broker list: {options.get('broker-list')}") from None
            absent = [b for b in wanted if b not in live]
            if absent:
                raise ArgumentError("ERROR: The given brokers do not exist from --broker-list: "
                                    + ",".join(map(str, absent))
                                    + ". Current existent brokers: "
                                    + ",".join(map(str, live)))
        else:
            wanted = live
        print("Querying brokers for log directories information")
        brokers = []
        for broker in wanted:
            answer = admin.call("DescribeLogDirs", 2, broker, topics=None if not topics else [
                DescribeLogDirsRequest.DescribableLogDirTopic(
                    topic=t, partitions=_all_partitions(admin, t)) for t in sorted(topics)])
            # Kafka 3.9 prints its document's keys in Java HashMap order: followed here
            brokers.append({"broker": broker, "logDirs": [
                {"partitions": _partitions(r, topics),
                 "error": None if not r.error_code else _exception(r.error_code),
                 "logDir": r.log_dir} for r in answer.results]})
        print("Received log directory information from brokers "
              + ",".join(map(str, wanted)))
        print(json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":")))
    return 0


def _exception(code: int) -> str:
    return f"org.apache.kafka.common.errors.{error_name(code)}"


def _all_partitions(admin: Admin, topic: str) -> list[int]:
    answer = admin.metadata([topic])
    return sorted(p.partition_index for t in answer.topics if t.error_code == 0
                  for p in t.partitions)


TOOL = Tool("log-dirs", "This tool helps to query log directory usage on the specified "
            "brokers.", OPTIONS, run)
