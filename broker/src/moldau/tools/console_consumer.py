"""kafka-console-consumer: fetch from partition leaders and print each record with
Kafka's DefaultMessageFormatter; with --group it joins the group as a real member and
commits what it printed."""

from __future__ import annotations

import re
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.generated.fetch_response import FetchResponse
from moldau.protocol.records import Record, iter_batches
from moldau.tools.admin import Admin, list_offsets, partition_leaders
from moldau.tools.client_configs import CONFIG_EXCEPTION, CONSUMER, ConfigError, parse_config
from moldau.tools.common import client_config
from moldau.tools.console_producer import parse_pairs
from moldau.tools.group_member import GroupMember
from moldau.tools.kafka_errors import check
from moldau.tools.options import LONG, Opt, Options, UsageError
from moldau.tools.read_committed import AbortedFilter
from moldau.tools.runner import ArgumentError, Tool, log4j_error

LATEST, EARLIEST = -1, -2
TP = tuple[str, int]
# a fetched record: (topic, partition, record, timestamp type)
Fetched = tuple[str, int, Record, int]
CONSUMER_LOGGER = "org.apache.kafka.clients.consumer.ConsumerConfig"
DEFAULT_FORMATTERS = ("kafka.tools.DefaultMessageFormatter",
                      "org.apache.kafka.tools.consumer.DefaultMessageFormatter")
# Kafka 3.9's other formatters, which Moldau does not print like
KAFKA_FORMATTERS = tuple(f"{package}.{name}" for package in ("kafka.tools",
                                                             "org.apache.kafka.tools.consumer")
                         for name in ("LoggingMessageFormatter", "NoOpMessageFormatter"))
TOOL_LOGGER = "org.apache.kafka.tools.consumer.ConsoleConsumer"

OPTIONS = [
    Opt("bootstrap-server", "REQUIRED: The server(s) to connect to.", "server to connect to"),
    Opt("topic", "The topic to consume on.", "topic"),
    Opt("include", "Regular expression specifying list of topics to include for "
        "consumption.", "Java regex (String)"),
    Opt("whitelist", "DEPRECATED, use --include instead; ignored if --include specified. Regular "
        "expression specifying list of topics to include for consumption.", "Java regex (String)"),
    Opt("partition", "The partition to consume from. Consumption starts from the end of "
        "the partition unless '--offset' is specified.", "partition", int),
    Opt("offset", "The offset to consume from (a non-negative number), or 'earliest' which "
        "means from beginning, or 'latest' which means from end", "consume offset",
        default="latest"),
    Opt("from-beginning", "If the consumer does not already have an established offset to "
        "consume from, start with the earliest message present in the log rather than the "
        "latest message."),
    Opt("group", "The consumer group id of the consumer.", "consumer group id"),
    Opt("max-messages", "The maximum number of messages to consume before exiting. If not "
        "set, consumption is continual.", "num_messages", int),
    Opt("timeout-ms", "If specified, exit if no message is available for consumption for "
        "the specified interval.", "timeout_ms", LONG),
    Opt("property", "The properties to initialize the message formatter. Default properties "
        "include:\n print.timestamp=true|false\n print.key=true|false\n "
        "print.offset=true|false\n print.partition=true|false\n print.headers=true|false\n "
        "print.value=true|false\n key.separator=<key.separator>\n "
        "line.separator=<line.separator>\n headers.separator=<line.separator>\n "
        "null.literal=<null.literal>\n key.deserializer=<key.deserializer>\n "
        "value.deserializer=<value.deserializer>\n "
        "header.deserializer=<header.deserializer>\nUsers can also pass in customized properties "
        "for their formatter; more specifically, users can pass in properties keyed with "
        "'key.deserializer.', 'value.deserializer.' and 'headers.deserializer.' prefixes to "
        "configure their deserializers.", "prop"),
    Opt("consumer-property", "A mechanism to pass user-defined properties in the form "
        "key=value to the consumer.", "consumer_prop"),
    Opt("formatter-config", "Config properties file to initialize the message formatter. Note "
        "that [property] takes precedence over this config.", "config file"),
    Opt("consumer.config", "Consumer config properties file. Note that [consumer-property] "
        "takes precedence over this config.", "config file"),
    Opt("formatter", "The name of a class to use for formatting kafka messages for "
        "display.", "class", default="org.apache.kafka.tools.consumer.DefaultMessageFormatter"),
    Opt("isolation-level", "Set to read_committed in order to filter out transactional "
        "messages which are not committed. Set to read_uncommitted to read all messages.",
        "", default="read_uncommitted"),
    Opt("skip-message-on-error", "If there is an error when processing a message, skip it "
        "instead of halt."),
    Opt("key-deserializer", '', "deserializer for key"),
    Opt("value-deserializer", '',
        "deserializer for values"),
    Opt("enable-systest-events", "Log lifecycle events of the consumer in addition to logging "
        "consumed messages. (This is specific for system tests.)"),
]


