"""The planners behind the day-2 procedures of issue 40 (roles/broker/files/moldau_ops.py):
increase-replication-factor.yml, reassign.yml's check of an operator's plan,
drain-broker.yml, and rebalance.yml by partition size and on servers or racks with
unequal broker counts, on cluster snapshots built in memory. The playbooks execute what
these plans say, so each plan must keep every replication factor it does not raise, never
list a broker twice, and keep the racks and hosts a partition spans."""

from __future__ import annotations

import json
import random
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "roles" / "broker" / "files"))

import moldau_ops
from moldau_ops import TP, Cluster


def snapshot(brokers: dict[int, str], replicas: dict[TP, list[int]],
             hosts: dict[int, str] | None = None) -> Cluster:
    """A healthy cluster: every replica in the ISR, the first replica leading."""
    return Cluster(brokers=dict(brokers), replicas={tp: list(r) for tp, r in replicas.items()},
                   isr={tp: list(r) for tp, r in replicas.items()},
                   leader={tp: r[0] for tp, r in replicas.items()},
                   min_isr={tp: 2 for tp in replicas}, hosts=dict(hosts or {}))


def round_robin(brokers: list[int], partitions: int, rf: int, topic: str = "orders",
                shift: int = 0) -> dict[TP, list[int]]:
    return {(topic, p): [brokers[(p + shift + i) % len(brokers)] for i in range(rf)]
            for p in range(partitions)}


def applied(c: Cluster, plan: dict[TP, list[int]]) -> Cluster:
    return snapshot(c.brokers, {**c.replicas, **plan}, c.hosts)


def hosts_of(c: Cluster, r: list[int]) -> set[str]:
    return {c.hosts.get(b, f"own host of {b}") for b in r}


def racks_of(c: Cluster, r: list[int]) -> set[str]:
    return {c.brokers[b] for b in r} - {""}


def spread(values: dict[int, int]) -> int:
    return max(values.values()) - min(values.values())


def assert_spread_kept(before: Cluster, plan: dict[TP, list[int]]) -> None:
    for tp, r in plan.items():
        assert len(set(r)) == len(r), (tp, r)
        assert len(racks_of(before, r)) >= len(racks_of(before, before.replicas[tp])), (tp, r)
        assert len(hosts_of(before, r)) >= len(hosts_of(before, before.replicas[tp])), (tp, r)


FOUR = {b: "" for b in (1, 2, 3, 4)}


# --- increase-replication-factor.yml ----------------------------------------------------

def test_increase_appends_replicas_on_the_least_loaded_brokers() -> None:
    replicas = {**round_robin([1, 2, 3, 4], 8, 2), **round_robin([1, 2, 3], 6, 3, "other")}
    before = snapshot(FOUR, replicas)
    plan = moldau_ops.plan_increase_rf(before, "orders", 3)
    assert set(plan) == {("orders", p) for p in range(8)}  # the other topic stays
    for tp, r in plan.items():
        assert r[:2] == before.replicas[tp] and len(set(r)) == 3  # leader and order kept
    load = Counter(b for r in applied(before, plan).replicas.values() for b in r)
    # broker 4 (no replica of "other") joined every partition it was not in; the others
    # shared the rest
    assert load[4] == 8 and spread({b: load[b] for b in (1, 2, 3)}) <= 1, load
    assert moldau_ops.plan_increase_rf(applied(before, plan), "orders", 3) == {}


def test_increase_takes_a_new_rack_then_a_new_host() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    before = snapshot(racks, {("t", p): [1 + p % 2] for p in range(4)})
    plan = moldau_ops.plan_increase_rf(before, "t", 2)
    assert all(racks_of(before, r) == {"a", "b"} for r in plan.values())
    hosts = {1: "s1", 2: "s1", 3: "s2", 4: "s2"}
    before = snapshot(FOUR, {("t", p): [1 + p % 2] for p in range(4)}, hosts)
    plan = moldau_ops.plan_increase_rf(before, "t", 2)
    assert all(hosts_of(before, r) == {"s1", "s2"} for r in plan.values())


