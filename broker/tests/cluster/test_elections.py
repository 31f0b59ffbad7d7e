"""The controller's election rules (moldau.cluster.elections), without ZooKeeper: Kafka's
four leader choices and what each occasion writes."""

from __future__ import annotations

from moldau.cluster import elections
from moldau.cluster.controller_state import NO_LEADER
from moldau.cluster.elections import Election, Imbalance
from moldau.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    PreferredLeaderNotAvailableError,
)

TP = ("t", 0)

# --- Kafka's leader choices ------------------------------------------------------------------


def test_offline_leader_is_the_first_eligible_isr_member_in_assignment_order() -> None:
    assert elections.offline_partition_leader([1, 2, 3], isr=[3, 2], eligible={2, 3},
                                              unclean=False) == 2


def test_offline_leader_without_unclean_election_waits_for_the_isr() -> None:
    assert elections.offline_partition_leader([1, 2, 3], isr=[1], eligible={2, 3},
                                              unclean=False) is None


def test_offline_leader_with_unclean_election_takes_the_first_eligible_replica() -> None:
    assert elections.offline_partition_leader([1, 2, 3], isr=[1], eligible={3, 2},
                                              unclean=True) == 2


def test_offline_leader_prefers_the_isr_even_with_unclean_election() -> None:
    assert elections.offline_partition_leader([1, 2, 3], isr=[3], eligible={2, 3},
                                              unclean=True) == 3


def test_preferred_leader_is_the_first_replica_only_when_eligible_and_in_sync() -> None:
    assert elections.preferred_replica_leader([2, 1], isr=[1, 2], eligible={1, 2}) == 2
    assert elections.preferred_replica_leader([2, 1], isr=[1], eligible={1, 2}) is None
    assert elections.preferred_replica_leader([2, 1], isr=[1, 2], eligible={1}) is None
    assert elections.preferred_replica_leader([], isr=[1], eligible={1}) is None


def test_controlled_shutdown_leader_skips_the_brokers_that_are_not_eligible() -> None:
    # broker 1 is shutting down, so it is not eligible
    assert elections.controlled_shutdown_leader([1, 2, 3], isr=[1, 3], eligible={2, 3}) == 3
    assert elections.controlled_shutdown_leader([1, 2], isr=[1], eligible={2}) is None


def test_reassignment_leader_is_the_first_eligible_target_replica_in_sync() -> None:
    assert elections.reassign_partition_leader([4, 5], isr=[1, 5, 4], eligible={4, 5}) == 4
    assert elections.reassign_partition_leader([4, 5], isr=[1, 5], eligible={4, 5}) == 5
    assert elections.reassign_partition_leader([4, 5], isr=[1], eligible={4, 5}) is None


# --- new partitions ---------------------------------------------------------------------------


def test_a_new_partition_is_led_by_its_first_live_replica() -> None:
    assert elections.new_partition([1, 2, 3], live={2, 3}) == Election(2, (2, 3))


def test_a_new_partition_with_no_live_replica_is_offline_with_every_replica_in_sync() -> None:
    assert elections.new_partition([1, 2], live={5}) == Election(NO_LEADER, (1, 2))


# --- brokers coming and going ----------------------------------------------------------------


def test_nothing_changes_while_the_leader_and_the_isr_are_alive() -> None:
    assert elections.after_broker_change(1, [1, 2], [1, 2], live={1, 2}, eligible={1, 2},
                                         unclean_allowed=False) is None


def test_a_dead_follower_leaves_the_isr() -> None:
    assert elections.after_broker_change(1, [1, 2, 3], [1, 2, 3], live={1, 3},
                                         eligible={1, 3}, unclean_allowed=False
                                         ) == Election(1, (1, 3))


def test_a_dead_leader_is_replaced_by_the_first_live_isr_member() -> None:
    assert elections.after_broker_change(1, [1, 3, 2], [1, 2, 3], live={2, 3},
                                         eligible={2, 3}, unclean_allowed=False
                                         ) == Election(2, (3, 2))


