"""The broker-side checks of a ZooKeeper restore (playbooks/files/zookeeper_restore_check.py)
against a real ZooKeeper server: the cluster ids of ZooKeeper and meta.properties, a
write refused by a znode's ACL, and the partition directories no restored topic owns,
set aside where the broker does not load them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kazoo.security import make_acl, make_digest_acl

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "playbooks" / "files"))

import zookeeper_restore_check as restore_check

from moldau.cluster import zk_data
from moldau.storage.producer_state import ProducerEntry, encode_snapshot


def with_log_dir(properties: Path, tmp_path: Path) -> Path:
    logs = tmp_path / "logs"
    logs.mkdir()
    properties.write_text(properties.read_text() + f"log.dirs={logs}\n")
    return logs


def run(capsys, *argv: str) -> tuple[int, object]:
    rc = restore_check.main(list(argv))
    return rc, json.loads(capsys.readouterr().out)


def test_cluster_ids_of_zookeeper_and_meta_properties(cluster, tmp_path, capsys) -> None:
    zk, properties = cluster
    logs = with_log_dir(properties, tmp_path)
    assert run(capsys, "cluster-id", str(properties)) == (0, "")
    zk.create(zk_data.CLUSTER_ID_PATH, zk_data.encode_cluster_id("abcDEF"), makepath=True)
    assert run(capsys, "cluster-id", str(properties)) == (0, "abcDEF")
    assert run(capsys, "meta", str(properties)) == (0, {str(logs): None})
    (logs / "meta.properties").write_text("version=0\nbroker.id=1\ncluster.id=abcDEF\n")
    assert run(capsys, "meta", str(properties)) == (0, {str(logs): "abcDEF"})


def test_strays_are_reported_and_set_aside(cluster, tmp_path, capsys) -> None:
    zk, properties = cluster
    logs = with_log_dir(properties, tmp_path)
    zk.set(zk_data.topic_path("t"),
           json.dumps({"partitions": {"0": [1, 2]}, "topic_id": "idOfTheRestoredT"}).encode())
    for name in ("t-0", "t-1", "later-0", "renamed-0", "restore-strays-x"):
        (logs / name).mkdir()
    (logs / "t-0" / "partition.metadata").write_text("version: 0\ntopic_id: idOfTheRestoredT")
    zk.create(zk_data.topic_path("renamed"),
              json.dumps({"partitions": {"0": [1]}, "topic_id": "idOfTheOldRenamed"}).encode())
    (logs / "renamed-0" / "partition.metadata").write_text(
        "version: 0\ntopic_id: idOfTheNewRenamed")
    rc, report = run(capsys, "check", str(properties))
    assert rc == 0
    assert isinstance(report, dict)
    assert report["denied"] == []
    assert report["topics"] == ["renamed", "t"]
    assert report["strays"] == [
        {"dir": str(logs / "later-0"), "why": "topic not in ZooKeeper"},
        {"dir": str(logs / "renamed-0"),
         "why": "topic id idOfTheNewRenamed on disk, idOfTheOldRenamed in ZooKeeper"},
        {"dir": str(logs / "t-1"), "why": "partition not in ZooKeeper"},
    ]
    assert run(capsys, "set-aside", str(properties), "--into", "strays-now") == (
        0, [str(logs / "later-0"), str(logs / "renamed-0"), str(logs / "t-1")])
    assert sorted(p.name for p in logs.iterdir()) == ["restore-strays-x", "strays-now", "t-0"]
    set_aside = sorted(p.name for p in (logs / "strays-now").iterdir())
    assert set_aside == ["later-0", "renamed-0", "t-1"]
    assert zk.exists("/" + restore_check.PROBE_NAME) is None  # the probes left nothing


def test_a_write_the_acl_refuses_is_reported(cluster, capsys) -> None:
    zk, properties = cluster
    zk.create(zk_data.CONTROLLER_EPOCH_PATH, b"7", makepath=True)
    others = [make_digest_acl("someone-else", "secret", all=True),
              make_acl("world", "anyone", read=True)]
    zk.set_acls(zk_data.CONTROLLER_EPOCH_PATH, others)
    rc, report = run(capsys, "check", str(properties))
    assert rc == 2
    assert isinstance(report, dict)
    assert report["denied"] == ["set /controller_epoch"]
    assert zk.get(zk_data.CONTROLLER_EPOCH_PATH)[1].version == 0  # nothing written


def test_set_aside_needs_a_name_the_broker_never_loads(cluster, capsys) -> None:
    _, properties = cluster
    for bad in ("strays-1", "", "a/b"):
        try:
            restore_check.main(["set-aside", str(properties), "--into", bad])
        except SystemExit as exc:
            assert exc.code == 2
        else:
            raise AssertionError(f"--into {bad!r} was accepted")


def test_producer_ids_skip_past_those_the_brokers_hold(cluster, tmp_path, capsys) -> None:
    zk, properties = cluster
    logs = with_log_dir(properties, tmp_path)
    assert run(capsys, "max-producer-id", str(properties)) == (0, -1)
    for name, ids in (("t-0", [7, 1000001000]), ("t-1", [5])):
        (logs / name).mkdir()
        # an older snapshot's ids are the newest one's too, or expired
        (logs / name / "00000000000000000003.snapshot").write_bytes(
            encode_snapshot([ProducerEntry(9_999_999_999)]))
        (logs / name / "00000000000000000068.snapshot").write_bytes(
            encode_snapshot([ProducerEntry(i) for i in ids]))
    assert run(capsys, "max-producer-id", str(properties)) == (0, 1000001000)

    path = zk_data.PRODUCER_ID_BLOCK_PATH
    assert run(capsys, "skip-producer-ids", str(properties), "--by", "1000000") == (
        0, {"before": None, "after": 999999})  # never written: ids from 0 were handed out
    zk.set(path, zk_data.ProducerIdBlock(2, 3000).encode())
    assert run(capsys, "skip-producer-ids", str(properties), "--by", "1000000") == (
        0, {"before": 3999, "after": 1003999})
    # the same backup restored again: the ids handed out since are on the brokers' disks
    zk.set(path, zk_data.ProducerIdBlock(2, 3000).encode())
    assert run(capsys, "skip-producer-ids", str(properties), "--above", "1000001000",
               "--by", "1000000") == (0, {"before": 3999, "after": 1001001000})
    block = zk_data.ProducerIdBlock.decode(zk.get(path)[0])
    assert (block.broker_id, block.first, block.last) == (2, 1001000001, 1001001000)