def test_increase_refuses_what_it_cannot_do() -> None:
    before = snapshot(FOUR, round_robin([1, 2, 3, 4], 4, 2))
    with pytest.raises(ValueError, match="above the 4 live brokers"):
        moldau_ops.plan_increase_rf(before, "orders", 5)
    with pytest.raises(ValueError, match="decreasing is a different procedure") as failure:
        moldau_ops.plan_increase_rf(before, "orders", 1)
    assert "orders-0 has 2" in str(failure.value)
    with pytest.raises(ValueError, match="topic nope does not exist"):
        moldau_ops.plan_increase_rf(before, "nope", 3)
    assert moldau_ops.plan_increase_rf(before, "orders", 2) == {}


def test_increase_evens_out_a_topic_with_mixed_factors() -> None:
    before = snapshot(FOUR, {("t", 0): [1], ("t", 1): [2, 3], ("t", 2): [3, 4, 1]})
    plan = moldau_ops.plan_increase_rf(before, "t", 3)
    assert set(plan) == {("t", 0), ("t", 1)}
    assert all(len(r) == 3 for r in applied(before, plan).replicas.values())


# --- drain-broker.yml ------------------------------------------------------------------

def test_drain_puts_the_broker_last_everywhere_and_undrain_brings_leaders_back() -> None:
    before = snapshot(FOUR, round_robin([1, 2, 3, 4], 12, 3))
    plan = moldau_ops.plan_drain(before, 2)
    assert set(plan) == {tp for tp, r in before.replicas.items() if 2 in r[:-1]}
    drained = applied(before, plan)
    for tp, r in drained.replicas.items():
        assert sorted(r) == sorted(before.replicas[tp])  # no data moves
        assert 2 not in r or r[-1] == 2
    assert moldau_ops.counts(drained)["preferred_leaders"][2] == 0
    assert moldau_ops.plan_drain(drained, 2) == {}  # a second run changes nothing
    # undrain: leadership only, back within one, replica sets untouched
    back = moldau_ops.plan_rebalance(drained, set(), leaders_only=True)
    undrained = applied(drained, back)
    assert all(sorted(r) == sorted(before.replicas[tp]) for tp, r in undrained.replicas.items())
    assert spread(moldau_ops.counts(undrained)["preferred_leaders"]) <= 1


def test_drain_names_partitions_whose_only_replica_is_the_broker() -> None:
    before = snapshot(FOUR, {("solo", 0): [2], ("solo", 1): [3], ("t", 0): [2, 1]})
    assert moldau_ops.sole_replicas(before, 2) == ["solo-0"]
    assert moldau_ops.plan_drain(before, 2) == {("t", 0): [1, 2]}


# --- reassign.yml: an operator's plan --------------------------------------------------

def plan_text(*entries: dict[str, object]) -> str:
    return json.dumps({"version": 1, "partitions": list(entries)})


def test_a_valid_plan_is_returned_as_written() -> None:
    before = snapshot(FOUR, round_robin([1, 2, 3, 4], 4, 2))
    text = plan_text({"topic": "orders", "partition": 0, "replicas": [3, 4]},
                     {"topic": "orders", "partition": 1, "replicas": [2, 3, 4],
                      "log_dirs": ["any", "any", "any"]})
    assert moldau_ops.check_plan(before, text) == {("orders", 0): [3, 4],
                                                   ("orders", 1): [2, 3, 4]}


def test_a_bad_plan_is_refused_naming_every_bad_entry() -> None:
    before = snapshot(FOUR, round_robin([1, 2, 3, 4], 4, 2))
    text = plan_text({"topic": "orders", "partition": 0, "replicas": [1, 9]},
                     {"topic": "orders", "partition": 7, "replicas": [1, 2]},
                     {"topic": "nope", "partition": 0, "replicas": [1, 2]},
                     {"topic": "orders", "partition": 1, "replicas": [3, 3]},
                     {"topic": "orders", "partition": 0, "replicas": [2, 3]},
                     {"topic": "orders", "partition": 2, "replicas": [1, 2],
                      "log_dirs": ["/data/a", "any"]},
                     {"topic": "orders", "partition": 3, "replicas": []})
    with pytest.raises(ValueError) as failure:
        moldau_ops.check_plan(before, text)
    lines = str(failure.value).splitlines()
    assert lines == [
        "entry 1 (orders-0): broker(s) [9] not registered (live brokers: [1, 2, 3, 4])",
        "entry 2 (orders-7): orders has no partition 7 (its partitions: 0 to 3)",
        "entry 3 (nope-0): unknown topic nope",
        "entry 4 (orders-1): broker(s) [3] listed twice in [3, 3]",
        "entry 5 (orders-0): orders-0 is listed more than once",
        'entry 6 (orders-2): log_dirs other than "any" (moves between a broker\'s '
        "directories) are not run by this playbook",
        "entry 7 (orders-3): needs a topic name, a partition number and a non-empty list "
        "of broker ids as replicas"]