class Formatter:
    """Kafka's DefaultMessageFormatter."""

    def __init__(self, props: dict[str, str]) -> None:
        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, str(default)).lower() == "true"
        self.timestamp, self.key = flag("print.timestamp"), flag("print.key")
        self.offset, self.partition = flag("print.offset"), flag("print.partition")
        self.headers, self.value = flag("print.headers"), flag("print.value", True)
        self.key_separator = _unescape(props.get("key.separator", "\t"))
        self.line_separator = _unescape(props.get("line.separator", "\n"))
        self.headers_separator = _unescape(props.get("headers.separator", ","))
        self.null = props.get("null.literal", "null")

    def _text(self, data: bytes | None) -> str:
        return self.null if data is None else data.decode("utf-8", "replace")

    def format(self, topic: str, partition: int, record: Record, timestamp_type: int) -> str:
        columns = []
        if self.timestamp:
            kind = "LogAppendTime" if timestamp_type else "CreateTime"
            columns.append(f"{kind}:{record.timestamp}")
        if self.partition:
            columns.append(f"Partition:{partition}")
        if self.offset:
            columns.append(f"Offset:{record.offset}")
        if self.headers:
            columns.append(self.headers_separator.join(
                f"{k}:{self._text(v)}" for k, v in record.headers) or "NO_HEADERS")
        if self.key:
            columns.append(self._text(record.key))
        if self.value:
            columns.append(self._text(record.value))
        # as Kafka's writeTo: each column is followed by the key separator, the last one by
        # the line separator (so a record without its value still ends its line)
        return self.key_separator.join(columns) + self.line_separator if columns else ""


def _unescape(text: str) -> str:
    return text.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


def check_args(options: Options) -> None:
    if not options.has("bootstrap-server"):
        raise UsageError('Missing required argument "[bootstrap-server]"')
    sources = [o for o in ("topic", "include", "whitelist") if options.has(o)]
    if len(sources) != 1 and not (set(sources) == {"include", "whitelist"}):
        raise UsageError("Exactly one of --include/--topic is required. ")
    if options.has("partition") and not options.has("topic"):
        raise UsageError("The topic is required when partition is specified.")
    if options.has("offset") and not options.has("partition"):
        raise UsageError("The partition is required when offset is specified.")
    if options.has("from-beginning") and options.has("offset"):
        raise UsageError("Options from-beginning and offset cannot be specified together.")
    if options.has("group") and options.has("partition"):
        raise UsageError("Options group and partition cannot be specified together.")
    formatter = options.get("formatter")
    if formatter not in DEFAULT_FORMATTERS:
        if formatter in KAFKA_FORMATTERS:
            raise ArgumentError(f"{formatter} is not supported by Moldau's console consumer: "
                                "only the default formatter is")
        raise UsageError(formatter)  # Kafka's: the ClassNotFoundException's message
    offset = options.get("offset")
    if offset not in ("earliest", "latest") and not re.fullmatch(r"\d+", offset or ""):
        raise UsageError(f"The provided offset value '{offset}' is incorrect. Valid values "
                         "are 'earliest', 'latest', or a non-negative long.")


