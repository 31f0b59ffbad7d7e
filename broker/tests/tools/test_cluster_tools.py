"""kafka-cluster, kafka-broker-api-versions, kafka-get-offsets, kafka-delete-records and
kafka-log-dirs against the real cluster; facts checked with ZooKeeper (kazoo) and
confluent-kafka."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .toolrun import ToolCluster, assert_golden, run, short_wait_config


def _produce(cluster: ToolCluster, topic: str, per_partition: list[int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for partition, count in enumerate(per_partition):
        for i in range(count):
            producer.produce(topic, value=b"r%d" % i, partition=partition)
    assert producer.flush(30) == 0


def test_cluster_id_is_the_one_in_zookeeper(cluster: ToolCluster) -> None:
    from kazoo.client import KazooClient

    out = cluster.ok("kafka-cluster.sh", "cluster-id")
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start(timeout=30)
    try:
        cluster_id = json.loads(zk.get("/cluster/id")[0])["id"]
    finally:
        zk.stop()
        zk.close()
    assert out == f"Cluster ID: {cluster_id}\n"
    wrong = cluster.tool("kafka-cluster.sh", "unregister", "--id", "1")
    assert wrong.code == 1


def test_broker_api_versions(cluster: ToolCluster) -> None:
    out = cluster.ok("kafka-broker-api-versions.sh")
    blocks = re.findall(r"^127\.0\.0\.1:(\d+) \(id: (\d) rack: null\) -> \(\n(.*?)\n\)$", out,
                        re.S | re.M)
    assert sorted(int(b[1]) for b in blocks) == [1, 2, 3]
    for port, broker_id, body in blocks:
        assert cluster.brokers[int(broker_id)].port == int(port)
        lines = body.split(",\n")
        assert all(line.startswith("\t") for line in lines)
        assert "\tProduce(0): 0 to 11 [usable: 11]" in lines
        assert "\tMetadata(3): 0 to 12 [usable: 12]" in lines
        assert any(line.endswith(": UNSUPPORTED") for line in lines)  # e.g. DescribeAcls


def test_get_offsets_and_delete_records(cluster: ToolCluster, tmp_path: Path) -> None:
    cluster.ok("kafka-topics.sh", "--create", "--topic", "trimmed", "--partitions", "2")
    _produce(cluster, "trimmed", [5, 3])
    assert cluster.ok("kafka-get-offsets.sh", "--topic", "trimmed") == (
        "trimmed:0:5\ntrimmed:1:3\n")
    assert cluster.ok("kafka-get-offsets.sh", "--topic", "trimmed", "--time", "-2") == (
        "trimmed:0:0\ntrimmed:1:0\n")
    assert cluster.ok("kafka-get-offsets.sh", "--topic-partitions", "trimmed:1",
                      "--time", "latest") == "trimmed:1:3\n"
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "trimmed", "partition": 0,
                                                "offset": 2}], "version": 1}))
    out = cluster.ok("kafka-delete-records.sh", "--offset-json-file", str(plan))
    assert_golden("delete-records.txt", out)
    assert cluster.ok("kafka-get-offsets.sh", "--topic", "trimmed", "--time", "earliest") == (
        "trimmed:0:2\ntrimmed:1:0\n")
    beyond = tmp_path / "beyond.json"
    beyond.write_text('{"partitions":[{"topic":"trimmed","partition":1,"offset":99}],'
                      '"version":1}')
    failed = cluster.tool("kafka-delete-records.sh", "--offset-json-file", str(beyond))
    assert failed.code == 1
    assert failed.out.splitlines()[-1] == (
        "partition: trimmed-1\terror: org.apache.kafka.common.errors."
        "OffsetOutOfRangeException: The requested offset is not within the range of "
        "offsets maintained by the server.")
    malformed = tmp_path / "malformed.json"
    malformed.write_text('{"partitions": [{"topic": "trimmed", ')
    bad = cluster.tool("kafka-delete-records.sh", "--offset-json-file", str(malformed))
    # Kafka 3.9.1's words: the message, then the exception (no frames) and an empty line
    assert (bad.code, bad.out, bad.err) == (
        1, "", "The input string is not a valid JSON\norg.apache.kafka.server.common."
               "AdminOperationException: The input string is not a valid JSON\n\n")
    none = cluster.tool("kafka-get-offsets.sh", "--topic", "no-such-topic")
    assert (none.code, none.err) == (
        1, "Error occurred: Could not match any topic-partitions with the specified filters\n")
    # a time without an offset (nothing is tiered) leaves the partition out, as Kafka's
    assert cluster.ok("kafka-get-offsets.sh", "--topic", "trimmed", "--time",
                      "latest-tiered") == ""
    assert cluster.ok("kafka-get-offsets.sh", "--topic", "trimmed", "--time", "-4") == (
        "trimmed:0:2\ntrimmed:1:0\n")
    malformed_time = cluster.tool("kafka-get-offsets.sh", "--topic", "trimmed", "--time", "soon")
    assert (malformed_time.code, malformed_time.err) == (
        1, "Error occurred: Malformed time argument soon. Please use -1 or latest / -2 or "
           "earliest / -3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a "
           "specified long format timestamp\n")
    both = cluster.tool("kafka-get-offsets.sh", "--topic", "trimmed", "--topic-partitions", "x")
    assert (both.code, both.err) == (
        1, "Error occurred: --topic-partitions cannot be used with --topic or --partitions\n")
    assert cluster.ok("kafka-get-offsets.sh", "--topic", "trimmed", "--time", "-2") == (
        "trimmed:0:2\ntrimmed:1:0\n")  # the failed runs changed nothing
    unreachable = run("kafka-get-offsets.sh", "--bootstrap-server", "127.0.0.1:1",
                      "--command-config", short_wait_config())
    assert (unreachable.code, unreachable.err) == (
        1, "Error occurred: Could not connect to any bootstrap server: 127.0.0.1:1 "
           "(Connection refused)\n")


def test_log_dirs(cluster: ToolCluster) -> None:
    cluster.ok("kafka-topics.sh", "--create", "--topic", "sized", "--replica-assignment",
               "1:2")
    cluster.wait_full_isr("sized", 2)
    _produce(cluster, "sized", [4])
    out = cluster.ok("kafka-log-dirs.sh", "--describe", "--topic-list", "sized")
    first, second, document = out.splitlines()
    assert first == "Querying brokers for log directories information"
    assert second == "Received log directory information from brokers 1,2,3"
    data = json.loads(document)
    assert list(data) == ["brokers", "version"]  # Kafka 3.9's key order
    assert data["version"] == 1 and [b["broker"] for b in data["brokers"]] == [1, 2, 3]
    for broker in data["brokers"]:
        (log_dir,) = broker["logDirs"]
        assert list(log_dir) == ["partitions", "error", "logDir"]
        assert log_dir["logDir"] == cluster.brokers[broker["broker"]].data_dir
        assert log_dir["error"] is None
        names = [p["partition"] for p in log_dir["partitions"]]
        assert names == ([] if broker["broker"] == 3 else ["sized-0"])
    leader = data["brokers"][0]["logDirs"][0]["partitions"][0]
    assert list(leader) == ["partition", "size", "offsetLag", "isFuture"]
    assert leader["size"] > 0 and leader["isFuture"] is False
    no_action = cluster.tool("kafka-log-dirs.sh", "--topic-list", "sized")
    assert no_action.code == 1
    assert no_action.err.startswith('Missing required argument "[describe]"\nOption')
    wrong = cluster.tool("kafka-log-dirs.sh", "--describe", "--broker-list", "1,7")
    assert (wrong.code, wrong.err) == (
        1, "ERROR: The given brokers do not exist from --broker-list: 7. Current existent "
           "brokers: 1,2,3\n")
