"""The planners of roles/broker/files/moldau_ops.py (decommission, demote, rebalance) on
cluster snapshots built in memory: the playbooks execute what these plans say, so a plan
must keep every replication factor, never list a broker twice, leave the removed broker
empty, keep the racks and hosts (`moldau.broker.host`) a partition spans, and bring the
counts within one. The ZooKeeper reading around them is covered by the Molecule
operations scenario and test_ops_script.py."""

from __future__ import annotations

import itertools
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "broker" / "files"))

import moldau_ops
from moldau_ops import TP, Cluster


def cluster(brokers: dict[int, str], replicas: dict[TP, list[int]],
            hosts: dict[int, str] | None = None) -> Cluster:
    """A healthy snapshot: every replica in the ISR, the first replica leading."""
    return Cluster(brokers=dict(brokers), replicas={tp: list(r) for tp, r in replicas.items()},
                   isr={tp: list(r) for tp, r in replicas.items()},
                   leader={tp: r[0] for tp, r in replicas.items()},
                   min_isr={tp: 2 for tp in replicas}, hosts=dict(hosts or {}))


def round_robin(brokers: list[int], partitions: int, rf: int,
                topics: tuple[str, ...] = ("orders",)) -> dict[TP, list[int]]:
    """Kafka-like assignment: consecutive brokers, the start shifting per partition."""
    out: dict[TP, list[int]] = {}
    for t, topic in enumerate(topics):
        for p in range(partitions):
            start = (p + t) % len(brokers)
            out[(topic, p)] = [brokers[(start + i) % len(brokers)] for i in range(rf)]
    return out


def applied(c: Cluster, plan: dict[TP, list[int]]) -> Cluster:
    """The cluster after the reassignment completed."""
    return cluster(c.brokers, {**c.replicas, **plan}, c.hosts)


def assert_valid(before: Cluster, plan: dict[TP, list[int]]) -> None:
    """Only existing partitions change, each keeps its replication factor, no broker twice."""
    assert set(plan) <= set(before.replicas)
    for tp, r in plan.items():
        assert len(r) == len(before.replicas[tp]), (tp, r)
        assert len(set(r)) == len(r), (tp, r)
        assert r != before.replicas[tp], f"{tp} listed although unchanged"


def spread(values: Counter[int] | dict[int, int]) -> int:
    return max(values.values()) - min(values.values())


def racks_of(c: Cluster, r: list[int]) -> set[str]:
    return {c.brokers[b] for b in r}


def hosts_of(c: Cluster, r: list[int]) -> set[str]:
    """The servers of r: a broker without `moldau.broker.host` is one of its own."""
    return {c.hosts.get(b, f"own host of {b}") for b in r}


def assert_host_spread_kept(before: Cluster, plan: dict[TP, list[int]]) -> None:
    for tp, r in plan.items():
        assert len(hosts_of(before, r)) >= len(hosts_of(before, before.replicas[tp])), (tp, r)


TWO_HOSTS = {1: "server-a", 2: "server-a", 3: "server-b", 4: "server-b"}


# --- decommission -------------------------------------------------------------------

@pytest.mark.parametrize("leaving", [1, 2, 3, 4])
def test_decommission_moves_every_replica_off_the_broker(leaving: int) -> None:
    before = cluster({b: "" for b in (1, 2, 3, 4)},
                     round_robin([1, 2, 3, 4], 12, 3, ("orders", "__consumer_offsets")))
    plan = moldau_ops.plan_decommission(before, leaving)
    assert_valid(before, plan)
    after = applied(before, plan)
    assert all(leaving not in r for r in after.replicas.values())
    # exactly the partitions that had a replica there move, internal topics included
    assert set(plan) == {tp for tp, r in before.replicas.items() if leaving in r}
    assert any(tp[0] == "__consumer_offsets" for tp in plan)
    # each replaced in place: the other replicas keep their positions
    for tp, r in plan.items():
        old = before.replicas[tp]
        kept = [b for b, o in zip(r, old, strict=True) if o != leaving]
        assert kept == [o for o in old if o != leaving]
    # the replacements spread evenly over the remaining brokers
    load = Counter(b for r in after.replicas.values() for b in r)
    assert spread(load) <= 1, load


def test_decommission_keeps_the_racks_a_partition_spans() -> None:
    brokers = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    # every partition on three racks, one broker per rack
    replicas = {("t", p): [r[p % 2] for r in ([1, 2], [3, 4], [5, 6])] for p in range(8)}
    before = cluster(brokers, replicas)
    plan = moldau_ops.plan_decommission(before, 1)
    assert_valid(before, plan)
    for tp, r in plan.items():
        assert racks_of(before, r) == {"a", "b", "c"}, (tp, r)
        assert 2 in r  # the only broker left in rack a
    assert all(1 not in r for r in applied(before, plan).replicas.values())