class Fetcher:
    def __init__(self, admin: Admin, config: dict[str, Any]) -> None:
        self.admin, self.config = admin, config
        self.isolation = 1 if config["isolation.level"] == "read_committed" else 0
        self.positions: dict[TP, int] = {}
        self.leaders: dict[TP, int] = {}

    def assign(self, positions: dict[TP, int]) -> None:
        self.positions = dict(positions)
        self.leaders = partition_leaders(self.admin, sorted({t for t, _ in positions}))

    def fetch(self, wait_ms: int) -> list[Fetched]:
        """One round of fetches: (topic, partition, record, timestamp type) in order."""
        out: list[Fetched] = []
        by_leader: dict[int, list[TP]] = {}
        for tp in sorted(self.positions):
            by_leader.setdefault(self.leaders.get(tp, -1), []).append(tp)
        if -1 in by_leader:
            self.leaders = partition_leaders(self.admin, sorted({t for t, _ in self.positions}))
            time.sleep(wait_ms / 1000)
            return out
        for leader, tps in by_leader.items():
            topics: dict[str, list[FetchRequest.FetchPartition]] = {}
            for topic, partition in tps:
                topics.setdefault(topic, []).append(FetchRequest.FetchPartition(
                    partition=partition, current_leader_epoch=-1,
                    fetch_offset=self.positions[(topic, partition)], log_start_offset=-1,
                    partition_max_bytes=self.config["max.partition.fetch.bytes"]))
            answer = self.admin.call(
                "Fetch", 12, leader, replica_id=-1, max_wait_ms=wait_ms // len(by_leader),
                min_bytes=self.config["fetch.min.bytes"],
                max_bytes=self.config["fetch.max.bytes"], isolation_level=self.isolation,
                session_id=0, session_epoch=-1, rack_id="",
                topics=[FetchRequest.FetchTopic(topic=t, partitions=ps)
                        for t, ps in topics.items()], forgotten_topics_data=[])
            check(answer.error_code)
            for topic in answer.responses:
                for p in topic.partitions:
                    out += self._records(topic.topic, p)
        return out

    def _records(self, topic: str, p: FetchResponse.PartitionData) -> list[Fetched]:
        tp = (topic, p.partition_index)
        if p.error_code in (5, 6):  # leadership moved: look the leaders up again
            self.leaders = partition_leaders(self.admin, sorted({t for t, _ in self.positions}))
            return []
        if p.error_code == 1:  # out of range: where auto.offset.reset says
            self.positions[tp] = reset_offsets(self.admin, [tp],
                                               self.config["auto.offset.reset"])[tp]
            return []
        check(p.error_code)
        out = []
        # read_uncommitted keeps every data batch: the broker sends no aborted list
        kept = AbortedFilter(p.aborted_transactions if self.isolation else None)
        for batch in iter_batches(p.records or b"", allow_partial=True):
            if not kept.keep(batch):  # a marker, or data of an aborted transaction
                self.positions[tp] = max(self.positions[tp], batch.next_offset)
                continue
            for record in batch.records():
                if record.offset >= self.positions[tp]:
                    out.append((topic, p.partition_index, record, batch.timestamp_type))
            self.positions[tp] = max(self.positions[tp], batch.next_offset)
        return out


def reset_offsets(admin: Admin, tps: list[TP], policy: str) -> dict[TP, int]:
    """Where partitions without a position start (auto.offset.reset); `none` is Kafka's
    NoOffsetForPartitionException."""
    if policy == "none":
        names = ", ".join(f"{t}-{p}" for t, p in tps)
        raise ArgumentError(_logged(
            "org.apache.kafka.clients.consumer.NoOffsetForPartitionException: Undefined "
            f"offset with no reset policy for partitions: [{names}]"))
    return list_offsets(admin, tps, EARLIEST if policy == "earliest" else LATEST)


def start_positions(admin: Admin, options: Options, tps: list[TP], committed: dict[TP, int],
                    policy: str) -> dict[TP, int]:
    offset = options.get("offset")
    if options.has("partition") and offset not in ("earliest", "latest"):
        return {tp: int(offset) for tp in tps}
    if options.has("partition") and options.has("offset"):
        policy = offset
    missing = [tp for tp in tps if tp not in committed]
    found = reset_offsets(admin, missing, policy) if missing else {}
    return {tp: committed.get(tp, found.get(tp, 0)) for tp in tps}


def _logged(exception_line: str) -> str:
    """A failure as 3.9's ConsoleConsumer.main logs it (its frames left out)."""
    return log4j_error("Unknown error when running consumer: ", TOOL_LOGGER) + "\n" + \
        exception_line


def consumer_props(options: Options) -> dict[str, str]:
    """3.9's ConsoleConsumerOptions: the file, then --consumer-property, one group id
    wherever it is given, auto.offset.reset from --from-beginning unless set, the client
    id console-consumer unless set, --isolation-level merged as Kafka merges options."""
    from_file = client_config(options, "consumer.config")
    extra = parse_pairs(options.all("consumer-property"), "consumer property")
    groups = list(dict.fromkeys(g for g in (options.get("group"), from_file.get("group.id"),
                                            extra.get("group.id")) if g is not None))
    if len(groups) > 1:
        raise UsageError("The group ids provided in different places (directly using "
                         "'--group', via '--consumer-property', or via '--consumer.config') "
                         "do not match. Detected group ids: "
                         + ", ".join(f"'{g}'" for g in groups))
    if groups and options.has("partition"):
        raise UsageError("Options group and partition cannot be specified together.")
    props = {**from_file, **extra}
    reset = props.get("auto.offset.reset")
    if reset is None:
        props["auto.offset.reset"] = "earliest" if options.has("from-beginning") else "latest"
    elif options.has("from-beginning") and reset != "earliest":
        raise ArgumentError(f"Can't simultaneously specify --from-beginning and "
                            f"'auto.offset.reset={reset}', please remove one option")
    props["bootstrap.servers"] = options.get("bootstrap-server")
    props.setdefault("client.id", "console-consumer")
    if options.has("isolation-level") or "isolation.level" not in props:
        props["isolation.level"] = options.get("isolation-level")
    if groups:
        props["group.id"] = groups[0]
    else:  # no group: Moldau assigns the partitions itself and commits nothing
        props.pop("group.id", None)
        props.setdefault("enable.auto.commit", "false")
    return props


