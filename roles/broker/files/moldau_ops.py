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
  moldau_ops.py PROPS plan-rebalance [--exclude N] [--sizes FILE] [--leaders-only]
                                        a reassignment JSON that brings every live broker's
                                        replica and preferred-leader counts within one of
                                        each other, or as close as the racks and hosts
                                        allow; with --sizes (kafka-log-dirs --describe's
                                        output) it evens out bytes per broker instead of
                                        replica counts; --leaders-only only reorders
  moldau_ops.py PROPS balance [same options]  the counts (and bytes), and the target the
                                        planner can reach; exit 1 when it could still move
  moldau_ops.py PROPS plan-increase-rf TOPIC N  new replicas (appended: leaders stay) so that
                                        every partition of TOPIC has N; exit 1 with the
                                        reason when N is not possible
  moldau_ops.py PROPS plan-drain N      broker N last in every replica list it is in (a
                                        preferred election then takes leadership off N and
                                        does not bring it back); exit 3 when N is the only
                                        replica of a partition (its leadership cannot move)
  moldau_ops.py PROPS check-plan FILE   an operator's reassignment JSON validated against the
                                        cluster; prints the rollback plan (the current
                                        replicas), or exit 1 naming every bad entry
  moldau_ops.py PROPS moving            the reassignments in progress and the brokers' throttle
                                        rates (JSON); exit 1 when none is in progress
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
import dataclasses
import functools
import itertools
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

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
    # partitions being reassigned -> (adding, removing), from the topic znodes
    moving: dict[TP, tuple[list[int], list[int]]] = field(default_factory=dict)


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
    moving: dict[TP, tuple[list[int], list[int]]] = {}
    for topic in zk.get_children(zk_data.TOPICS_PATH):
        try:
            znode = json.loads(zk.get(zk_data.topic_path(topic))[0])
            assignment = znode["partitions"]
        except (NoNodeError, KeyError, ValueError):
            continue  # being created or deleted
        adding = znode.get("adding_replicas") or {}
        removing = znode.get("removing_replicas") or {}
        for partition in set(adding) | set(removing):
            moving[(topic, int(partition))] = (list(adding.get(partition, [])),
                                               list(removing.get(partition, [])))
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
    return Cluster(brokers, replicas, isr, leader, min_isr, hosts, moving)


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
        best = _new_replica(cluster, candidates, others, load)
        plan[tp] = [best if b == leaving else b for b in replicas]
    return plan


def _new_replica(cluster: Cluster, candidates: list[int], others: list[int],
                 load: Counter[int]) -> int:
    """The candidate for a partition that keeps `others`: a rack it does not use first,
    then a host it does not use, then the fewest replicas; counted in `load`."""
    used = _racks(cluster, others)
    used_hosts = _hosts(cluster, others)
    best = min(candidates, key=lambda b: (cluster.brokers[b] in used and bool(used),
                                          _hosts(cluster, [b]) <= used_hosts, load[b], b))
    load[best] += 1
    return best


def plan_increase_rf(cluster: Cluster, topic: str, factor: int) -> dict[TP, list[int]]:
    """Every partition of `topic` brought to `factor` replicas: the new ones appended (the
    preferred leader stays), each chosen as a decommission chooses a replacement. Raises
    ValueError when the topic is unknown, `factor` exceeds the live brokers, or a
    partition already has more (decreasing is another procedure)."""
    partitions = sorted(tp for tp in cluster.replicas if tp[0] == topic)
    if not partitions:
        raise ValueError(f"topic {topic} does not exist")
    if factor > len(cluster.brokers):
        raise ValueError(f"replication factor {factor} is above the {len(cluster.brokers)} "
                         f"live brokers {sorted(cluster.brokers)}")
    above = [f"{t}-{p} has {len(cluster.replicas[(t, p)])}" for t, p in partitions
             if len(cluster.replicas[(t, p)]) > factor]
    if above:
        raise ValueError(f"replication factor {factor} is below the current one "
                         f"({', '.join(above)}): this playbook only increases it; decreasing "
                         "is a different procedure (a reassignment with fewer replicas, "
                         "reassign.yml)")
    load = Counter({b: 0 for b in cluster.brokers})
    for replicas in cluster.replicas.values():
        load.update(b for b in replicas if b in load)
    plan: dict[TP, list[int]] = {}
    for tp in partitions:
        replicas = list(cluster.replicas[tp])
        while len(replicas) < factor:
            candidates = [b for b in sorted(cluster.brokers) if b not in replicas]
            replicas.append(_new_replica(cluster, candidates, replicas, load))
        if replicas != cluster.replicas[tp]:
            plan[tp] = replicas
    return plan


