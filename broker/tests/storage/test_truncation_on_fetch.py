"""Truncation on fetch (Kafka from IBP 2.7): a leader's check of a fetch's last fetched
epoch (`diverging_epoch`, the Fetch handler's) and a follower's cut for the answer
(`truncation_offset`, the replica fetcher's), on real logs. The replication suite runs the
same path between brokers (a returning leader truncates what nobody copied)."""

from __future__ import annotations

import os

import pytest
from storage_helpers import batch

from moldau.errors import OffsetOutOfRangeError
from moldau.replication.replica_fetcher import cut_to_leader, truncation_offset
from moldau.server.handlers.fetch import diverging_epoch
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog


def make_log(path: str, epochs: list[int], seed: int = 0) -> PartitionLog:
    """A log with one 2-record batch per entry of epochs, appended as leader."""
    plog = PartitionLog(path, LogConfig(), sync=False)
    for i, epoch in enumerate(epochs):
        plog.append_as_leader(batch(2, seed=seed + i), epoch)
    return plog


def log_bytes(plog: PartitionLog) -> bytes:
    data = plog.read(plog.log_start_offset, 1 << 24).slice
    return os.pread(data.fd, data.size, data.position) if data is not None else b""


@pytest.fixture
def leader(tmp_path):
    plog = make_log(str(tmp_path / "leader" / "t-0"), [1, 1, 1, 1, 3, 3, 3, 3])  # 1@0, 3@8
    yield plog
    plog.close()


@pytest.mark.parametrize(
    "last_fetched_epoch, fetch_offset, expected",
    [
        (3, 16, None),  # at the log end, in the latest epoch
        (3, 12, None),  # inside the latest epoch
        (1, 8, None),  # at the end of an older epoch
        (1, 10, (1, 8)),  # past where epoch 1 ends here
        (2, 9, (1, 8)),  # an epoch this log never had: its floor, and where that ends
        (0, 0, None),  # below every epoch here: it ends where the first one starts
        (0, 2, (0, 0)),
        (3, 20, (3, 16)),  # past this log's end
    ],
)
def test_a_leader_names_where_the_fetchers_log_diverges(leader, last_fetched_epoch,
                                                        fetch_offset, expected):
    assert diverging_epoch(leader, last_fetched_epoch, fetch_offset) == expected


def test_an_epoch_above_the_leaders_or_an_offset_below_its_start_is_out_of_range(leader):
    with pytest.raises(OffsetOutOfRangeError, match="last fetched epoch 4"):
        diverging_epoch(leader, 4, 16)
    leader.update_high_watermark(leader.log_end_offset)
    leader.delete_records(4)
    with pytest.raises(OffsetOutOfRangeError, match="below the log start offset 4"):
        diverging_epoch(leader, 1, 2)


def test_a_returning_leader_converges_on_the_new_leaders_log(tmp_path, leader):
    # the old leader shares epoch 1 with the new one, then wrote 3 batches of epoch 2
    # that nobody copied; the new leader wrote epoch 3 from offset 8
    old = make_log(str(tmp_path / "old" / "t-0"), [1, 1, 1, 1, 2, 2, 2], seed=0)
    assert old.log_end_offset == 14
    rounds = 0
    while (diverging := diverging_epoch(leader, old.epochs.latest_epoch,
                                        old.log_end_offset)) is not None:
        rounds += 1
        assert rounds < 5, "truncation does not converge"
        cut_to_leader(old, *diverging)
    assert rounds == 1 and old.log_end_offset == 8
    # then the follower copies the rest with the leader's offsets and epochs
    data = leader.read(old.log_end_offset, 1 << 24).slice
    old.append_as_follower(os.pread(data.fd, data.size, data.position))
    assert log_bytes(old) == log_bytes(leader)
    assert [tuple(e) for e in old.epochs.entries] == [(1, 0), (3, 8)]
    old.close()


def test_an_epoch_a_former_leader_never_wrote_under_is_dropped(tmp_path, leader):
    # broker 3 led at epoch 2 without appending (it assigned the epoch at its log end when
    # it became leader), then lost leadership to a broker that never saw epoch 2
    old = make_log(str(tmp_path / "old" / "t-0"), [1, 1, 1, 1])
    old.epochs.assign(2, old.log_end_offset)
    assert old.epochs.latest_epoch == 2 and old.log_end_offset == 8
    diverging = diverging_epoch(leader, old.epochs.latest_epoch, old.log_end_offset)
    assert diverging == (1, 8)
    # no record to cut, but the cut drops the dangling epoch, or every fetch would diverge
    assert cut_to_leader(old, *diverging) == old.log_end_offset == 8
    assert old.epochs.latest_epoch == 1
    assert diverging_epoch(leader, old.epochs.latest_epoch, old.log_end_offset) is None
    old.close()


def test_a_follower_the_leader_knows_nothing_of_keeps_its_committed_records(tmp_path):
    follower = make_log(str(tmp_path / "f" / "t-0"), [5, 5, 5])
    follower.update_high_watermark(4)
    assert truncation_offset(follower, -1, -1) == 4
    assert truncation_offset(follower, 5, 100) == follower.log_end_offset  # nothing to cut
    follower.close()
