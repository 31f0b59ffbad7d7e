"""kafka-producer-perf-test and kafka-consumer-perf-test with Kafka's options and output
lines, on confluent-kafka (librdkafka), the fastest client at hand, so operators can put
Moldau's numbers next to their Kafka numbers."""

from __future__ import annotations

import secrets
import sys
import time
import uuid
from types import ModuleType
from typing import TYPE_CHECKING

from moldau.tools.argparse4j_usage import INTEGER, Parser, java_double
from moldau.tools.argparse4j_usage import LONG as JAVA_LONG
from moldau.tools.client_configs import (
    CONFIG_EXCEPTION,
    CONSUMER,
    PRODUCER,
    ConfigError,
    Key,
    idempotence,
    parse_config,
)
from moldau.tools.common import client_config, librdkafka_config
from moldau.tools.console_producer import parse_pairs
from moldau.tools.options import LONG, Opt, Options, ToolError, UsageError, require
from moldau.tools.runner import KAFKA_EXCEPTION, Tool

if TYPE_CHECKING:  # imported by _confluent() when a perf tool runs
    from confluent_kafka import KafkaError, Message
    from confluent_kafka import Producer as ConfluentProducer

MB = 1024 * 1024
REPORT_MS = 5000
# Java client keys librdkafka has no setting for: checked, then left out
JAVA_ONLY = {
    "max.block.ms", "buffer.memory", "key.serializer", "value.serializer",
    "key.deserializer", "value.deserializer", "metadata.max.idle.ms", "partitioner.class",
    "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "auto.include.jmx.reporter", "enable.metrics.push",
    "metric.reporters", "metrics.num.samples", "metrics.sample.window.ms",
    "metrics.recording.level", "interceptor.classes", "send.buffer.bytes",
    "receive.buffer.bytes", "socket.connection.setup.timeout.max.ms",
    "default.api.timeout.ms", "exclude.internal.topics", "max.poll.records",
    "partition.assignment.strategy", "group.protocol",
}


def checked_settings(props: dict[str, str], table: dict[str, Key], logger: str) -> dict[str, str]:
    """The properties checked as Kafka's client checks them (its ConfigException, uncaught
    in Kafka's perf tools, is the tool's failure), then as librdkafka settings."""
    try:
        config = parse_config(props, table, logger)
        if table is PRODUCER:
            idempotence(config, props)
    except ConfigError as exc:
        raise ToolError(f'Exception in thread "main" {CONFIG_EXCEPTION}: {exc}') from None
    except ToolError as exc:
        raise ToolError(f'Exception in thread "main" {exc}') from None
    return librdkafka_config({k: v for k, v in props.items() if k not in JAVA_ONLY})


def _confluent() -> ModuleType:
    """The confluent_kafka module, imported on first use (only these tools need it)."""
    try:
        import confluent_kafka
    except ImportError:
        raise ToolError("the perf tools need confluent-kafka: pip install confluent-kafka") \
            from None
    return confluent_kafka