def plan_drain(cluster: Cluster, broker: int) -> dict[TP, list[int]]:
    """`broker` moved to the end of every replica list it is in (same replicas), so that a
    preferred election elects another replica and later ones do not bring it back."""
    return {tp: [b for b in r if b != broker] + [broker]
            for tp, r in sorted(cluster.replicas.items())
            if len(r) > 1 and broker in r and r[-1] != broker}


def sole_replicas(cluster: Cluster, broker: int) -> list[str]:
    """The partitions whose only replica is on `broker`: no election moves their leader."""
    return sorted(f"{t}-{p}" for (t, p), r in cluster.replicas.items() if r == [broker])


def plan_demote(cluster: Cluster, leaving: int) -> dict[TP, list[int]]:
    """Broker `leaving` moved to the end of every replica list it heads (same replicas)."""
    return {tp: [b for b in r if b != leaving] + [leaving]
            for tp, r in sorted(cluster.replicas.items()) if len(r) > 1 and r[0] == leaving}


def plan_rebalance(cluster: Cluster, exclude: set[int], sizes: dict[TP, int] | None = None,
                   leaders_only: bool = False, tolerance: float = 0.1) -> dict[TP, list[int]]:
    """Moves replicas from more to less loaded brokers until the counts are within one
    (never losing a rack or a host the partition used), then reorders replica lists so the
    preferred leaders are within one too. Where the racks and hosts forbid that (servers or
    racks with unequal broker counts), it stops at the best balance its moves can reach:
    no direct move and no chain of moves narrows the spread any more. With `sizes` (bytes
    per partition) the load is bytes, evened out to within `tolerance` of the mean per
    broker. Only changed partitions are returned."""
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
    if leaders_only:
        pass
    elif sizes is None:
        while (_step(target, cluster, counts(None), _move_replica)
               or _step(target, cluster, counts(None),
                        functools.partial(_move_replica_chain, allowed=set(brokers)))):
            pass
    else:
        while _size_step(target, cluster, brokers, sizes, tolerance):
            pass
    # the exchange fallback swaps two replicas: not when only reorders are wanted, nor by
    # size, where the counts it keeps are not the load
    leadership = functools.partial(_move_leadership,
                                   exchange=not leaders_only and sizes is None)
    while _step(target, cluster, counts(0), leadership):
        pass
    return {tp: r for tp, r in target.items() if r != cluster.replicas[tp]}


