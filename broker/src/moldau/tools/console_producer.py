"""kafka-console-producer: one record per input line (keys with parse.key=true), sent
as Kafka 3.9's console producer sends them: the tool's options merged into the producer
properties, every setting checked as ProducerConfig does, then batching, acks, retries,
compression and idempotence as KafkaProducer (moldau.tools.record_sender)."""

from __future__ import annotations

import queue
import sys
import threading
import time
from typing import Any, TextIO

from moldau.tools.admin import Admin
from moldau.tools.client_configs import (
    CONFIG_EXCEPTION,
    PRODUCER,
    ConfigError,
    idempotence,
    parse_config,
)
from moldau.tools.common import client_config
from moldau.tools.options import LONG, Opt, Options, ToolError, UsageError, require
from moldau.tools.record_sender import (
    Accumulator,
    Batch,
    Failure,
    LineRecord,
    Partitioner,
    Sender,
)
from moldau.tools.runner import Tool, log4j_error

PRODUCER_LOGGER = "org.apache.kafka.clients.producer.ProducerConfig"
ERROR_LOGGER = "org.apache.kafka.clients.producer.internals.ErrorLoggingCallback"
# the producer keys the tool's own options set (ConsoleProducerOptions.producerProps)
MERGED_OPTIONS = [
    ("linger.ms", "timeout"), ("acks", "request-required-acks"),
    ("request.timeout.ms", "request-timeout-ms"), ("retries", "message-send-max-retries"),
    ("retry.backoff.ms", "retry-backoff-ms"), ("send.buffer.bytes", "socket-buffer-size"),
    ("buffer.memory", "max-memory-bytes"), ("batch.size", "batch-size"),
    ("batch.size", "max-partition-memory-bytes"), ("metadata.max.age.ms", "metadata-expiry-ms"),
    ("max.block.ms", "max-block-ms"),
]

OPTIONS = [
    Opt("bootstrap-server", "REQUIRED unless --broker-list(deprecated) is specified. The "
        "server(s) to connect to. The broker list string in the form HOST1:PORT1,HOST2:PORT2.",
        "server to connect to"),
    Opt("broker-list", "DEPRECATED, use --bootstrap-server instead; ignored if "
        "--bootstrap-server is specified.  The broker list string in the form "
        "HOST1:PORT1,HOST2:PORT2.", "broker-list"),
    Opt("topic", "REQUIRED: The topic id to produce messages to.", "topic"),
    Opt("property", "A mechanism to pass user-defined properties in the form key=value to the "
        "message reader. This allows custom configuration for a user-defined message "
        "reader.\nDefault properties include:\n parse.key=false\n parse.headers=false\n "
        "ignore.error=false\n key.separator=\\t\n headers.delimiter=\\t\n headers.separator=,\n "
        "headers.key.separator=:\n null.marker=   When set, any fields (key, value and headers) "
        "equal to this will be replaced by null\nDefault parsing pattern when:\n "
        'parse.headers=true and parse.key=true:\n  "h1:v1,h2:v2...\\tkey\\tvalue"\n '
        'parse.key=true:\n  "key\\tvalue"\n parse.headers=true:\n  "h1:v1,h2:v2...\\tvalue"',
        "prop"),
    Opt("producer-property", "A mechanism to pass user-defined properties in the form "
        "key=value to the producer.", "producer_prop"),
    Opt("producer.config", "Producer config properties file. Note that [producer-property] "
        "takes precedence over this config.", "config file"),
    Opt("compression-codec", "The compression codec: either 'none', 'gzip', 'snappy', 'lz4', "
        "or 'zstd'. If specified without value, then it defaults to 'gzip'",
        "compression-codec", optional=True),
    Opt("request-required-acks", "The required `acks` of the producer requests",
        "request required acks", default="-1"),
    Opt("request-timeout-ms", "The ack timeout of the producer requests. Value must be "
        "non-negative and non-zero.", "request timeout ms", int, 1500),
    Opt("batch-size", "Number of messages to send in a single batch if they are not being "
        "sent synchronously. please note that this option will be replaced if "
        "max-partition-memory-bytes is also set", "size", int, 16384),
    Opt("sync", "If set message send requests to the brokers are synchronously, one at a "
        "time as they arrive."),
    Opt("timeout", "If set and the producer is running in asynchronous mode, this gives the "
        "maximum amount of time a message will queue awaiting sufficient batch size. The "
        "value is given in ms. This is the option to control `linger.ms` in producer "
        "configs.", "timeout_ms", LONG, 1000),
    Opt("message-send-max-retries", "Brokers can fail receiving the message for multiple "
        "reasons, and being unavailable transiently is just one of them. This property specifies "
        "the number of retries before the producer give up and drop this message. This is the "
        "option to control `retries` in producer configs.", "", int, 3),
    Opt("retry-backoff-ms", "Before each retry, the producer refreshes the metadata of relevant "
        "topics. Since leader election takes a bit of time, this property specifies the amount "
        "of time that the producer waits before refreshing the metadata. This is the option to "
        "control `retry.backoff.ms` in producer configs.", "", LONG, 100),
    Opt("metadata-expiry-ms", "The period of time in milliseconds after which we force a refresh "
        "of metadata even if we haven't seen any leadership changes. This is the option to "
        "control `metadata.max.age.ms` in producer configs.",
        "metadata expiration interval", LONG, 300000),
    Opt("max-block-ms", "The max time that the producer will block for during a send "
        "request.", "max block on send", LONG, 60000),
    Opt("max-memory-bytes", "The total memory used by the producer to buffer records "
        "waiting to be sent to the server. This is the option to control `buffer.memory` "
        "in producer configs.", "total memory in bytes", LONG, 33554432),
    Opt("max-partition-memory-bytes", "The buffer size allocated for a partition. When records "
        "are received which are smaller than this size the producer will attempt to "
        "optimistically group them together until this size is reached. This is the option to "
        "control `batch.size` in producer configs.", "memory in bytes per partition", int, 16384),
    Opt("socket-buffer-size", "The size of the tcp RECV size. This is the option to "
        "control `send.buffer.bytes` in producer configs.", "size", int, 102400),
    Opt("reader-config", "Config properties file for the message reader. Note that "
        "[property] takes precedence over this config.", "config file"),
    Opt("line-reader", "The class name of the class to use for reading lines from standard in. "
        "By default each line is read as a separate message. (default: "
        "kafka.tools.ConsoleProducer$LineMessageReader)", "reader_class"),
]


