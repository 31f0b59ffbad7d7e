"""AlterReplicaLogDirs (34) on a real broker with two log dirs: a replica moves between
them while an idempotent producer keeps writing (nothing lost, the same offsets, the
producer's sequence state carried over); DescribeLogDirs lists the future replica while
it is copied; a restart in the middle resumes the copy; and the errors Kafka answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from moldau.devcluster.brokers import BrokerProcess
from moldau.protocol.generated.alter_replica_log_dirs_request import (
    AlterReplicaLogDirsRequest as A,
)
from moldau.protocol.generated.describe_log_dirs_request import DescribeLogDirsRequest
from moldau.protocol.generated.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest as I,
)

from .raw import connect, create_topic, produce, records, topic_name, wait_leaders, wait_until

ALTER_REPLICA_LOG_DIRS, DESCRIBE_LOG_DIRS, INCREMENTAL_ALTER_CONFIGS = 34, 35, 44
NONE, REPLICA_NOT_AVAILABLE, LOG_DIR_NOT_FOUND = 0, 9, 57
IO_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("jbod")
    dirs = f"{directory}/dir-a,{directory}/dir-b"
    process = BrokerProcess(str(directory), 1,
                            zk_ensemble.connect_string + f"/moldau-{uuid.uuid4().hex[:12]}",
                            properties={"log.dirs": dirs, "num.partitions": "1"})
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"broker exited with {code} on SIGTERM\n{process.tail()}"


def log_dirs(broker: BrokerProcess) -> list[str]:
    return broker.properties["log.dirs"].split(",")


def alter(broker: BrokerProcess, moves: dict[tuple[str, int], str], version: int = 2
          ) -> dict[tuple[str, int], int]:
    by_dir: dict[str, dict[str, list[int]]] = {}
    for (topic, partition), path in moves.items():
        by_dir.setdefault(path, {}).setdefault(topic, []).append(partition)
    request = A(dirs=[A.AlterReplicaLogDir(path=path, topics=[
        A.AlterReplicaLogDirTopic(name=t, partitions=ps) for t, ps in topics.items()])
        for path, topics in by_dir.items()])
    with connect(broker) as conn:
        answer = conn.request(ALTER_REPLICA_LOG_DIRS, version, request)
    return {(t.topic_name, p.partition_index): p.error_code
            for t in answer.results for p in t.partitions}


def replicas(broker: BrokerProcess, topic: str) -> dict[tuple[str, bool], Any]:
    """DescribeLogDirs: (log dir, is future) -> the partition 0 entry of topic."""
    with connect(broker) as conn:
        answer = conn.request(DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=[
            DescribeLogDirsRequest.DescribableLogDirTopic(topic=topic, partitions=[0])]))
    return {(r.log_dir, p.is_future_key): p for r in answer.results for t in r.topics
            if t.name == topic for p in t.partitions}


def home_of(broker: BrokerProcess, topic: str) -> str:
    (found,) = [d for d, future in replicas(broker, topic) if not future]
    return found


def other_dir(broker: BrokerProcess, path: str) -> str:
    (other,) = [d for d in log_dirs(broker) if d != path]
    return other


def set_io_rate(broker: BrokerProcess, rate: int | None) -> None:
    config = (I.AlterableConfig(name=IO_RATE, config_operation=0, value=str(rate))
              if rate is not None else
              I.AlterableConfig(name=IO_RATE, config_operation=1, value=None))
    with connect(broker) as conn:
        (result,) = conn.request(INCREMENTAL_ALTER_CONFIGS, 1, I(resources=[
            I.AlterConfigsResource(resource_type=4, resource_name="1", configs=[config])],
            validate_only=False)).responses
    assert result.error_code == 0, result


def consume_all(broker: BrokerProcess, topic: str, count: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []
    try:
        while len(got) < count:
            batch = consumer.consume(1000, timeout=10)
            assert batch, f"only {len(got)} of {count} records"
            for message in batch:
                assert message.error() is None, message.error()
                got.append((message.offset(), message.value()))
    finally:
        consumer.close()
    return got


def test_a_replica_moves_while_an_idempotent_producer_writes(broker: BrokerProcess) -> None:
    topic = topic_name("move")
    with connect(broker) as conn:
        create_topic(conn, topic)
    source = home_of(broker, topic)
    target = other_dir(broker, source)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5})
    failures: list[Any] = []
    sent = 0
    stop = threading.Event()

    def write() -> None:
        nonlocal sent
        while not stop.is_set() or sent < 3000:
            producer.produce(topic, str(sent).encode().rjust(200, b"."), partition=0,
                             on_delivery=lambda err, _msg: err and failures.append(err))
            sent += 1
            producer.poll(0)
            time.sleep(0.0005)
    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_until(lambda: sent > 1500, 30)
        assert alter(broker, {(topic, 0): target}) == {(topic, 0): NONE}
        moved = wait_until(lambda: list(replicas(broker, topic)) == [(target, False)], 30)
        assert moved, replicas(broker, topic)
    finally:
        stop.set()
        writer.join()
    assert producer.flush(30) == 0
    assert failures == []
    got = consume_all(broker, topic, sent)
    # every record once, in order, at the offsets it was given
    assert got == [(i, str(i).encode().rjust(200, b".")) for i in range(sent)]
    assert not os.path.exists(os.path.join(source, f"{topic}-0"))
    assert os.path.exists(os.path.join(target, f"{topic}-0", "leader-epoch-checkpoint"))
    assert Path(target, f"{topic}-0", "leader-epoch-checkpoint").read_text().split("\n")[1] == "1"


def test_the_future_replica_is_listed_and_a_restart_resumes_its_copy(
        broker: BrokerProcess) -> None:
    topic = topic_name("resume")
    with connect(broker) as conn:
        create_topic(conn, topic)
        for _ in range(40):
            assert produce(conn, topic, records(100, 100)).error_code == 0
    source = home_of(broker, topic)
    target = other_dir(broker, source)
    set_io_rate(broker, 50_000)  # about 400 KB to copy: several seconds
    try:
        assert alter(broker, {(topic, 0): target}) == {(topic, 0): NONE}
        listed = replicas(broker, topic)
        assert set(listed) == {(source, False), (target, True)}
        assert listed[(target, True)].offset_lag > 0
        futures = [n for n in os.listdir(target) if n.startswith(f"{topic}-0.")]
        assert len(futures) == 1 and futures[0].endswith("-future")
        assert len(futures[0]) == len(f"{topic}-0.") + 32 + len("-future")
        # a restart in the middle: the future dir is loaded and its copy goes on
        assert broker.stop() == 0
        broker.start()
        assert set(replicas(broker, topic)) == {(source, False), (target, True)}
        with connect(broker) as conn:  # writes go on meanwhile
            wait_leaders(conn, topic)
            assert produce(conn, topic, records(100, 100)).error_code == 0
    finally:
        set_io_rate(broker, None)
    assert wait_until(lambda: list(replicas(broker, topic)) == [(target, False)], 30)
    got = consume_all(broker, topic, 4100)
    assert [offset for offset, _ in got] == list(range(4100))
    assert not [n for n in os.listdir(target) if n.endswith("-future")]
    assert not os.path.exists(os.path.join(source, f"{topic}-0"))


def test_errors_and_a_partition_created_later(broker: BrokerProcess) -> None:
    topic = topic_name("errors")
    with connect(broker) as conn:
        create_topic(conn, topic)
    home = home_of(broker, topic)
    later = topic_name("later")
    target = other_dir(broker, home)
    assert alter(broker, {(topic, 0): "/nowhere", (topic, 1): "relative/dir"}) == {
        (topic, 0): LOG_DIR_NOT_FOUND, (topic, 1): LOG_DIR_NOT_FOUND}
    # already there: nothing to do
    assert alter(broker, {(topic, 0): home}, version=0) == {(topic, 0): NONE}
    assert list(replicas(broker, topic)) == [(home, False)]
    # not hosted yet: REPLICA_NOT_AVAILABLE, and the dir is remembered for its creation
    for path in log_dirs(broker):
        assert alter(broker, {(later, 0): path}) == {(later, 0): REPLICA_NOT_AVAILABLE}
    with connect(broker) as conn:
        create_topic(conn, later)
    assert home_of(broker, later) == log_dirs(broker)[-1]
    # a move abandoned by a move back: the future log goes
    set_io_rate(broker, 1)  # one batch a pass, then throttled
    try:
        with connect(broker) as conn:
            for _ in range(5):
                assert produce(conn, topic, records(100, 100)).error_code == 0
        assert alter(broker, {(topic, 0): target}) == {(topic, 0): NONE}
        assert (target, True) in replicas(broker, topic)
        assert alter(broker, {(topic, 0): home}) == {(topic, 0): NONE}
        assert list(replicas(broker, topic)) == [(home, False)]
        assert wait_until(lambda: not [n for n in os.listdir(target)
                                       if n.startswith(f"{topic}-0.")], 10)
    finally:
        set_io_rate(broker, None)


def test_reassign_partitions_moves_log_dirs(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = topic_name("tool")
    with connect(broker) as conn:
        create_topic(conn, topic)
        for _ in range(5):
            assert produce(conn, topic, records(100, 100)).error_code == 0
    source = home_of(broker, topic)
    target = other_dir(broker, source)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [1], "log_dirs": [target]}]}))
    tool = ("kafka-reassign-partitions.sh", "--bootstrap-server", broker.bootstrap,
            "--reassignment-json-file", str(plan))
    set_io_rate(broker, 1)  # one batch a pass: --verify sees the move in progress
    try:
        out = run_tool(*tool, "--execute")
        assert out.endswith(f"Successfully started partition reassignment for {topic}-0\n"
                            f"Successfully started moving log directory to {target} for "
                            f"replica {topic}-0 with broker 1 \n"), out
        assert run_tool(*tool, "--verify") == (
            f"Status of partition reassignment:\nReassignment of partition {topic}-0 is "
            f"completed.\nReassignment of replica {topic}-0-1 is still in progress.\n")
    finally:
        set_io_rate(broker, None)
    assert wait_until(lambda: list(replicas(broker, topic)) == [(target, False)], 30)
    done = run_tool(*tool, "--verify")
    assert f"Reassignment of replica {topic}-0-1 completed successfully.\n" in done, done


def run_tool(*args: str) -> str:
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), args[0]), *args[1:]],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout
