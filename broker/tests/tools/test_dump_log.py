"""kafka-dump-log and the seeds' kafka-run-class.sh kafka.tools.DumpLogSegments form,
on a real broker's segment files, compared with Kafka 3.9's text."""

from __future__ import annotations

import os

from .toolrun import ToolCluster, assert_golden, run


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