def test_decommission_uses_a_new_rack_when_the_leaving_rack_has_no_broker_left() -> None:
    brokers = {1: "a", 2: "b", 3: "b", 4: "c", 5: "d"}
    before = cluster(brokers, {("t", 0): [1, 2, 4], ("t", 1): [4, 1, 3]})
    plan = moldau_ops.plan_decommission(before, 1)
    assert_valid(before, plan)
    # broker 5 (rack d) keeps three racks; broker 3 (rack b, already used by t-0) would not
    assert plan[("t", 0)] == [5, 2, 4]
    assert len(racks_of(before, plan[("t", 1)])) == 3


def test_decommission_of_a_decommissioned_broker_plans_nothing() -> None:
    before = cluster({b: "" for b in (1, 2, 3, 4)}, round_robin([1, 2, 3, 4], 12, 3))
    after = applied(before, moldau_ops.plan_decommission(before, 4))
    gone = cluster({1: "", 2: "", 3: ""}, after.replicas)  # stopped: no longer registered
    assert moldau_ops.plan_decommission(gone, 4) == {}
    assert moldau_ops.plan_decommission(after, 4) == {}  # still registered but empty
    assert moldau_ops.plan_demote(gone, 4) == {}


def test_decommission_moves_replicas_of_a_stopped_broker() -> None:
    """N no longer registered but still named in replica lists: those replicas move too."""
    replicas = round_robin([1, 2, 3, 4], 8, 2)
    before = cluster({1: "", 2: "", 3: ""}, replicas)
    plan = moldau_ops.plan_decommission(before, 4)
    assert_valid(before, plan)
    assert all(4 not in r and set(r) <= {1, 2, 3} for r in applied(before, plan).replicas.values())


def test_decommission_fails_clearly_when_the_others_cannot_hold_the_partitions() -> None:
    before = cluster({1: "", 2: "", 3: ""}, round_robin([1, 2, 3], 3, 3))
    with pytest.raises(ValueError) as failure:
        moldau_ops.plan_decommission(before, 3)
    message = str(failure.value)
    assert "orders-0" in message and "replication factor 3" in message
    assert "[1, 2]" in message  # the brokers left


# --- hosts (moldau.broker.host: several brokers on one server) -------------------------

def test_decommission_keeps_replicas_on_different_hosts() -> None:
    # RF 2 over 2 servers x 2 brokers, each partition on both servers; by load alone
    # broker 1's replicas of t-3 and t-4 would go to server-b, which holds the other one
    order = [1, 3, 2, 4]
    replicas = {("t", p): [order[(p + i) % 4] for i in range(2)] for p in range(8)}
    before = cluster({b: "" for b in TWO_HOSTS}, replicas, TWO_HOSTS)
    plan = moldau_ops.plan_decommission(before, 1)
    assert_valid(before, plan)
    assert set(plan) == {tp for tp, r in replicas.items() if 1 in r}
    after = applied(before, plan)
    assert all(len(hosts_of(after, r)) == 2 for r in after.replicas.values())
    assert all(2 in r for r in plan.values())  # the one broker left on server-a


def test_decommission_with_more_replicas_than_servers_still_completes() -> None:
    # RF 3 on two servers always doubles up one; the plan still completes and keeps both
    before = cluster({b: "" for b in TWO_HOSTS}, round_robin([1, 3, 2, 4], 8, 3), TWO_HOSTS)
    plan = moldau_ops.plan_decommission(before, 1)
    assert_valid(before, plan)
    assert_host_spread_kept(before, plan)
    assert all(1 not in r for r in applied(before, plan).replicas.values())


def test_decommission_puts_the_rack_before_the_host() -> None:
    # server s2 spans racks b and c (a misconfiguration): as in placement, a free rack
    # wins over a free host
    brokers = {1: "a", 2: "b", 3: "b", 4: "c"}
    hosts = {1: "s1", 2: "s2", 3: "s3", 4: "s2"}
    before = cluster(brokers, {("t", 0): [1, 2]}, hosts)
    assert moldau_ops.plan_decommission(before, 1) == {("t", 0): [4, 2]}
    # with rack c gone, the broker on a free host wins over the one on s2
    without_c = cluster({1: "a", 2: "b", 3: "b", 5: "b"}, {("t", 0): [1, 2]},
                        {1: "s1", 2: "s2", 3: "s2", 5: "s5"})
    assert moldau_ops.plan_decommission(without_c, 1) == {("t", 0): [5, 2]}