def test_a_replica_on_a_failed_log_dir_or_shutting_down_is_passed_over() -> None:
    # broker 2 is alive (it stays in the ISR) but may not lead this partition
    assert elections.after_broker_change(1, [1, 2, 3], [1, 2, 3], live={2, 3},
                                         eligible={3}, unclean_allowed=False
                                         ) == Election(3, (2, 3))


def test_with_no_live_isr_member_the_partition_goes_offline_keeping_the_whole_isr() -> None:
    assert elections.after_broker_change(1, [1, 2], [1, 2, 3], live={3}, eligible={3},
                                         unclean_allowed=False
                                         ) == Election(NO_LEADER, (1, 2))


def test_an_offline_partition_stays_as_it_is_until_an_isr_member_returns() -> None:
    assert elections.after_broker_change(NO_LEADER, [1, 2], [1, 2, 3], live={3},
                                         eligible={3}, unclean_allowed=False) is None
    assert elections.after_broker_change(NO_LEADER, [1, 2], [1, 2, 3], live={2, 3},
                                         eligible={2, 3}, unclean_allowed=False
                                         ) == Election(2, (2,))


def test_unclean_election_lets_a_live_out_of_sync_replica_lead_alone() -> None:
    assert elections.after_broker_change(1, [1], [1, 2, 3], live={2, 3}, eligible={2, 3},
                                         unclean_allowed=True
                                         ) == Election(2, (2,), unclean=True)


def test_the_topic_config_is_needed_only_when_just_an_unclean_election_could_elect() -> None:
    def needs(leader: int, isr: list[int], live: set[int], eligible: set[int]) -> bool:
        return elections.only_unclean_can_elect(leader, isr, [1, 2, 3], live, eligible)

    assert not needs(1, [1, 2], live={1, 2}, eligible={1, 2})  # the leader lives
    assert not needs(1, [1, 2], live={2, 3}, eligible={2, 3})  # a clean choice exists
    assert not needs(1, [1], live=set(), eligible=set())  # nobody could lead
    assert needs(1, [1], live={3}, eligible={3})
    # an ISR member that is alive but not eligible does not make the election clean
    assert needs(1, [1, 2], live={2, 3}, eligible={3})


# --- failed log dirs --------------------------------------------------------------------------


def test_a_leader_on_a_failed_log_dir_hands_over_to_the_next_isr_member() -> None:
    assert elections.after_log_dir_failure(1, [1, 2, 3], [1, 2, 3], broker_id=1,
                                           eligible={2, 3}) == Election(2, (2, 3))


def test_a_leader_on_a_failed_log_dir_with_no_other_eligible_member_goes_offline() -> None:
    assert elections.after_log_dir_failure(1, [1, 2], [1, 2], broker_id=1,
                                           eligible=set()) == Election(NO_LEADER, (2,))


def test_the_last_isr_member_stays_in_the_isr_when_its_log_dir_fails() -> None:
    assert elections.after_log_dir_failure(1, [1], [1, 2], broker_id=1, eligible={2}
                                           ) == Election(NO_LEADER, (1,))


def test_a_follower_on_a_failed_log_dir_leaves_the_isr() -> None:
    assert elections.after_log_dir_failure(1, [1, 2], [1, 2], broker_id=2, eligible={1}
                                           ) == Election(1, (1,))
    assert elections.after_log_dir_failure(1, [1], [1, 2], broker_id=2,
                                           eligible={1}) is None


# --- controlled shutdown ------------------------------------------------------------------------


def test_controlled_shutdown_moves_leadership_to_another_isr_member() -> None:
    assert elections.for_controlled_shutdown(1, [1, 2, 3], [1, 2, 3], broker_id=1,
                                             eligible={2, 3}) == Election(2, (2, 3))


def test_a_shutting_down_leader_without_another_isr_member_keeps_leading() -> None:
    assert elections.for_controlled_shutdown(1, [1], [1, 2], broker_id=1,
                                             eligible={2}) is None


def test_a_shutting_down_follower_leaves_the_isr_unless_it_would_empty_it() -> None:
    assert elections.for_controlled_shutdown(1, [1, 2], [1, 2], broker_id=2,
                                             eligible={1}) == Election(1, (1,))
    assert elections.for_controlled_shutdown(NO_LEADER, [2], [1, 2], broker_id=2,
                                             eligible={1}) is None
    assert elections.for_controlled_shutdown(1, [1], [1, 2], broker_id=2,
                                             eligible={1}) is None