@pytest.mark.parametrize("text", ["not json", "[]", '{"version": 1}',
                                  '{"version": 1, "partitions": []}'])
def test_a_plan_without_partitions_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"not JSON|partitions"):
        moldau_ops.check_plan(snapshot(FOUR, round_robin([1, 2, 3, 4], 4, 2)), text)


# --- rebalance.yml -e rebalance_by=size -----------------------------------------------

LOG_DIRS = """Querying brokers for log directories information
Received log directory information from brokers 1,2
{"version":1,"brokers":[{"broker":1,"logDirs":[{"logDir":"/var/lib/moldau","error":null,\
"partitions":[{"partition":"orders-0","size":900,"offsetLag":0,"isFuture":false},\
{"partition":"my-topic-1","size":10,"offsetLag":0,"isFuture":false}]}]},\
{"broker":2,"logDirs":[{"logDir":"/var/lib/moldau","error":null,"partitions":[\
{"partition":"orders-0","size":1000,"offsetLag":0,"isFuture":false},\
{"partition":"my-topic-1","size":99999,"offsetLag":0,"isFuture":true}]}]}]}
"""


def test_sizes_come_from_kafka_log_dirs() -> None:
    """The largest replica counts (a follower may lag); a future replica does not."""
    assert moldau_ops.parse_log_dirs(LOG_DIRS) == {("orders", 0): 1000, ("my-topic", 1): 10}
    with pytest.raises(ValueError, match="no JSON"):
        moldau_ops.parse_log_dirs("Querying brokers\n")


def bytes_per_broker(c: Cluster, sizes: dict[TP, int]) -> dict[int, int]:
    return {b: sum(sizes.get(tp, 0) for tp, r in c.replicas.items() if b in r)
            for b in c.brokers}


def test_size_rebalance_evens_out_bytes_that_counts_call_balanced() -> None:
    # equal replica counts, but the big topic sits on brokers 1 and 2 only
    replicas = {**round_robin([1, 2], 4, 2, "big"), **round_robin([3, 4], 4, 2, "small")}
    sizes = {tp: (1000 if tp[0] == "big" else 10) for tp in replicas}
    before = snapshot(FOUR, replicas)
    assert moldau_ops.plan_rebalance(before, set()) == {}  # by counts: nothing to do
    plan = moldau_ops.plan_rebalance(before, set(), sizes)
    assert_spread_kept(before, plan)
    after = applied(before, plan)
    load = bytes_per_broker(after, sizes)
    assert spread(load) <= 0.1 * sum(load.values()) / 4, load
    # leadership as even as reordering replica lists gets it (no data moves for it)
    assert moldau_ops.balance(after, set(), leaders_only=True)["balanced"]
    assert moldau_ops.plan_rebalance(after, set(), sizes) == {}  # then nothing left


@pytest.mark.parametrize("seed", range(20))
def test_size_rebalance_of_random_clusters_never_widens_the_bytes_spread(seed: int) -> None:
    rng = random.Random(seed)
    ids = list(range(1, rng.randint(3, 7)))
    hosts = {b: f"server-{(b - 1) // 2}" for b in ids} if seed % 3 == 0 else {}
    brokers = {b: (f"r{b % 2}" if seed % 2 else "") for b in ids}
    replicas = {(t, p): rng.sample(ids, rng.randint(1, min(3, len(ids))))
                for t in ("a", "b") for p in range(rng.randint(2, 10))}
    sizes = {tp: int(rng.random() ** 4 * 10_000) for tp in replicas}
    before = snapshot(brokers, replicas, hosts)
    plan = moldau_ops.plan_rebalance(before, set(), sizes)
    assert_spread_kept(before, plan)
    after = applied(before, plan)
    # the planner lowers the sum of squared bytes per broker with every move
    squares = [sum(v * v for v in bytes_per_broker(c, sizes).values()) for c in (before, after)]
    assert squares[1] <= squares[0]
    for tp, r in plan.items():  # and moves data only for bytes: leadership is reordering
        if sorted(r) != sorted(replicas[tp]):
            assert sizes[tp] > 0, (tp, r)
    assert moldau_ops.plan_rebalance(after, set(), sizes) == {}


