"""The host as a failure domain below the rack (`moldau.broker.host`, a Moldau
extension): placement that puts no two replicas of a partition on one server whenever
there are enough servers, Kafka's placement byte for byte while no two brokers share a
host, the warnings for what cannot be helped, and the registration field that carries the
host to the placing broker."""

from __future__ import annotations

import json
import logging
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from moldau.cluster import zk_data
from moldau.cluster.assignment import (
    MIXED_RACKS,
    AdminOperationError,
    BrokerMetadata,
    RackAwareMode,
    assign_replicas,
    broker_metadatas,
    domain_alternated_brokers,
    host_keys,
)
from moldau.cluster.host_domains import hosts_of, shared_hosts
from moldau.server.config import BrokerConfig, ConfigError
from moldau.server.metadata_cache import BrokerEndpoints, MetadataCache
from moldau.server.topic_admin import TopicAdmin

B = BrokerMetadata


def two_by_two() -> list[BrokerMetadata]:
    """The issue's layout: two servers with two brokers each."""
    return [B(1, None, "a"), B(2, None, "a"), B(3, None, "b"), B(4, None, "b")]


# --- the exact placement --------------------------------------------------------------


def test_two_hosts_of_two_brokers_fixed_start() -> None:
    # Worked by hand. The walk list alternates hosts (a before b: its lowest id is lower):
    # 1 3 2 4. Without racks the hosts are the top domain, so the shift is scaled by the
    # host count (2) as Kafka scales it by the rack count. Slot k of a follower of the
    # partition led from index f is (f + 1 + (2 * shift + k) % 3) % 4.
    # Lap 1 (shift 0): p0 leader 1, slot 1 -> 3 (host b); p1 leader 3 -> 2; p2 2 -> 4;
    # p3 4 -> index 0, broker 1. Lap 2 (shift 1, offset 2): p4 1 -> index 3, broker 4;
    # p5 3 -> index 0, broker 1; p6 2 -> index 1, broker 3; p7 4 -> index 2, broker 2.
    assert assign_replicas(two_by_two(), 8, 2, start_index=0, next_replica_shift=0) == {
        0: [1, 3], 1: [3, 2], 2: [2, 4], 3: [4, 1],
        4: [1, 4], 5: [3, 1], 6: [2, 3], 7: [4, 2]}


def test_a_lone_host_takes_a_replica_of_every_partition() -> None:
    # Brokers 1 and 2 share a server, 3 is a host of its own (no moldau.broker.host):
    # with RF 2 every partition has a replica on 3, as a lone rack's broker in Kafka.
    brokers = [B(1, None, "a"), B(2, None, "a"), B(3)]
    for start in range(3):
        for shift in range(3):
            placed = assign_replicas(brokers, 6, 2, start, shift)
            assert all(3 in replicas for replicas in placed.values()), placed
            assert sorted(Counter(r[0] for r in placed.values()).values()) == [2, 2, 2]


def test_domain_alternated_list() -> None:
    hosts = {0: "x", 1: "x", 2: "y", 3: "y", 4: "z", 5: "z"}
    # Hosts in the order of their lowest id, one broker of each in turn.
    assert domain_alternated_brokers(None, hosts) == [0, 2, 4, 1, 3, 5]
    # With racks: Kafka's rotation of racks, each rack's brokers alternating its hosts.
    racks = {0: "r1", 1: "r1", 2: "r1", 3: "r1", 4: "r2", 5: "r2"}
    hosts = {0: "h1", 1: "h1", 2: "h2", 3: "h2", 4: "h3", 5: "h4"}
    # Kafka's list would be 0 4 1 5 2 3; rack r1's turns take 0 2 1 3 instead of 0 1 2 3.
    assert domain_alternated_brokers(racks, hosts) == [0, 4, 2, 5, 1, 3]
    # One broker per host: Kafka's list.
    unique = host_keys([B(b, r) for b, r in racks.items()])
    assert domain_alternated_brokers(racks, unique) == [0, 4, 1, 5, 2, 3]


def test_rack_first_then_host() -> None:
    # Two racks of two servers of two brokers; RF 3 spans both racks and three servers.
    brokers = [B(i, f"r{i // 4}", f"h{i // 2}") for i in range(8)]
    for start in range(8):
        for shift in range(8):
            for replicas in assign_replicas(brokers, 16, 3, start, shift).values():
                assert {brokers[b].rack for b in replicas} == {"r0", "r1"}
                assert len({brokers[b].host for b in replicas}) == 3


# --- Kafka's placement while no host is shared ------------------------------------------