def consumer_config(props: dict[str, str]) -> dict[str, Any]:
    try:
        return parse_config(props, CONSUMER, CONSUMER_LOGGER)
    except ConfigError as exc:
        raise ArgumentError(_logged(f"{CONFIG_EXCEPTION}: {exc}")) from None


def subscribed_topics(admin: Admin, options: Options) -> list[str]:
    if options.has("topic"):
        return [options.get("topic")]
    pattern = re.compile(options.get("include") or options.get("whitelist"))
    return sorted(t.name for t in admin.metadata(None).topics
                  if t.error_code == 0 and pattern.fullmatch(t.name))


def run(options: Options) -> int:
    check_args(options)
    props = consumer_props(options)
    config = consumer_config(props)
    group_id = config["group.id"]
    commits = bool(group_id) and config["enable.auto.commit"]
    # --property wins over --formatter-config, as in Kafka's ConsoleConsumerOptions
    formatter_props = {**client_config(options, "formatter-config"),
                       **parse_pairs(options.all("property"), "property")}
    formatter = Formatter(formatter_props)
    limit, timeout_ms = options.get("max-messages"), options.get("timeout-ms")
    commit_interval = config["auto.commit.interval.ms"] / 1000
    count = 0
    with Admin(options.get("bootstrap-server"), props) as admin:
        topics = subscribed_topics(admin, options)
        member = GroupMember(admin, group_id, topics,
                             config["session.timeout.ms"]) if group_id else None
        fetcher = Fetcher(admin, config)

        def assign() -> None:
            if member is not None:
                tps = member.join()
                committed = member.committed()
            else:
                leaders = partition_leaders(admin, topics)
                if options.has("topic") and not leaders:
                    raise ArgumentError(f"Topic {options.get('topic')} does not exist")
                tps = ([(options.get("topic"), options.get("partition"))]
                       if options.has("partition") else sorted(leaders))
                committed = {}
            fetcher.assign(start_positions(admin, options, tps, committed,
                                           config["auto.offset.reset"]))

        assign()
        last_message, last_commit = time.monotonic(), time.monotonic()
        stop = StopSignals()
        try:
            while not stop.requested and (limit is None or count < limit):
                for topic, partition, record, kind in fetcher.fetch(
                        config["fetch.max.wait.ms"]):
                    sys.stdout.write(formatter.format(topic, partition, record, kind))
                    count += 1
                    last_message = time.monotonic()
                    fetcher.positions[(topic, partition)] = record.offset + 1
                    if limit is not None and count >= limit:
                        break
                sys.stdout.flush()
                if timeout_ms is not None and (time.monotonic() - last_message) * 1000 > timeout_ms:
                    # Kafka's ConsoleConsumer logs the consumer's TimeoutException so
                    print(log4j_error("Error processing message, terminating consumer "
                                      "process: ", TOOL_LOGGER)
                          + "\norg.apache.kafka.common.errors.TimeoutException",
                          file=sys.stderr)
                    break
                if member is not None:
                    if commits and time.monotonic() - last_commit > commit_interval:
                        member.commit(fetcher.positions)
                        last_commit = time.monotonic()
                    if member.heartbeat_due() and not member.heartbeat():
                        if commits:
                            member.commit(fetcher.positions)
                        assign()
        except KeyboardInterrupt:
            pass
        finally:
            stop.restore()
            if member is not None:
                if commits:
                    member.commit(fetcher.positions)
                member.leave()
            print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


class StopSignals:
    """SIGTERM and SIGINT (Ctrl-C) end the consumer as Kafka's shutdown hook does: after
    the request in progress, it commits, leaves its group and prints the total. A flag,
    not an exception: one raised in the middle of a request would leave its answer
    unread on the connection for the closing commit to trip over. Off the main thread,
    where Python takes no signals, nothing is installed."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._previous[signum] = signal.signal(signum, self._request)

    def _request(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


TOOL = Tool("console-consumer", "This tool helps to read data from Kafka topics and "
            "outputs it to standard output.", OPTIONS, run)
