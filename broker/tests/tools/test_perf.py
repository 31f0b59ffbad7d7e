"""kafka-producer-perf-test and kafka-consumer-perf-test against the real cluster: Kafka's
output lines (the numbers vary, the format does not) and the records really written."""

from __future__ import annotations

import re

from .toolrun import ToolCluster, run

FINAL = re.compile(r"(\d+) records sent, \d+\.\d{6} records/sec \(\d+\.\d\d MB/sec\), "
                   r"\d+\.\d\d ms avg latency, \d+\.\d\d ms max latency, \d+ ms 50th, "
                   r"\d+ ms 95th, \d+ ms 99th, \d+ ms 99\.9th\.")
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
ROW = re.compile(rf"{STAMP}, {STAMP}, (\d+\.\d{{4}}), \d+\.\d{{4}}, (\d+), \d+\.\d{{4}}, "
                 r"\d+, \d+, \d+\.\d{4}, \d+\.\d{4}")


def test_producer_then_consumer_perf(cluster: ToolCluster) -> None:
    cluster.ok("kafka-topics.sh", "--create", "--topic", "perf", "--partitions", "2")
    produced = run("kafka-producer-perf-test.sh", "--topic", "perf", "--num-records", "3000",
                   "--record-size", "100", "--throughput", "2000", "--producer-props",
                   f"bootstrap.servers={cluster.bootstrap}", "acks=all")
    assert produced.code == 0, produced.err
    last = produced.out.splitlines()[-1]
    match = FINAL.fullmatch(last)
    assert match and match.group(1) == "3000", produced.out
    ends = [int(line.rsplit(":", 1)[1]) for line in
            cluster.ok("kafka-get-offsets.sh", "--topic", "perf").splitlines()]
    assert sum(ends) == 3000
    consumed = cluster.ok("kafka-consumer-perf-test.sh", "--topic", "perf", "--messages",
                          "3000", "--timeout", "30000")
    header, row = consumed.splitlines()
    assert header == ("start.time, end.time, data.consumed.in.MB, MB.sec, "
                      "data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, "
                      "fetch.MB.sec, fetch.nMsg.sec")
    match = ROW.fullmatch(row)
    assert match and match.group(2) == "3000" and match.group(1) == "0.2861", row


def test_bad_input(cluster: ToolCluster) -> None:
    missing = run("kafka-producer-perf-test.sh", "--num-records", "10", "--record-size", "1",
                  "--throughput", "-1")
    assert missing.code == 1 and missing.err.startswith("usage: producer-performance [-h]")
    assert missing.err.endswith("producer-performance: error: argument --topic is required\n")
    neither = run("kafka-producer-perf-test.sh", "--topic", "perf", "--num-records", "10",
                  "--throughput", "-1", "--producer-props", "bootstrap.servers=127.0.0.1:1")
    # argparse4j's error line: cut where Java breaks lines, justified to 75 columns
    assert neither.code == 1 and neither.err.endswith(
        "producer-performance: error: one of  the arguments --record-size --payload-\n"
        "file --payload-monotonic is required\n")
    no_messages = cluster.tool("kafka-consumer-perf-test.sh", "--topic", "perf")
    assert no_messages.err.startswith('Missing required argument "[messages]"')
