"""The transactional accounting on hand-made transactions and reads: aborted records must
stay invisible, a transaction is visible whole or not at all (per partition and across
them), in-doubt transactions may go either way."""

from __future__ import annotations

import json

import pytest

from moldau.checker.records import CheckerRecord
from moldau.checker.report import PartitionRead
from moldau.checker.transactional import aborted_on_purpose
from moldau.checker.txn_report import (
    ABORTED,
    COMMITTED,
    IN_DOUBT,
    TransactionWrites,
    build_transactional_report,
    transactional_writes,
)

RUN = "run1"


def txn(tag: str, outcome: str, **records: list[int]) -> TransactionWrites:
    """records: p0=[seqs], p1=[...]."""
    return TransactionWrites(tag, outcome, {int(p[1:]): seqs for p, seqs in records.items()},
                             on_purpose=outcome == ABORTED)


def reads(visible: dict[int, list[tuple[int, str]]], partitions=(0, 1)) -> dict[int, PartitionRead]:
    """partition -> [(sequence, tag)] in offset order (offsets 0, 1, ...)."""
    out = {}
    for p in partitions:
        seen = visible.get(p, [])
        out[p] = PartitionRead(
            p, [(o, CheckerRecord(RUN, p, seq, 0)) for o, (seq, _) in enumerate(seen)],
            start_offset=0, end_offset=len(seen) + 5,  # markers and aborted records
            tags={o: tag for o, (_, tag) in enumerate(seen) if tag})
    return out


def report(transactions: list[TransactionWrites], visible, sent=None):
    sent = sent or {0: 6, 1: 6}
    writes = transactional_writes(transactions, sent)
    return build_transactional_report(RUN, "t", writes, transactions, reads(visible))


# t0 commits p0 0-2 and p1 0-2, t1 (aborted) p0 3-4 and p1 3-4, t2 commits p0 5 and p1 5
def three() -> list[TransactionWrites]:
    return [txn("0", COMMITTED, p0=[0, 1, 2], p1=[0, 1, 2]),
            txn("1", ABORTED, p0=[3, 4], p1=[3, 4]),
            txn("2", COMMITTED, p0=[5], p1=[5])]


def committed_view() -> dict[int, list[tuple[int, str]]]:
    return {p: [(0, "0"), (1, "0"), (2, "0"), (5, "2")] for p in (0, 1)}


def test_committed_visible_and_aborted_invisible_is_ok():
    r = report(three(), committed_view())
    assert r.ok, r.summary()
    check = r.transactions
    assert check is not None
    assert check.counts == {COMMITTED: 2, ABORTED: 1, IN_DOUBT: 0}
    assert check.aborted_on_purpose == 1
    assert r.totals()["aborted"] == 4 and r.totals()["lost"] == 0
    assert r.partitions[0].sent == 6 and r.partitions[0].acknowledged == 4
    assert "transactions: committed 2 aborted 1 (on purpose 1) in-doubt 0" in r.summary()
    assert "aborted 2 aborted-visible 0" in r.summary()  # the partition line says it


def test_an_aborted_record_read_is_an_error_per_partition_and_per_transaction():
    visible = committed_view()
    visible[1] = [(0, "0"), (1, "0"), (2, "0"), (3, "1"), (5, "2")]
    r = report(three(), visible)
    assert not r.ok
    assert r.partitions[1].aborted_visible == [3] and r.partitions[0].aborted_visible == []
    assert r.totals()["aborted_visible"] == 1
    check = r.transactions
    assert check is not None and [f.tag for f in check.aborted_visible] == ["1"]
    assert check.aborted_visible[0].visible == {1: 1}
    assert "aborted but visible sequences 3" in r.summary()
    assert "aborted but visible: 1 (aborted: p0 0/2, p1 1/2)" in r.summary()


def test_a_committed_transaction_missing_in_one_partition_is_torn_and_lost():
    visible = committed_view()
    visible[1] = [(0, "0"), (1, "0"), (2, "0")]  # t2's record never shows in p1
    r = report(three(), visible)
    assert not r.ok
    assert r.partitions[1].lost == [5]
    check = r.transactions
    assert check is not None and [f.tag for f in check.torn] == ["2"]
    assert check.torn[0].visible == {0: 1} and check.torn[0].written == {0: 1, 1: 1}


def test_a_committed_transaction_not_visible_at_all_is_reported():
    visible = {p: [(0, "0"), (1, "0"), (2, "0")] for p in (0, 1)}
    r = report(three(), visible)
    check = r.transactions
    assert check is not None and [f.tag for f in check.committed_invisible] == ["2"]
    assert not check.torn and not r.ok and r.lost == 2