# --- elections asked for (ElectLeaders) -------------------------------------------------------


def test_a_preferred_election_puts_the_first_replica_back_in_front() -> None:
    assert elections.preferred_on_request(TP, 2, [2, 1], [1, 2], eligible={1, 2}
                                          ) == Election(1, (2, 1))


def test_a_preferred_election_is_not_needed_when_the_preferred_replica_leads() -> None:
    outcome = elections.preferred_on_request(TP, 1, [1, 2], [1, 2], eligible=set())
    assert isinstance(outcome, ElectionNotNeededError)


def test_a_preferred_election_fails_when_the_preferred_replica_is_out_of_sync() -> None:
    outcome = elections.preferred_on_request(TP, 2, [2], [1, 2], eligible={1, 2})
    assert isinstance(outcome, PreferredLeaderNotAvailableError)
    assert "t-0" in str(outcome)
    not_eligible = elections.preferred_on_request(TP, 2, [2, 1], [1, 2], eligible={2})
    assert isinstance(not_eligible, PreferredLeaderNotAvailableError)


def test_an_unclean_election_is_not_needed_while_the_leader_lives() -> None:
    outcome = elections.unclean_on_request(TP, 1, [1], [1, 2], live={1, 2}, eligible={2})
    assert isinstance(outcome, ElectionNotNeededError)


def test_an_unclean_election_prefers_a_live_isr_member() -> None:
    assert elections.unclean_on_request(TP, 1, [1, 3, 2], [1, 2, 3], live={2, 3},
                                        eligible={2, 3}) == Election(2, (3, 2))


def test_an_unclean_election_falls_back_to_an_out_of_sync_replica() -> None:
    assert elections.unclean_on_request(TP, NO_LEADER, [1], [1, 2, 3], live={3},
                                        eligible={3}) == Election(3, (3,), unclean=True)


def test_an_unclean_election_fails_with_no_eligible_replica() -> None:
    outcome = elections.unclean_on_request(TP, NO_LEADER, [1], [1, 2], live={2},
                                           eligible=set())
    assert isinstance(outcome, EligibleLeadersNotAvailableError)


# --- reassignment -----------------------------------------------------------------------------


def test_a_completed_move_keeps_a_leader_that_is_a_target_replica() -> None:
    assert elections.after_reassignment(2, [1, 2, 3], target=[3, 2], eligible={2, 3}
                                        ) == Election(2, (2, 3))


def test_a_completed_move_replaces_a_leader_outside_the_target() -> None:
    assert elections.after_reassignment(1, [1, 2, 3], target=[3, 2], eligible={2, 3}
                                        ) == Election(3, (2, 3))


def test_a_completed_move_with_no_eligible_target_in_sync_is_offline() -> None:
    assert elections.after_reassignment(1, [1, 3], target=[3, 4], eligible={4}
                                        ) == Election(NO_LEADER, (3,))


# --- auto leader rebalance ---------------------------------------------------------------------


def test_a_broker_leading_too_few_of_its_preferred_partitions_gets_them_back() -> None:
    assignments = {("a", 0): [1, 2], ("a", 1): [1, 2], ("a", 2): [2, 1], ("a", 3): [1, 2]}
    current = {("a", 0): (2, [2, 1]), ("a", 1): (1, [1, 2]), ("a", 2): (2, [2, 1]),
               ("a", 3): (2, [2])}  # broker 1 is out of a-3's ISR: it cannot take it back
    assert elections.leader_imbalances(assignments, current, eligible={1, 2},
                                       percentage=10) == [
        Imbalance(1, 1 / 3, [("a", 0)])]
    # at or under the allowed percentage nothing moves
    assert elections.leader_imbalances(assignments, current, eligible={1, 2},
                                       percentage=34) == []
    # nor for a broker that may not lead
    assert elections.leader_imbalances(assignments, current, eligible={2},
                                       percentage=10) == []