class Stats:
    """Kafka's ProducerPerformance.Stats: windows every 5 s, percentiles at the end."""

    def __init__(self, records: int) -> None:
        self.start = self.window_start = time.monotonic()
        self.count = self.bytes = self.max_latency = 0
        self.total_latency = 0.0
        self.latencies: list[int] = []
        self.sampling = max(1, records // 500000)
        self.window_count = self.window_bytes = self.window_max = 0
        self.window_total = 0.0
        self.iteration = 0

    def record(self, latency_ms: int, size: int) -> None:
        self.count += 1
        self.bytes += size
        self.total_latency += latency_ms
        self.max_latency = max(self.max_latency, latency_ms)
        self.window_count += 1
        self.window_bytes += size
        self.window_total += latency_ms
        self.window_max = max(self.window_max, latency_ms)
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency_ms)
        self.iteration += 1
        if (time.monotonic() - self.window_start) * 1000 >= REPORT_MS:
            self.print_window()
            self.window_start = time.monotonic()
            self.window_count = self.window_bytes = self.window_max = 0
            self.window_total = 0.0

    def print_window(self) -> None:
        elapsed = max(time.monotonic() - self.window_start, 1e-9)
        print(f"{self.window_count} records sent, {self.window_count / elapsed:.1f} "
              f"records/sec ({self.window_bytes / elapsed / MB:.2f} MB/sec), "
              f"{self.window_total / max(self.window_count, 1):.1f} ms avg latency, "
              f"{float(self.window_max):.1f} ms max latency.", flush=True)

    def print_total(self) -> None:
        elapsed = max(time.monotonic() - self.start, 1e-9)
        ordered = sorted(self.latencies) or [0]

        def pct(p: float) -> int:
            return ordered[int(p * len(ordered))] if int(p * len(ordered)) < len(ordered) \
                else ordered[-1]
        print(f"{self.count} records sent, {self.count / elapsed:f} records/sec "
              f"({self.bytes / elapsed / MB:.2f} MB/sec), "
              f"{self.total_latency / max(self.count, 1):.2f} ms avg latency, "
              f"{float(self.max_latency):.2f} ms max latency, {pct(0.5)} ms 50th, "
              f"{pct(0.95)} ms 95th, {pct(0.99)} ms 99th, {pct(0.999)} ms 99.9th.")


PRODUCER_PROG = "producer-performance"
PRODUCER_DESCRIPTION = "This tool is used to verify the producer performance."
# option -> the Options name run_producer reads it by (the argparse dest's)
_PRODUCER_NAMES = {"topic": "topic", "num_records": "num-records",
                   "record_size": "record-size", "payload_file": "payload-file",
                   "payload_monotonic": "payload-monotonic",
                   "payload_delimiter": "payload-delimiter", "throughput": "throughput",
                   "producer_props": "producer-props", "producer_config": "producer.config",
                   "print_metrics": "print-metrics", "transactional_id": "transactional-id",
                   "transaction_duration_ms": "transaction-duration-ms"}


def producer_parser() -> Parser:
    """ProducerPerformance's argparse4j command line (3.9.1's arguments, usage and
    errors)."""
    parser = Parser(prog=PRODUCER_PROG, description=PRODUCER_DESCRIPTION)
    parser.add_argument("--topic", required=True, metavar="TOPIC",
                        help="produce messages to this topic")
    parser.add_argument("--num-records", required=True, type=JAVA_LONG, metavar="NUM-RECORDS",
                        help="number of messages to produce")
    parser.add_argument("--payload-delimiter", metavar="PAYLOAD-DELIMITER", default="\\n",
                        help="provides delimiter to be used when --payload-file is provided. "
                             "Defaults to new line. Note that this parameter will be ignored "
                             "if --payload-file is not provided.")
    parser.add_argument("--throughput", required=True, type=java_double, metavar="THROUGHPUT",
                        help="throttle maximum message throughput to *approximately* "
                             "THROUGHPUT messages/sec. Set this to -1 to disable throttling.")
    parser.add_argument("--producer-props", nargs="+", metavar="PROP-NAME=PROP-VALUE",
                        help="kafka producer related configuration properties like "
                             "bootstrap.servers,client.id etc. These configs take precedence "
                             "over those passed via --producer.config.")
    parser.add_argument("--producer.config", dest="producer_config", metavar="CONFIG-FILE",
                        help="producer config properties file.")
    parser.add_argument("--print-metrics", action="store_true",
                        help="print out metrics at the end of the test.")
    parser.add_argument("--transactional-id", metavar="TRANSACTIONAL-ID", help=(
        "The transactional id to use. This config takes precedence over the "
        "transactional.id specified via --producer.config or --producer-props. Note that if "
        "the transactional id is not specified while --transaction-duration-ms is provided, "
        "the default value for the transactional id will be performance-producer- followed "
        "by a random uuid."))
    parser.add_argument("--transaction-duration-ms", type=JAVA_LONG,
                        metavar="TRANSACTION-DURATION", help=(
                            "The max age of each transaction. The commitTransaction will be "
                            "called after this time has elapsed. The value should be greater "
                            "than 0. If the transactional id is specified via "
                            "--producer-props, --producer.config, or --transactional-id but "
                            "--transaction-duration-ms is not specified, the default value "
                            "will be 3000."))
    payload = parser.add_described_group(
        "either --record-size or --payload-file must be specified but not both.", required=True)
    note = ("Note that you must provide exactly one of --record-size or --payload-file or "
            "--payload-monotonic.")
    payload.add_argument("--record-size", type=INTEGER, metavar="RECORD-SIZE",
                         help="message size in bytes. " + note)
    payload.add_argument("--payload-file", metavar="PAYLOAD-FILE",
                         help="file to read the message payloads from, split by "
                              "--payload-delimiter. " + note)
    payload.add_argument("--payload-monotonic", action="store_true",
                         help="payload is monotonically increasing integer. " + note)
    return parser