def _move_replica_chain(target: dict[TP, list[int]], cluster: Cluster, high: int,
                        low: int, allowed: set[int]) -> bool:
    """When no partition can go straight from `high` to `low` (a rack or host would be
    lost): high's replica of p1 goes to b1, b1's of p2 to b2, ..., bk's to low, each move
    keeping its partition's racks and hosts and each partition used once, so only high's
    and low's counts change (the shortest such chain, breadth first)."""
    holding: dict[int, list[TP]] = {}
    for tp in sorted(target):
        for b in target[tp]:
            holding.setdefault(b, []).append(tp)
    candidates = sorted(allowed & set(holding) | {low})
    via: dict[int, tuple[int, TP]] = {}  # broker -> (the broker it takes a replica from, tp)
    queue = [high]
    for b in queue:
        on_path = set()
        x = b
        while x != high:
            x, tp = via[x]
            on_path.add(tp)
        for tp in holding.get(b, []):
            r = target[tp]
            if tp in on_path:
                continue
            for nxt in candidates:
                if (nxt != high and nxt not in via and nxt not in r
                        and _keeps_spread(cluster, r, [nxt if x == b else x for x in r])):
                    via[nxt] = (b, tp)
                    queue.append(nxt)
        if low in via:
            break
    if low not in via:
        return False
    b = low
    while b != high:
        prev, tp = via[b]
        target[tp] = [b if x == prev else x for x in target[tp]]
        b = prev
    return True


def _size_step(target: dict[TP, list[int]], cluster: Cluster, brokers: list[int],
               sizes: dict[TP, int], tolerance: float) -> bool:
    """One replica from a broker holding more bytes to one holding fewer, between the most
    unequal pair that differs by more than `tolerance` of the mean and has a move: the
    partition whose size is nearest half the gap (the largest fall of the sum of squared
    bytes, so the loop ends); never a partition as large as the gap (that only swaps the
    two) and never one that would lose a rack or host."""
    load = Counter({b: 0 for b in brokers})
    for tp, r in target.items():
        for b in r:
            if b in load:
                load[b] += sizes.get(tp, 0)
    margin = tolerance * sum(load.values()) / max(len(load), 1)
    pairs = sorted(((h, lo) for h in load for lo in load if load[h] - load[lo] > margin),
                   key=lambda p: (load[p[1]] - load[p[0]], p))
    for high, low in pairs:
        gap = load[high] - load[low]
        best: tuple[int, TP, list[int]] | None = None
        for tp in sorted(target):
            r, size = target[tp], sizes.get(tp, 0)
            if not 0 < size < gap or high not in r or low in r:
                continue
            moved = [low if b == high else b for b in r]
            gain = size * (gap - size)
            if (best is None or gain > best[0]) and _keeps_spread(cluster, r, moved):
                best = (gain, tp, moved)
        if best is not None:
            target[best[1]] = best[2]
            return True
    return False


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
                     low: int, exchange: bool = True) -> bool:
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
        return exchange and _exchange(target, cluster, high, low)
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


def balance(cluster: Cluster, exclude: set[int], sizes: dict[TP, int] | None = None,
            leaders_only: bool = False, tolerance: float = 0.1) -> dict[str, Any]:
    """The counts (and bytes, with `sizes`) of the brokers not excluded, now and after what
    the planner would still move: the best balance it can reach under the rack and host
    rules. `balanced` says it has nothing left to move."""
    plan = plan_rebalance(cluster, exclude, sizes, leaders_only, tolerance)
    after = dataclasses.replace(cluster, replicas={**cluster.replicas, **plan})

    def kept(c: Cluster) -> dict[str, dict[int, int]]:
        out = {k: {b: n for b, n in v.items() if b not in exclude} for k, v in counts(c).items()}
        if sizes is not None:
            out["bytes"] = {b: sum(sizes.get(tp, 0) for tp, r in c.replicas.items() if b in r)
                            for b in sorted(c.brokers) if b not in exclude}
        return out

    now = kept(cluster)
    return {"now": now, "target": kept(after), "moves_left": len(plan), "balanced": not plan,
            "within_one": all(max(v.values()) - min(v.values()) <= 1
                              for k, v in now.items() if v and k != "bytes")}