def parse_pairs(values: list[str], what: str) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep:
            raise ToolError(f"Invalid {what} '{value}': expected key=value")
        out[key.strip()] = val
    return out


class LineReader:
    """Kafka's LineMessageReader: key, headers and value from each line."""

    def __init__(self, props: dict[str, str]) -> None:
        self.parse_key = props.get("parse.key", "false").lower() == "true"
        self.key_separator = props.get("key.separator", "\t")
        self.ignore_error = props.get("ignore.error", "false").lower() == "true"
        self.parse_headers = props.get("parse.headers", "false").lower() == "true"
        self.headers_delimiter = props.get("headers.delimiter", "\t")
        self.headers_separator = props.get("headers.separator", ",")
        self.headers_key_separator = props.get("headers.key.separator", ":")
        self.null_marker = props.get("null.marker")

    def _nullable(self, text: str) -> bytes | None:
        return None if text == self.null_marker else text.encode()

    def record(self, line: str, number: int) -> LineRecord:
        headers: list[tuple[str, bytes | None]] = []
        if self.parse_headers:
            head, sep, line = line.partition(self.headers_delimiter)
            if not sep:
                raise ToolError(f"No headers delimiter found on line number {number}: "
                                f"'{head}'")
            for item in filter(None, head.split(self.headers_separator)):
                k, _, v = item.partition(self.headers_key_separator)
                headers.append((k, self._nullable(v)))
        key = None
        if self.parse_key:
            key_text, sep, value_text = line.partition(self.key_separator)
            if not sep and not self.ignore_error:
                raise ToolError(f"No key separator found on line number {number}: '{line}'")
            key = self._nullable(key_text)
            line = value_text if sep else ""
        return key, self._nullable(line), headers


def merge_option(props: dict[str, str], key: str, options: Options, name: str) -> None:
    """Kafka's CommandLineUtils.maybeMergeOptions: an option given on the command line
    wins; its default applies only when the property is absent."""
    if options.has(name) or key not in props:
        value = options.get(name)
        if value is None:
            props.pop(key, None)
        else:
            props[key] = str(value)


def compression_codec(options: Options) -> str:
    """As 3.9's ConsoleProducer: the option's codec (gzip without a value), else none;
    it replaces any compression.type of the producer properties."""
    if options.has("compression-codec"):
        return options.get("compression-codec") or "gzip"
    return "none"


def producer_props(options: Options) -> dict[str, str]:
    """The producer's properties as 3.9's ConsoleProducerOptions.producerProps builds
    them: the file, then --producer-property, then the tool's own options."""
    props = client_config(options, "producer.config")
    props.update(parse_pairs(options.all("producer-property"), "producer property"))
    props["bootstrap.servers"] = options.get("bootstrap-server") or options.get("broker-list")
    props["compression.type"] = compression_codec(options)
    props.setdefault("client.id", "console-producer")
    for key, name in MERGED_OPTIONS:
        merge_option(props, key, options, name)
    return props