def producer_options(argv: list[str]) -> Options:
    """The command line read by producer_parser, as the Options run_producer reads."""
    ns = producer_parser().parse_args(argv)
    options = Options(argv=argv)
    for dest, name in _PRODUCER_NAMES.items():
        value = getattr(ns, dest)
        if value is not None and value is not False:
            options.values[name] = list(value) if name == "producer-props" else [value]
    return options


class ProducerPerfTool:
    """kafka-producer-perf-test.sh: ProducerPerformance's argparse4j command line (help
    on standard output without arguments, usage errors in argparse4j's layout), then the
    run."""

    name = "producer-perf-test"

    def main(self, argv: list[str] | None = None) -> int:
        argv = list(sys.argv[1:] if argv is None else argv)
        parser = producer_parser()
        if not argv:  # 3.9.1 prints its help and exits 0
            sys.stdout.write(parser.argparse4j_help())
            return 0
        try:
            return run_producer(producer_options(argv))
        except SystemExit as exc:  # usage errors (1), -h (0)
            return exc.code if isinstance(exc.code, int) else 1
        except UsageError as exc:
            try:
                parser.fail(str(exc))
            except SystemExit:
                return 1
        except ToolError as exc:
            print(exc, file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 130


DEFAULT_TRANSACTION_ID_PREFIX = "performance-producer-"
DEFAULT_TRANSACTION_DURATION_MS = 3000


def _payloads(options: Options) -> list[bytes]:
    """The payloads sent in turn; none for --payload-monotonic (each record's own)."""
    if options.has("payload-monotonic"):
        return []
    if options.has("payload-file"):
        delimiter = options.get("payload-delimiter").replace("\\n", "\n")
        try:
            with open(options.get("payload-file"), encoding="utf-8") as fh:
                items = [p for p in fh.read().split(delimiter) if p]
        except OSError as exc:
            raise ToolError(f"{options.get('payload-file')} ({exc.strerror})") from None
        if not items:
            raise ToolError("File does not contain any payloads")
        return [p.encode() for p in items]
    size = options.get("record-size")
    return [bytes((65 + (i % 26)) for i in range(size))]


def transaction_settings(options: Options, config: dict[str, str]) -> int | None:
    """Kafka's ConfigPostProcessor: transactions are on when a duration, a
    --transactional-id or a transactional.id property is given; the id is put into the
    producer config (the option's, else the property's, else a random one). The commit
    interval in ms, or None without transactions."""
    duration = options.get("transaction-duration-ms")
    if duration is not None and duration <= 0:
        raise UsageError("--transaction-duration-ms should be greater than zero")
    if duration is None and not options.has("transactional-id") \
            and "transactional.id" not in config:
        return None
    config["transactional.id"] = (options.get("transactional-id")
                                  or config.get("transactional.id")
                                  or DEFAULT_TRANSACTION_ID_PREFIX + str(uuid.uuid4()))
    return DEFAULT_TRANSACTION_DURATION_MS if duration is None else int(duration)


class Transactions:
    """The perf test's transactions: one begun before a record when none is open, committed
    once a send finds it at least the duration old, and the last one at the end."""

    def __init__(self, producer: ConfluentProducer, duration_ms: int | None) -> None:
        self.producer, self.duration_ms = producer, duration_ms
        self.size, self.started = 0, 0.0
        if duration_ms is not None:
            producer.init_transactions()

    def before_send(self) -> None:
        if self.duration_ms is not None and self.size == 0:
            self.producer.begin_transaction()
            self.started = time.monotonic()

    def after_send(self, sent_at: float) -> None:
        self.size += 1
        if self.duration_ms is not None and \
                self.duration_ms <= (sent_at - self.started) * 1000:
            self.producer.commit_transaction()
            self.size = 0

    def finish(self) -> None:
        if self.duration_ms is not None and self.size:
            self.producer.commit_transaction()
            self.size = 0


def _produce(producer: ConfluentProducer, transactions: Transactions, options: Options,
             payloads: list[bytes], stats: Stats) -> list[str]:
    """Send the records at the asked rate, in transactions when they are on; the delivery
    failures."""
    records, throughput = options.get("num-records"), options.get("throughput")
    topic = options.get("topic")
    failures: list[str] = []
    start = time.monotonic()
    for i in range(records):
        # --payload-monotonic: the record's number, in decimal (Long.toString)
        payload = payloads[i % len(payloads)] if payloads else str(i).encode()
        sent_at = time.monotonic()

        def done(err: KafkaError | None, _msg: Message, sent_at: float = sent_at,
                 size: int = len(payload)) -> None:
            if err is not None:
                failures.append(str(err))
            else:
                stats.record(int((time.monotonic() - sent_at) * 1000), size)
        transactions.before_send()
        while True:
            try:
                producer.produce(topic, payload, on_delivery=done)
                break
            except BufferError:
                producer.poll(0.05)
        transactions.after_send(sent_at)
        producer.poll(0)
        if throughput > 0:  # Kafka's ThroughputThrottler: sleep while ahead of the rate
            ahead = (i + 1) / throughput - (time.monotonic() - start)
            if ahead > 0:
                producer.poll(ahead)
    transactions.finish()
    producer.flush(300)
    return failures


def run_producer(options: Options) -> int:
    config = client_config(options, "producer.config")
    config.update(parse_pairs(options.all("producer-props"), "producer property"))
    if "bootstrap.servers" not in config:
        raise UsageError("bootstrap.servers must be given in --producer-props or "
                         "--producer.config")
    duration_ms = transaction_settings(options, config)
    settings = checked_settings(config, PRODUCER,
                                "org.apache.kafka.clients.producer.ProducerConfig")
    confluent = _confluent()
    producer = confluent.Producer(settings)
    payloads = _payloads(options)
    try:
        transactions = Transactions(producer, duration_ms)  # initTransactions first
        stats = Stats(options.get("num-records"))
        failures = _produce(producer, transactions, options, payloads, stats)
    except confluent.KafkaException as exc:  # a transaction call refused
        raise ToolError(f'Exception in thread "main" {KAFKA_EXCEPTION}: '
                        f"{exc.args[0].str()}") from None
    if failures:
        raise ToolError(f"{len(failures)} records failed: {failures[0]}")
    stats.print_total()
    return 0


CONSUMER_OPTIONS = [
    Opt("bootstrap-server", "REQUIRED unless --broker-list(deprecated) is specified. The "
        "server(s) to connect to.", "server to connect to"),
    Opt("broker-list", "DEPRECATED, use --bootstrap-server instead; ignored if "
        "--bootstrap-server is specified. The broker list string in the form "
        "HOST1:PORT1,HOST2:PORT2.", "broker-list"),
    Opt("topic", "REQUIRED: The topic to consume from.", "topic"),
    # Kafka's default group is drawn at random once a run, and its usage table shows it
    Opt("group", "The group id to consume on.", "gid",
        default=f"perf-consumer-{secrets.randbelow(100000)}"),
    Opt("messages", "REQUIRED: The number of messages to send or consume", "count", LONG),
    Opt("fetch-size", "The amount of data to fetch in a single request.", "size", int,
        1048576),
    Opt("from-latest", "If the consumer does not already have an established offset to "
        "consume from, start with the latest message present in the log rather than the "
        "earliest message."),
    Opt("reporting-interval", "Interval in milliseconds at which to print progress info.",
        "interval_ms", LONG, REPORT_MS),
    Opt("show-detailed-stats", "If set, stats are reported for each reporting interval as "
        "configured by reporting-interval"),
    Opt("hide-header", "If set, skips printing the header for the stats"),
    Opt("timeout", "The maximum allowed time in milliseconds between returned records.",
        "milliseconds", LONG, 10000, optional=True),
    Opt("consumer.config", "Consumer config properties file.", "config file"),
    Opt("socket-buffer-size", "The size of the tcp RECV size.", "size", int, 2 * 1024 * 1024),
    # accepted and ignored, as 3.9.1 does
    Opt("num-fetch-threads", "DEPRECATED AND IGNORED: Number of fetcher threads.", "count",
        int, 1),
    Opt("threads", "DEPRECATED AND IGNORED: Number of processing threads.", "count", int, 10),
    Opt("date-format", "The date format to use for formatting the time field. See "
        "java.text.SimpleDateFormat for options.", "date format",
        default="yyyy-MM-dd HH:mm:ss:SSS"),
    Opt("print-metrics", 'Print out the metrics.'),
]
HEADER = ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, "
          "nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")


