"""The console and perf tools' client settings (issue 41 items 3 and 7) against the real
cluster: --producer.config / --producer-property / --consumer-property take effect as in
Kafka 3.9 (read back from the log's batches through Fetch), and each invalid value is
refused with Kafka's ConfigException message before anything is written."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.records import RecordBatch, iter_batches
from moldau.tools.admin import Admin, list_offsets, partition_leaders

from .toolrun import BIN, ToolCluster, die_with_parent, run, wait_for

PRODUCER, CONSUMER = "kafka-console-producer.sh", "kafka-console-consumer.sh"
ZSTD, NO_PRODUCER_ID = 4, -1


def _batches(cluster: ToolCluster, topic: str) -> list[RecordBatch]:
    """Partition 0's batches as its leader stores them."""
    with Admin(cluster.bootstrap) as admin:
        leader = partition_leaders(admin, [topic])[(topic, 0)]
        answer = admin.call(
            "Fetch", 12, leader, replica_id=-1, max_wait_ms=0, min_bytes=0,
            max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1, rack_id="",
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                FetchRequest.FetchPartition(partition=0, current_leader_epoch=-1,
                                            fetch_offset=0, log_start_offset=-1,
                                            partition_max_bytes=1 << 20)])],
            forgotten_topics_data=[])
    return list(iter_batches(answer.responses[0].partitions[0].records or b""))


def _end_offset(cluster: ToolCluster, topic: str) -> int:
    with Admin(cluster.bootstrap) as admin:
        return list_offsets(admin, [(topic, 0)], -1)[(topic, 0)]


def _topic(cluster: ToolCluster, name: str) -> str:
    cluster.ok("kafka-topics.sh", "--create", "--topic", name, "--partitions", "1")
    return name


@pytest.fixture(scope="module")
def refused_topic(cluster: ToolCluster) -> str:
    return _topic(cluster, "settings-refused")


LINES = "".join(f"line-{i:03d}\n" for i in range(40))


def test_producer_settings_take_effect(cluster: ToolCluster, tmp_path: Path) -> None:
    # the file's batch.size and linger.ms are used; --compression-codec gives zstd;
    # idempotent by default (acks=-1, retries=3): a producer id and sequences
    config = tmp_path / "producer.properties"
    config.write_text("batch.size=200\nlinger.ms=5\nclient.id=settings-test\n")
    small = _topic(cluster, "settings-small-batches")
    cluster.ok(PRODUCER, "--topic", small, "--producer.config", str(config),
               "--compression-codec", "zstd", stdin=LINES)
    batches = _batches(cluster, small)
    assert sum(b.records_count for b in batches) == 40
    # records of about 17 bytes in 200-byte batches (a 61-byte header): at most 8 fit one;
    # how many batches linger.ms closes early depends on the machine's speed
    assert max(b.records_count for b in batches) <= 8 and len(batches) >= 5
    assert {b.compression for b in batches} == {ZSTD}
    assert batches[0].producer_id != NO_PRODUCER_ID
    sequences = [b.base_sequence for b in batches]
    assert sequences[0] == 0 and sequences == sorted(sequences)
    # the defaults: one batch for piped input (batch.size 16384), no compression; 3.9
    # replaces compression.type of the properties with --compression-codec's (none)
    one = _topic(cluster, "settings-one-batch")
    cluster.ok(PRODUCER, "--topic", one, "--producer-property", "compression.type=zstd",
               stdin=LINES)
    batches = _batches(cluster, one)
    assert [(b.records_count, b.compression) for b in batches] == [(40, 0)]
    # acks=0 and acks=1 turn idempotence off quietly (not asked for): plain batches
    quiet = _topic(cluster, "settings-acks")
    cluster.ok(PRODUCER, "--topic", quiet, "--request-required-acks", "1", stdin="a\n")
    cluster.ok(PRODUCER, "--topic", quiet, "--producer-property", "acks=0", stdin="b\n")
    # --request-required-acks given explicitly wins over the property
    cluster.ok(PRODUCER, "--topic", quiet, "--producer-property", "acks=0",
               "--request-required-acks", "all", stdin="c\n")
    got = wait_for(lambda: (lambda b: b if len(b) == 3 else None)(_batches(cluster, quiet)),
                   10, "the three batches")
    assert [b.producer_id == NO_PRODUCER_ID for b in got] == [True, True, False]


# (every message of the table: test_client_configs.py; here the tool's paths to it)
@pytest.mark.parametrize(("args", "message"), [
    (["--producer-property", "retries=MAX_INT"],
     "Invalid value MAX_INT for configuration retries: Not a number of type INT"),
    (["--compression-codec", "brotli"],
     "Invalid value brotli for configuration compression.type: String must be one of: "
     "none, gzip, snappy, lz4, zstd"),
    (["--producer-property", "enable.idempotence=true", "--request-required-acks", "1"],
     "Must set acks to all in order to use the idempotent producer. Otherwise we cannot "
     "guarantee idempotence."),
    (["--producer-property", "delivery.timeout.ms=1000"],
     "delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms"),
])
def test_producer_refuses_invalid_values(cluster: ToolCluster, refused_topic: str,
                                         args: list[str], message: str) -> None:
    topic = refused_topic
    refused = cluster.tool(PRODUCER, "--topic", topic, *args, stdin="never\n")
    assert (refused.code, refused.out) == (1, "")
    assert refused.err == f"org.apache.kafka.common.config.ConfigException: {message}\n"
    assert _end_offset(cluster, topic) == 0


def test_linger_holds_records_for_one_batch(cluster: ToolCluster) -> None:
    """Two lines half a second apart: one batch with --timeout (linger.ms) 5000, two
    with linger.ms=0 from the properties (the option's default applies only when absent)."""
    def produce(topic: str, *args: str) -> int:
        producer = subprocess.Popen(
            [str(BIN / PRODUCER), "--bootstrap-server", cluster.bootstrap, "--topic", topic,
             *args], stdin=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
        assert producer.stdin is not None
        producer.stdin.write("first\n")
        producer.stdin.flush()
        time.sleep(0.5)
        producer.stdin.write("second\n")
        producer.stdin.close()
        assert producer.wait(30) == 0
        return len(_batches(cluster, topic))
    assert produce(_topic(cluster, "settings-linger"), "--timeout", "5000") == 1
    assert produce(_topic(cluster, "settings-no-linger"), "--producer-property",
                   "linger.ms=0") == 2


def test_unknown_producer_key_is_warned_not_refused(cluster: ToolCluster) -> None:
    topic = _topic(cluster, "settings-unknown-key")
    written = cluster.tool(PRODUCER, "--topic", topic, "--producer-property", "no.such=1",
                           stdin="x\n")
    assert written.code == 0
    assert "These configurations '[no.such]' were supplied but are not used yet." in written.err
    assert _end_offset(cluster, topic) == 1


def _member_client_id(cluster: ToolCluster, group: str) -> str | None:
    members = cluster.tool("kafka-consumer-groups.sh", "--describe", "--members",
                           "--group", group).out
    match = re.search(rf"^{group}\s+\S+\s+\S+\s+(\S+)\s+\d+", members, re.M)
    return match.group(1) if match else None


def test_consumer_settings_take_effect(cluster: ToolCluster) -> None:
    topic = _topic(cluster, "settings-consumer")
    cluster.ok(PRODUCER, "--topic", topic, stdin="a\nb\nc\n")
    # auto.offset.reset=earliest from the properties (no --from-beginning); the default
    # client id console-consumer is the member's, as the broker reports it
    consumer = subprocess.Popen(
        [str(BIN / CONSUMER), "--bootstrap-server", cluster.bootstrap, "--topic", topic,
         "--group", "settings-group", "--consumer-property", "auto.offset.reset=earliest"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
    try:
        assert consumer.stdout is not None
        lines = [consumer.stdout.readline() for _ in range(3)]
        assert lines == ["a\n", "b\n", "c\n"], consumer.communicate(timeout=30)
        assert wait_for(lambda: _member_client_id(cluster, "settings-group"), 10,
                        "the member") == "console-consumer"
        consumer.send_signal(signal.SIGTERM)
        consumer.communicate(timeout=30)
    finally:
        consumer.kill()
    # enable.auto.commit=false: the group reads but commits nothing, so it starts over
    again = cluster.tool(CONSUMER, "--topic", topic, "--group", "settings-nocommit",
                         "--from-beginning", "--max-messages", "3", "--consumer-property",
                         "enable.auto.commit=false", "--consumer-property",
                         "client.id=reader-7")
    assert (again.code, again.out) == (0, "a\nb\nc\n")
    offsets = cluster.tool("kafka-consumer-groups.sh", "--describe", "--group",
                           "settings-nocommit")
    assert not re.search(rf"settings-nocommit\s+{topic}\s+0\s+\d", offsets.out), offsets.out
    # auto.offset.reset=none without a committed offset: Kafka's exception
    none = cluster.tool(CONSUMER, "--topic", topic, "--group", "settings-none",
                        "--consumer-property", "auto.offset.reset=none")
    assert none.code == 1
    assert none.err.rstrip().endswith(
        "org.apache.kafka.clients.consumer.NoOffsetForPartitionException: Undefined offset "
        f"with no reset policy for partitions: [{topic}-0]"), none.err


@pytest.mark.parametrize(("args", "tail"), [
    (["--consumer-property", "isolation.level=read_dirty"],
     "org.apache.kafka.common.config.ConfigException: Invalid value read_dirty for "
     "configuration isolation.level: String must be one of: read_uncommitted, "
     "read_committed"),
    (["--isolation-level", "READ_COMMITTED"],
     "org.apache.kafka.common.config.ConfigException: Invalid value READ_COMMITTED for "
     "configuration isolation.level: String must be one of: read_uncommitted, "
     "read_committed"),
    (["--from-beginning", "--consumer-property", "auto.offset.reset=latest"],
     "Can't simultaneously specify --from-beginning and 'auto.offset.reset=latest', please "
     "remove one option"),
])
def test_consumer_refuses_invalid_values(cluster: ToolCluster, args: list[str],
                                         tail: str) -> None:
    refused = cluster.tool(CONSUMER, "--topic", "settings-consumer", "--group",
                           "settings-refused", *args)
    assert (refused.code, refused.out) == (1, "")
    assert refused.err.rstrip().endswith(tail), refused.err


def test_consumer_group_ids_must_agree(cluster: ToolCluster) -> None:
    refused = cluster.tool(CONSUMER, "--topic", "x", "--group", "a", "--consumer-property",
                           "group.id=b")
    assert refused.code == 1 and refused.err.startswith(
        "The group ids provided in different places (directly using '--group', via "
        "'--consumer-property', or via '--consumer.config') do not match. Detected group "
        "ids: 'a', 'b'\n")


def test_perf_tools_check_their_settings(cluster: ToolCluster, tmp_path: Path) -> None:
    topic = _topic(cluster, "settings-perf")
    produced = run("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", "5",
                   "--record-size", "10", "--throughput", "-1", "--producer-props",
                   f"bootstrap.servers={cluster.bootstrap}", "retries=MAX_INT")
    assert produced.code == 1
    assert produced.err == ('Exception in thread "main" org.apache.kafka.common.config.'
                            "ConfigException: Invalid value MAX_INT for configuration "
                            "retries: Not a number of type INT\n")
    bad = tmp_path / "consumer.properties"
    bad.write_text("isolation.level=dirty\n")
    consumed = cluster.tool("kafka-consumer-perf-test.sh", "--topic", topic, "--messages",
                            "1", "--consumer.config", str(bad))
    assert (consumed.code, consumed.err) == (1, (
        'Exception in thread "main" org.apache.kafka.common.config.ConfigException: Invalid '
        "value dirty for configuration isolation.level: String must be one of: "
        "read_uncommitted, read_committed\n"))
    assert _end_offset(cluster, topic) == 0
    # the Java-only keys are checked, then left out for librdkafka
    ok = run("kafka-producer-perf-test.sh", "--topic", topic, "--num-records", "5",
             "--record-size", "10", "--throughput", "-1", "--producer-props",
             f"bootstrap.servers={cluster.bootstrap}", "max.block.ms=5000",
             "compression.type=zstd", "linger.ms=50")
    assert ok.code == 0, ok.err
    assert {b.compression for b in _batches(cluster, topic)} == {ZSTD}