def check_plan(cluster: Cluster, text: str) -> dict[TP, list[int]]:
    """An operator's reassignment JSON (as kafka-reassign-partitions --execute takes it)
    checked against the cluster; returns the plan. Raises ValueError naming every bad
    entry: an unknown topic or partition, a broker not registered, a broker listed twice,
    a partition listed twice, a log directory other than "any"."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"the plan is not JSON: {exc}") from None
    entries = document.get("partitions") if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError('the plan needs a non-empty "partitions" list of {"topic", '
                         '"partition", "replicas"} entries (kafka-reassign-partitions\' '
                         "format)")
    live = sorted(cluster.brokers)
    problems: list[str] = []
    plan: dict[TP, list[int]] = {}
    for index, entry in enumerate(entries, 1):
        if not isinstance(entry, dict):
            problems.append(f"entry {index}: not an object: {entry!r}")
            continue
        topic, partition, replicas = (entry.get("topic"), entry.get("partition"),
                                      entry.get("replicas"))
        name = f"entry {index} ({topic}-{partition})"
        if not isinstance(topic, str) or not isinstance(partition, int) or not (
                isinstance(replicas, list) and replicas
                and all(isinstance(b, int) for b in replicas)):
            problems.append(f"{name}: needs a topic name, a partition number and a "
                            "non-empty list of broker ids as replicas")
            continue
        tp = (topic, partition)
        count = sum(1 for t, _ in cluster.replicas if t == topic)
        if not count:
            problems.append(f"{name}: unknown topic {topic}")
        elif tp not in cluster.replicas:
            problems.append(f"{name}: {topic} has no partition {partition} "
                            f"(its partitions: 0 to {count - 1})")
        unknown = sorted({b for b in replicas if b not in cluster.brokers})
        if unknown:
            problems.append(f"{name}: broker(s) {unknown} not registered "
                            f"(live brokers: {live})")
        twice = sorted({b for b in replicas if replicas.count(b) > 1})
        if twice:
            problems.append(f"{name}: broker(s) {twice} listed twice in {replicas}")
        if tp in plan:
            problems.append(f"{name}: {topic}-{partition} is listed more than once")
        dirs = entry.get("log_dirs")
        if dirs is not None and any(d != "any" for d in dirs):
            problems.append(f"{name}: log_dirs other than \"any\" (moves between a "
                            "broker's directories) are not run by this playbook")
        plan[tp] = list(replicas)
    if problems:
        raise ValueError("\n".join(problems))
    return plan


def parse_log_dirs(text: str) -> dict[TP, int]:
    """Bytes per partition from kafka-log-dirs --describe's output (its JSON line): the
    largest replica's size, future replicas left out."""
    line = next((ln for ln in reversed(text.splitlines()) if ln.startswith("{")), None)
    if line is None:
        raise ValueError("no JSON document in the kafka-log-dirs output")
    sizes: dict[TP, int] = {}
    for broker in json.loads(line).get("brokers", []):
        for log_dir in broker.get("logDirs", []):
            for replica in log_dir.get("partitions", []):
                if replica.get("isFuture"):
                    continue
                topic, _, partition = str(replica["partition"]).rpartition("-")
                tp = (topic, int(partition))
                sizes[tp] = max(sizes.get(tp, 0), int(replica.get("size", 0)))
    return sizes


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


THROTTLE_RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def in_progress(zk: KazooClient, cluster: Cluster) -> dict[str, object]:
    """The partitions being reassigned (the topic znodes' adding and removing replicas, and
    a pending /admin/reassign_partitions), the brokers they involve and every live
    broker's throttle rates (its dynamic config in ZooKeeper)."""
    lines = [f"{t}-{p}: replicas {cluster.replicas.get((t, p), [])} adding {add} removing {rem}"
             for (t, p), (add, rem) in sorted(cluster.moving.items())]
    involved = {b for tp in cluster.moving for b in cluster.replicas.get(tp, [])}
    try:
        pending = json.loads(zk.get(zk_data.REASSIGN_PARTITIONS_PATH)[0]).get("partitions", [])
    except (NoNodeError, ValueError):
        pending = []
    for entry in pending:
        lines.append(f"{entry.get('topic')}-{entry.get('partition')}: requested "
                     f"{entry.get('replicas')} (/admin/reassign_partitions)")
        involved.update(entry.get("replicas", []))
    rates: dict[int, dict[str, str]] = {}
    for broker in sorted(cluster.brokers):
        try:
            config = json.loads(zk.get(zk_data.config_entity_path("brokers", str(broker)))[0])
        except (NoNodeError, ValueError):
            config = {}
        values = config.get("config", {}) if isinstance(config, dict) else {}
        rates[broker] = {k: values[k] for k in THROTTLE_RATES if k in values}
    return {"partitions": lines, "brokers": sorted(involved & set(cluster.brokers)),
            "throttles": rates}


