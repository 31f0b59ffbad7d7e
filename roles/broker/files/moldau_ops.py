"""The operations playbooks' view of the cluster, run on a broker host with the broker's
own venv (beside moldau_health.py): it reads ZooKeeper (zookeeper.connect of the given
server.properties) and prints what a playbook needs to decide or to plan.

  moldau_ops.py PROPS restart-risks     partitions a restart makes unavailable: RF 1 or
                                        an ISR at (or below) min.insync.replicas; exit 3
                                        when there are any
  moldau_ops.py PROPS plan-decommission N  a reassignment JSON moving every replica off
                                        broker N (internal topics included); exit 1 when
                                        the other brokers cannot hold them
  moldau_ops.py PROPS plan-demote N     a reassignment JSON that only reorders replica lists:
                                        broker N last wherever it is the preferred leader
                                        (a preferred election then moves leadership off N
                                        before any data moves)
  moldau_ops.py PROPS plan-rebalance [--exclude N]  a reassignment JSON that brings every
                                        live broker's replica and preferred-leader counts
                                        within one of each other
  moldau_ops.py PROPS counts            replica and preferred-leader counts per live broker
                                        (JSON); exit 1 when they differ by more than one
  moldau_ops.py PROPS leads N           the partitions whose leader (in ZooKeeper) is N;
                                        exit 1 when there are any
  moldau_ops.py PROPS holds N           the partitions that still have a replica on N;
                                        exit 1 when there are any or N is registered
  moldau_ops.py PROPS unsecured-znodes SCHEME  the znodes zookeeper-security-migration
                                        --zookeeper.acl=secure sets whose ACL gives no
                                        SCHEME identity (e.g. sasl) every right; exit 1
                                        when there are any

Plans are printed as Kafka's reassignment JSON with only the partitions that change
(an empty list when nothing has to move), for kafka-reassign-partitions --execute. They
keep replicas apart by rack and then by host (`moldau.broker.host`, the registration's
`moldau_host`; a broker without one is a host of its own), as topic creation does."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.security import Permissions
from moldau_health import connect

from moldau.cluster import zk_acls, zk_data
from moldau.cluster.assignment import BrokerMetadata, host_keys
from moldau.cluster.zk_broker_znode import MOLDAU_HOST_FIELD
from moldau.tools.zk_security_migration import SECURE_ROOT_PATHS

TP = tuple[str, int]


@dataclass
class Cluster:
    brokers: dict[int, str]  # live broker id -> rack ("" when none)
    replicas: dict[TP, list[int]]
    isr: dict[TP, list[int]]
    leader: dict[TP, int]
    min_isr: dict[TP, int]
    # live broker id -> its `moldau.broker.host`, for the brokers that registered one
    hosts: dict[int, str] = field(default_factory=dict)


def read_cluster(zk: KazooClient, default_min_isr: int) -> Cluster:
    brokers = {}
    hosts = {}
    for child in zk.get_children(zk_data.BROKER_IDS_PATH):
        try:
            info = json.loads(zk.get(zk_data.broker_path(int(child)))[0])
        except NoNodeError:
            continue  # went away while we read
        brokers[int(child)] = info.get("rack") or ""
        host = info.get(MOLDAU_HOST_FIELD)
        if isinstance(host, str) and host:  # as the broker reads it: only a name counts
            hosts[int(child)] = host
    replicas: dict[TP, list[int]] = {}
    isr: dict[TP, list[int]] = {}
    leader: dict[TP, int] = {}
    min_isr: dict[TP, int] = {}
    for topic in zk.get_children(zk_data.TOPICS_PATH):
        try:
            assignment = json.loads(zk.get(zk_data.topic_path(topic))[0])["partitions"]
        except (NoNodeError, KeyError, ValueError):
            continue  # being created or deleted
        try:
            config = json.loads(zk.get(zk_data.config_entity_path("topics", topic))[0])
            topic_min = int(config.get("config", {}).get("min.insync.replicas", default_min_isr))
        except (NoNodeError, ValueError):
            topic_min = default_min_isr
        for partition, assigned in assignment.items():
            tp = (topic, int(partition))
            replicas[tp] = list(assigned)
            min_isr[tp] = topic_min
            try:
                state = json.loads(zk.get(zk_data.partition_state_path(*tp))[0])
                isr[tp] = list(state["isr"])
                leader[tp] = int(state["leader"])
            except (NoNodeError, KeyError, ValueError):
                isr[tp] = []
                leader[tp] = -1
    return Cluster(brokers, replicas, isr, leader, min_isr, hosts)


def restart_risks(cluster: Cluster) -> list[str]:
    """Partitions whose availability (for acks=all writers) one broker restart interrupts."""
    risks = []
    for tp in sorted(cluster.replicas):
        replicas, isr = cluster.replicas[tp], cluster.isr[tp]
        if len(replicas) == 1:
            risks.append(f"{tp[0]}-{tp[1]} replication factor 1 (replicas={replicas})")
        elif len(isr) <= cluster.min_isr[tp]:
            risks.append(f"{tp[0]}-{tp[1]} at min ISR: isr={isr} "
                         f"min.insync.replicas={cluster.min_isr[tp]} replicas={replicas}")
    return risks


def _racks(cluster: Cluster, brokers: list[int]) -> set[str]:
    return {cluster.brokers.get(b, "") for b in brokers} - {""}


def _hosts(cluster: Cluster, brokers: list[int]) -> set[str]:
    """The servers of `brokers`, by the placement's host identity (a broker without
    `moldau.broker.host` is a host of its own, so without hosts this is the brokers)."""
    return set(host_keys(BrokerMetadata(b, host=cluster.hosts.get(b)) for b in brokers).values())


def _keeps_spread(cluster: Cluster, before: list[int], after: list[int]) -> bool:
    """`after` spans at least as many racks and as many hosts as `before`."""
    return (len(_racks(cluster, after)) >= len(_racks(cluster, before))
            and len(_hosts(cluster, after)) >= len(_hosts(cluster, before)))


def plan_decommission(cluster: Cluster, leaving: int) -> dict[TP, list[int]]:
    """Every replica on `leaving` replaced, in the same position, by the remaining broker
    with the fewest replicas that is not in the set yet, preferring a rack the partition
    does not use, then a host it does not use (a host is shared only when the rack rule or
    a replication factor above the free hosts leaves no other candidate, as in placement).
    Raises ValueError when a partition cannot keep its replication factor."""
    remaining = sorted(set(cluster.brokers) - {leaving})
    load = Counter({b: 0 for b in remaining})
    for replicas in cluster.replicas.values():
        load.update(b for b in replicas if b in load)
    plan: dict[TP, list[int]] = {}
    for tp in sorted(cluster.replicas):
        replicas = cluster.replicas[tp]
        if leaving not in replicas:
            continue
        others = [b for b in replicas if b != leaving]
        candidates = [b for b in remaining if b not in replicas]
        if not candidates:
            raise ValueError(f"{tp[0]}-{tp[1]} (replicas {replicas}) cannot keep replication "
                             f"factor {len(replicas)} on the brokers left: {remaining}")
        used = _racks(cluster, others)
        used_hosts = _hosts(cluster, others)
        best = min(candidates, key=lambda b: (cluster.brokers[b] in used and bool(used),
                                              _hosts(cluster, [b]) <= used_hosts,
                                              load[b], b))
        load[best] += 1
        plan[tp] = [best if b == leaving else b for b in replicas]
    return plan


def plan_demote(cluster: Cluster, leaving: int) -> dict[TP, list[int]]:
    """Broker `leaving` moved to the end of every replica list it heads (same replicas)."""
    return {tp: [b for b in r if b != leaving] + [leaving]
            for tp, r in sorted(cluster.replicas.items()) if len(r) > 1 and r[0] == leaving}


def plan_rebalance(cluster: Cluster, exclude: set[int]) -> dict[TP, list[int]]:
    """Moves replicas from more to less loaded brokers until the counts are within one
    (never losing a rack or a host the partition used), then reorders replica lists so the
    preferred leaders are within one too. Only changed partitions are returned."""
    brokers = sorted(set(cluster.brokers) - exclude)
    target = {tp: list(r) for tp, r in cluster.replicas.items()}

    def counts(position: int | None) -> Counter[int]:
        c = Counter({b: 0 for b in brokers})
        for r in target.values():
            c.update(b for b in (r if position is None else r[:1]) if b in c)
        return c

    # Each step moves one replica (or one leadership) from a broker with at least two more
    # than another to it, so the sum of squared counts falls and the loop ends. Every such
    # pair is tried, not only the fullest and the emptiest: that one pair may have no
    # partition in common (or only moves that lose a rack or host) while another pair has.
    while _step(target, cluster, counts(None), _move_replica):
        pass
    while _step(target, cluster, counts(0), _move_leadership):
        pass
    return {tp: r for tp, r in target.items() if r != cluster.replicas[tp]}


Move = Callable[[dict[TP, list[int]], Cluster, int, int], bool]


def _step(target: dict[TP, list[int]], cluster: Cluster, c: Counter[int], move: Move) -> bool:
    """One move between the most unequal pair that has one; False when none has."""
    pairs = sorted(((h, lo) for h in c for lo in c if c[h] - c[lo] >= 2),
                   key=lambda p: (c[p[1]] - c[p[0]], p))
    return any(move(target, cluster, high, low) for high, low in pairs)


def _move_replica(target: dict[TP, list[int]], cluster: Cluster, high: int, low: int) -> bool:
    """Replace `high` by `low` (in the same position) in a partition that has high, not
    low, and keeps its racks and hosts. A partition high heads is preferred while high
    leads more than low, another one otherwise: replicas that cannot move later
    (replication factor 1) then do not strand leaderships on one broker."""
    leads = Counter(r[0] for r in target.values() if r)
    heads_first = leads[high] > leads[low]
    for tp in sorted(target, key=lambda tp: ((target[tp][0] == high) != heads_first, tp)):
        r = target[tp]
        if high in r and low not in r:
            moved = [low if b == high else b for b in r]
            if _keeps_spread(cluster, r, moved):
                target[tp] = moved
                return True
    return False


def _move_leadership(target: dict[TP, list[int]], cluster: Cluster, high: int,
                     low: int) -> bool:
    """Preferred leadership from `high` to `low` along a chain of partitions: high leads
    one that has b1, b1 leads one that has b2, ..., bk leads one that has low; each
    partition's new first replica is the next broker of the chain (found breadth first),
    so only high's and low's counts change."""
    via: dict[int, tuple[int, TP]] = {}  # broker -> (previous broker, partition)
    queue = [high]
    for b in queue:
        for tp in sorted(target):
            r = target[tp]
            if r[0] != b:
                continue
            for nxt in r[1:]:
                if nxt != high and nxt not in via:
                    via[nxt] = (b, tp)
                    queue.append(nxt)
        if low in via:
            break
    if low not in via:
        return _exchange(target, cluster, high, low)
    b = low
    while b != high:
        prev, tp = via[b]
        r = target[tp]
        i = r.index(b)
        target[tp] = [b, *r[1:i], prev, *r[i + 1:]]
        b = prev
    return True


def _exchange(target: dict[TP, list[int]], cluster: Cluster, high: int, low: int) -> bool:
    """When no chain exists: high gives a partition it heads to low, and takes low's place
    in a partition low follows in, so the replica counts stay and one leadership moves."""
    for p, q in itertools.product(sorted(target), repeat=2):
        rp, rq = target[p], target[q]
        if rp[0] != high or low in rp or low not in rq[1:] or high in rq:
            continue
        new_p = [low, *rp[1:]]
        new_q = [high if b == low else b for b in rq]
        if _keeps_spread(cluster, rp, new_p) and _keeps_spread(cluster, rq, new_q):
            target[p], target[q] = new_p, new_q
            return True
    return False


def counts(cluster: Cluster) -> dict[str, dict[int, int]]:
    replicas = Counter({b: 0 for b in cluster.brokers})
    leaders = Counter({b: 0 for b in cluster.brokers})
    for r in cluster.replicas.values():
        replicas.update(b for b in r if b in replicas)
        if r and r[0] in leaders:
            leaders[r[0]] += 1
    return {"replicas": dict(sorted(replicas.items())),
            "preferred_leaders": dict(sorted(leaders.items()))}


def unsecured_znodes(zk: KazooClient, scheme: str) -> list[str]:
    """The znodes the migration tool secures (the chroot's root, every secure root's
    subtree) that Kafka's secure ACLs would protect but whose ACL gives no `scheme`
    identity every right: what it has yet to reach."""
    missing: list[str] = []
    level = ["/"]
    level += [path for path in SECURE_ROOT_PATHS if zk.exists(path)]
    first = True
    while level:
        below: list[str] = []
        for path in level:
            try:
                acls, _ = zk.get_acls(path)
                children = [] if first and path == "/" else zk.get_children(path)
            except NoNodeError:  # deleted meanwhile
                continue
            open_by_design = zk_acls.acls_for(path)[0].id.scheme == "world"
            if not open_by_design and not any(
                    acl.id.scheme == scheme and acl.perms == Permissions.ALL for acl in acls):
                missing.append(path)
            base = "" if path == "/" else path
            below += [f"{base}/{child}" for child in children]
        level, first = below, False
    return sorted(missing)


def reassignment_json(plan: dict[TP, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(plan.items())]})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("properties", help="the broker's server.properties")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("restart-risks")
    sub.add_parser("plan-decommission").add_argument("broker", type=int)
    sub.add_parser("plan-demote").add_argument("broker", type=int)
    sub.add_parser("plan-rebalance").add_argument("--exclude", type=int, action="append",
                                                  default=[])
    sub.add_parser("counts")
    sub.add_parser("holds").add_argument("broker", type=int)
    sub.add_parser("leads").add_argument("broker", type=int)
    sub.add_parser("unsecured-znodes").add_argument("scheme")
    args = parser.parse_args(argv)
    zk, props, why = connect(args.properties)
    if zk is None:
        print(why)
        return 2
    if args.command == "unsecured-znodes":
        try:
            missing = unsecured_znodes(zk, args.scheme)
        finally:
            zk.stop()
            zk.close()
        print("\n".join(missing) if missing else f"every znode gives {args.scheme} every right")
        return 1 if missing else 0
    try:
        cluster = read_cluster(zk, int(props.get("min.insync.replicas", "1")))
    finally:
        zk.stop()
        zk.close()
    if args.command == "restart-risks":
        risks = restart_risks(cluster)
        print("\n".join(risks) if risks else "no partition at risk")
        return 3 if risks else 0
    if args.command == "plan-decommission":
        try:
            print(reassignment_json(plan_decommission(cluster, args.broker)))
        except ValueError as exc:
            print(exc)
            return 1
        return 0
    if args.command == "plan-demote":
        print(reassignment_json(plan_demote(cluster, args.broker)))
        return 0
    if args.command == "plan-rebalance":
        print(reassignment_json(plan_rebalance(cluster, set(args.exclude))))
        return 0
    if args.command == "counts":
        c = counts(cluster)
        print(json.dumps(c))
        spread = [max(v.values()) - min(v.values()) for v in c.values() if v]
        return 0 if all(s <= 1 for s in spread) else 1
    if args.command == "leads":
        led = sorted(f"{t}-{p}" for (t, p), b in cluster.leader.items() if b == args.broker)
        print(", ".join(led) if led else f"broker {args.broker} leads no partition")
        return 1 if led else 0
    held = sorted(f"{t}-{p}" for (t, p), r in cluster.replicas.items() if args.broker in r)
    registered = args.broker in cluster.brokers
    print(json.dumps({"registered": registered, "partitions": held}))
    return 1 if held or registered else 0


if __name__ == "__main__":
    sys.exit(main())
