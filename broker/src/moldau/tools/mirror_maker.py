"""kafka-mirror-maker: copy topics from one cluster to another (Kafka's MirrorMaker 1
interface): a consumer group on the source, an idempotent acks=all producer on the
target; offsets are committed only after the target has acknowledged what was read, so
a restart loses nothing (it may copy a record twice). Runs until SIGTERM or Ctrl-C."""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

from moldau.tools.common import client_config, librdkafka_config
from moldau.tools.options import Opt, Options, ToolError, UsageError, require
from moldau.tools.perf import _confluent
from moldau.tools.runner import Tool

if TYPE_CHECKING:  # imported by _confluent() when the tool runs
    from confluent_kafka import KafkaError, Message

OPTIONS = [
    Opt("consumer.config", "Embedded consumer config for consuming from the source "
        "cluster.", "config file"),
    Opt("producer.config", "Embedded producer config.", "config file"),
    Opt("include", "List of included topics to mirror.", "Java regex (String)"),
    Opt("whitelist", "DEPRECATED, use --include instead; ignored if --include specified. "
        "List of included topics to mirror.", "Java regex (String)"),
    Opt("num.streams", "Number of consumption streams (one is used: librdkafka fetches "
        "in its own threads).", "Number of threads", int, 1),
    Opt("offset.commit.interval.ms", "Offset commit interval in ms.",
        "offset commit interval in millisecond", int, 60000),
    Opt("abort.on.send.failure", "Configure the mirror maker to exit on a failed send.",
        "Stop the entire mirror maker when a send failure occurs", default="true"),
    Opt("message.handler", "Message handler (only the default one is supported).",
        "A custom message handler of type MirrorMakerMessageHandler"),
]


def _pattern(options: Options) -> str:
    """Kafka's include list as a librdkafka regex subscription."""
    text = (options.get("include") or options.get("whitelist")).strip()
    text = text.replace(",", "|").replace(" ", "").strip("\"'")
    return f"^({text})$"


def run(options: Options) -> int:
    require(options, "consumer.config", "producer.config")
    if not options.has("include") and not options.has("whitelist"):
        raise UsageError("include list must be specified")
    source = client_config(options, "consumer.config")
    target = client_config(options, "producer.config")
    if "group.id" not in source:
        raise ToolError("The consumer config needs group.id")
    kafka = _confluent()
    consumer = kafka.Consumer({**librdkafka_config(source), "enable.auto.commit": "false",
                               "auto.offset.reset": source.get("auto.offset.reset",
                                                               "earliest")})
    producer = kafka.Producer({**librdkafka_config(target), "enable.idempotence": "true",
                               "acks": "all"})
    failures: list[str] = []
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))

    def delivered(err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            failures.append(str(err))

    consumer.subscribe([_pattern(options)])
    try:
        while not stopping:
            batch = [m for m in consumer.consume(1000, 0.5) if not m.error()]
            for message in batch:
                while True:
                    try:
                        producer.produce(message.topic(), message.value(), message.key(),
                                         headers=message.headers(),
                                         timestamp=message.timestamp()[1],
                                         on_delivery=delivered)
                        break
                    except BufferError:
                        producer.poll(0.1)
            if batch:
                producer.flush(60)
                if failures:
                    raise ToolError(f"Send failed: {failures[0]}")
                consumer.commit(asynchronous=False)
    except KeyboardInterrupt:
        pass
    finally:
        producer.flush(60)
        consumer.close()
    return 0


TOOL = Tool("mirror-maker", "Continuously copy data between two Kafka clusters.",
            OPTIONS, run)