def _stamp(wall: float) -> str:
    """The default date format, yyyy-MM-dd HH:mm:ss:SSS, in local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wall)) + \
        f":{int(wall * 1000) % 1000:03d}"


def run_consumer(options: Options) -> int:
    servers = options.get("bootstrap-server") or options.get("broker-list")
    if not servers:
        raise UsageError('Missing required argument "[bootstrap-server]"')
    require(options, "topic", "messages")
    config = client_config(options, "consumer.config")
    config.update({"bootstrap.servers": servers,
                   "group.id": options.get("group"),
                   "auto.offset.reset": "latest" if options.has("from-latest") else "earliest",
                   "max.partition.fetch.bytes": str(options.get("fetch-size")),
                   "receive.buffer.bytes": str(options.get("socket-buffer-size")),
                   "check.crcs": "false"})
    config.setdefault("client.id", "perf-consumer-client")
    settings = checked_settings(config, CONSUMER,
                                "org.apache.kafka.clients.consumer.ConsumerConfig")
    wanted, timeout = options.get("messages"), options.get("timeout") / 1000
    consumer = _confluent().Consumer(settings)
    assigned_at: list[float] = []
    consumer.subscribe([options.get("topic")],
                       on_assign=lambda c, ps: assigned_at.append(time.monotonic()))
    start_wall, start = time.time(), time.monotonic()
    count = size = 0
    last = time.monotonic()
    try:
        while count < wanted:
            batch = consumer.consume(min(10000, wanted - count), 0.1)
            for message in batch:
                if message.error():
                    continue
                count += 1
                size += len(message.value() or b"")
            if batch:
                last = time.monotonic()
            elif time.monotonic() - last > timeout:
                print(f"WARNING: Exiting before consuming the expected number of messages: "
                      f"timeout ({options.get('timeout')} ms) exceeded. You can use the "
                      "--timeout option to increase the timeout.")
                break
    finally:
        consumer.close()
    end, end_wall = time.monotonic(), time.time()
    elapsed = max(end - start, 1e-9)
    rebalance = (assigned_at[0] - start) if assigned_at else 0.0
    fetch = max(elapsed - rebalance, 1e-9)
    mb = size / MB
    if not options.has("hide-header"):
        print(HEADER)
    print(f"{_stamp(start_wall)}, {_stamp(end_wall)}, {mb:.4f}, {mb / elapsed:.4f}, {count}, "
          f"{count / elapsed:.4f}, {int(rebalance * 1000)}, {int(fetch * 1000)}, "
          f"{mb / fetch:.4f}, {count / fetch:.4f}")
    return 0


PRODUCER_TOOL = ProducerPerfTool()
CONSUMER_TOOL = Tool("consumer-perf-test", "This tool is used to verify the consumer "
                     "performance.", CONSUMER_OPTIONS, run_consumer)
