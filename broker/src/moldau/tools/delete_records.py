"""kafka-delete-records: move the log start offset of partitions forward
(DeleteRecords to each leader), with Kafka's JSON file and output."""

from __future__ import annotations

import json
from collections import Counter

from moldau.protocol.generated.delete_records_request import DeleteRecordsRequest
from moldau.tools.admin import partition_leaders
from moldau.tools.common import admin_from, bootstrap_opts
from moldau.tools.kafka_errors import error_text
from moldau.tools.options import Opt, Options, require
from moldau.tools.runner import ArgumentError, Tool

OPTIONS = [
    *bootstrap_opts("Admin Client", "REQUIRED: The server to connect to.",
                    "server(s) to use for bootstrapping", "command config property file path",
                    "A property file containing configs to be passed to"),
    Opt("offset-json-file", "REQUIRED: The JSON file with offset per partition. The format to "
        "use is:\n{\"partitions\":\n  [{\"topic\": \"foo\", \"partition\": 1, \"offset\": 1}],\n "
        "\"version\":1\n}", "Offset json file path"),
]
ADMIN_OPERATION = "org.apache.kafka.server.common.AdminOperationException"
EXCEPTIONS = {1: "OffsetOutOfRangeException", 3: "UnknownTopicOrPartitionException",
              5: "LeaderNotAvailableException", 6: "NotLeaderOrFollowerException",
              7: "TimeoutException", 29: "TopicAuthorizationException",
              56: "KafkaStorageException", 73: "PolicyViolationException"}


def _java_failure(exception: str, message: str) -> ArgumentError:
    """Kafka 3.9's DeleteRecordsCommand ends on any exception with its message, then the
    exception (its stack trace, whose frames Moldau has none of) and an empty line, all on
    stderr."""
    return ArgumentError(f"{message}\n{exception}: {message}\n")


def parse_offsets(text: str) -> list[tuple[str, int, int]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise _java_failure(ADMIN_OPERATION, "The input string is not a valid JSON") from None
    if not isinstance(data, dict) or "partitions" not in data:
        raise _java_failure(ADMIN_OPERATION, "Missing partitions field")
    if not isinstance(data["partitions"], list):
        raise ArgumentError("Offset json file doesn't contain a partitions array")
    out = []
    for item in data["partitions"]:
        try:
            out.append((str(item["topic"]), int(item["partition"]), int(item["offset"])))
        except (KeyError, TypeError, ValueError):
            raise ArgumentError(f"Invalid partition entry in the offset json file: "
                                f"{json.dumps(item)}") from None
    counts = Counter((t, p) for t, p, _ in out)
    duplicates = sorted({f"{t}-{p}" for (t, p), n in counts.items() if n > 1})
    if duplicates:
        raise _java_failure("org.apache.kafka.server.common.AdminCommandFailedException",
                            "Offset json file contains duplicate topic partitions: "
                            + ",".join(duplicates))
    return out


def run(options: Options) -> int:
    require(options, "bootstrap-server", "offset-json-file")
    path = options.get("offset-json-file")
    try:
        with open(path, encoding="utf-8") as fh:
            wanted = parse_offsets(fh.read())
    except OSError as exc:
        raise ArgumentError(f"{path} ({exc.strerror})") from None
    with admin_from(options) as admin:
        leaders = partition_leaders(admin, [t for t, _, _ in wanted])
        print("Executing records delete operation")
        results: dict[tuple[str, int], tuple[int, int]] = {}  # (error code, low watermark)
        by_leader: dict[int, list[tuple[str, int, int]]] = {}
        for t, p, o in wanted:
            if (t, p) not in leaders:
                results[(t, p)] = (3, -1)
            else:
                by_leader.setdefault(leaders[(t, p)], []).append((t, p, o))
        for leader, items in by_leader.items():
            topics: dict[str, list[DeleteRecordsRequest.DeleteRecordsPartition]] = {}
            for t, p, o in items:
                topics.setdefault(t, []).append(
                    DeleteRecordsRequest.DeleteRecordsPartition(partition_index=p, offset=o))
            answer = admin.call("DeleteRecords", 2, leader, timeout_ms=30000, topics=[
                DeleteRecordsRequest.DeleteRecordsTopic(name=t, partitions=ps)
                for t, ps in topics.items()])
            for t in answer.topics:
                for p in t.partitions:
                    results[(t.name, p.partition_index)] = (p.error_code, p.low_watermark)
        print("Records delete operation completed:")
        failed = False
        for t, p, _ in wanted:
            code, low_watermark = results[(t, p)]
            if code:
                failed = True
                name = EXCEPTIONS.get(code, "ApiException")
                print(f"partition: {t}-{p}\terror: org.apache.kafka.common.errors.{name}: "
                      f"{error_text(code)}")
            else:
                print(f"partition: {t}-{p}\tlow_watermark: {low_watermark}")
    return 1 if failed else 0


TOOL = Tool("delete-records", "This tool helps to delete records of the given partitions down "
            "to the specified offset.", OPTIONS, run)
