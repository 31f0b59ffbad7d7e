"""kafka-console-producer and kafka-console-consumer against the real cluster, checked
with independent clients: confluent-kafka reads what the producer wrote, kafka-python's
murmur2 says which partition a key belongs to."""

from __future__ import annotations

import re
import signal
import subprocess
from typing import Any

from .toolrun import BIN, ToolCluster, assert_golden, die_with_parent, run

PRODUCER, CONSUMER = "kafka-console-producer.sh", "kafka-console-consumer.sh"


def _read_all(cluster: ToolCluster, topic: str, count: int) -> list[Any]:
    """Every record of the topic, read by confluent-kafka (an independent client)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"check-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    records: list[Any] = []
    try:
        for _ in range(600):
            message = consumer.poll(0.1)
            if message is not None and not message.error():
                records.append(message)
            if len(records) >= count:
                break
    finally:
        consumer.close()
    return records


def test_seed_produce_and_consume_from_beginning(cluster: ToolCluster) -> None:
    cluster.ok("kafka-topics.sh", "--create", "--topic", "console", "--partitions", "1")
    lines = [f"message {i}" for i in range(5)]
    # the book's producer form (--broker-list) and consumer form (--bootstrap-server)
    written = run(PRODUCER, "--broker-list", cluster.bootstrap, "--topic", "console",
                  stdin="\n".join(lines) + "\n")
    assert (written.code, written.out, written.err) == (0, "", "")
    assert [m.value().decode() for m in _read_all(cluster, "console", 5)] == lines
    read = cluster.tool(CONSUMER, "--topic", "console", "--from-beginning",
                        "--max-messages", "5")
    assert (read.code, read.out) == (0, "\n".join(lines) + "\n")
    assert read.err == "Processed a total of 5 messages\n"
    one = cluster.ok(CONSUMER, "--topic", "console", "--partition", "0", "--offset", "3",
                     "--max-messages", "1")
    assert one == "message 3\n"


def test_keys_go_to_kafkas_partition(cluster: ToolCluster) -> None:
    from kafka.partitioner.default import murmur2

    cluster.ok("kafka-topics.sh", "--create", "--topic", "keyed", "--partitions", "3")
    pairs = [(f"user-{i}", f"event-{i}") for i in range(12)]
    cluster.ok(PRODUCER, "--topic", "keyed", "--property", "parse.key=true", "--property",
               "key.separator=:", "--compression-codec", "lz4",
               stdin="".join(f"{k}:{v}\n" for k, v in pairs))
    got = _read_all(cluster, "keyed", 12)
    assert sorted((m.key().decode(), m.value().decode()) for m in got) == sorted(pairs)
    for message in got:
        expected = (murmur2(message.key()) & 0x7FFFFFFF) % 3
        assert message.partition() == expected, message.key()


def test_formatter_properties(cluster: ToolCluster) -> None:
    from confluent_kafka import Producer

    cluster.ok("kafka-topics.sh", "--create", "--topic", "formatted", "--partitions", "1")
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce("formatted", key=b"k1", value=b"v1", headers=[("h1", b"x"), ("h2", b"y")],
                     timestamp=1700000000000)
    producer.produce("formatted", value=b"v2", timestamp=1700000000001)
    assert producer.flush(30) == 0
    out = cluster.ok(CONSUMER, "--topic", "formatted", "--from-beginning", "--max-messages",
                     "2", "--property", "print.key=true", "--property", "print.timestamp=true",
                     "--property", "print.partition=true", "--property", "print.offset=true",
                     "--property", "print.headers=true")
    assert_golden("console-consumer-properties.txt", out)
    # without the value, the last column printed still ends the line, as Kafka's
    keys = cluster.ok(CONSUMER, "--topic", "formatted", "--from-beginning", "--max-messages",
                      "2", "--property", "print.key=true", "--property", "print.value=false",
                      "--property", "null.literal=<none>")
    assert keys == "k1\n<none>\n"


def test_group_consumption_commits(cluster: ToolCluster) -> None:
    cluster.ok("kafka-topics.sh", "--create", "--topic", "grouped", "--partitions", "1")
    cluster.ok(PRODUCER, "--topic", "grouped", stdin="a\nb\nc\nd\ne\n")
    first = cluster.ok(CONSUMER, "--topic", "grouped", "--group", "console-group",
                       "--from-beginning", "--max-messages", "3")
    assert first == "a\nb\nc\n"
    described = cluster.ok("kafka-consumer-groups.sh", "--describe", "--group",
                           "console-group")
    assert re.search(r"console-group\s+grouped\s+0\s+3\s+5\s+2\s", described), described
    rest = cluster.tool(CONSUMER, "--topic", "grouped", "--group", "console-group",
                        "--timeout-ms", "2000")
    assert (rest.code, rest.out) == (0, "d\ne\n")
    assert rest.err.endswith("Processed a total of 2 messages\n")
    # the timeout is logged as Kafka 3.9.1's ConsoleConsumer logs it
    timed_out = rest.err.splitlines()[-3:-1]
    assert re.fullmatch(r"\[[-\d :,]+\] ERROR Error processing message, terminating consumer "
                        r"process:  \(org\.apache\.kafka\.tools\.consumer\.ConsoleConsumer\)",
                        timed_out[0]), rest.err
    assert timed_out[1] == "org.apache.kafka.common.errors.TimeoutException"


def test_sigterm_commits_leaves_and_prints_the_total(cluster: ToolCluster) -> None:
    """As Kafka's shutdown hook (issue 41, item 4): SIGTERM, e.g. systemctl stop, ends the
    consumer like Ctrl-C: its position committed, the group left at once, the total
    printed."""
    cluster.ok("kafka-topics.sh", "--create", "--topic", "terminated", "--partitions", "1")
    cluster.ok(PRODUCER, "--topic", "terminated", stdin="a\nb\nc\n")
    consumer = subprocess.Popen(
        [str(BIN / CONSUMER), "--bootstrap-server", cluster.bootstrap, "--topic", "terminated",
         "--group", "terminated-group", "--from-beginning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    try:
        assert consumer.stdout is not None
        assert [consumer.stdout.readline() for _ in range(3)] == ["a\n", "b\n", "c\n"]
        consumer.send_signal(signal.SIGTERM)
        _, err = consumer.communicate(timeout=30)
    finally:
        consumer.kill()
    assert consumer.returncode == 0, err
    assert err.endswith("Processed a total of 3 messages\n"), err
    described = cluster.tool("kafka-consumer-groups.sh", "--describe", "--group",
                             "terminated-group")
    assert re.search(r"terminated-group\s+terminated\s+0\s+3\s+3\s+0\s", described.out), \
        described
    assert "has no active members" in described.err  # left, not waiting for its session


def test_bad_input(cluster: ToolCluster) -> None:
    no_topic = cluster.tool(CONSUMER, "--from-beginning")
    assert no_topic.code == 1 and no_topic.err.startswith(
        "Exactly one of --include/--topic is required. \nOption")
    # a formatter class that does not exist: Kafka 3.9.1 prints the class name and usage
    no_class = cluster.tool(CONSUMER, "--topic", "console", "--formatter", "org.example.None")
    assert no_class.code == 1 and no_class.err.startswith("org.example.None\nOption")
    offset_alone = cluster.tool(CONSUMER, "--topic", "console", "--offset", "2")
    assert offset_alone.err.startswith("The partition is required when offset is specified.")
    unknown = cluster.tool(CONSUMER, "--topic", "no-such-topic", "--max-messages", "1")
    assert (unknown.code, unknown.err) == (1, "Topic no-such-topic does not exist\n")
    missing = run(PRODUCER, "--topic", "console", stdin="x\n")
    assert missing.code == 1 and missing.err.startswith(
        'Missing required argument "[bootstrap-server]"\nOption')
    no_separator = cluster.tool(PRODUCER, "--topic", "console", "--property",
                                "parse.key=true", stdin="no separator here\n")
    assert (no_separator.code, no_separator.err) == (
        1, "No key separator found on line number 1: 'no separator here'\n")
    unreachable = run(PRODUCER, "--bootstrap-server", "127.0.0.1:1", "--topic", "console",
                      stdin="x\n")
    assert (unreachable.code, unreachable.err) == (
        1, "Could not connect to any bootstrap server: 127.0.0.1:1 (Connection refused)\n")
    everything = cluster.ok(CONSUMER, "--topic", "console", "--from-beginning",
                            "--timeout-ms", "2000")
    assert everything.count("\n") == 5  # the failed runs wrote nothing
    assert "no-such-topic" not in cluster.topics()