def reassignment_json(plan: dict[TP, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(plan.items())]})


def rebalance_command(cluster: Cluster, args: argparse.Namespace) -> int:
    """plan-rebalance prints the plan; balance prints where the cluster stands and exits 1
    while the planner would still move something."""
    sizes = None
    if args.sizes:
        try:
            with open(args.sizes, encoding="utf-8") as f:
                sizes = parse_log_dirs(f.read())
        except (OSError, ValueError, KeyError) as exc:
            print(f"cannot read the partition sizes from {args.sizes}: {exc}")
            return 2
    options = (set(args.exclude), sizes, args.leaders_only, args.tolerance / 100)
    if args.command == "plan-rebalance":
        print(reassignment_json(plan_rebalance(cluster, *options)))
        return 0
    report = balance(cluster, *options)
    print(json.dumps(report))
    return 0 if report["balanced"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("properties", help="the broker's server.properties")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("restart-risks")
    sub.add_parser("plan-decommission").add_argument("broker", type=int)
    sub.add_parser("plan-demote").add_argument("broker", type=int)
    for name in ("plan-rebalance", "balance"):
        rebalance = sub.add_parser(name)
        rebalance.add_argument("--exclude", type=int, action="append", default=[])
        rebalance.add_argument("--sizes", help="kafka-log-dirs --describe's output: even "
                               "out bytes per broker instead of replica counts")
        rebalance.add_argument("--tolerance", type=float, default=10.0,
                               help="with --sizes: the bytes spread left alone, in percent "
                               "of the mean per broker (default 10)")
        rebalance.add_argument("--leaders-only", action="store_true",
                               help="only reorder replica lists (no data moves)")
    increase = sub.add_parser("plan-increase-rf")
    increase.add_argument("topic")
    increase.add_argument("factor", type=int)
    sub.add_parser("plan-drain").add_argument("broker", type=int)
    sub.add_parser("check-plan").add_argument("file")
    sub.add_parser("moving")
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
        moving = in_progress(zk, cluster) if args.command == "moving" else None
    finally:
        zk.stop()
        zk.close()
    if moving is not None:
        print(json.dumps(moving))
        return 0 if moving["partitions"] else 1
    if args.command in ("plan-rebalance", "balance"):
        return rebalance_command(cluster, args)
    if args.command in ("plan-increase-rf", "check-plan"):
        try:
            if args.command == "plan-increase-rf":
                print(reassignment_json(plan_increase_rf(cluster, args.topic, args.factor)))
            else:
                with open(args.file, encoding="utf-8") as f:
                    plan = check_plan(cluster, f.read())
                print(reassignment_json({tp: cluster.replicas[tp] for tp in plan}))
                changes = sum(1 for tp, r in plan.items() if r != cluster.replicas[tp])
                print(f"{changes} of {len(plan)} partition(s) change", file=sys.stderr)
        except (OSError, ValueError) as exc:
            print(exc)
            return 1
        return 0
    if args.command == "plan-drain":
        sole = sole_replicas(cluster, args.broker)
        if sole:
            print(f"broker {args.broker} is the only replica of {', '.join(sole)}: no election "
                  "can move their leadership (raise their replication factor first)")
            return 3
        print(reassignment_json(plan_drain(cluster, args.broker)))
        return 0
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
