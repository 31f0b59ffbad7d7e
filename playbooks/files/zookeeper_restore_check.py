"""What a ZooKeeper restore means for a broker host, checked with the broker's own
ZooKeeper settings (server.properties: zookeeper.connect with its chroot, the
zookeeper.ssl.* client identity; SASL from KAFKA_OPTS as the broker has it). Run with
the broker's venv by playbooks/zookeeper-backup.yml and zookeeper-restore.yml
(docs/operations.md):

  cluster-id PROPS          /cluster/id as ZooKeeper holds it ("" when there is none)
  meta PROPS                cluster.id of each log dir's meta.properties (no ZooKeeper)
  check PROPS               after the restore: can this broker's identity still write the
                            znodes brokers write (the znode ACLs), and which partition
                            directories no restored topic owns (strays)
  set-aside PROPS --into N  move the strays into <log dir>/N, where the broker never
                            loads them (its name is not a partition's)
  max-producer-id PROPS     the highest producer id in the newest producer-state snapshot
                            of any partition dir (-1 when none): ids the broker still
                            holds sequence numbers for
  skip-producer-ids PROPS --above A --by N
                            move /latest_producer_id_block to end N ids past the larger of
                            its own end and A, so that no id a broker holds state for is
                            handed out again

Prints JSON; `check` exits 2 when a write is refused.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoAuthError, NodeExistsError, NoNodeError

from moldau.cluster import zk_data, zk_sasl, zk_tls
from moldau.storage.dir_names import parse_partition_dir
from moldau.storage.producer_state import SNAPSHOT_SUFFIX, decode_snapshot
from moldau.tools.properties import load_properties

# A version no znode reaches: a setData with it fails after the ACL check (ZooKeeper checks
# the ACL first), so it proves the right to write without changing anything.
NEVER_VERSION = 2**31 - 1
PROBE_NAME = "zookeeper-restore-probe"


def log_dirs(props: dict[str, str]) -> list[str]:
    value = props.get("log.dirs") or props.get("log.dir") or "/tmp/kafka-logs"
    return [d.strip() for d in value.split(",") if d.strip()]


def read_key(path: str, key: str) -> str | None:
    """The value of `key` in a file of key=value or key: value lines (None when absent)."""
    try:
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                name, sep, value = line.replace(":", "=", 1).partition("=")
                if sep and name.strip() == key:
                    return value.strip()
    except FileNotFoundError:
        return None
    return None


def connect(props: dict[str, str]) -> KazooClient:
    """A session with the broker's identity: its TLS client certificate, and SASL when
    KAFKA_OPTS (in this process's environment, as the broker's) names a JAAS login."""
    options: dict[str, Any] = dict(zk_tls.kazoo_options(props))
    login = zk_sasl.settings_from_environment().login
    if login is not None:
        options["sasl_options"] = login.kazoo_options()
    hosts = props["zookeeper.connect"]
    zk = KazooClient(hosts=hosts, **options)
    outcome = zk_sasl.SaslOutcome.watch(zk, login.refusal_hint) if login is not None else None
    zk_sasl.start_admitted(zk, hosts, login, outcome, timeout=30)
    return zk


def cluster_id(zk: KazooClient) -> str:
    try:
        return str(zk_data.decode_cluster_id(zk.get(zk_data.CLUSTER_ID_PATH)[0]))
    except NoNodeError:
        return ""


def may_set(zk: KazooClient, path: str) -> bool | None:
    """Whether this session may write the znode (None when it does not exist)."""
    try:
        data, _ = zk.get(path)
        zk.set(path, data, version=NEVER_VERSION)
    except NoNodeError:
        return None
    except NoAuthError:
        return False
    except BadVersionError:
        return True
    return True  # unreachable in practice: the version never matches


def may_create_under(zk: KazooClient, parent: str) -> bool | None:
    """Whether this session may create children of the znode: an ephemeral child, removed
    at once (and by ZooKeeper with the session, should this process die first)."""
    child = f"{parent.rstrip('/')}/{PROBE_NAME}"
    try:
        zk.create(child, b"", ephemeral=True)
    except NoNodeError:
        return None
    except NoAuthError:
        return False
    except NodeExistsError:
        return True
    zk.delete(child)
    return True


# topic -> (its partitions, its topic id) as the restored /brokers/topics holds them
Topics = dict[str, tuple[list[str], str | None]]


def probes(zk: KazooClient, topics: Topics) -> Iterator[tuple[str, str]]:
    """(what, path) of the writes brokers make: the controller's znodes, registrations,
    topic assignments and every partition's state (the leaders' ISR changes)."""
    yield "set", zk_data.CONTROLLER_EPOCH_PATH
    for parent in ("/", zk_data.BROKER_IDS_PATH, zk_data.ISR_CHANGE_NOTIFICATION_PATH,
                   zk_data.CONFIG_CHANGES_PATH):
        yield "create", parent
    for topic, (partitions, _) in sorted(topics.items()):
        yield "set", zk_data.topic_path(topic)
        for partition in partitions:
            yield "set", f"{zk_data.topic_path(topic)}/partitions/{partition}/state"


def restored_topics(zk: KazooClient) -> Topics:
    found: Topics = {}
    for topic in zk.get_children(zk_data.TOPICS_PATH):
        znode = json.loads(zk.get(zk_data.topic_path(topic))[0])
        found[topic] = (sorted(znode.get("partitions", {}), key=int), znode.get("topic_id"))
    return found


def why_stray(path: str, topic: str, partition: int, topics: Topics) -> str | None:
    """Why no restored topic owns the partition directory (None when one does)."""
    if topic not in topics:
        return "topic not in ZooKeeper"
    partitions, topic_id = topics[topic]
    if str(partition) not in partitions:
        return "partition not in ZooKeeper"
    on_disk = read_key(os.path.join(path, "partition.metadata"), "topic_id")
    if on_disk and topic_id and on_disk != topic_id:
        return f"topic id {on_disk} on disk, {topic_id} in ZooKeeper"
    return None


def strays(props: dict[str, str], topics: Topics) -> list[dict[str, str]]:
    """Partition directories no restored topic owns: topic or partition unknown, or a
    partition.metadata naming another topic id (a name deleted and created again)."""
    found = []
    for log_dir in log_dirs(props):
        for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
            path = os.path.join(log_dir, name)
            parsed = parse_partition_dir(name)
            if parsed is None or not os.path.isdir(path):
                continue
            why = why_stray(path, parsed[0], parsed[1], topics)
            if why:
                found.append({"dir": path, "why": why})
    return found


def check(props: dict[str, str]) -> tuple[int, dict[str, object]]:
    zk = connect(props)
    try:
        topics = restored_topics(zk)
        denied = []
        for what, path in probes(zk, topics):
            allowed = may_set(zk, path) if what == "set" else may_create_under(zk, path)
            if allowed is False:
                denied.append(f"{what} {path}")
        result: dict[str, object] = {
            "cluster_id": cluster_id(zk), "topics": sorted(topics), "denied": denied,
            "strays": strays(props, topics),
        }
    finally:
        zk.stop()
        zk.close()
    return (2 if denied else 0), result


def set_aside(props: dict[str, str], into: str) -> list[str]:
    zk = connect(props)
    try:
        found = strays(props, restored_topics(zk))
    finally:
        zk.stop()
        zk.close()
    moved = []
    for stray in found:
        target = os.path.join(os.path.dirname(stray["dir"]), into)
        os.makedirs(target, exist_ok=True)
        os.rename(stray["dir"], os.path.join(target, os.path.basename(stray["dir"])))
        moved.append(stray["dir"])
    return moved


def max_producer_id(props: dict[str, str]) -> int:
    """The highest producer id the broker holds state for, from the newest snapshot of
    each partition (the playbook stopped the broker, which writes one as it stops)."""
    highest = -1
    for log_dir in log_dirs(props):
        for name in os.listdir(log_dir) if os.path.isdir(log_dir) else []:
            path = os.path.join(log_dir, name)
            if parse_partition_dir(name) is None or not os.path.isdir(path):
                continue
            snapshots = sorted(f for f in os.listdir(path) if f.endswith(SNAPSHOT_SUFFIX))
            if snapshots:
                with open(os.path.join(path, snapshots[-1]), "rb") as snapshot:
                    entries = decode_snapshot(snapshot.read())
                highest = max([highest, *(entry.producer_id for entry in entries)])
    return highest


def skip_producer_ids(props: dict[str, str], above: int, by: int) -> dict[str, int | None]:
    """Brokers take producer ids in blocks from /latest_producer_id_block, which a restore
    puts back: the next blocks would be ones handed out after the backup, and a new
    producer with the id of a producer that wrote since then has its first batches taken
    for duplicates of that producer's (acknowledged, never appended). The block is moved
    to end `by` ids past both its own end and `above` (what the brokers hold state for):
    the margin covers ids handed out whose state no snapshot holds yet."""
    zk = connect(props)
    try:
        path = zk_data.PRODUCER_ID_BLOCK_PATH
        found = zk.exists(path)
        data = zk.get(path)[0] if found else b""
        current = zk_data.ProducerIdBlock.decode(data) if data else None
        last = max(current.last if current else -1, above) + by
        block = zk_data.ProducerIdBlock(current.broker_id if current else -1,
                                        last - zk_data.PRODUCER_ID_BLOCK_SIZE + 1)
        if found:
            zk.set(path, block.encode(), version=found.version)
        else:
            zk.create(path, block.encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()
    return {"before": current.last if current else None, "after": block.last}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command",
                        choices=["cluster-id", "meta", "check", "set-aside", "max-producer-id",
                                 "skip-producer-ids"])
    parser.add_argument("properties")
    parser.add_argument("--into", default="")
    parser.add_argument("--above", type=int, default=-1)
    parser.add_argument("--by", type=int, default=0)
    args = parser.parse_args(argv)
    props = load_properties(args.properties)
    rc = 0
    result: object
    if args.command == "meta":
        result = {d: read_key(os.path.join(d, "meta.properties"), "cluster.id")
                  for d in log_dirs(props)}
    elif args.command == "cluster-id":
        zk = connect(props)
        try:
            result = cluster_id(zk)
        finally:
            zk.stop()
            zk.close()
    elif args.command == "check":
        rc, result = check(props)
    elif args.command == "skip-producer-ids":
        if args.by < zk_data.PRODUCER_ID_BLOCK_SIZE:
            parser.error(f"--by must be at least one block ({zk_data.PRODUCER_ID_BLOCK_SIZE})")
        result = skip_producer_ids(props, args.above, args.by)
    elif args.command == "max-producer-id":
        result = max_producer_id(props)
    else:
        if parse_partition_dir(args.into) is not None or not args.into or "/" in args.into:
            parser.error("--into must be a plain name that is not a partition's (topic-N)")
        result = set_aside(props, args.into)
    print(json.dumps(result))
    return rc


if __name__ == "__main__":
    sys.exit(main())