def test_rebalance_never_doubles_up_a_host() -> None:
    # without the host rule this plan put t-0 on [1, 2] (server-a) and t-2 on [3, 4]
    replicas = {("t", 0): [2, 3], ("t", 1): [1, 3], ("t", 2): [1, 4], ("t", 3): [1, 4]}
    before = cluster({b: "" for b in TWO_HOSTS}, replicas, TWO_HOSTS)
    plan = moldau_ops.plan_rebalance(before, set())
    after = assert_balanced(before, plan, set(TWO_HOSTS))
    assert all(len(hosts_of(after, r)) == 2 for r in after.replicas.values())
    assert moldau_ops.plan_rebalance(after, set()) == {}


def test_rebalance_onto_an_added_server_keeps_hosts_apart() -> None:
    hosts = {**TWO_HOSTS, 5: "server-c", 6: "server-c"}
    before = cluster({b: "" for b in hosts},
                     round_robin([1, 3, 2, 4], 12, 2, ("orders", "__consumer_offsets")), hosts)
    plan = moldau_ops.plan_rebalance(before, set())
    after = assert_balanced(before, plan, set(hosts))
    assert all(len(hosts_of(after, r)) == 2 for r in after.replicas.values())
    assert moldau_ops.counts(after)["replicas"][5] > 0


@pytest.mark.parametrize("seed", range(20))
def test_rebalance_of_random_clusters_with_hosts_never_loses_host_spread(seed: int) -> None:
    rng = random.Random(seed)
    ids = list(range(1, rng.randint(4, 7)))
    hosts = {b: f"server-{(b - 1) // 2}" for b in ids}  # two brokers per server
    brokers = {b: (f"r{(b - 1) // 4}" if seed % 2 else "") for b in ids}  # racks of servers
    replicas = {(topic, p): rng.sample(ids, rng.randint(1, 3))
                for topic in ("a", "b") for p in range(rng.randint(2, 8))}
    before = cluster(brokers, replicas, hosts)
    plan = moldau_ops.plan_rebalance(before, set())
    assert_valid(before, plan)
    assert_host_spread_kept(before, plan)
    for tp, r in plan.items():
        assert len(racks_of(before, r) - {""}) >= len(racks_of(before, replicas[tp]) - {""})
    assert moldau_ops.plan_rebalance(applied(before, plan), set()) == {}


@pytest.mark.parametrize("seed", range(10))
def test_a_host_per_broker_plans_as_without_hosts(seed: int) -> None:
    """One broker per server (or the key set on none) is Kafka's world: the same plans."""
    rng = random.Random(seed)
    ids = list(range(1, rng.randint(4, 7)))
    brokers = {b: (f"r{b % 2}" if seed % 2 else "") for b in ids}
    replicas = {(topic, p): rng.sample(ids[:-1], rng.randint(1, min(3, len(ids) - 1)))
                for topic in ("a", "b") for p in range(rng.randint(2, 8))}
    plain = cluster(brokers, replicas)
    own_hosts = cluster(brokers, replicas, {b: f"server-{b}" for b in ids})
    assert moldau_ops.plan_rebalance(own_hosts, set()) == moldau_ops.plan_rebalance(plain, set())
    leaving = rng.choice(ids)
    try:
        expected = moldau_ops.plan_decommission(plain, leaving)
    except ValueError:
        with pytest.raises(ValueError):
            moldau_ops.plan_decommission(own_hosts, leaving)
    else:
        assert moldau_ops.plan_decommission(own_hosts, leaving) == expected


# --- demote (leadership off a broker before its data moves) ---------------------------

def test_demote_puts_the_broker_last_where_it_leads_and_moves_no_data() -> None:
    before = cluster({b: "" for b in (1, 2, 3, 4)}, round_robin([1, 2, 3, 4], 12, 3))
    plan = moldau_ops.plan_demote(before, 2)
    assert_valid(before, plan)
    assert set(plan) == {tp for tp, r in before.replicas.items() if r[0] == 2}
    for tp, r in plan.items():
        assert sorted(r) == sorted(before.replicas[tp]) and r[-1] == 2
    assert all(r[0] != 2 for r in applied(before, plan).replicas.values())
    assert moldau_ops.plan_demote(applied(before, plan), 2) == {}


# --- rebalance ----------------------------------------------------------------------

