"""The coordinator's parts that are plain rules, on their own: which offsets expire
(KIP-211), which groups a partition's records rebuild, and the member timers'
bookkeeping. The coordinator as a whole is in test_group_coordinator."""

from __future__ import annotations

import asyncio

from moldau.coordinator.group.cleanup import expired_offsets
from moldau.coordinator.group.group import Group, GroupState
from moldau.coordinator.group.loading import rebuild_groups
from moldau.coordinator.group.offsets_log import Entry, LoadedGroup, LoadedOffset
from moldau.coordinator.group.records import (
    GroupKey,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
)
from moldau.coordinator.group.timers import CoordinatorTimers

RETENTION = 100


def committed_at(timestamp: int, expire: int | None = None) -> OffsetAndMetadata:
    return OffsetAndMetadata(1, commit_timestamp=timestamp, expire_timestamp=expire)


def test_standalone_offsets_expire_from_their_commit_unless_in_flight() -> None:
    group = Group("g", offsets={("t", 0): committed_at(0), ("t", 1): committed_at(0),
                                ("t", 2): committed_at(60)})
    group.pending_offsets[("t", 1)] += 1
    assert expired_offsets(group, 99, RETENTION) == []
    assert expired_offsets(group, 100, RETENTION) == [("t", 0)]
    assert expired_offsets(group, 160, RETENTION) == [("t", 0), ("t", 2)]


def test_an_explicit_expire_timestamp_wins_over_retention() -> None:
    group = Group("g", offsets={("t", 0): committed_at(0, expire=500),
                                ("t", 1): committed_at(490, expire=200)})
    assert expired_offsets(group, 300, RETENTION) == [("t", 1)]
    assert expired_offsets(group, 500, RETENTION) == [("t", 0), ("t", 1)]


def test_an_empty_group_counts_from_when_it_became_empty() -> None:
    group = Group("g", protocol_type="consumer", state_timestamp=1000,
                  offsets={("t", 0): committed_at(0)})
    assert expired_offsets(group, 1099, RETENTION) == []
    assert expired_offsets(group, 1100, RETENTION) == [("t", 0)]


def test_a_stable_consumer_group_keeps_the_offsets_of_its_subscribed_topics() -> None:
    group = Group("g", state=GroupState.STABLE, protocol_type="consumer",
                  subscribed_topics={"kept"},
                  offsets={("kept", 0): committed_at(0), ("dropped", 0): committed_at(0)})
    assert expired_offsets(group, 1000, RETENTION) == [("dropped", 0)]
    group.state = GroupState.PREPARING_REBALANCE
    assert expired_offsets(group, 1000, RETENTION) == []


def test_rebuilt_groups_keep_the_last_record_of_each_key() -> None:
    member = MemberRecord("m-1", None, "client", "/127.0.0.1", 300, 100, b"", b"A")
    entries: list[Entry] = [
        LoadedOffset(OffsetKey("live", "t", 0), committed_at(1)),
        LoadedOffset(OffsetKey("live", "t", 1), committed_at(1)),
        LoadedOffset(OffsetKey("live", "t", 1), None),  # tombstoned later
        LoadedGroup(GroupKey("live"), GroupRecord("consumer", 4, "range", "m-1", 7, [member])),
        LoadedOffset(OffsetKey("deleted", "t", 0), committed_at(1)),
        LoadedOffset(OffsetKey("deleted", "t", 0), None),
        LoadedGroup(GroupKey("deleted"), GroupRecord("consumer", 1, None, None, 7)),
        LoadedGroup(GroupKey("deleted"), None),
        LoadedGroup(GroupKey("offsets-stay"), None),  # a group tombstone, yet offsets follow
        LoadedOffset(OffsetKey("offsets-stay", "t", 0), committed_at(2)),
    ]
    groups = {g.group_id: g for g in rebuild_groups(entries, now=55.0)}
    assert set(groups) == {"live", "offsets-stay"}
    live = groups["live"]
    assert live.state is GroupState.STABLE and live.generation == 4
    assert list(live.offsets) == [("t", 0)]
    assert live.members["m-1"].assignment == b"A"
    assert live.members["m-1"].last_heartbeat == 55.0
    standalone = groups["offsets-stay"]
    assert standalone.state is GroupState.EMPTY and standalone.protocol_type is None
    assert standalone.offsets == {("t", 0): committed_at(2)}


def test_a_member_timer_restarted_fires_once_and_a_retired_group_fires_none() -> None:
    async def body() -> list[str]:
        timers = CoordinatorTimers(asyncio.get_running_loop())
        fired: list[str] = []
        timers.start_member("g", "m", 0.01, lambda: fired.append("first"))
        timers.start_member("g", "m", 0.02, lambda: fired.append("second"))
        group = Group("h", pending_members={"p"})
        timers.start_member("h", "p", 0.01, lambda: fired.append("pending"))
        timers.of_group(group).join = asyncio.get_running_loop().call_later(
            0.01, lambda: fired.append("join"))
        timers.cancel_group(group)
        await asyncio.sleep(0.05)
        return fired

    assert asyncio.run(body()) == ["second"]