def producer_config(props: dict[str, str]) -> tuple[dict[str, Any], bool]:
    """The typed settings and whether the producer is idempotent; a refused value is
    Kafka's ConfigException, raised where KafkaProducer's constructor raises it."""
    try:
        config = parse_config(props, PRODUCER, PRODUCER_LOGGER)
    except ConfigError as exc:
        raise ToolError(f"{CONFIG_EXCEPTION}: {exc}") from None
    idempotent = idempotence(config, props)
    floor = config["linger.ms"] + config["request.timeout.ms"]
    if config["delivery.timeout.ms"] < floor:  # KafkaProducer.configureDeliveryTimeout
        if "delivery.timeout.ms" in props:
            raise ToolError(f"{CONFIG_EXCEPTION}: delivery.timeout.ms should be equal to or "
                            "larger than linger.ms + request.timeout.ms")
        config["delivery.timeout.ms"] = floor
    return config, idempotent


def not_in_transaction(topic: str, partition: int) -> str:
    """Kafka's console producer has no transactional mode: with a transactional.id its
    KafkaProducer refuses the first record, as initTransactions was never called (Kafka
    prints the exception's stack trace; Moldau its first line)."""
    return (f"java.lang.IllegalStateException: Cannot add partition {topic}-{partition} to "
            "transaction before completing a call to initTransactions")


def report_failures(topic: str, failures: list[Failure], sync: bool) -> None:
    """As Kafka's console producer: with --sync, send().get() throws and the tool ends
    (exit 1); otherwise each record's ErrorLoggingCallback logs an ERROR line and the
    exception, and the tool goes on with the next lines (exit 0)."""
    for failure in failures:
        cause = f"{failure.exception}: {failure.message}"
        if sync:
            raise ToolError(f"java.util.concurrent.ExecutionException: {cause}")
        for key, value, _ in failure.batch.records:
            print(log4j_error(
                f"Error when sending message to topic {topic} with key: "
                f"{'null' if key is None else f'{len(key)} bytes'}, value: "
                f"{'null' if value is None else f'{len(value)} bytes'} with error:",
                ERROR_LOGGER) + "\n" + cause, file=sys.stderr, flush=True)


def _read_lines(stream: TextIO, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n").rstrip("\r"))
    lines.put(None)


def run(options: Options) -> int:
    if not options.has("bootstrap-server") and not options.has("broker-list"):
        raise UsageError('Missing required argument "[bootstrap-server]"')
    require(options, "topic")
    reader_props = client_config(options, "reader-config")
    reader_props.update(parse_pairs(options.all("property"), "property"))
    reader = LineReader(reader_props)
    props = producer_props(options)
    config, idempotent = producer_config(props)
    sync = options.has("sync")
    # one connection attempt per send: the Sender keeps the delivery deadline
    with Admin(props["bootstrap.servers"], props, connect_wait_ms=0) as admin:
        sender = Sender(admin, options.get("topic"), config, idempotent)
        topic = options.get("topic")

        def send(batches: list[Batch]) -> None:
            report_failures(topic, sender.send(batches), sync)

        partitioner = Partitioner(len(sender.leaders), config["batch.size"],
                                  config["partitioner.ignore.keys"])
        accumulator = Accumulator(config["batch.size"], config["linger.ms"])
        # a reader thread, so lingering batches leave on time while stdin is quiet
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_read_lines, args=(sys.stdin, lines), daemon=True).start()
        number = 0
        while True:
            deadline = accumulator.next_deadline()
            try:
                line = lines.get(timeout=None if deadline is None
                                 else max(deadline - time.monotonic(), 0))
            except queue.Empty:
                send(accumulator.drain())
                continue
            if line is None:
                break
            number += 1
            record = reader.record(line, number)
            partition = partitioner.partition(record)
            if config["transactional.id"] is not None:
                raise ToolError(not_in_transaction(options.get("topic"), partition))
            batch = accumulator.append(partition, record)
            if sync:  # send(record).get(): this record's batch leaves, then the next line
                while not accumulator.is_ready(batch, time.monotonic()):
                    time.sleep(max(batch.created + accumulator.linger - time.monotonic(), 0))
                while accumulator.pending():
                    send(accumulator.drain(flush=True))
            send(accumulator.drain())
        while accumulator.pending():  # close(): what is left goes out at once
            send(accumulator.drain(flush=True))
    return 0

TOOL = Tool("console-producer", "This tool helps to read data from standard input and "
            "publish it to Kafka.", OPTIONS, run)
