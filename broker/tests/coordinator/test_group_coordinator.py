"""The group coordinator's state machine on its own: an in-memory offsets log stands in for
__consumer_offsets (the component tests in tests/groups run the real one)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from moldau.coordinator.group.coordinator import CoordinatorConfig, GroupCoordinator, JoinResult
from moldau.coordinator.group.group import GroupState
from moldau.coordinator.group.offsets_log import OffsetsLog, TxnProducer
from moldau.coordinator.group.records import OffsetAndMetadata, read_key
from moldau.errors import (
    CoordinatorLoadInProgressError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidSessionTimeoutError,
    MemberIdRequiredError,
    NonEmptyGroupError,
    NotCoordinatorError,
    OffsetMetadataTooLargeError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)

T = TypeVar("T")


class MemoryOffsetsLog(OffsetsLog):
    """Keeps appended records per partition; load() returns them decoded, each record's
    position its index (transactional writes are not kept: the real log is in
    test_txn_offsets)."""

    def __init__(self) -> None:
        super().__init__(lambda: None)
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.fail_with = 0

    async def write(self, index: int, records: list[tuple[bytes, bytes | None]], *,
                    base_sequence: int = -1, producer: TxnProducer | None = None
                    ) -> tuple[int, int]:
        if self.fail_with:
            return self.fail_with, -1
        kept = self.records.setdefault(index, [])
        kept.extend(records)
        return 0, len(kept) - len(records)

    async def load(self, index: int) -> list[Any]:
        return [e for i, (k, v) in enumerate(self.records.get(index, []))
                if (e := self._decode(k, v, i)) is not None]


def run(test: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), 20))


async def coordinator(log: MemoryOffsetsLog | None = None, **settings: Any) -> GroupCoordinator:
    config = CoordinatorConfig(offsets_partitions=1, min_session_timeout_ms=10,
                               initial_rebalance_delay_ms=0, **settings)
    c = GroupCoordinator(config, log or MemoryOffsetsLog(), asyncio.get_running_loop())
    c.on_elected(0)
    for _ in range(10):
        await asyncio.sleep(0)
    assert c.owned == {0}
    return c


def join(c: GroupCoordinator, member_id: str = "", *, group: str = "g",
         instance: str | None = None, protocols: list[tuple[str, bytes]] | None = None,
         session_ms: int = 1000, rebalance_ms: int = 1000, require_known: bool = True,
         skip_ok: bool = False) -> asyncio.Task[JoinResult]:
    return asyncio.ensure_future(c.join_group(
        group, member_id, instance, require_known, skip_ok, "client", "/127.0.0.1",
        rebalance_ms, session_ms, "consumer", protocols or [("range", b"r")]))


async def join_new(c: GroupCoordinator, **kw: Any) -> asyncio.Task[JoinResult]:
    """The KIP-394 dance: get a member id, then join with it (the join may park)."""
    first = await join(c, **kw)
    assert first.error == MemberIdRequiredError.code and first.member_id
    return join(c, first.member_id, **kw)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_single_member_forms_a_stable_group() -> None:
    async def scenario() -> None:
        c = await coordinator()
        result = await (await join_new(c))
        assert result.error == 0 and result.generation == 1
        assert result.leader == result.member_id
        assert [m[0] for m in result.members] == [result.member_id]
        assert c.groups["g"].state is GroupState.COMPLETING_REBALANCE
        sync = await c.sync_group("g", 1, result.member_id, None, "consumer", "range",
                                  {result.member_id: b"assignment"})
        assert sync.error == 0 and sync.assignment == b"assignment"
        assert c.groups["g"].state is GroupState.STABLE
        c.heartbeat("g", result.member_id, None, 1)
        c.shutdown()
    run(scenario)


async def stable_pair(c: GroupCoordinator, **kw: Any) -> tuple[JoinResult, JoinResult]:
    a = await (await join_new(c, **kw.get("a", {})))
    await c.sync_group("g", a.generation, a.member_id, None, None, None, {a.member_id: b"A"})
    b_join = await join_new(c, **kw.get("b", {}))
    await settle()
    assert c.groups["g"].state is GroupState.PREPARING_REBALANCE
    with pytest.raises(RebalanceInProgressError):
        c.heartbeat("g", a.member_id, None, a.generation)
    a2_join = join(c, a.member_id, **kw.get("a", {}))
    a2, b = await a2_join, await b_join
    assert a2.generation == b.generation == 2
    leader, follower = (a2, b) if a2.leader == a2.member_id else (b, a2)
    assert len(leader.members) == 2 and follower.members == []
    follower_sync = asyncio.ensure_future(c.sync_group(
        "g", 2, follower.member_id, None, None, None, {}))
    await settle()
    assert not follower_sync.done()  # waits for the leader's assignment
    await c.sync_group("g", 2, leader.member_id, None, None, None,
                       {a2.member_id: b"A2", b.member_id: b"B2"})
    assert (await follower_sync).assignment == (b"A2" if follower is a2 else b"B2")
    return a2, b


def test_a_second_member_rebalances_the_group() -> None:
    async def scenario() -> None:
        c = await coordinator()
        a, _ = await stable_pair(c)
        assert c.groups["g"].state is GroupState.STABLE
        assert c.groups["g"].members[a.member_id].assignment == b"A2"
        c.shutdown()
    run(scenario)


def test_a_member_that_stops_heartbeating_is_removed_after_its_session() -> None:
    async def scenario() -> None:
        c = await coordinator()
        a, b = await stable_pair(c, a={"session_ms": 200}, b={"session_ms": 5000})
        await asyncio.sleep(0.4)  # a is silent; b's session is long
        group = c.groups["g"]
        assert a.member_id not in group.members
        assert group.state is GroupState.PREPARING_REBALANCE
        rejoin = await join(c, b.member_id, session_ms=5000)
        assert rejoin.generation == 3 and rejoin.leader == b.member_id
        c.shutdown()
    run(scenario)


def test_leave_group_rebalances_and_the_last_leaver_empties_the_group() -> None:
    async def scenario() -> None:
        c = await coordinator()
        a, b = await stable_pair(c)
        assert c.leave_group("g", [(a.member_id, None, "bye"), ("nobody", None, None)]) == [
            0, UnknownMemberIdError.code]
        rejoin = await join(c, b.member_id)
        assert rejoin.generation == 3
        assert c.leave_group("g", [(b.member_id, None, None)]) == [0]
        await settle()
        assert c.groups["g"].state is GroupState.EMPTY
        c.shutdown()
    run(scenario)


def test_join_errors() -> None:
    async def scenario() -> None:
        c = await coordinator(max_group_size=1)
        with pytest.raises(InvalidSessionTimeoutError):
            await join(c, session_ms=1)
        with pytest.raises(UnknownMemberIdError):
            await join(c, "made-up", group="nothing-here")
        a = await (await join_new(c))
        with pytest.raises(GroupMaxSizeReachedError):
            await join_new(c)
        await c.sync_group("g", a.generation, a.member_id, None, None, None, {})
        with pytest.raises(IllegalGenerationError):
            c.heartbeat("g", a.member_id, None, a.generation + 1)
        c.shutdown()
    run(scenario)


def test_protocol_selection_takes_the_most_preferred_common_protocol() -> None:
    async def scenario() -> None:
        c = await coordinator()
        both = [("roundrobin", b""), ("range", b"")]
        a = await (await join_new(c, protocols=both))
        assert a.protocol == "roundrobin"
        await c.sync_group("g", 1, a.member_id, None, None, None, {})
        b_join = await join_new(c, protocols=[("range", b""), ("sticky", b"")])
        a2 = await join(c, a.member_id, protocols=both)
        assert a2.protocol == "range" == (await b_join).protocol  # the only common one
        other = await join(c, protocols=[("cooperative-sticky", b"")])
        assert other.error == InconsistentGroupProtocolError.code
        c.shutdown()
    run(scenario)


def test_static_member_rejoin_keeps_the_generation_and_fences_the_old_id() -> None:
    async def scenario() -> None:
        c = await coordinator()
        a = await join(c, instance="i-1", require_known=False)
        await c.sync_group("g", 1, a.member_id, "i-1", None, None, {a.member_id: b"A"})
        again = await join(c, instance="i-1", require_known=False)
        assert again.error == 0 and again.member_id != a.member_id
        assert again.generation == 1  # no rebalance
        assert c.groups["g"].state is GroupState.STABLE
        sync = await c.sync_group("g", 1, again.member_id, "i-1", None, None, {})
        assert sync.assignment == b"A"
        with pytest.raises(FencedInstanceIdError):
            c.heartbeat("g", a.member_id, "i-1", 1)
        c.shutdown()
    run(scenario)


def test_commit_errors_and_nothing_written_for_rejected_commits() -> None:
    async def scenario() -> None:
        log = MemoryOffsetsLog()
        c = await coordinator(log, offset_metadata_max_bytes=5)
        a = await (await join_new(c))
        offsets = {("t", 0): OffsetAndMetadata(10, -1, "", 1)}
        assert await c.commit_offsets("g", "stranger", None, 1, offsets) == {
            ("t", 0): UnknownMemberIdError.code}
        assert await c.commit_offsets("g", a.member_id, None, 7, offsets) == {
            ("t", 0): IllegalGenerationError.code}
        # joined but not synced: CompletingRebalance
        assert await c.commit_offsets("g", a.member_id, None, 1, offsets) == {
            ("t", 0): RebalanceInProgressError.code}
        assert log.records == {}
        await c.sync_group("g", 1, a.member_id, None, None, None, {})
        mixed = {("t", 0): OffsetAndMetadata(10, -1, "ok", 1),
                 ("t", 1): OffsetAndMetadata(11, -1, "too long", 1)}
        assert await c.commit_offsets("g", a.member_id, None, 1, mixed) == {
            ("t", 0): 0, ("t", 1): OffsetMetadataTooLargeError.code}
        fetched = c.fetch_offsets("g", [("t", 0), ("t", 1)])
        assert fetched[("t", 0)].offset == 10 and fetched[("t", 1)] is None
        written = [read_key(k) for k, _ in log.records[0]]
        assert [k.partition for k in written if hasattr(k, "partition")] == [0]
        c.shutdown()
    run(scenario)


def test_failed_write_is_reported_and_not_applied() -> None:
    async def scenario() -> None:
        log = MemoryOffsetsLog()
        c = await coordinator(log)
        log.fail_with = NotCoordinatorError.code
        result = await c.commit_offsets("standalone", "", None, -1,
                                        {("t", 0): OffsetAndMetadata(5)})
        assert result == {("t", 0): NotCoordinatorError.code}
        assert c.fetch_offsets("standalone", [("t", 0)]) == {("t", 0): None}
        c.shutdown()
    run(scenario)


def test_groups_and_offsets_survive_a_reload_and_deletion_is_tombstoned() -> None:
    async def scenario() -> None:
        log = MemoryOffsetsLog()
        c = await coordinator(log)
        a = await (await join_new(c))
        await c.sync_group("g", 1, a.member_id, None, None, None, {a.member_id: b"A"})
        assert await c.commit_offsets("g", a.member_id, None, 1,
                                      {("t", 3): OffsetAndMetadata(33, 2, "m", 1)}) == {
            ("t", 3): 0}
        c.shutdown()
        again = await coordinator(log)
        group = again.groups["g"]
        assert group.state is GroupState.STABLE and group.generation == 1
        assert group.members[a.member_id].assignment == b"A"
        assert again.fetch_offsets("g", None) == {("t", 3): OffsetAndMetadata(33, 2, "m", 1)}
        assert await again.delete_groups(["g"]) == {"g": NonEmptyGroupError.code}
        assert again.leave_group("g", [(a.member_id, None, None)]) == [0]
        await settle()
        assert await again.delete_groups(["g"]) == {"g": 0}
        again.shutdown()
        third = await coordinator(log)
        assert "g" not in third.groups
        third.shutdown()
    run(scenario)


def test_offsets_of_an_empty_group_expire_and_the_group_goes() -> None:
    async def scenario() -> None:
        c = await coordinator(offsets_retention_ms=100,
                              offsets_retention_check_interval_ms=50)
        await c.commit_offsets("simple", "", None, -1, {("t", 0): OffsetAndMetadata(
            1, commit_timestamp=int(__import__("time").time() * 1000))})
        assert "simple" in c.groups
        for _ in range(50):
            await asyncio.sleep(0.05)
            if "simple" not in c.groups:
                break
        assert "simple" not in c.groups
        c.shutdown()
    run(scenario)


def test_a_coming_election_answers_load_in_progress_not_not_coordinator() -> None:
    """While a LeaderAndIsr that makes this broker lead the group's offsets partition is
    applied, or once this broker's metadata names it the leader, a client is told to
    retry here (librdkafka abandons a manual assignment's offset fetch on
    NOT_COORDINATOR); otherwise NOT_COORDINATOR sends it to look elsewhere."""
    async def body() -> None:
        c = GroupCoordinator(CoordinatorConfig(offsets_partitions=1), MemoryOffsetsLog(),
                             asyncio.get_running_loop())
        with pytest.raises(NotCoordinatorError):
            c.fetch_offsets("g", None)
        c.expect_elections([0])
        with pytest.raises(CoordinatorLoadInProgressError):
            c.fetch_offsets("g", None)
        c.end_expected([0])
        with pytest.raises(NotCoordinatorError):
            c.fetch_offsets("g", None)
        c.named_leader = lambda partition: partition == 0
        with pytest.raises(CoordinatorLoadInProgressError):
            c.fetch_offsets("g", None)
        c.expect_elections([0])
        c.on_elected(0)
        assert c.expected == set()
        for _ in range(10):
            await asyncio.sleep(0)
        assert c.fetch_offsets("g", None) == {}
        c.on_resigned(0)
        c.named_leader = lambda _partition: False
        with pytest.raises(NotCoordinatorError):
            c.fetch_offsets("g", None)
    run(body)
