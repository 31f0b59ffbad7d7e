"""kafka-dump-log and the seeds' kafka-run-class.sh kafka.tools.DumpLogSegments form,
on a real broker's segment files, compared with Kafka 3.9's text."""

from __future__ import annotations

import os
import struct

from .toolrun import ToolCluster, assert_golden, run, wait_for


def test_dump_segment_and_indexes(cluster: ToolCluster) -> None:
    from confluent_kafka import Producer

    cluster.ok("kafka-topics.sh", "--create", "--topic", "dumped", "--replica-assignment", "1")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
    producer.produce("dumped", key=b"k1", value=b"v1", partition=0, timestamp=1700000000000,
                     headers=[("h", b"x")])
    assert producer.flush(30) == 0
    producer.produce("dumped", value=b"second", partition=0, timestamp=1700000000001)
    assert producer.flush(30) == 0
    segment = os.path.join(cluster.brokers[1].data_dir, "dumped-0", "00000000000000000000")
    out = run("kafka-run-class.sh", "kafka.tools.DumpLogSegments", "--files",
              segment + ".log", "--print-data-log")
    assert out.code == 0, out.err
    assert_golden("dump-log-print-data.txt", out.out.replace(segment, "<SEGMENT>"))
    shallow = run("kafka-dump-log.sh", "--files", segment + ".log")
    assert [line for line in out.out.splitlines() if not line.startswith("| ")] == \
        shallow.out.splitlines()
    index = run("kafka-dump-log.sh", "--files", f"{segment}.index,{segment}.timeindex")
    assert index.out.splitlines()[0] == f"Dumping {segment}.index"
    assert f"Dumping {segment}.timeindex" in index.out.splitlines()
    missing = run("kafka-dump-log.sh", "--files", "/nonexistent/00000000000000000000.log")
    assert (missing.code, missing.err) == (
        1, "/nonexistent/00000000000000000000.log (No such file or directory)\n")
    unknown = run("kafka-run-class.sh", "kafka.tools.NoSuchTool")
    assert (unknown.code, unknown.err) == (
        1, "Error: Could not find or load main class kafka.tools.NoSuchTool\n")


def _segments_of(cluster: ToolCluster, partition_dir: str) -> list[str]:
    """The first segment of a partition on every broker that holds it."""
    found = []
    for broker in cluster.brokers.values():
        path = os.path.join(broker.data_dir, partition_dir, "00000000000000000000.log")
        if os.path.exists(path) and os.path.getsize(path):
            found.append(path)
    return found


def test_offsets_decoder_prints_commits_and_groups_as_kafka_does(cluster: ToolCluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    from moldau.coordinator.group.records import partition_for

    cluster.ok("kafka-topics.sh", "--create", "--topic", "decoded", "--partitions", "1")
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(3):
        producer.produce("decoded", value=b"v%d" % i)
    assert producer.flush(30) == 0
    group = "dump-decoder-group"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["decoded"])
    got = 0
    while got < 3:
        got += len([m for m in consumer.consume(10, 10.0) if m.error() is None])
    consumer.commit(offsets=[TopicPartition("decoded", 0, 3)], asynchronous=False)
    consumer.close()
    partition_dir = f"__consumer_offsets-{partition_for(group, 50)}"
    segment = wait_for(lambda: _segments_of(cluster, partition_dir), what="the offsets log")[0]

    def dumped() -> list[str]:
        out = run("kafka-dump-log.sh", "--files", segment, "--offsets-decoder")
        assert out.code == 0, out.err
        return [line for line in out.out.splitlines() if f'"group":"{group}"' in line]

    lines = wait_for(lambda: (lambda ls: ls if any('"topic":"decoded"' in x for x in ls)
                              and any('"type":"2"' in x for x in ls) else None)(dumped()),
                     what="the commit and the group in the offsets log")
    commit = next(x for x in lines if '"type":"1"' in x)
    assert (f' key: {{"type":"1","data":{{"group":"{group}","topic":"decoded",'
            f'"partition":0}}}} payload: {{"version":"3","data":{{"offset":3,') in commit
    assert '"metadata":"","commitTimestamp":' in commit
    joined = next(x for x in lines if '"type":"2"' in x and '"protocolType"' in x)
    assert f'key: {{"type":"2","data":{{"group":"{group}"}}}}' in joined
    assert '"protocolType":"consumer"' in joined
    # the members' consumer-protocol bytes are decoded, not shown as base64
    assert '"subscription":{"topics":["decoded"]' in joined
    assert '"assignment":{"assignedPartitions":[{"topic":"decoded","partitions":[0]}]' \
        in joined


def test_index_verification_and_sanity_check(cluster: ToolCluster, tmp_path) -> None:
    from confluent_kafka import Producer

    cluster.ok("kafka-topics.sh", "--create", "--topic", "indexed", "--replica-assignment", "1")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 0})
    for i in range(12):  # 1 KiB batches: an index entry every 4 KiB
        producer.produce("indexed", value=b"%04d" % i * 256, partition=0)
        assert producer.flush(30) == 0
    source = os.path.join(cluster.brokers[1].data_dir, "indexed-0", "00000000000000000000")
    for suffix in (".log", ".index", ".timeindex"):
        with open(source + suffix, "rb") as src, open(tmp_path / f"00000000000000000000{suffix}",
                                                      "wb") as dst:
            dst.write(src.read())
    copy = str(tmp_path / "00000000000000000000")
    index = run("kafka-dump-log.sh", "--files", copy + ".index")
    entries = [line for line in index.out.splitlines() if line.startswith("offset: ")]
    assert entries and index.err == ""
    verified = run("kafka-dump-log.sh", "--files", f"{copy}.index,{copy}.timeindex",
                   "--verify-index-only")
    assert (verified.code, verified.out, verified.err) == (
        0, f"Dumping {copy}.index\nDumping {copy}.timeindex\n", "")
    sane = run("kafka-dump-log.sh", "--files", copy + ".index", "--index-sanity-check")
    assert sane.out == f"Dumping {copy}.index\n{copy}.index passed sanity check.\n"
    # An entry that points at the wrong batch is reported, as Kafka reports it.
    with open(copy + ".index", "r+b") as fh:
        relative, position = struct.unpack(">ii", fh.read(8))
        fh.seek(0)
        fh.write(struct.pack(">ii", relative + 1, position))
    bad = run("kafka-dump-log.sh", "--files", copy + ".index", "--verify-index-only")
    assert bad.code == 0 and bad.out == f"Dumping {copy}.index\n"
    assert bad.err == (f"Mismatches in :{copy}.index\n"
                       f"  Index offset: {relative + 1}, log offset: {relative}\n")
    # A size that is no multiple of the entry size fails the sanity check.
    with open(copy + ".index", "ab") as fh:
        fh.write(b"\x00\x01\x02")
    broken = run("kafka-dump-log.sh", "--files", copy + ".index", "--index-sanity-check")
    size = os.path.getsize(copy + ".index")
    assert (broken.code, broken.err) == (1, f"Index file {copy}.index is corrupt, found {size} "
                                         "bytes which is neither positive nor a multiple of "
                                         "8.\n")