# --- unequal broker counts per server or rack ------------------------------------------

def test_one_broker_on_one_server_two_on_another_is_balanced_as_far_as_it_goes() -> None:
    """RF 2 over servers a (broker 1) and b (brokers 2, 3): every partition keeps both
    servers, so broker 1 holds a replica of each and 2 and 3 share the others: counts 12,
    6, 6 are the best there is, and the check accepts them instead of failing."""
    hosts = {1: "a", 2: "b", 3: "b"}
    replicas = {("t", p): [1, 2] if p < 9 else [3, 1] for p in range(12)}
    before = snapshot({1: "", 2: "", 3: ""}, replicas, hosts)
    plan = moldau_ops.plan_rebalance(before, set())
    assert_spread_kept(before, plan)
    after = applied(before, plan)
    assert moldau_ops.counts(after)["replicas"] == {1: 12, 2: 6, 3: 6}
    report = moldau_ops.balance(after, set())
    assert report["balanced"] and not report["within_one"]
    assert report["target"] == report["now"]
    # before the plan the check names what is left to move and where it leads
    report = moldau_ops.balance(before, set())
    assert not report["balanced"] and report["moves_left"] == len(plan)
    assert report["target"]["replicas"] == {1: 12, 2: 6, 3: 6}


def test_unequal_racks_reach_the_achievable_target() -> None:
    """Rack a has one broker, rack b three; RF 2 keeps both racks, so broker 1 holds every
    partition and the three in rack b share the other replicas within one."""
    racks = {1: "a", 2: "b", 3: "b", 4: "b"}
    replicas = {("t", p): [1, 2 if p % 3 else 3] for p in range(9)}
    before = snapshot(racks, replicas)
    after = applied(before, moldau_ops.plan_rebalance(before, set()))
    replica_counts = moldau_ops.counts(after)["replicas"]
    assert replica_counts[1] == 9 and spread({b: replica_counts[b] for b in (2, 3, 4)}) <= 1
    assert moldau_ops.balance(after, set())["balanced"]


def test_a_chain_of_moves_reaches_what_no_single_move_can() -> None:
    """Broker 1 (rack a) has two more replicas than broker 4 (rack b), but every partition
    of broker 1 already has a rack-b replica and no rack-a one: moving one to 4 would lose
    rack a. Two moves do it: 1 gives a replica to 2 (rack a), 2 gives another to 4."""
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    replicas = {("t", 0): [1, 3], ("t", 1): [1, 3], ("t", 2): [2, 3], ("t", 3): [2, 4],
                ("u", 0): [2]}
    before = snapshot(racks, replicas)
    plan = moldau_ops.plan_rebalance(before, set())
    assert_spread_kept(before, plan)
    after = applied(before, plan)
    assert spread(moldau_ops.counts(after)["replicas"]) <= 1, after.replicas


@pytest.mark.parametrize("seed", range(30))
def test_random_unequal_servers_end_balanced_by_their_own_check(seed: int) -> None:
    rng = random.Random(seed)
    ids = list(range(1, rng.randint(4, 8)))
    hosts = {b: f"server-{rng.randint(0, 2)}" for b in ids}
    brokers = {b: (f"r{b % 2}" if seed % 2 else "") for b in ids}
    replicas = {(t, p): rng.sample(ids, rng.randint(1, 3))
                for t in ("a", "b") for p in range(rng.randint(2, 10))}
    before = snapshot(brokers, replicas, hosts)
    plan = moldau_ops.plan_rebalance(before, set())
    assert_spread_kept(before, plan)
    after = applied(before, plan)
    report = moldau_ops.balance(after, set())
    assert report["balanced"], report
    counted = moldau_ops.counts(after)["replicas"]
    assert spread(counted) <= spread(moldau_ops.counts(before)["replicas"])
