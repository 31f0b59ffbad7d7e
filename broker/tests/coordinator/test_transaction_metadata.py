"""The transaction state machine: Kafka 3.9's valid previous states, the two-phase
transitions of TransactionMetadata, epoch bumps, fencing and exhaustion."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.coordinator.transaction.metadata import (
    IllegalTransitionError,
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from moldau.coordinator.transaction.state import TransactionState
from moldau.errors import ProducerFencedError

S = TransactionState

# Kafka 3.9's TransactionState.validPreviousStates, written out.
VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_states_ids_names_and_previous_states():
    assert [(s.value, s.display_name) for s in S] == [
        (0, "Empty"), (1, "Ongoing"), (2, "PrepareCommit"), (3, "PrepareAbort"),
        (4, "CompleteCommit"), (5, "CompleteAbort"), (6, "Dead"), (7, "PrepareEpochFence")]
    assert {s: set(s.valid_previous_states) for s in S} == VALID_PREVIOUS
    assert {s for s in S if s.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT,
                                                      S.COMPLETE_ABORT}
    assert S.from_name("PrepareAbort") == S.PREPARE_ABORT and S.from_name("nope") is None
    with pytest.raises(ValueError, match="Unknown transaction state id 8"):
        S.from_id(8)


def _meta(state=S.EMPTY, epoch=0, partitions=(), start=-1) -> TransactionMetadata:
    return TransactionMetadata("txn", 100, epoch, 60000, state, set(partitions), start, 10)


def _commit(meta: TransactionMetadata, transit: TxnTransitMetadata) -> TransactionMetadata:
    meta.complete_transition_to(transit)
    return meta


def test_a_whole_committed_transaction():
    meta = TransactionMetadata("txn", 100, txn_timeout_ms=60000, txn_last_update_timestamp=5)
    _commit(meta, meta.prepare_increment_producer_epoch(30000, None, 10))
    assert (meta.state, meta.producer_epoch, meta.txn_timeout_ms) == (S.EMPTY, 0, 30000)
    _commit(meta, meta.prepare_add_partitions({("t", 0)}, 20))
    assert (meta.state, meta.txn_start_timestamp, meta.topic_partitions) == (S.ONGOING, 20,
                                                                             {("t", 0)})
    _commit(meta, meta.prepare_add_partitions({("t", 1)}, 25))
    assert meta.txn_start_timestamp == 20 and meta.topic_partitions == {("t", 0), ("t", 1)}
    _commit(meta, meta.prepare_abort_or_commit(S.PREPARE_COMMIT, 30))
    assert meta.state == S.PREPARE_COMMIT and meta.txn_last_update_timestamp == 30
    meta.remove_partition(("t", 0))
    assert meta.topic_partitions == {("t", 1)}
    transit = meta.prepare_complete(40)
    assert transit.topic_partitions == frozenset() and transit.state == S.COMPLETE_COMMIT
    _commit(meta, transit)
    assert (meta.state, meta.topic_partitions, meta.pending_state) == (S.COMPLETE_COMMIT, set(),
                                                                       None)
    # the next transaction starts from CompleteCommit with a new start time
    _commit(meta, meta.prepare_add_partitions({("u", 0)}, 50))
    assert meta.txn_start_timestamp == 50


def test_prepare_marks_pending_and_changes_nothing_else():
    meta = _meta(S.ONGOING, partitions=[("t", 0)], start=5)
    before = meta.prepare_no_transit()
    transit = meta.prepare_abort_or_commit(S.PREPARE_ABORT, 99)
    assert meta.pending_state == S.PREPARE_ABORT and meta.pending_transition_in_progress
    assert meta.prepare_no_transit() == before
    assert transit.last_producer_id == 100  # the transit's last id is the current id
    with pytest.raises(IllegalTransitionError, match="already a pending state PrepareAbort"):
        meta.prepare_add_partitions({("t", 1)}, 100)
    meta.cancel_pending_transition()  # the append failed
    assert meta.pending_state is None and meta.state == S.ONGOING


@pytest.mark.parametrize("current", list(S))
@pytest.mark.parametrize("target", [S.PREPARE_COMMIT, S.PREPARE_ABORT])
def test_prepare_follows_valid_previous_states(current, target):
    meta = _meta(current, partitions=[("t", 0)] if current != S.EMPTY else [], start=1)
    if current in VALID_PREVIOUS[target]:
        assert meta.prepare_abort_or_commit(target, 5).state == target
    else:
        with pytest.raises(IllegalTransitionError, match="not a valid previous state"):
            meta.prepare_abort_or_commit(target, 5)
        assert meta.pending_state is None


def test_dead_is_prepared_from_expirable_states_and_never_completed():
    meta = _meta(S.COMPLETE_ABORT, start=1)
    transit = meta.prepare_dead()
    assert transit.state == S.DEAD and transit.txn_last_update_timestamp == 10
    with pytest.raises(IllegalTransitionError, match="remove the transaction metadata"):
        meta.complete_transition_to(transit)
    with pytest.raises(IllegalTransitionError):
        _meta(S.ONGOING).prepare_dead()


# --- InitProducerId: epochs ---------------------------------------------------------

def test_increment_without_expected_epoch_forgets_the_last_epoch():
    meta = _meta(S.COMPLETE_COMMIT, epoch=4, start=1)
    meta.last_producer_epoch = 3
    transit = meta.prepare_increment_producer_epoch(1000, None, 50)
    assert (transit.producer_epoch, transit.last_producer_epoch, transit.txn_timeout_ms,
            transit.topic_partitions, transit.txn_start_timestamp) == (5, -1, 1000,
                                                                       frozenset(), -1)
    _commit(meta, transit)
    assert (meta.producer_epoch, meta.last_producer_epoch, meta.state) == (5, -1, S.EMPTY)


def test_a_new_id_gets_epoch_zero():
    meta = TransactionMetadata("txn", 100)  # epoch -1, as InitProducerId creates it
    transit = meta.prepare_increment_producer_epoch(1000, None, 5)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (0, -1)


def test_expected_epoch_current_bumps_and_remembers_it():
    meta = _meta(S.EMPTY, epoch=4)
    transit = meta.prepare_increment_producer_epoch(1000, 4, 5)
    assert (transit.producer_epoch, transit.last_producer_epoch) == (5, 4)
    _commit(meta, transit)
    # the retry of that success names the old epoch: the same answer, no bump
    retry = meta.prepare_increment_producer_epoch(1000, 4, 6)
    assert (retry.producer_epoch, retry.last_producer_epoch) == (5, 4)
    _commit(meta, retry)
    assert meta.producer_epoch == 5


def test_an_unknown_expected_epoch_is_fenced_with_nothing_pending():
    meta = _meta(S.EMPTY, epoch=4)
    meta.last_producer_epoch = 2
    with pytest.raises(ProducerFencedError, match="Expected producer epoch 3"):
        meta.prepare_increment_producer_epoch(1000, 3, 5)
    assert meta.pending_state is None


def test_epoch_exhaustion_and_rotation():
    assert not is_epoch_exhausted(32765) and is_epoch_exhausted(32766)
    meta = _meta(S.COMPLETE_ABORT, epoch=32766, start=1)
    with pytest.raises(IllegalTransitionError, match="Cannot allocate any more producer epochs"):
        meta.prepare_increment_producer_epoch(1000, None, 5)
    transit = meta.prepare_producer_id_rotation(200, 1000, 5, record_last_epoch=True)
    assert (transit.producer_id, transit.last_producer_id, transit.producer_epoch,
            transit.last_producer_epoch) == (200, 100, 0, 32766)
    _commit(meta, transit)
    assert (meta.producer_id, meta.last_producer_id, meta.producer_epoch) == (200, 100, 0)
    meta = _meta(S.EMPTY, epoch=32766)
    assert meta.prepare_producer_id_rotation(201, 1, 5, False).last_producer_epoch == -1
    with pytest.raises(IllegalTransitionError, match="still pending"):
        _meta(S.ONGOING, epoch=32766).prepare_producer_id_rotation(202, 1, 5, False)


# --- fencing an ongoing transaction -------------------------------------------------

def test_fencing_an_ongoing_transaction_bumps_then_aborts():
    meta = _meta(S.ONGOING, epoch=7, partitions=[("t", 0)], start=3)
    meta.last_producer_epoch = 6
    fence = meta.prepare_fence_producer_epoch()
    assert (fence.state, fence.producer_epoch, fence.last_producer_epoch) == (
        S.PREPARE_EPOCH_FENCE, 8, -1)
    with pytest.raises(IllegalTransitionError):  # a fence is never completed
        meta.complete_transition_to(fence)
    meta.apply_epoch_fence(fence.producer_epoch)
    assert (meta.producer_epoch, meta.last_producer_epoch, meta.pending_state) == (8, -1, None)
    abort = meta.prepare_abort_or_commit(S.PREPARE_ABORT, 20)
    assert abort.producer_epoch == 8 and abort.topic_partitions == {("t", 0)}
    _commit(meta, abort)
    assert meta.state == S.PREPARE_ABORT


def test_a_failed_fence_does_not_bump_again():
    meta = _meta(S.ONGOING, epoch=7, partitions=[("t", 0)], start=3)
    meta.apply_epoch_fence(meta.prepare_fence_producer_epoch().producer_epoch)
    meta.prepare_abort_or_commit(S.PREPARE_ABORT, 20)
    meta.cancel_pending_transition()  # the PrepareAbort write failed
    meta.has_failed_epoch_fence = True
    assert meta.prepare_fence_producer_epoch().producer_epoch == 8
    meta.cancel_pending_transition()
    meta.state = S.PREPARE_ABORT
    meta.prepare_complete(30)
    assert not meta.has_failed_epoch_fence


def test_fencing_at_short_max_and_apply_without_fence_are_refused():
    with pytest.raises(IllegalTransitionError, match=r"Short\.MaxValue"):
        _meta(S.ONGOING, epoch=32767).prepare_fence_producer_epoch()
    with pytest.raises(IllegalTransitionError, match="no pending epoch fence"):
        _meta(S.ONGOING).apply_epoch_fence(3)
    with pytest.raises(IllegalTransitionError, match="PrepareEpochFence"):
        _meta(S.EMPTY).prepare_fence_producer_epoch()


# --- completion checks --------------------------------------------------------------

def _with(transit: TxnTransitMetadata, **changes) -> TxnTransitMetadata:
    fields = {name: getattr(transit, name) for name in TxnTransitMetadata.__slots__}
    fields.update(changes)
    return TxnTransitMetadata(**fields)


@pytest.mark.parametrize(("prepare", "bad"), [
    (lambda m: m.prepare_add_partitions({("t", 1)}, 5), {"producer_epoch": 9}),
    (lambda m: m.prepare_add_partitions({("t", 1)}, 5), {"topic_partitions": frozenset()}),
    (lambda m: m.prepare_add_partitions({("t", 1)}, 5), {"txn_timeout_ms": 1}),
    (lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 5),
     {"topic_partitions": frozenset({("t", 0), ("x", 0)})}),
    (lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 5), {"txn_start_timestamp": 4}),
    (lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 5), {"producer_id": 1}),
    (lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, 5), {"state": S.PREPARE_ABORT}),
])
def test_completion_refuses_unexpected_metadata(prepare, bad):
    meta = _meta(S.ONGOING, epoch=2, partitions=[("t", 0)], start=3)
    transit = prepare(meta)
    with pytest.raises(IllegalTransitionError, match="unexpected metadata"):
        meta.complete_transition_to(_with(transit, **bad))
    assert meta.state == S.ONGOING and meta.topic_partitions == {("t", 0)}


def test_empty_completion_allows_same_bump_or_new_producer_only():
    meta = _meta(S.EMPTY, epoch=2)
    transit = meta.prepare_increment_producer_epoch(1, None, 5)
    with pytest.raises(IllegalTransitionError):
        meta.complete_transition_to(_with(transit, producer_epoch=4))
    _commit(meta, _with(transit, producer_epoch=0, producer_id=555))
    assert (meta.producer_id, meta.producer_epoch) == (555, 0)
    with pytest.raises(IllegalTransitionError, match="does not have a pending state"):
        meta.complete_transition_to(transit)


def test_complete_needs_a_start_timestamp_and_remove_partition_needs_prepare():
    meta = _meta(S.PREPARE_ABORT, partitions=[("t", 0)], start=3)
    transit = meta.prepare_complete(9)
    with pytest.raises(IllegalTransitionError):
        meta.complete_transition_to(_with(transit, txn_start_timestamp=-1))
    with pytest.raises(IllegalTransitionError, match="while trying to remove partitions"):
        _meta(S.ONGOING, partitions=[("t", 0)]).remove_partition(("t", 0))


_ops = st.lists(st.sampled_from(["init", "add", "commit", "abort", "complete", "fence"]),
                max_size=30)


@given(_ops)
def test_any_sequence_of_requests_keeps_the_invariants(ops):
    """Whatever a client does, each step either raises before changing anything or
    lands in a state its previous state allows, and Empty never holds partitions."""
    meta = TransactionMetadata("txn", 1)
    now = 0
    for op in ops:
        now += 1
        before = (meta.state, meta.producer_epoch, frozenset(meta.topic_partitions))
        try:
            if op == "init":
                transit = meta.prepare_increment_producer_epoch(1000, None, now)
            elif op == "add":
                transit = meta.prepare_add_partitions({("t", now % 3)}, now)
            elif op in ("commit", "abort"):
                target = S.PREPARE_COMMIT if op == "commit" else S.PREPARE_ABORT
                transit = meta.prepare_abort_or_commit(target, now)
            elif op == "complete":
                if meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                    continue
                transit = meta.prepare_complete(now)
            else:
                fence = meta.prepare_fence_producer_epoch()
                meta.apply_epoch_fence(fence.producer_epoch)
                transit = meta.prepare_abort_or_commit(S.PREPARE_ABORT, now)
        except (IllegalTransitionError, ProducerFencedError):
            assert (meta.state, meta.producer_epoch, frozenset(meta.topic_partitions)) == before
            assert meta.pending_state is None
            continue
        previous = meta.state
        meta.complete_transition_to(transit)
        assert previous in meta.state.valid_previous_states or op == "fence"
        assert meta.pending_state is None
        if meta.state == S.EMPTY:
            # (Kafka keeps the last start time in memory; the record says -1)
            assert not meta.topic_partitions and transit.txn_start_timestamp == -1
