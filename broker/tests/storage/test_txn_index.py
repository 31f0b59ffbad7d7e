"""The transaction index (`.txnindex`): Kafka's 34-byte entries read back with struct,
the fetch-range search, truncation, and its life with its segment."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from moldau.errors import KafkaStorageError
from moldau.storage.mapped_index import CorruptIndexError
from moldau.storage.segment import LogSegment
from moldau.storage.txn_index import (
    AbortedTxn,
    TransactionIndex,
    collect_aborted_transactions,
)

_ENTRY = ">hqqqq"  # version, producer id, first offset, last offset, last stable offset


def _on_disk(path) -> list[tuple[int, int, int, int, int]]:
    data = Path(path).read_bytes()
    assert len(data) % 34 == 0
    return [struct.unpack_from(_ENTRY, data, i) for i in range(0, len(data), 34)]


def test_entries_are_kafkas_34_bytes_and_the_file_appears_with_the_first(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(str(path), 0)
    assert not path.exists() and index.entries() == []
    index.append(AbortedTxn(7, 10, 20, 11))
    index.append(AbortedTxn(8, 15, 25, 26))
    assert _on_disk(path) == [(0, 7, 10, 20, 11), (0, 8, 15, 25, 26)]
    assert os.path.getsize(path) == 68
    # a fresh object reads what is there, and keeps the order rule across reopening
    again = TransactionIndex(str(path), 0)
    assert again.entries() == [AbortedTxn(7, 10, 20, 11), AbortedTxn(8, 15, 25, 26)]
    with pytest.raises(ValueError, match="must increase sequentially"):
        again.append(AbortedTxn(9, 21, 25, 26))
    assert len(_on_disk(path)) == 2


def test_collect_aborted_overlapping_the_range_and_stop_at_the_lso(tmp_path):
    index = TransactionIndex(str(tmp_path / "a.txnindex"), 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.append(AbortedTxn(2, 3, 10, 11))
    index.append(AbortedTxn(3, 12, 20, 30))
    index.append(AbortedTxn(4, 25, 40, 41))
    result = index.collect_aborted(6, 15)
    assert [t.producer_id for t in result.aborted] == [2, 3]
    assert result.is_complete  # entry 3's LSO (30) >= 15: no later segment matters
    result = index.collect_aborted(0, 100)
    assert [t.producer_id for t in result.aborted] == [1, 2, 3, 4] and not result.is_complete


def test_collect_across_segments_stops_at_the_first_complete_search(tmp_path):
    first = TransactionIndex(str(tmp_path / "0.txnindex"), 0)
    second = TransactionIndex(str(tmp_path / "100.txnindex"), 100)
    third = TransactionIndex(str(tmp_path / "200.txnindex"), 200)
    first.append(AbortedTxn(1, 50, 60, 61))
    second.append(AbortedTxn(2, 90, 110, 300))
    third.append(AbortedTxn(3, 95, 210, 211))  # never looked at: second's LSO ends it
    found = collect_aborted_transactions([first, second, third], 55, 150)
    assert [t.producer_id for t in found] == [1, 2]


def test_truncate_to_drops_markers_at_or_after_the_offset(tmp_path):
    path = tmp_path / "t.txnindex"
    index = TransactionIndex(str(path), 0)
    for pid, last in ((1, 5), (2, 9), (3, 14)):
        index.append(AbortedTxn(pid, last - 2, last, last + 1))
    index.truncate_to(9)
    assert [e[1] for e in _on_disk(path)] == [1]
    index.append(AbortedTxn(4, 6, 7, 8))  # the last offset is 5 again: 7 is allowed
    index.truncate_to(100)  # nothing at or after: unchanged
    assert [e[1] for e in _on_disk(path)] == [1, 4]
    index.reset()
    assert os.path.getsize(path) == 0 and index.entries() == []
    index.append(AbortedTxn(5, 0, 1, 2))
    TransactionIndex(str(tmp_path / "none.txnindex"), 0).truncate_to(0)  # no file: fine
    assert not (tmp_path / "none.txnindex").exists()


def test_sanity_check_and_unknown_versions(tmp_path):
    path = tmp_path / "00000000000000000100.txnindex"
    index = TransactionIndex(str(path), 100)
    index.append(AbortedTxn(1, 90, 120, 121))
    index.sanity_check()
    with open(path, "ab") as f:
        f.write(struct.pack(_ENTRY, 0, 2, 10, 99, 100))  # written past the order check
    with pytest.raises(CorruptIndexError, match="less than start offset 100"):
        TransactionIndex(str(path), 100).sanity_check()
    with open(path, "wb") as f:
        f.write(struct.pack(_ENTRY, 1, 2, 10, 120, 121))
    with pytest.raises(KafkaStorageError, match="Unexpected aborted transaction version 1"):
        TransactionIndex(str(path), 100).entries()


def test_a_torn_entry_is_ignored_and_cut_before_the_next_append(tmp_path):
    path = tmp_path / "t.txnindex"
    with open(path, "wb") as f:
        f.write(struct.pack(_ENTRY, 0, 1, 0, 5, 6) + b"\x00\x00\x00")
    index = TransactionIndex(str(path), 0)
    assert index.entries() == [AbortedTxn(1, 0, 5, 6)]
    index.append(AbortedTxn(2, 6, 8, 9))
    assert _on_disk(path) == [(0, 1, 0, 5, 6), (0, 2, 6, 8, 9)]


def test_the_index_follows_its_segment(tmp_path):
    segment = LogSegment(str(tmp_path), 0)
    path = tmp_path / "00000000000000000000.txnindex"
    assert not path.exists()  # a segment without aborted transactions has no file
    segment.txn_index.append(AbortedTxn(1, 0, 3, 4))
    segment.flush()
    segment.change_suffix(".deleted")
    assert not path.exists() and (tmp_path / "00000000000000000000.txnindex.deleted").exists()
    assert segment.txn_index.entries() == [AbortedTxn(1, 0, 3, 4)]
    segment.delete()
    assert os.listdir(tmp_path) == []


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 20), st.integers(0, 30)),
                max_size=15),
       st.integers(0, 120), st.integers(0, 120))
def test_search_is_the_filter_up_to_the_first_lso_at_the_bound(tmp_path_factory, txns,
                                                               fetch, upper):
    """collect_aborted against its definition, over any index with increasing markers."""
    index = TransactionIndex(str(tmp_path_factory.mktemp("i") / "x.txnindex"), 0)
    entries, last = [], 0
    for pid, length, lso_gap in txns:
        last += length
        entry = AbortedTxn(pid, last - length + 1, last, last + 1 + lso_gap)
        index.append(entry)
        entries.append(entry)
    expected, complete = [], False
    for entry in entries:
        if entry.last_offset >= fetch and entry.first_offset < upper:
            expected.append(entry)
        if entry.last_stable_offset >= upper:
            complete = True
            break
    assert index.collect_aborted(fetch, upper) == (expected, complete)
