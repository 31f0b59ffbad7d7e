"""The controller's election rules, as pure functions of a partition's state.

The four leader choices are Kafka's PartitionLeaderElectionAlgorithms: each takes the
assignment order and picks the first replica that may lead. On top of them, one function
per occasion says what a partition's new leader and ISR are (`Election`), or None when
nothing changes; the controller reads the state from ZooKeeper, calls the rule, and
writes what it returns.

The arguments, for one partition:
- `replicas`: its assignment, in order (the first is the preferred leader);
- `isr`: the ISR in its state znode;
- `live`: the registered brokers;
- `eligible`: the replicas that may lead it: alive, not in controlled shutdown, and not on
  a failed log dir of their broker (always a subset of `live`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from moldau.cluster.controller_state import NO_LEADER, TopicPartition
from moldau.errors import (
    ElectionNotNeededError,
    EligibleLeadersNotAvailableError,
    KafkaError,
    PreferredLeaderNotAvailableError,
)


@dataclass(frozen=True)
class Election:
    """A partition's new leader (NO_LEADER: offline) and ISR."""

    leader: int
    isr: tuple[int, ...]
    unclean: bool = False  # the leader was not in the ISR: records may be lost


# --- Kafka's leader choices ----------------------------------------------------------------

def offline_partition_leader(replicas: Sequence[int], isr: Collection[int],
                             eligible: Collection[int], unclean: bool) -> int | None:
    """The first eligible ISR member; with unclean election, else the first eligible
    replica."""
    leader = _first_in_sync(replicas, isr, eligible)
    if leader is None and unclean:
        leader = next((r for r in replicas if r in eligible), None)
    return leader


def reassign_partition_leader(target: Sequence[int], isr: Collection[int],
                              eligible: Collection[int]) -> int | None:
    """The first eligible target replica in the ISR."""
    return _first_in_sync(target, isr, eligible)


def preferred_replica_leader(replicas: Sequence[int], isr: Collection[int],
                             eligible: Collection[int]) -> int | None:
    """The preferred (first assigned) replica, if it is eligible and in the ISR."""
    if replicas and replicas[0] in isr and replicas[0] in eligible:
        return replicas[0]
    return None


def controlled_shutdown_leader(replicas: Sequence[int], isr: Collection[int],
                               eligible: Collection[int]) -> int | None:
    """The first eligible ISR member (the brokers shutting down are not eligible)."""
    return _first_in_sync(replicas, isr, eligible)


def _first_in_sync(replicas: Sequence[int], isr: Collection[int],
                   eligible: Collection[int]) -> int | None:
    return next((r for r in replicas if r in isr and r in eligible), None)


# --- the occasions -------------------------------------------------------------------------

def new_partition(replicas: Sequence[int], live: Collection[int]) -> Election:
    """A partition's first state: the first live replica leads, the live replicas are the
    ISR (every replica when none is alive, so whichever comes first leads cleanly)."""
    alive = tuple(r for r in replicas if r in live)
    return Election(alive[0] if alive else NO_LEADER, alive or tuple(replicas))


def only_unclean_can_elect(leader: int, isr: Sequence[int], replicas: Sequence[int],
                           live: Collection[int], eligible: Collection[int]) -> bool:
    """Whether `after_broker_change` depends on unclean election being allowed, so the
    controller reads the topic's config only then."""
    if leader in live:
        return False
    isr_live = [r for r in isr if r in live]
    return (_first_in_sync(replicas, isr_live, eligible) is None
            and any(r in eligible for r in replicas))


def after_broker_change(leader: int, isr: Sequence[int], replicas: Sequence[int],
                        live: Collection[int], eligible: Collection[int],
                        unclean_allowed: bool) -> Election | None:
    """Brokers came or went (or the controller just loaded the partition). Dead replicas
    leave the ISR; a dead leader is replaced by the first eligible ISR member
    (OfflinePartitionLeaderElectionStrategy), or, only when unclean election is allowed,
    by the first eligible replica, which then is the whole ISR. With no ISR member
    alive, the ISR stays whole: every member holds every committed record, so whichever
    returns first leads cleanly (Kafka narrows it to its last member, which only delays
    that)."""
    isr_live = tuple(r for r in isr if r in live)
    if leader in live:
        return None if list(isr_live) == list(isr) else Election(leader, isr_live)
    chosen = offline_partition_leader(replicas, isr_live, eligible, unclean_allowed)
    if chosen is not None:
        if chosen in isr_live:
            return Election(chosen, isr_live)
        return Election(chosen, (chosen,), unclean=True)
    kept = isr_live or tuple(isr)
    if leader == NO_LEADER and list(kept) == list(isr):
        return None
    return Election(NO_LEADER, kept)