@pytest.mark.parametrize("seen,ok", [
    ([], True),  # aborted after all
    ([(0, 3), (0, 4), (1, 3), (1, 4)], True),  # committed after all
    ([(0, 3), (0, 4)], False),  # one partition only: torn
    ([(0, 3), (1, 3), (1, 4)], False),  # part of one partition: torn
])
def test_an_in_doubt_transaction_is_visible_whole_or_not_at_all(seen, ok):
    transactions = three()
    transactions[1] = txn("1", IN_DOUBT, p0=[3, 4], p1=[3, 4])
    visible = {p: [(0, "0"), (1, "0"), (2, "0")] for p in (0, 1)}
    for p, seq in seen:
        visible[p].append((seq, "1"))
    for p in (0, 1):
        visible[p].append((5, "2"))
    r = report(transactions, visible)
    check = r.transactions
    assert check is not None
    assert r.ok is ok, r.summary()
    assert bool(check.torn) is not ok
    if ok:
        assert (check.in_doubt_visible, check.in_doubt_invisible) == ((1, 0) if seen else (0, 1))
        # in-doubt records read are not lost, duplicated or unexpected
        assert r.totals()["landed_unacknowledged"] == len(seen)


def test_an_undelivered_record_of_an_in_doubt_transaction_may_be_missing():
    transactions = three()
    transactions[1] = txn("1", IN_DOUBT, p0=[3, 4], p1=[3, 4])
    transactions[1].undelivered = {(1, 4)}
    visible = {0: [(0, "0"), (1, "0"), (2, "0"), (3, "1"), (4, "1"), (5, "2")],
               1: [(0, "0"), (1, "0"), (2, "0"), (3, "1"), (5, "2")]}
    r = report(transactions, visible)
    assert r.ok, r.summary()


def test_records_with_an_unknown_or_wrong_tag_are_errors():
    visible = committed_view()
    visible[0][3] = (5, "7")  # no transaction 7
    r = report(three(), visible)
    check = r.transactions
    assert check is not None and check.unknown_tags == {"7": 1} and not r.ok
    visible = committed_view()
    visible[0][3] = (5, "0")  # transaction 0 did not write p0 5
    check = report(three(), visible).transactions
    assert check is not None and check.unknown_tags == {"0": 1}
    visible = committed_view()
    visible[0][3] = (5, "")  # untagged
    check = report(three(), visible).transactions
    assert check is not None and check.unknown_tags == {"": 1}
    assert "<none> x1" in check.summary()


def test_duplicates_and_reordering_are_judged_as_in_the_idempotent_mode():
    visible = committed_view()
    visible[0] = [(0, "0"), (2, "0"), (1, "0"), (5, "2"), (5, "2")]
    r = report(three(), visible)
    assert r.partitions[0].out_of_order == [(2, 1, 2)]
    assert r.partitions[0].duplicated == {5: [3, 4]}
    assert not r.ok


def test_json_form_carries_the_transactions():
    r = report(three(), committed_view())
    data = json.loads(r.to_json())
    assert data["ok"] is True
    assert data["transactions"]["counts"] == {"committed": 2, "aborted": 1, "in_doubt": 0}
    assert data["totals"]["aborted"] == 4
    assert data["partitions"][0]["aborted_visible"] == []


def test_aborts_on_purpose_are_spread_evenly():
    assert [k for k in range(12) if aborted_on_purpose(k, 1 / 3)] == [2, 5, 8, 11]
    assert [k for k in range(4) if aborted_on_purpose(k, 0.5)] == [1, 3]
    assert not any(aborted_on_purpose(k, 0) for k in range(10))
    assert all(aborted_on_purpose(k, 1) for k in range(10))


def test_transactional_writes_count_sequences_never_enqueued_as_in_doubt():
    writes = transactional_writes(three(), {0: 7, 1: 6})
    assert writes[0].sent == 7 and writes[0].in_doubt() == {6}
    assert writes[0].aborted == {3, 4}
    assert sorted(writes[0].acknowledged) == [0, 1, 2, 5]


def test_an_in_doubt_transaction_with_nothing_delivered_is_invisible():
    transactions = three()
    transactions[1] = txn("1", IN_DOUBT, p0=[3, 4], p1=[3, 4])
    transactions[1].undelivered = {(0, 3), (0, 4), (1, 3), (1, 4)}  # purged by the abort
    check = report(transactions, committed_view()).transactions
    assert check is not None and check.ok
    assert (check.in_doubt_visible, check.in_doubt_invisible) == (0, 1)
    assert check.doubts == {"1": "no answer (the writer stopped or died)"}
