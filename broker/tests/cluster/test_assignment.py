"""Replica placement (moldau.cluster.assignment) against Kafka 3.9's
AdminUtils.assignReplicasToBrokers.

The fixed-start tables restate the expectations of Kafka's own tests (AdminRackAwareTest
and testReplicaAssignment, and the example in the AdminUtils Javadoc) or were worked out by
hand from Kafka's algorithm; the comments show the working. The property tests repeat
Kafka's distribution checks (RackAwareTest.checkReplicaDistribution) for every start index
and shift Kafka could draw, which is stronger than Kafka's one random draw per run.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from moldau.cluster.assignment import (
    MIXED_RACKS,
    MIXED_RACKS_ENFORCED,
    AdminOperationError,
    BrokerMetadata,
    RackAwareMode,
    assign_replicas,
    broker_metadatas,
    rack_alternated_brokers,
    zk_metadata_cache_order,
)
from moldau.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    UnknownServerError,
)
from moldau.server.config import BrokerConfig
from moldau.server.metadata_cache import BrokerEndpoints, MetadataCache
from moldau.server.topic_admin import TopicAdmin


def racked(mapping: dict[int, str]) -> list[BrokerMetadata]:
    """Kafka's test helper toBrokerMetadata: the brokers sorted by id."""
    return [BrokerMetadata(b, r) for b, r in sorted(mapping.items())]


# Kafka's AdminRackAwareTest brokers.
SIX_IN_THREE_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
JAVADOC_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


# --- fixed start index and shift: the exact placement ----------------------------------

PLACEMENTS = [
    pytest.param(
        # testReplicaAssignment, and the Javadoc table (5 brokers, 10 partitions): start 0,
        # and the shift is the start index too. From partition 5 on (the second lap) the
        # shift is 1, so followers skip one broker: 5 -> 0, 2, 3.
        list(range(5)), 10, 3, 0, -1, 0,
        {0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
         5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]},
        id="rack-unaware-5-brokers"),
    pytest.param(
        # testGetRackAlternatedBrokerListAndAssignReplicasToBrokers: the rack-alternated
        # list is 0, 3, 1, 5, 4, 2; the first lap is a plain round robin on it, and
        # partition 6 starts the second lap with the shift one rack-count further.
        racked(JAVADOC_RACKS), 7, 3, 0, -1, 0,
        {0: [0, 3, 1], 1: [3, 1, 5], 2: [1, 5, 4], 3: [5, 4, 2], 4: [4, 2, 0],
         5: [2, 0, 3], 6: [0, 4, 2]},
        id="rack-aware-javadoc"),
    pytest.param(
        # testSkipBrokerWithReplicaAlreadyAssigned's brokers (a: 0 3 4, b: 1, c: 2), start
        # and shift 2, worked by hand. Alternated list: 0 1 2 3 4 (rack a, b, c, a, a);
        # follower slot k of a partition with leader index f is (f + 1 + (6 + k) % 4) % 5.
        # Partition 2: leader 4 (a); k=0 -> 2 (c) taken; k=1 -> 3 (a) and k=2 -> 0 (a)
        # skipped, rack a has a replica while rack b has none; k=3 -> 1 (b) taken; k=4 ->
        # 2 skipped, it already has a replica; k=5 -> 3, every rack is used now: taken.
        # Partition 5 starts the second lap: the shift becomes 3, so 9 + k.
        [(0, "a"), (1, "b"), (2, "c"), (3, "a"), (4, "a")], 6, 4, 2, -1, 0,
        {0: [2, 0, 1, 3], 1: [3, 1, 2, 4], 2: [4, 2, 1, 3], 3: [0, 1, 2, 3],
         4: [1, 4, 2, 3], 5: [2, 4, 1, 3]},
        id="rack-aware-skipping"),
    pytest.param(
        # Uneven racks by hand: r1 has 1 and 2, r2 only 3; alternated list 1 3 2. Partition
        # 2: leader 2 (r1), slot 0 -> broker 1 skipped (r1 again while r2 has none), slot 1
        # -> broker 3. The lone broker of r2 gets a replica of every partition, as the
        # operations guide warns for racks with fewer brokers.
        [(1, "r1"), (2, "r1"), (3, "r2")], 3, 2, 0, -1, 0,
        {0: [1, 3], 1: [3, 2], 2: [2, 3]},
        id="rack-aware-uneven-racks"),
    pytest.param(
        # CreatePartitions on brokers 0 1 2 from 2 to 4 partitions, partition 0 led by
        # broker 1: Kafka's start index (and shift) is the index of the first broker with
        # id >= 1, i.e. 1, and startPartitionId is 2. Partition 2: leader (2 + 1) % 3 = 0,
        # follower (0 + 1 + 1 % 2) % 3 = 2. Partition 3 is a new lap: shift 2, leader 1,
        # follower (1 + 1 + 2 % 2) % 3 = 2.
        [0, 1, 2], 2, 2, 1, 1, 2,
        {2: [0, 2], 3: [1, 2]},
        id="added-partitions"),
    pytest.param(
        # The seeds' `kafka-topics --describe` of i-love-kafka (Confluent's administration
        # course, 3b): 3 partitions, RF 3 on brokers 101-103 with leaders 101, 103, 102.
        # Kafka handed the brokers over in ZkMetadataCache order, 101 103 102 (see below);
        # start 0 and shift 1 then give the seeds' table exactly.
        [101, 103, 102], 3, 3, 0, 1, 0,
        {0: [101, 102, 103], 1: [103, 101, 102], 2: [102, 103, 101]},
        id="seed-i-love-kafka"),
    pytest.param(
        # A separate shift: brokers 0-3, start 1, shift 2. Partition 0: leader 1, followers
        # (1 + 1 + (2 + j) % 3) % 4 for j = 0, 1 -> 0, 1 + 1 + 0 = 2. Partition 3: leader 0,
        # followers 0 + 1 + 2 = 3 and 0 + 1 + 0 = 1. Partition 4 (new lap, shift 3): leader
        # 1, followers 1 + 1 + 0 = 2 and 1 + 1 + 1 = 3.
        [0, 1, 2, 3], 5, 3, 1, 2, 0,
        {0: [1, 0, 2], 1: [2, 1, 3], 2: [3, 2, 0], 3: [0, 3, 1], 4: [1, 2, 3]},
        id="separate-shift"),
]