def assert_balanced(before: Cluster, plan: dict[TP, list[int]], brokers: set[int]) -> Cluster:
    assert_valid(before, plan)
    after = applied(before, plan)
    counts = moldau_ops.counts(after)
    replicas = {b: n for b, n in counts["replicas"].items() if b in brokers}
    leaders = {b: n for b, n in counts["preferred_leaders"].items() if b in brokers}
    assert spread(replicas) <= 1, replicas
    assert spread(leaders) <= 1, leaders
    for tp, r in plan.items():  # no partition lost a rack
        assert len(racks_of(before, r) - {""}) >= len(racks_of(before, before.replicas[tp]) - {""})
    return after


def test_rebalance_spreads_onto_an_added_broker() -> None:
    before = cluster({b: "" for b in (1, 2, 3, 4)},
                     round_robin([1, 2, 3], 12, 3, ("orders", "__consumer_offsets")))
    plan = moldau_ops.plan_rebalance(before, set())
    after = assert_balanced(before, plan, {1, 2, 3, 4})
    assert moldau_ops.counts(after)["replicas"][4] > 0
    assert moldau_ops.plan_rebalance(after, set()) == {}  # a second run moves nothing


def test_rebalance_of_a_balanced_cluster_moves_nothing() -> None:
    before = cluster({b: "" for b in (1, 2, 3, 4)}, round_robin([1, 2, 3, 4], 12, 3))
    assert moldau_ops.plan_rebalance(before, set()) == {}


def test_rebalance_excludes_a_broker() -> None:
    before = cluster({b: "" for b in (1, 2, 3, 4)}, round_robin([1, 2, 3], 9, 2))
    plan = moldau_ops.plan_rebalance(before, {4})
    after = assert_balanced(before, plan, {1, 2, 3})
    assert all(4 not in r for r in after.replicas.values())


def test_rebalance_moves_leaders_with_racks() -> None:
    brokers = {1: "a", 2: "a", 3: "b", 4: "b"}
    # all preferred leaders on broker 1, replicas on one broker per rack
    replicas = {("t", p): [1, 3] if p % 2 else [1, 4] for p in range(8)}
    before = cluster(brokers, replicas)
    plan = moldau_ops.plan_rebalance(before, set())
    after = assert_balanced(before, plan, set(brokers))
    assert all(racks_of(after, r) == {"a", "b"} for r in after.replicas.values())


@pytest.mark.parametrize("seed", range(40))
def test_rebalance_of_random_clusters_is_within_one(seed: int) -> None:
    """Random skewed assignments (some racked), each RF <= the number of brokers."""
    rng = random.Random(seed)
    n = rng.randint(3, 6)
    ids = list(range(1, n + 1))
    racked = seed % 2 == 1
    brokers = {b: (f"r{b % 3}" if racked else "") for b in ids}
    replicas: dict[TP, list[int]] = {}
    weights = [rng.random() ** 3 + 1e-3 for _ in ids]  # skewed towards a few brokers
    for topic, p in itertools.product(("a", "b", "c"), range(rng.randint(1, 8))):
        rf = rng.randint(1, min(3, n))
        # weighted sampling without replacement (a key of u ** (1 / w) per broker)
        keys = {b: rng.random() ** (1 / w) for b, w in zip(ids, weights, strict=True)}
        replicas[(topic, p)] = sorted(ids, key=lambda b: -keys[b])[:rf]
    before = cluster(brokers, replicas)
    plan = moldau_ops.plan_rebalance(before, set())
    assert_valid(before, plan)
    after = applied(before, plan)
    if not racked:
        assert_balanced(before, plan, set(ids))
    else:  # with racks a move that would lose a rack is refused; racks are never lost
        for tp, r in plan.items():
            assert len(racks_of(before, r)) >= len(racks_of(before, before.replicas[tp]))
    assert moldau_ops.plan_rebalance(after, set()) == {}


# --- restart risks and counts ---------------------------------------------------------

def test_restart_risks_lists_rf1_and_min_isr_partitions() -> None:
    c = cluster({1: "", 2: "", 3: ""}, {("solo", 0): [1], ("t", 0): [1, 2, 3], ("t", 1): [2, 3, 1]})
    c.isr[("t", 1)] = [2, 3]  # at min.insync.replicas=2
    risks = moldau_ops.restart_risks(c)
    assert len(risks) == 2
    assert risks[0].startswith("solo-0 replication factor 1")
    assert risks[1].startswith("t-1 at min ISR")


def test_counts_cover_every_live_broker() -> None:
    c = cluster({1: "", 2: "", 3: "", 4: ""}, round_robin([1, 2, 3], 3, 3))
    counts = moldau_ops.counts(c)
    assert counts["replicas"] == {1: 3, 2: 3, 3: 3, 4: 0}
    assert counts["preferred_leaders"] == {1: 1, 2: 1, 3: 1, 4: 0}
