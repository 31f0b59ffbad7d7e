"""The partitions that stopping several brokers together makes unavailable, for
playbooks/host-roll.yml: the brokers of one server (several brokers per host,
broker_instance) stop at once there, so the one-broker check of moldau_ops.py
restart-risks is asked for the whole set. Run on a broker host with the broker's venv,
beside moldau_ops.py, whose reading of ZooKeeper it shares.

  moldau_host_risk.py PROPS IDS [IDS ...]   IDS: a server's broker ids, comma-separated
                                            (e.g. 1,2 3,4: each server on its own)

Prints, per server, the partitions with a replica there whose ISR would fall below
min.insync.replicas (acks=all writes refused) or lose every replica (offline), and exits
3 when there are any; 0 when every server can stop on its own; 2 when the cluster cannot
be read. With host-aware placement (moldau.broker.host) a partition has at most one
replica per server while there are enough servers, so this holds when the replication
factor is at least 2 and min.insync.replicas at most the factor minus 1."""

from __future__ import annotations

import argparse
import json
import sys

from moldau_health import connect
from moldau_ops import Cluster, read_cluster


def stop_risks(cluster: Cluster, stopping: set[int]) -> list[str]:
    """The partitions `stopping` (brokers stopped together) leaves below min ISR or offline."""
    risks = []
    for tp in sorted(cluster.replicas):
        replicas = cluster.replicas[tp]
        if not stopping.intersection(replicas):
            continue
        isr = cluster.isr[tp]
        left = [b for b in isr if b not in stopping]
        if not [b for b in replicas if b not in stopping]:
            risks.append(f"{tp[0]}-{tp[1]} offline: every replica is on these brokers "
                         f"(replicas={replicas})")
        elif len(left) < cluster.min_isr[tp]:
            risks.append(f"{tp[0]}-{tp[1]} below min ISR: isr={isr} would be {left}, "
                         f"min.insync.replicas={cluster.min_isr[tp]} replicas={replicas}")
    return risks


def parse_ids(text: str) -> set[int]:
    try:
        ids = {int(part) for part in text.split(",") if part.strip()}
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of broker ids: {text!r}") from None
    if not ids:
        raise argparse.ArgumentTypeError("an empty list of broker ids")
    return ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("properties", help="the broker's server.properties")
    parser.add_argument("servers", nargs="+", type=parse_ids,
                        help="each server's broker ids, comma-separated")
    args = parser.parse_args(argv)
    zk, props, why = connect(args.properties)
    if zk is None:
        print(why)
        return 2
    try:
        cluster = read_cluster(zk, int(props.get("min.insync.replicas", "1")))
    finally:
        zk.stop()
        zk.close()
    report = {",".join(map(str, sorted(ids))): stop_risks(cluster, ids) for ids in args.servers}
    print(json.dumps(report, indent=1))
    return 3 if any(report.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