@pytest.mark.parametrize(
    "brokers,partitions,rf,start,shift,first,expected", PLACEMENTS)
def test_fixed_start_placement(brokers, partitions, rf, start, shift, first,
                               expected) -> None:
    assert assign_replicas(brokers, partitions, rf, start_index=start,
                           next_replica_shift=shift, first_partition=first) == expected


def test_rack_alternated_broker_list() -> None:
    # AdminRackAwareTest: with and without broker 5.
    assert rack_alternated_brokers(JAVADOC_RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_brokers({b: r for b, r in JAVADOC_RACKS.items() if b != 5}) == [
        0, 3, 1, 4, 2]
    # The Javadoc's three racks of three: 0, 3, 6, 1, 4, 7, 2, 5, 8.
    nine = {b: f"rack{b // 3 + 1}" for b in range(9)}
    assert rack_alternated_brokers(nine) == [0, 3, 6, 1, 4, 7, 2, 5, 8]
    # Racks in name order, brokers by id within a rack, whatever the input order.
    assert rack_alternated_brokers({9: "b", 1: "b", 5: "a", 7: "c", 3: "c"}) == [
        5, 1, 3, 9, 7]


def test_brokers_keep_the_given_order_without_racks() -> None:
    # AdminUtils does not sort: the list order is the caller's.
    assert assign_replicas([2, 0, 1], 3, 1, start_index=0) == {0: [2], 1: [0], 2: [1]}


def test_bare_ids_tuples_and_metadata_mean_the_same() -> None:
    as_metadata = [BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(2)]
    as_tuples = [(0, None), (1, None), (2, None)]
    expected = assign_replicas([0, 1, 2], 6, 2, start_index=1)
    assert assign_replicas(as_metadata, 6, 2, start_index=1) == expected
    assert assign_replicas(as_tuples, 6, 2, start_index=1) == expected


def test_single_broker() -> None:
    assert assign_replicas([7], 3, 1) == {0: [7], 1: [7], 2: [7]}
    assert assign_replicas([(7, "r")], 2, 1) == {0: [7], 1: [7]}


# --- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("brokers", [[0, 1, 2, 3, 4], racked(SIX_IN_THREE_RACKS)])
def test_kafka_messages_for_bad_counts(brokers) -> None:
    with pytest.raises(InvalidPartitionsError) as e:
        assign_replicas(brokers, 0, 1)
    assert str(e.value) == "Number of partitions must be larger than 0."
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(brokers, -1, 1)
    with pytest.raises(InvalidReplicationFactorError) as e:
        assign_replicas(brokers, 10, 0)
    assert str(e.value) == "Replication factor must be larger than 0."
    with pytest.raises(InvalidReplicationFactorError) as e:
        assign_replicas(brokers, 10, len(brokers) + 1)
    assert str(e.value) == (f"Replication factor: {len(brokers) + 1} larger than available "
                            f"brokers: {len(brokers)}.")


def test_no_brokers() -> None:
    with pytest.raises(InvalidReplicationFactorError) as e:
        assign_replicas([], 1, 1)
    assert str(e.value) == "Replication factor: 1 larger than available brokers: 0."


def test_mixed_rack_information_is_refused() -> None:
    # testAssignReplicasToBrokersWithInvalidParameters: racks on 0-3, none on 4.
    brokers = [(0, "rack1"), (1, "rack3"), (2, "rack3"), (3, "rack2"), (4, None)]
    with pytest.raises(AdminOperationError) as e:
        assign_replicas(brokers, 10, 5)
    assert str(e.value) == MIXED_RACKS
    assert str(e.value) == ("Not all brokers have rack information for replica rack aware "
                            "assignment.")
    assert e.value.code == -1  # UNKNOWN_SERVER_ERROR
    # Kafka checks the counts first.
    with pytest.raises(InvalidPartitionsError):
        assign_replicas(brokers, 0, 0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(brokers, 10, 0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas(brokers, 10, 6)


def test_broker_metadatas_modes() -> None:
    """AdminZkClient.getBrokerMetadatas: sorted by id; ENFORCED refuses mixed racks,
    SAFE drops them when mixed, DISABLED always (rack-unaware placement forced)."""
    mixed = [(2, "r2"), (0, None), (1, "r1")]
    with pytest.raises(AdminOperationError) as e:
        broker_metadatas(mixed)
    assert str(e.value) == MIXED_RACKS_ENFORCED
    assert str(e.value) == ("Not all brokers have rack information. Add --disable-rack-aware "
                            "in command line to make replica assignment without rack "
                            "information.")
    unaware = [BrokerMetadata(0), BrokerMetadata(1), BrokerMetadata(2)]
    assert broker_metadatas(mixed, RackAwareMode.SAFE) == unaware
    assert broker_metadatas(mixed, RackAwareMode.DISABLED) == unaware
    full = [(2, "r2"), (0, "r1"), (1, "r1")]
    expected = [BrokerMetadata(0, "r1"), BrokerMetadata(1, "r1"), BrokerMetadata(2, "r2")]
    for mode in RackAwareMode:
        if mode is RackAwareMode.DISABLED:
            assert broker_metadatas(full, mode) == unaware
        else:
            assert broker_metadatas(full, mode) == expected
    # Forcing rack-unaware gives the rack-unaware placement on the same brokers.
    assert assign_replicas(broker_metadatas(mixed, RackAwareMode.DISABLED), 3, 2,
                           start_index=0) == assign_replicas([0, 1, 2], 3, 2, start_index=0)


# --- distribution properties (Kafka's checkReplicaDistribution) -------------------------


def check_distribution(assignment: dict[int, list[int]], racks: dict[int, str] | None,
                       brokers: list[int], partitions: int, rf: int, *,
                       rack_aware: bool = True, leaders_even: bool = True,
                       replicas_even: bool = True) -> None:
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf, "a broker holds two replicas of one partition"
    if racks is not None and rack_aware:
        for replicas in assignment.values():
            assert len({racks[b] for b in replicas}) == rf
    if leaders_even:
        leaders = Counter(replicas[0] for replicas in assignment.values())
        assert sorted(leaders.values()) == [partitions // len(brokers)] * len(brokers)
    if replicas_even:
        counts = Counter(b for replicas in assignment.values() for b in replicas)
        assert sorted(counts.values()) == [partitions * rf // len(brokers)] * len(brokers)


def every_start(n: int):
    """Every (start index, shift) pair Kafka can draw for n brokers."""
    return [(s, t) for s in range(n) for t in range(n)]


RACK_CASES = [
    # (rack map, partitions, rf, first partition, which checks), after Kafka's tests.
    pytest.param(SIX_IN_THREE_RACKS, 6, 3, 0, {}, id="WithRackAware"),
    pytest.param(SIX_IN_THREE_RACKS, 13, 3, 0, {"leaders_even": False,
                                               "replicas_even": False}, id="UnevenReplicas"),
    pytest.param({0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"},
                 12, 3, 0, {"replicas_even": False}, id="UnevenRacks"),
    pytest.param(SIX_IN_THREE_RACKS, 12, 2, 0, {}, id="2ReplicasRackAware"),
    pytest.param({6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack3", 11: "rack1"},
                 12, 2, 12, {}, id="RackAwareExpansion"),
    pytest.param(SIX_IN_THREE_RACKS, 6, 2, 0, {}, id="2ReplicasWith6Partitions"),
    pytest.param({0: "rack1", 1: "rack2", 4: "rack3"}, 3, 2, 0, {}, id="3Brokers"),
    pytest.param({0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1",
                  6: "rack1", 7: "rack2", 8: "rack2", 9: "rack3", 10: "rack1",
                  11: "rack3"}, 96, 3, 0, {}, id="LargeNumberPartitions"),
    pytest.param({0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}, 6, 4, 0,
                 {"rack_aware": False, "leaders_even": False, "replicas_even": False},
                 id="SkipBrokerWithReplicaAlreadyAssigned"),
]


@pytest.mark.parametrize("racks,partitions,rf,first,checks", RACK_CASES)
def test_rack_aware_distribution(racks, partitions, rf, first, checks) -> None:
    brokers = sorted(racks)
    for start, shift in every_start(len(brokers)):
        assignment = assign_replicas(racked(racks), partitions, rf, start, shift, first)
        assert sorted(assignment) == list(range(first, first + partitions))
        check_distribution(assignment, racks, brokers, partitions, rf, **checks)


@pytest.mark.parametrize("rf,rack_count", [(5, 3), (2, 2)])
def test_more_and_fewer_replicas_than_racks(rf, rack_count) -> None:
    # testMoreReplicasThanRacks / testLessReplicasThanRacks: a partition spans
    # min(rf, racks) racks.
    racks = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"}
    for start, shift in every_start(6):
        assignment = assign_replicas(racked(racks), 6, rf, start, shift)
        for replicas in assignment.values():
            assert len(replicas) == rf == len(set(replicas))
            assert len({racks[b] for b in replicas}) == rack_count


def test_single_rack() -> None:
    racks = dict.fromkeys(range(6), "rack1")
    for start, shift in every_start(6):
        assignment = assign_replicas(racked(racks), 6, 3, start, shift)
        check_distribution(assignment, None, list(range(6)), 6, 3)


def test_rack_unaware_distribution() -> None:
    for start, shift in every_start(5):
        check_distribution(assign_replicas(list(range(5)), 10, 3, start, shift), None,
                           list(range(5)), 10, 3)


@st.composite
def clusters(draw):
    ids = draw(st.lists(st.integers(0, 50), min_size=1, max_size=12, unique=True))
    with_racks = draw(st.booleans())
    rack_names = draw(st.lists(st.sampled_from("abcdé"), min_size=len(ids),
                               max_size=len(ids)))
    brokers = [(b, r if with_racks else None) for b, r in zip(ids, rack_names, strict=True)]
    rf = draw(st.integers(1, len(ids)))
    partitions = draw(st.integers(1, 40))
    start = draw(st.integers(-1, len(ids) - 1))
    shift = draw(st.integers(-1, len(ids) - 1))
    first = draw(st.integers(0, 30))
    return brokers, rf, partitions, start, shift, first


@settings(max_examples=examples(300), deadline=None)
@given(clusters())
def test_properties(cluster) -> None:
    brokers, rf, partitions, start, shift, first = cluster
    assignment = assign_replicas(brokers, partitions, rf, start, shift, first)
    ids = [b for b, _ in brokers]
    assert sorted(assignment) == list(range(first, first + partitions))
    racks = {b: r for b, r in brokers}
    rack_count = len(set(racks.values()))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(ids)
        if brokers[0][1] is not None:
            assert len({racks[b] for b in replicas}) == min(rf, rack_count)
    # Leaders go round robin: no broker leads two more partitions than another.
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1
    if partitions % len(ids) == 0:
        assert set(counts) == {partitions // len(ids)}
    # With racks the list order does not matter (the rack-alternated list is built from
    # ids and rack names); a fixed start index and shift leave nothing to chance.
    if start >= 0 and shift >= 0 and brokers[0][1] is not None:
        assert assign_replicas(list(reversed(brokers)), partitions, rf, start, shift,
                               first) == assignment


# --- the broker order Kafka hands over ---------------------------------------------------


def test_zk_metadata_cache_order() -> None:
    """ZkMetadataCache keeps the live brokers in a Scala mutable.LongMap: 0 first, then
    by table slot, slot = MurmurHash3 finalizer of the id & mask. With up to 8 brokers in
    the previous snapshot the table starts with 8 slots (mask 7); it doubles when more
    than half full (the 4th non-zero id, the 8th, ...)."""
    # 101, 102, 103 land in slots 1, 7 and 6 of 8: the seeds' i-love-kafka leaders.
    assert zk_metadata_cache_order([101, 102, 103]) == [101, 103, 102]
    assert zk_metadata_cache_order([1, 2, 3]) == [2, 3, 1]
    assert zk_metadata_cache_order([2, 0, 1]) == [0, 2, 1]
    # Six brokers: 1-5 outgrow the 8-slot table and are re-placed in 16 slots.
    assert zk_metadata_cache_order(range(6)) == [0, 5, 1, 4, 2, 3]
    assert zk_metadata_cache_order([]) == []
    # The same brokers in a table sized for a bigger earlier cluster.
    assert sorted(zk_metadata_cache_order(range(1, 20), buffer_size=40)) == list(range(1, 20))


def test_seed_example_through_kafka_broker_order() -> None:
    order = zk_metadata_cache_order([101, 102, 103])
    assert assign_replicas(order, 3, 3, start_index=0, next_replica_shift=1) == {
        0: [101, 102, 103], 1: [103, 101, 102], 2: [102, 103, 101]}


# --- TopicAdmin uses the live brokers and their racks ------------------------------------


def topic_admin(racks: dict[int, str | None]) -> TopicAdmin:
    cache = MetadataCache(0)
    cache.set_brokers([BrokerEndpoints(b, {}, r) for b, r in racks.items()])
    unused_zk: Any = None  # placement reads only the live brokers
    return TopicAdmin(BrokerConfig.from_properties({"zookeeper.connect": "zk:2181"}), cache,
                      unused_zk)


def test_topic_admin_places_rack_aware() -> None:
    admin = topic_admin({0: "a", 1: "a", 2: "b", 3: "b"})
    assert admin.live_brokers() == [BrokerMetadata(0, "a"), BrokerMetadata(2, "b"),
                                    BrokerMetadata(3, "b"), BrokerMetadata(1, "a")]
    for _ in range(20):  # random start and shift
        plan = admin.plan("t", 8, 2, None)
        assert sorted(plan) == list(range(8))
        for replicas in plan.values():
            assert {admin.metadata.brokers[b].rack for b in replicas} == {"a", "b"}
        assert sorted(Counter(r[0] for r in plan.values()).values()) == [2, 2, 2, 2]


def test_topic_admin_rack_unaware_follows_kafka_broker_order() -> None:
    admin = topic_admin({101: None, 102: None, 103: None})
    for _ in range(20):
        plan = admin.plan("t", 3, 1, None)
        leaders = [plan[p][0] for p in range(3)]
        # Leaders walk 101 -> 103 -> 102, never 101 -> 102.
        i = leaders.index(101)
        assert leaders[i:] + leaders[:i] == [101, 103, 102]


def test_topic_admin_refuses_mixed_racks(caplog) -> None:
    admin = topic_admin({0: "a", 1: None})
    with (caplog.at_level(logging.ERROR, logger="kafka.server.ZkAdminManager"),
          pytest.raises(UnknownServerError) as e):
        admin.plan("t", 1, 1, None)
    assert str(e.value) == ""  # UNKNOWN_SERVER_ERROR goes out without a message
    assert MIXED_RACKS in caplog.text
    # Kafka's own checks still come first, with their messages.
    with pytest.raises(InvalidReplicationFactorError):
        admin.plan("t", 1, 3, None)
    # An explicit assignment needs no placement.
    assert admin.plan("t", -1, -1, {0: [0, 1]}) == {0: [0, 1]}
    with pytest.raises(AdminOperationError) as err:
        admin.partition_brokers()
    assert str(err.value) == MIXED_RACKS_ENFORCED


def test_topic_admin_partition_brokers_sorted() -> None:
    admin = topic_admin({3: "b", 1: "a", 2: "a"})
    assert admin.partition_brokers() == [BrokerMetadata(1, "a"), BrokerMetadata(2, "a"),
                                         BrokerMetadata(3, "b")]
