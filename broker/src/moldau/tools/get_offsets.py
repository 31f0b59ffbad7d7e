"""kafka-get-offsets: offsets of topic partitions for a time (Kafka 3.9's GetOffsetShell:
-1 latest, -2 earliest, -3 max-timestamp, or a timestamp in ms); "topic:partition:offset"
lines."""

from __future__ import annotations

import re

from moldau.tools.admin import Admin, list_offsets
from moldau.tools.common import client_config
from moldau.tools.options import LONG, Opt, Options, ToolError, UsageError
from moldau.tools.runner import ArgumentError, Tool

NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4,
               "latest-tiered": -5}
INTERNAL = {"__consumer_offsets", "__transaction_state"}

OPTIONS = [
    Opt("bootstrap-server", "REQUIRED. The server(s) to connect to in the form "
        "HOST1:PORT1,HOST2:PORT2.", "HOST1:PORT1,...,HOST3:PORT3"),
    Opt("broker-list", "DEPRECATED, use --bootstrap-server instead; ignored if "
        "--bootstrap-server is specified. The server(s) to connect to in the form "
        "HOST1:PORT1,HOST2:PORT2.", "HOST1:PORT1,...,HOST3:PORT3"),
    Opt("topic-partitions", "Comma separated list of topic-partition patterns to get the offsets "
        "for, with the format of '([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?'. The first "
        "group is an optional regex for the topic name, if omitted, it matches any topic name. "
        "The section after ':' describes a 'partition' pattern, which can be: a number, a range "
        "in the format of 'NUMBER-NUMBER' (lower inclusive, upper exclusive), an inclusive lower "
        "bound in the format of 'NUMBER-', an exclusive upper bound in the format of '-NUMBER' "
        "or may be omitted to accept all partitions.",
        "topic1:1,topic2:0-3,topic3,topic4:5-,topic5:-3"),
    Opt("topic", "The topic to get the offsets for. It also accepts a regular expression. If not "
        "present, all authorized topics are queried. Cannot be used if --topic-partitions is "
        "present.", "topic"),
    Opt("partitions", "Comma separated list of partition ids to get the offsets for. If not "
        "present, all partitions of the authorized topics are queried. Cannot be used if "
        "--topic-partitions is present.", "partition ids"),
    Opt("time", "timestamp of the offsets before that. [Note: No offset is returned, if the "
        "timestamp greater than recently committed record timestamp is given.]",
        "<timestamp> / -1 or latest / -2 or earliest / -3 or max-timestamp / -4 or "
        "earliest-local / -5 or latest-tiered",
        default="latest"),
    Opt("command-config", "Property file containing configs to be passed to Admin Client.",
        "config file"),
    Opt("exclude-internal-topics", "By default, internal topics are included. If specified, "
        "internal topics are excluded."),
]
_PATTERN = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")


def _time(text: str) -> int:
    if text in NAMED_TIMES:
        return NAMED_TIMES[text]
    try:
        return LONG(text)
    except ValueError:
        raise ToolError(f"Malformed time argument {text}. Please use -1 or latest / -2 or "
                        "earliest / -3 or max-timestamp / -4 or earliest-local / -5 or "
                        "latest-tiered, or a specified long format timestamp") from None


def _filters(options: Options) -> list[tuple[re.Pattern[str], range | None]]:
    """(topic regex, partition range or None) pairs from --topic/--partitions or
    --topic-partitions."""
    if options.has("topic-partitions"):
        if options.has("topic") or options.has("partitions"):
            raise ToolError("--topic-partitions cannot be used with --topic or --partitions")
        filters = []
        for item in options.get("topic-partitions").split(","):
            match = _PATTERN.fullmatch(item.strip())
            if not match:
                raise ArgumentError(f"Invalid topic-partition rule: {item}")
            topic, single, low, high = match.groups()
            wanted = (range(int(single), int(single) + 1) if single else
                      range(int(low or 0), int(high) if high else 2**31)
                      if low is not None or high is not None else None)
            filters.append((re.compile(topic or ".*"), wanted))
        return filters
    partitions = None
    if options.get("partitions"):
        try:
            ids = sorted(int(p) for p in options.get("partitions").split(","))
        except ValueError:
            raise ArgumentError(f"Invalid partition ids: {options.get('partitions')}") from None
        partitions = ids
    topic = re.compile(options.get("topic") or ".*")
    if partitions is None:
        return [(topic, None)]
    return [(topic, range(p, p + 1)) for p in partitions]


def run(options: Options) -> int:
    servers = options.get("bootstrap-server") or options.get("broker-list")
    if not servers:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    when = _time(options.get("time"))
    filters = _filters(options)
    with Admin(servers, client_config(options)) as admin:
        found = []
        for topic in sorted(admin.metadata(None).topics, key=lambda t: t.name):
            if topic.error_code or (options.has("exclude-internal-topics")
                                    and (topic.is_internal or topic.name in INTERNAL)):
                continue
            for p in sorted(topic.partitions, key=lambda p: p.partition_index):
                if any(rx.fullmatch(topic.name) and (r is None or p.partition_index in r)
                       for rx, r in filters):
                    found.append((topic.name, p.partition_index))
        if not found:
            raise ToolError("Could not match any topic-partitions with the specified filters")
        offsets = list_offsets(admin, found, when)
        for topic, partition in found:
            offset = offsets.get((topic, partition), -1)
            if offset >= 0:  # as Kafka's: a partition without an offset for it is left out
                print(f"{topic}:{partition}:{offset}")
    return 0


TOOL = Tool("get-offsets", "An interactive shell for getting topic-partition offsets.",
            OPTIONS, run, "Error occurred: ")