@st.composite
def clusters(draw: Any) -> tuple[list[tuple[int, str | None]], int, int, int, int, int]:
    ids = draw(st.lists(st.integers(0, 50), min_size=1, max_size=12, unique=True))
    with_racks = draw(st.booleans())
    rack_names = draw(st.lists(st.sampled_from("abcd"), min_size=len(ids), max_size=len(ids)))
    brokers = [(b, r if with_racks else None) for b, r in zip(ids, rack_names, strict=True)]
    rf = draw(st.integers(1, len(ids)))
    partitions = draw(st.integers(1, 30))
    start = draw(st.integers(0, len(ids) - 1))
    shift = draw(st.integers(0, len(ids) - 1))
    first = draw(st.integers(0, 20))
    return brokers, rf, partitions, start, shift, first


@settings(max_examples=examples(300), deadline=None)
@given(clusters(), st.data())
def test_one_broker_per_host_is_kafkas_placement(cluster: Any, data: Any) -> None:
    brokers, rf, partitions, start, shift, first = cluster
    kafka = assign_replicas(brokers, partitions, rf, start, shift, first)
    # Each broker on a host of its own, named or not: the same placement.
    named = data.draw(st.lists(st.booleans(), min_size=len(brokers), max_size=len(brokers)))
    hosted = [B(b, r, f"server-{b}" if n else None)
              for (b, r), n in zip(brokers, named, strict=True)]
    assert assign_replicas(hosted, partitions, rf, start, shift, first) == kafka


# --- the guarantee, for any layout --------------------------------------------------------


@st.composite
def hosted_clusters(draw: Any) -> tuple[list[BrokerMetadata], int, int, int, int]:
    """Brokers on servers (some on their own), servers in racks or no racks at all."""
    host_count = draw(st.integers(1, 6))
    with_racks = draw(st.booleans())
    rack_of_host = draw(st.lists(st.sampled_from("xyz"), min_size=host_count,
                                 max_size=host_count))
    per_host = draw(st.lists(st.integers(1, 4), min_size=host_count, max_size=host_count))
    ids = iter(draw(st.permutations(range(sum(per_host)))))
    brokers = []
    for h, count in enumerate(per_host):
        for _ in range(count):
            # a host with one broker may leave the key unset: it is a host of its own
            name = None if count == 1 and draw(st.booleans()) else f"host{h}"
            brokers.append(B(next(ids), rack_of_host[h] if with_racks else None, name))
    rf = draw(st.integers(1, len(brokers)))
    partitions = draw(st.integers(1, 30))
    start = draw(st.integers(-1, len(brokers) - 1))
    shift = draw(st.integers(-1, len(brokers) - 1))
    return brokers, rf, partitions, start, shift


@settings(max_examples=examples(400), deadline=None)
@given(hosted_clusters())
def test_no_host_holds_two_replicas_while_hosts_suffice(cluster: Any) -> None:
    brokers, rf, partitions, start, shift = cluster
    placed = assign_replicas(brokers, partitions, rf, start, shift)
    hosts = host_keys(brokers)
    racks = {b.id: b.rack for b in brokers}
    host_count = len(set(hosts.values()))
    rack_count = len(set(racks.values()))
    for replicas in placed.values():
        assert len(replicas) == rf == len(set(replicas))
        # min(rf, hosts) servers: none holds two replicas when there are rf of them
        assert len({hosts[b] for b in replicas}) == min(rf, host_count), placed
        if brokers[0].rack is not None:  # and Kafka's rack guarantee holds first
            assert len({racks[b] for b in replicas}) == min(rf, rack_count)
    # Leaders still go round robin over every broker.
    leaders = Counter(replicas[0] for replicas in placed.values())
    counts = [leaders.get(b.id, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from("pqr")), min_size=2,
                max_size=8), st.integers(0, 7), st.integers(0, 7))
def test_hosts_that_span_racks_still_place(layout: list[tuple[str, str]], start: int,
                                           shift: int) -> None:
    # A misconfiguration (one host in two racks): the rack rule wins and the walk ends.
    brokers = [B(i, rack, host) for i, (rack, host) in enumerate(layout)]
    rf = min(3, len(brokers))
    placed = assign_replicas(brokers, 10, rf, start % len(brokers), shift % len(brokers))
    rack_count = len({b.rack for b in brokers})
    for replicas in placed.values():
        assert len(set(replicas)) == rf
        assert len({brokers[b].rack for b in replicas}) == min(rf, rack_count)


def test_replication_factor_above_the_hosts_is_placed_best_effort() -> None:
    # Kafka would create it (it counts brokers): Moldau too, spanning every host.
    placed = assign_replicas(two_by_two(), 4, 3, start_index=0)
    for replicas in placed.values():
        assert len(set(replicas)) == 3
        assert {("a" if b <= 2 else "b") for b in replicas} == {"a", "b"}
    crowded = shared_hosts(placed, {1: "a", 2: "a", 3: "b", 4: "b"})
    assert sorted(crowded) == [0, 1, 2, 3]
    assert all(len(by_host) == 1 and len(next(iter(by_host.values()))) == 2
               for by_host in crowded.values())


