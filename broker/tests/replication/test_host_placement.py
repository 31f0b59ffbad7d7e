"""Several brokers on one server (`moldau.broker.host`, a Moldau extension), on real
brokers: brokers 1 and 2 say they share server-a, broker 3 sets nothing and is a host of
its own. Every placement path (CreateTopics, auto-creation, CreatePartitions,
kafka-reassign-partitions --generate) keeps two replicas of a partition off server-a; an
explicit assignment that puts them there is accepted with a warning naming partition and
host; the registration and DescribeConfigs carry the host."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

from moldau.cluster import zk_data

from .conftest import Cluster, make_cluster, running

HOSTS = {1: "server-a", 2: "server-a"}
REASSIGN = Path(sys.executable).parent / "kafka-reassign-partitions.sh"


@pytest.fixture(scope="module")
def hosted(tmp_path_factory: pytest.TempPathFactory, zk_ensemble: Any) -> Iterator[Cluster]:
    with running(make_cluster(tmp_path_factory, zk_ensemble, hosts=HOSTS, **{
            "default.replication.factor": "2", "num.partitions": "4"})) as cluster:
        yield cluster


def create(cluster: Cluster, topic: NewTopic) -> None:
    cluster.on_controller(lambda admin: admin.create_topics([topic])[topic.topic].result(30))


def replicas(cluster: Cluster, topic: str, count: int) -> dict[int, list[int]]:
    """The assignment as the metadata has it, once all `count` partitions are there."""
    cluster.wait_for(lambda: len(cluster.partitions(topic)) == count, 30,
                     f"{topic}: {count} partitions in the metadata")
    return {p: list(m.replicas) for p, m in cluster.partitions(topic).items()}


def broker_logs(cluster: Cluster) -> str:
    """The brokers' console and controller logs (Kafka's log4j layout: the controller's
    lines go to controller.log only)."""
    return "".join(Path(b.log_dir, name).read_text(errors="replace")
                   for b in cluster.brokers.values()
                   for name in ("stdout.log", "controller.log")
                   if Path(b.log_dir, name).exists())


def off_server_a(assignment: dict[int, list[int]]) -> bool:
    """Every partition has at most one replica on server-a (brokers 1 and 2)."""
    return all(len({1, 2} & set(r)) <= 1 for r in assignment.values())


def test_registration_and_describe_configs_carry_the_host(hosted: Cluster) -> None:
    with hosted.zookeeper() as zk:
        found = zk.get(zk_data.broker_path(1))
        assert found is not None
        assert json.loads(found[0])["moldau_host"] == "server-a"
        found = zk.get(zk_data.broker_path(3))
        assert found is not None
        assert "moldau_host" not in json.loads(found[0])

    def described(broker: int) -> dict[str, str | None]:
        resource = ConfigResource(ConfigResource.Type.BROKER, str(broker))
        admin = hosted.admin()  # held until the answer: its destruction fails the future
        result = admin.describe_configs([resource])[resource].result(30)
        return {name: entry.value for name, entry in result.items()}

    assert described(1)["moldau.broker.host"] == "server-a"
    # unset: not listed, as a Kafka broker lists a key it does not know only when set
    assert "moldau.broker.host" not in described(3)


def test_create_topics_keeps_replicas_off_one_server(hosted: Cluster) -> None:
    name = f"hosts-{uuid.uuid4().hex[:8]}"
    create(hosted, NewTopic(name, 6, 2))
    placed = replicas(hosted, name, 6)
    assert off_server_a(placed), placed
    assert all(3 in r for r in placed.values()), placed  # the other host has one each
    assert sorted(Counter(r[0] for r in placed.values()).values()) == [2, 2, 2]
    # A factor above the hosts is placed as Kafka would (it counts brokers), with a warning.
    wide = f"wide-{uuid.uuid4().hex[:8]}"
    create(hosted, NewTopic(wide, 2, 3))
    assert all(sorted(r) == [1, 2, 3] for r in replicas(hosted, wide, 2).values())
    hosted.wait_for(lambda: f"Replication factor 3 of {wide} is larger than the 2 hosts"
                    in broker_logs(hosted), 10, "the warning in a broker's log")


def test_auto_creation_and_create_partitions(hosted: Cluster) -> None:
    auto = f"auto-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": hosted.bootstrap})
    producer.produce(auto, b"first")
    assert producer.flush(30) == 0
    placed = replicas(hosted, auto, 4)  # num.partitions, default.replication.factor 2
    assert off_server_a(placed), placed

    grown = f"grown-{uuid.uuid4().hex[:8]}"
    create(hosted, NewTopic(grown, 2, 2))
    hosted.on_controller(lambda admin: admin.create_partitions(
        [NewPartitions(grown, 7)])[grown].result(30))
    placed = replicas(hosted, grown, 7)
    assert off_server_a(placed), placed


def test_explicit_assignments_are_accepted_with_a_warning(hosted: Cluster,
                                                          tmp_path: Path) -> None:
    name = f"pinned-{uuid.uuid4().hex[:8]}"
    create(hosted, NewTopic(name, 2, replica_assignment=[[3, 1], [1, 2]]))
    assert replicas(hosted, name, 2) == {0: [3, 1], 1: [1, 2]}
    hosted.wait_for(lambda: f"replicas 1,2 of {name}-1 on one host, server-a"
                    in broker_logs(hosted), 10, "the warning in a broker's log")

    # kafka-reassign-partitions: --generate spreads over the hosts, learned from each
    # broker's DescribeConfigs; --execute runs a plan that does not, with a warning.
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": name}]}))
    done = subprocess.run(
        [str(REASSIGN), "--bootstrap-server", hosted.bootstrap, "--generate",
         "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,3"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done
    proposed = json.loads(done.stdout.rstrip("\n").rsplit("\n", 1)[1])["partitions"]
    assert off_server_a({p["partition"]: p["replicas"] for p in proposed}), proposed

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": name, "partition": 0, "replicas": [2, 1]}]}))
    done = subprocess.run(
        [str(REASSIGN), "--bootstrap-server", hosted.bootstrap, "--execute",
         "--reassignment-json-file", str(plan)],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done
    assert done.stderr == (f"Warning: replicas 2,1 of {name}-0 are on one host, server-a "
                           "(moldau.broker.host)\n")
    hosted.wait_for(lambda: replicas(hosted, name, 2)[0] == [2, 1], 30,
                    "the reassignment to finish")
    assert f"replicas 2,1 of {name}-0 on one host, server-a" in broker_logs(hosted)
