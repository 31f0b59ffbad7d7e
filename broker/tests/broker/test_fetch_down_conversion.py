"""Old consumers (Fetch v0-v3) read v2 batches down-converted to message format v0 or v1,
as Kafka 3.9 serves them: a raw Fetch per version, the topic settings that refuse it, and
librdkafka told it talks to a 0.9 and a 0.10 broker."""

from __future__ import annotations

import time
from typing import Any

import confluent_kafka
import pytest

from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol import compression as codecs
from moldau.protocol import legacy
from moldau.protocol.generated.fetch_request import FetchRequest
from moldau.protocol.records import build_batch, iter_batches

from .raw import FETCH, connect, create_topic, produce, server_log, topic_name

UNSUPPORTED_VERSION, UNSUPPORTED_COMPRESSION_TYPE = 35, 76
# recent timestamps: older ones would let retention.ms delete the records mid-test
T0 = int(time.time() * 1000) - 60_000


def _fetch(broker: BrokerProcess, topic: str, version: int, offset: int = 0) -> Any:
    request = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    with connect(broker) as conn:
        return conn.request(FETCH, version, request).responses[0].partitions[0]


def _topic(broker: BrokerProcess, prefix: str, configs: dict[str, str] | None = None,
           batches: list[bytes] = ()) -> str:  # type: ignore[assignment]
    name = topic_name(prefix)
    with connect(broker) as conn:
        create_topic(conn, name, configs=configs)
        for data in batches:
            assert produce(conn, name, data).error_code == 0
    return name


def _batch(values: list[bytes], codec: int = codecs.NONE) -> bytes:
    return build_batch([(b"k", v, [("h", b"1")], T0 + i) for i, v in enumerate(values)],
                       compression=codec)


@pytest.mark.parametrize("codec", [codecs.NONE, codecs.GZIP, codecs.SNAPPY, codecs.LZ4])
def test_each_fetch_version_reads_the_format_of_its_era(broker: BrokerProcess,
                                                        codec: int) -> None:
    name = _topic(broker, "down", batches=[_batch([b"a", b"b", b"c"], codec),
                                           _batch([b"d", b"e"], codec)])
    for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
        part = _fetch(broker, name, version, offset=1)
        assert (part.error_code, part.high_watermark) == (0, 5), (version, part)
        got = [(m.offset, m.timestamp, m.value, m.magic)
               for m in legacy.iter_messages(bytes(part.records))]
        # an uncompressed batch starts at the fetch offset, a compressed one stays whole
        first = 1 if codec == codecs.NONE else 0
        assert got == [(i, T0 + i % 3 if i < 3 and magic else (T0 + i - 3 if magic else -1),
                        b"abcde"[i:i + 1], magic) for i in range(first, 5)], (version, got)
    v4 = _fetch(broker, name, 4, offset=1)  # v4 and later read the stored batches
    assert [b.base_offset for b in iter_batches(bytes(v4.records))] == [0, 3]


def test_a_topic_that_disables_down_conversion_refuses_old_consumers(
        broker: BrokerProcess) -> None:
    name = _topic(broker, "no-down", {"message.downconversion.enable": "false"},
                  [_batch([b"a"])])
    for version in range(4):
        part = _fetch(broker, name, version)
        assert (part.error_code, part.high_watermark, len(part.records)) == \
            (UNSUPPORTED_VERSION, -1, 0), (version, part)
    assert _fetch(broker, name, 4).error_code == 0  # newer consumers are served
    assert _fetch(broker, name, 0, offset=10**6).error_code == 1  # OFFSET_OUT_OF_RANGE first


def test_zstd_is_refused_below_fetch_v10(broker: BrokerProcess) -> None:
    topic_zstd = _topic(broker, "zstd-topic", {"compression.type": "zstd"}, [_batch([b"a"])])
    for version in (0, 3, 4, 9):
        assert _fetch(broker, topic_zstd, version).error_code == UNSUPPORTED_COMPRESSION_TYPE
    assert _fetch(broker, topic_zstd, 10).error_code == 0
    # the producer's zstd batch on a compression.type=producer topic cannot be converted
    producer_zstd = _topic(broker, "zstd-batch", batches=[_batch([b"a"], codecs.ZSTD)])
    assert _fetch(broker, producer_zstd, 3).error_code == UNSUPPORTED_COMPRESSION_TYPE
    assert _fetch(broker, producer_zstd, 9).error_code == 0  # sent as stored, as Kafka
    assert "Traceback" not in server_log(broker)


@pytest.mark.parametrize("fallback,magic", [("0.9.0.1", 0), ("0.10.0.1", 1)])
def test_librdkafka_as_an_old_client_consumes_and_produces(broker: BrokerProcess,
                                                           fallback: str, magic: int) -> None:
    """librdkafka without ApiVersions behaves as a client of that broker version: Fetch v1
    (magic 0) or v2 (magic 1), Produce v1 or v2 with legacy message sets."""
    name = _topic(broker, "old-client", batches=[_batch([b"new-%d" % i for i in range(3)])])
    old = {"bootstrap.servers": f"127.0.0.1:{broker.port}", "api.version.request": False,
           "broker.version.fallback": fallback}
    producer = confluent_kafka.Producer({**old, "compression.type": "gzip", "linger.ms": 5})
    for i in range(3):
        producer.produce(name, key=b"k", value=b"old-%d" % i)
    assert producer.flush(15) == 0
    consumer = confluent_kafka.Consumer({
        **old, "group.id": name, "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([confluent_kafka.TopicPartition(name, 0, 0)])
    seen: list[tuple[int, bytes | None, int]] = []
    deadline = time.monotonic() + 20
    try:
        while len(seen) < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            ts_type, _ = msg.timestamp()
            seen.append((msg.offset(), msg.value(), ts_type))
    finally:
        consumer.close()
    assert [(o, v) for o, v, _ in seen] == [(i, b"new-%d" % i) for i in range(3)] + [
        (3 + i, b"old-%d" % i) for i in range(3)]
    # magic 0 has no timestamps; magic 1 carries CreateTime
    expected = (confluent_kafka.TIMESTAMP_NOT_AVAILABLE if magic == 0
                else confluent_kafka.TIMESTAMP_CREATE_TIME)
    assert {t for *_, t in seen} == {expected}