def test_racks_rules_stay_kafkas_with_hosts() -> None:
    with pytest.raises(AdminOperationError) as e:
        assign_replicas([B(1, "r1", "a"), B(2, None, "a")], 1, 1)
    assert str(e.value) == MIXED_RACKS
    # --disable-rack-aware drops racks, not hosts: it never allows two replicas per server
    mixed = [(2, "r2", "b"), (1, None, "a"), (3, "r1", "a")]
    assert broker_metadatas(mixed, RackAwareMode.DISABLED) == [
        B(1, None, "a"), B(2, None, "b"), B(3, None, "a")]
    assert broker_metadatas(mixed, RackAwareMode.SAFE) == [
        B(1, None, "a"), B(2, None, "b"), B(3, None, "a")]


# --- the admin path: hosts from the registrations, warnings ---------------------------


def topic_admin(brokers: list[int]) -> TopicAdmin:
    cache = MetadataCache(0)
    cache.set_brokers([BrokerEndpoints(b, {}) for b in brokers])
    unused_zk: Any = None  # plan() is given the hosts; it does not read ZooKeeper
    return TopicAdmin(BrokerConfig.from_properties({"zookeeper.connect": "zk:2181"}), cache,
                      unused_zk)


def test_topic_admin_places_on_hosts(caplog: pytest.LogCaptureFixture) -> None:
    admin = topic_admin([1, 2, 3, 4])
    hosts = {1: "a", 2: "a", 3: "b", 4: "b"}
    assert admin.live_brokers(hosts)[0].host is not None
    with caplog.at_level(logging.WARNING, logger="kafka.server.ZkAdminManager"):
        for _ in range(20):  # a random start index and shift each time
            plan = admin.plan("t", 8, 2, None, hosts)
            assert all({hosts[b] for b in r} == {"a", "b"} for r in plan.values())
    assert caplog.records == []
    with caplog.at_level(logging.WARNING, logger="kafka.server.ZkAdminManager"):
        admin.plan("wide", 4, 3, None, hosts)
    assert caplog.messages == [
        "Replication factor 3 of wide is larger than the 2 hosts (moldau.broker.host) of "
        "its brokers: 4 of its partitions have more than one replica on one host"]


def test_explicit_assignment_on_one_host_is_accepted_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    admin = topic_admin([1, 2, 3])
    hosts = {1: "a", 2: "a"}
    with caplog.at_level(logging.WARNING, logger="kafka.server.ZkAdminManager"):
        assert admin.plan("pinned", -1, -1, {0: [1, 3], 1: [2, 1]}, hosts) == {
            0: [1, 3], 1: [2, 1]}
    assert caplog.messages == [
        "The assignment puts replicas 2,1 of pinned-1 on one host, a (moldau.broker.host): "
        "losing that server loses all of them"]


# --- the registration and the key -----------------------------------------------------


def test_registration_carries_the_host_after_kafkas_fields() -> None:
    endpoints = [zk_data.EndPoint("PLAINTEXT", "h", 9092, "PLAINTEXT")]
    plain = zk_data.BrokerRegistration(1, endpoints, rack="r1", timestamp=5)
    hosted = zk_data.BrokerRegistration(1, endpoints, rack="r1", timestamp=5,
                                        moldau_host="server-7")
    # Unset: the bytes Kafka writes. Set: the same fields in the same order, then Moldau's.
    assert b"moldau" not in plain.encode()
    assert hosted.encode() == plain.encode()[:-1] + b',"moldau_host":"server-7"}'
    decoded = zk_data.BrokerRegistration.decode(1, hosted.encode())
    assert decoded == hosted and decoded.moldau_host == "server-7"
    assert zk_data.BrokerRegistration.decode(1, plain.encode()).moldau_host is None
    # A znode with something else there (hand-edited): no host.
    odd = json.loads(plain.encode())
    odd["moldau_host"] = 7
    assert zk_data.BrokerRegistration.decode(1, json.dumps(odd).encode()).moldau_host is None
    assert hosts_of([hosted, zk_data.BrokerRegistration(2, endpoints)]) == {1: "server-7"}


def test_the_key_is_a_moldau_extension() -> None:
    base = {"zookeeper.connect": "zk:2181"}
    assert BrokerConfig.from_properties(base)["moldau.broker.host"] is None
    config = BrokerConfig.from_properties({**base, "moldau.broker.host": "rack7-srv3"})
    assert config["moldau.broker.host"] == "rack7-srv3" and config.warnings == []
    for bad in ("", "two words"):
        with pytest.raises(ConfigError) as e:
            BrokerConfig.from_properties({**base, "moldau.broker.host": bad})
        assert "moldau.broker.host" in str(e.value)
