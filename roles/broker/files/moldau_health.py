"""The broker role's health gate, run on a broker host with the broker's own venv:
is this broker registered in /brokers/ids, and is every partition's ISR as large as its
replica set? It reads ZooKeeper, where the controller records ISRs, with the
zookeeper.connect (chroot included) of the broker's server.properties.

Exit codes: 0 healthy, 1 not (the reasons on stdout), 2 ZooKeeper unreachable or the
file unreadable. `--controller` prints the controller's broker id (or -1) instead."""

from __future__ import annotations

import argparse
import json
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from moldau.cluster import zk_data
from moldau.tools.options import ToolError
from moldau.tools.properties import load_properties


def under_replicated(zk: KazooClient) -> list[str]:
    """'topic-partition isr=[..] replicas=[..]' for each partition short of replicas."""
    problems = []
    for topic in sorted(zk.get_children(zk_data.TOPICS_PATH)):
        try:
            assignment = json.loads(zk.get(zk_data.topic_path(topic))[0])["partitions"]
        except (NoNodeError, KeyError, ValueError):
            continue  # a topic being created or deleted
        for partition, replicas in sorted(assignment.items(), key=lambda kv: int(kv[0])):
            try:
                state = json.loads(zk.get(zk_data.partition_state_path(topic, int(partition)))[0])
            except NoNodeError:
                problems.append(f"{topic}-{partition} has no state yet (no leader elected)")
                continue
            if len(state["isr"]) < len(replicas) or state["leader"] < 0:
                problems.append(f"{topic}-{partition} leader={state['leader']} "
                                f"isr={state['isr']} replicas={replicas}")
    return problems


def controller_id(zk: KazooClient) -> int:
    try:
        return int(json.loads(zk.get(zk_data.CONTROLLER_PATH)[0])["brokerid"])
    except NoNodeError:
        return -1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("properties", help="the broker's server.properties")
    parser.add_argument("--controller", action="store_true", help="print the controller id")
    args = parser.parse_args(argv)
    try:
        props = load_properties(args.properties)
    except ToolError as exc:
        print(f"cannot read {exc}")
        return 2
    zk = KazooClient(hosts=props["zookeeper.connect"], read_only=False)
    try:
        zk.start(timeout=15)
    except Exception as exc:  # kazoo raises its own timeout type
        print(f"ZooKeeper {props['zookeeper.connect']} unreachable: {exc}")
        return 2
    try:
        if args.controller:
            print(controller_id(zk))
            return 0
        broker_id = int(props["broker.id"])
        problems = [] if zk.exists(zk_data.broker_path(broker_id)) else [
            f"broker {broker_id} is not registered in {zk_data.BROKER_IDS_PATH}"]
        problems += under_replicated(zk)
        print("\n".join(problems) if problems else f"broker {broker_id} healthy")
        return 1 if problems else 0
    finally:
        zk.stop()
        zk.close()


if __name__ == "__main__":
    sys.exit(main())
