"""kafka-console-producer: one record per input line (keys with parse.key=true), sent
in v2 batches with Produce to each partition's leader; keyed records go to the partition
Kafka's default partitioner picks (murmur2 of the key)."""

from __future__ import annotations

import select
import sys
import time
from collections.abc import Iterator
from typing import TextIO

from moldau.protocol.generated.produce_request import ProduceRequest
from moldau.protocol.records import build_batch
from moldau.tools.admin import Admin
from moldau.tools.common import client_config
from moldau.tools.kafka_errors import check, error_text
from moldau.tools.options import Opt, Options, ToolError, UsageError, require
from moldau.tools.runner import Tool

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
RETRIABLE = {5, 6, 7, 19}
# one input line as a record: (key, value, headers)
LineRecord = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]

OPTIONS = [
    Opt("bootstrap-server", "REQUIRED unless --broker-list(deprecated) is specified. The "
        "server(s) to connect to. The broker list string in the form HOST1:PORT1,HOST2:PORT2.",
        "String: server to connect to"),
    Opt("broker-list", "DEPRECATED, use --bootstrap-server instead; ignored if "
        "--bootstrap-server is specified.", "String: broker-list"),
    Opt("topic", "REQUIRED: The topic id to produce messages to.", "topic"),
    Opt("property", "A mechanism to pass user-defined properties in the form key=value to "
        "the message reader: parse.key, key.separator, parse.headers, headers.delimiter, "
        "headers.separator, headers.key.separator, ignore.error, null.marker.", "prop"),
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
        "sent synchronously.", "size", int, 16384),
    Opt("sync", "If set message send requests to the brokers are synchronously, one at a "
        "time as they arrive."),
    Opt("timeout", "If set and the producer is running in asynchronous mode, this gives the "
        "maximum amount of time a message will queue awaiting sufficient batch size.",
        "timeout_ms", int, 1000),
    Opt("message-send-max-retries", "Number of retries before the producer gives up.",
        "Integer", int, 3),
    Opt("line-reader", "The class name of the class to use for reading lines from standard "
        "in (only the default reader is supported).", "reader_class"),
]


def murmur2(data: bytes) -> int:
    """Kafka's Utils.murmur2 (seed 0x9747b28c), as a signed 32-bit int."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, count: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % count


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


def batches(stream: TextIO, size: int, sync: bool) -> Iterator[list[str]]:
    """Lines in groups: up to `size`, or what has arrived when input pauses."""
    pending: list[str] = []
    for line in stream:
        pending.append(line.rstrip("\n").rstrip("\r"))
        if sync or len(pending) >= size or not _more_ready(stream):
            yield pending
            pending = []
    if pending:
        yield pending


def _more_ready(stream: TextIO) -> bool:
    try:
        return bool(select.select([stream], [], [], 0)[0])
    except (ValueError, OSError, TypeError):
        return True


class Sender:
    def __init__(self, admin: Admin, topic: str, acks: int, codec: int, timeout_ms: int,
                 retries: int) -> None:
        self.admin, self.topic, self.acks, self.codec = admin, topic, acks, codec
        self.timeout_ms, self.retries = timeout_ms, retries
        self.leaders: dict[int, int] = {}
        self.next_partition = 0
        self.refresh()

    def refresh(self) -> None:
        for _ in range(50):
            topic = self.admin.metadata([self.topic], auto_create=True).topics[0]
            if topic.error_code == 0 and all(p.leader_id >= 0 for p in topic.partitions):
                self.leaders = {p.partition_index: p.leader_id for p in topic.partitions}
                return
            if topic.error_code not in (3, 5):  # not yet created / electing: ask again
                check(topic.error_code)
            time.sleep(0.2)
        raise ToolError(f"Topic {self.topic} not present in metadata after "
                        f"{self.admin.timeout * 1000:.0f} ms.")

    def send(self, records: list[LineRecord]) -> None:
        count = len(self.leaders)
        by_partition: dict[int, list[LineRecord]] = {}
        unkeyed = self.next_partition % count
        self.next_partition += 1
        for key, value, headers in records:
            partition = key_partition(key, count) if key is not None else unkeyed
            by_partition.setdefault(partition, []).append((key, value, headers))
        for partition, items in sorted(by_partition.items()):
            self._send_partition(partition, items)

    def _send_partition(self, partition: int, items: list[LineRecord]) -> None:
        batch = build_batch(items, compression=self.codec)
        for attempt in range(self.retries + 1):
            answer = self.admin.call(
                "Produce", 9, self.leaders[partition], transactional_id=None, acks=self.acks,
                timeout_ms=self.timeout_ms, topic_data=[ProduceRequest.TopicProduceData(
                    name=self.topic, partition_data=[ProduceRequest.PartitionProduceData(
                        index=partition, records=batch)])]) if self.acks != 0 else None
            if answer is None:
                return
            result = answer.responses[0].partition_responses[0]
            if result.error_code in RETRIABLE and attempt < self.retries:
                self.refresh()
                continue
            if result.error_code:
                key = items[0][0]
                raise ToolError(
                    f"Error when sending message to topic {self.topic} with key: "
                    f"{'null' if key is None else f'{len(key)} bytes'}, value: "
                    f"{len(items[0][1] or b'')} bytes with error: "
                    + error_text(result.error_code, result.error_message))
            return


def run(options: Options) -> int:
    if not options.has("bootstrap-server") and not options.has("broker-list"):
        raise UsageError('Missing required argument "[bootstrap-server]"')
    require(options, "topic")
    config = client_config(options, "producer.config")
    config.update(parse_pairs(options.all("producer-property"), "producer property"))
    codec_name = options.get("compression-codec")
    codec_name = "gzip" if codec_name == "" else codec_name or config.get(
        "compression.type", "none")
    if codec_name not in CODECS:
        raise ToolError(f"Invalid compression codec: {codec_name}")
    acks = options.get("request-required-acks")
    acks = -1 if acks == "all" else int(acks)
    reader = LineReader(parse_pairs(options.all("property"), "property"))
    servers = options.get("bootstrap-server") or options.get("broker-list")
    with Admin(servers, config) as admin:
        sender = Sender(admin, options.get("topic"), acks, CODECS[codec_name],
                        options.get("request-timeout-ms"), options.get(
                            "message-send-max-retries"))
        number = 0
        for lines in batches(sys.stdin, options.get("batch-size"), options.has("sync")):
            records = []
            for line in lines:
                number += 1
                records.append(reader.record(line, number))
            sender.send(records)
    return 0


TOOL = Tool("console-producer", "This tool helps to read data from standard input and "
            "publish it to Kafka.", OPTIONS, run)