def after_log_dir_failure(leader: int, isr: Sequence[int], replicas: Sequence[int],
                          broker_id: int, eligible: Collection[int]) -> Election | None:
    """broker_id's replica of the partition is on a failed log dir: it leaves the ISR
    (unless it is the only member: it held every committed record), and if it led, the
    first eligible ISR member leads (offline without one)."""
    remaining = tuple(r for r in isr if r != broker_id)
    new_leader = leader
    if leader == broker_id:
        chosen = offline_partition_leader(replicas, remaining, eligible, unclean=False)
        new_leader = NO_LEADER if chosen is None else chosen
    new_isr = remaining or tuple(isr)
    if new_leader == leader and list(new_isr) == list(isr):
        return None
    return Election(new_leader, new_isr)


def for_controlled_shutdown(leader: int, isr: Sequence[int], replicas: Sequence[int],
                            broker_id: int, eligible: Collection[int]) -> Election | None:
    """broker_id is shutting down: a partition it leads gets the first eligible other ISR
    member (it keeps leading without one); one it follows in sync leaves the ISR unless
    that would empty it."""
    remaining = tuple(r for r in isr if r != broker_id)
    if leader == broker_id:
        chosen = controlled_shutdown_leader(replicas, remaining, eligible)
        return None if chosen is None else Election(chosen, remaining)
    if broker_id in isr and remaining:
        return Election(leader, remaining)
    return None


def preferred_on_request(tp: TopicPartition, leader: int, isr: Sequence[int],
                         replicas: Sequence[int], eligible: Collection[int]
                         ) -> Election | KafkaError:
    """ElectLeaders PREFERRED (and the znode, and the auto rebalance): the preferred
    replica leads, or the error Kafka answers for the partition."""
    if replicas and leader == replicas[0]:
        return ElectionNotNeededError("Leader election not needed for topic partition.")
    chosen = preferred_replica_leader(replicas, isr, eligible)
    if chosen is None:
        return PreferredLeaderNotAvailableError(
            f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy")
    return Election(chosen, tuple(isr))


def unclean_on_request(tp: TopicPartition, leader: int, isr: Sequence[int],
                       replicas: Sequence[int], live: Collection[int],
                       eligible: Collection[int]) -> Election | KafkaError:
    """ElectLeaders UNCLEAN: a partition whose leader is dead gets the first eligible ISR
    member, else the first eligible replica (unclean: it alone is the ISR)."""
    if leader in live:
        return ElectionNotNeededError("Leader election not needed for topic partition.")
    chosen = offline_partition_leader(replicas, isr, eligible, unclean=True)
    if chosen is None:
        return EligibleLeadersNotAvailableError(
            f"Failed to elect leader for partition {tp[0]}-{tp[1]} under strategy "
            "UncleanPartitionLeaderElectionStrategy")
    if chosen in isr:
        return Election(chosen, tuple(r for r in isr if r in live))
    return Election(chosen, (chosen,), unclean=True)


def after_reassignment(leader: int, isr: Sequence[int], target: Sequence[int],
                       eligible: Collection[int]) -> Election:
    """A move completes: replicas outside the target leave the ISR, and a leader outside
    it (or not eligible) is replaced by the first eligible target replica in the ISR
    (offline without one)."""
    new_isr = tuple(r for r in isr if r in target)
    if leader in target and leader in eligible:
        return Election(leader, new_isr)
    chosen = reassign_partition_leader(target, new_isr, eligible)
    return Election(NO_LEADER if chosen is None else chosen, new_isr)


# --- auto leader rebalance -----------------------------------------------------------------

@dataclass(frozen=True)
class Imbalance:
    """A broker leading too few of the partitions it is the preferred leader of."""

    broker_id: int
    ratio: float  # of its preferred partitions, the share another broker leads
    partitions: list[TopicPartition]  # those it could lead again (it is in their ISR)


def leader_imbalances(assignments: Mapping[TopicPartition, Sequence[int]],
                      current: Mapping[TopicPartition, tuple[int, Sequence[int]]],
                      eligible: Collection[int], percentage: float) -> list[Imbalance]:
    """auto.leader.rebalance.enable: the eligible brokers, in id order, whose share of
    led-elsewhere preferred partitions exceeds leader.imbalance.per.broker.percentage
    (Kafka's checkAndTriggerAutoLeaderRebalance). `current` is each partition's (leader,
    ISR) as the controller knows it."""
    by_preferred: dict[int, list[TopicPartition]] = {}
    for tp, replicas in assignments.items():
        if replicas:
            by_preferred.setdefault(replicas[0], []).append(tp)
    out = []
    for broker_id, partitions in sorted(by_preferred.items()):
        if broker_id not in eligible:
            continue
        elsewhere = [tp for tp in partitions if tp in current
                     and current[tp][0] != broker_id and broker_id in current[tp][1]]
        ratio = len(elsewhere) / len(partitions)
        if elsewhere and ratio * 100 > percentage:
            out.append(Imbalance(broker_id, ratio, elsewhere))
    return out
