"""The group coordinator's side of transactions against a real `__consumer_offsets` log:
TxnOffsetCommit's pending offsets, the markers that commit or drop them, the rule that
orders them against plain commits, the load after a failover (markers in the log), the
KIP-447 member checks and the log's producer epoch check."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import TypeVar

from moldau.coordinator.group.coordinator import CoordinatorConfig, GroupCoordinator
from moldau.coordinator.group.group import GroupState
from moldau.coordinator.group.loading import rebuild_groups
from moldau.coordinator.group.offsets_log import (
    LoadedMarker,
    LoadedOffset,
    OffsetsLog,
)
from moldau.coordinator.group.records import OffsetAndMetadata, OffsetKey, read_key
from moldau.errors import (
    FencedInstanceIdError,
    IllegalGenerationError,
    InvalidGroupIdError,
    InvalidProducerEpochError,
    MemberIdRequiredError,
    OffsetMetadataTooLargeError,
    UnknownMemberIdError,
)
from moldau.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_control_batch, iter_batches
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog

T = TypeVar("T")
TP = ("orders", 0)
PID, EPOCH = 4000, 3


def leading(log: PartitionLog) -> OffsetsLog:
    """An OffsetsLog that leads the partition alone: each append is committed at once."""
    partition = SimpleNamespace(
        log=log, name="__consumer_offsets-0", leader_epoch=0, state=SimpleNamespace(isr=[1]),
        maybe_increment_high_watermark=lambda: log.update_high_watermark(log.log_end_offset),
        appended=lambda: None)
    manager = SimpleNamespace(leader_partition=lambda topic, index, require_leader: partition)
    return OffsetsLog(lambda: manager)  # type: ignore[arg-type, return-value]


def new_log(tmp_path: Path) -> PartitionLog:
    return PartitionLog(str(tmp_path / "__consumer_offsets-0"), LogConfig(), sync=False)


def run(test: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), 20))


async def coordinator(log: PartitionLog, **settings: int) -> GroupCoordinator:
    config = CoordinatorConfig(offsets_partitions=1, min_session_timeout_ms=10,
                               initial_rebalance_delay_ms=0, **settings)
    c = GroupCoordinator(config, leading(log), asyncio.get_running_loop())
    c.on_elected(0)
    while c.owned != {0}:
        await asyncio.sleep(0)
    return c


def marker(log: PartitionLog, commit: bool, producer_id: int = PID,
           epoch: int = EPOCH) -> None:
    """What WriteTxnMarkers writes to the offsets partition."""
    log.append_as_leader(build_control_batch(CONTROL_COMMIT if commit else CONTROL_ABORT,
                                             producer_id=producer_id, producer_epoch=epoch,
                                             coordinator_epoch=0), 0, from_client=False)
    log.update_high_watermark(log.log_end_offset)


def at(offset: int, metadata: str = "") -> dict[tuple[str, int], OffsetAndMetadata]:
    return {TP: OffsetAndMetadata(offset, -1, metadata, 1)}


async def txn_commit(c: GroupCoordinator, offset: int, *, group: str = "g",
                     producer_id: int = PID, epoch: int = EPOCH, member: str = "",
                     instance: str | None = None, generation: int = -1
                     ) -> dict[tuple[str, int], int]:
    return await c.commit_transactional_offsets(group, producer_id, epoch, member, instance,
                                                generation, at(offset))


def committed(c: GroupCoordinator, group: str = "g") -> int | None:
    found = c.fetch_offsets(group, [TP])[TP]
    return None if found is None else found.offset


def test_offsets_wait_for_the_marker_commit_applies_and_abort_drops(tmp_path: Path) -> None:
    log = new_log(tmp_path)

    async def scenario() -> None:
        c = await coordinator(log)
        assert await txn_commit(c, 10) == {TP: 0}
        # pending: invisible, and unstable for RequireStable
        assert committed(c) is None
        assert c.unstable_offsets("g", [TP, ("other", 0)]) == {TP}
        marker(log, commit=True)
        c.on_transaction_marker(0, PID, True)
        assert committed(c) == 10 and c.unstable_offsets("g", [TP]) == set()
        # the next transaction of the same producer is aborted
        assert await txn_commit(c, 20) == {TP: 0}
        marker(log, commit=False)
        c.on_transaction_marker(0, PID, False)
        assert committed(c) == 10 and c.unstable_offsets("g", [TP]) == set()
        # a marker of another producer, or for another partition, leaves them be
        assert await txn_commit(c, 30) == {TP: 0}
        c.on_transaction_marker(0, PID + 1, True)
        c.on_transaction_marker(1, PID, True)
        assert committed(c) == 10 and c.unstable_offsets("g", [TP]) == {TP}
        c.shutdown()

    run(scenario)
    # the batches as Kafka writes them: transactional, the producer's id and epoch, base
    # sequence 0 for every commit (the log checks a coordinator's epoch, not sequences)
    batches = list(iter_batches(log.read_bytes(log.read(0, 1 << 20))))
    data = [b for b in batches if not b.is_control]
    assert [(b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional)
            for b in data] == [(PID, EPOCH, 0, True)] * 3
    keys = [read_key(r.key) for r in data[0].records()]
    assert keys == [OffsetKey("g", "orders", 0)]


def test_a_later_plain_commit_wins_over_an_earlier_transaction(tmp_path: Path) -> None:
    # Kafka keeps the commit whose batch is later in the log: a transaction committing
    # after a plain commit of the same partition was written does not undo it.
    log = new_log(tmp_path)

    async def scenario() -> None:
        c = await coordinator(log)
        assert await txn_commit(c, 10) == {TP: 0}
        assert await c.commit_offsets("g", "", None, -1, at(50)) == {TP: 0}
        marker(log, commit=True)
        c.on_transaction_marker(0, PID, True)
        assert committed(c) == 50
        # the other way round the transaction's offsets are the later ones
        assert await c.commit_offsets("g", "", None, -1, at(60)) == {TP: 0}
        assert await txn_commit(c, 70) == {TP: 0}
        marker(log, commit=True)
        c.on_transaction_marker(0, PID, True)
        assert committed(c) == 70
        c.shutdown()
        # a reload compares the same positions
        again = await coordinator(log)
        assert committed(again) == 70
        again.shutdown()

    run(scenario)


def test_a_reload_commits_aborts_and_keeps_open_transactions_pending(tmp_path: Path) -> None:
    # After a failover the new coordinator reads the markers from the log: an aborted
    # transaction's offsets never come back; one still open stays pending until its
    # marker, which then arrives at the new coordinator.
    log = new_log(tmp_path)
    committer, aborter, still_open = PID, PID + 1, PID + 2

    async def scenario() -> None:
        c = await coordinator(log)
        assert await txn_commit(c, 10, producer_id=committer) == {TP: 0}
        assert await txn_commit(c, 99, group="h", producer_id=aborter) == {TP: 0}
        marker(log, commit=True, producer_id=committer)
        marker(log, commit=False, producer_id=aborter)
        assert await txn_commit(c, 11, group="h", producer_id=still_open) == {TP: 0}
        assert await c.commit_offsets("plain", "", None, -1, at(5)) == {TP: 0}
        c.shutdown()  # markers never reached it: the failover happened first

        again = await coordinator(log)
        assert committed(again) == 10
        assert committed(again, "h") is None  # aborted, and the open one pending
        assert again.unstable_offsets("h", [TP]) == {TP}
        assert committed(again, "plain") == 5
        marker(log, commit=True, producer_id=still_open)
        again.on_transaction_marker(0, still_open, True)
        assert committed(again, "h") == 11
        again.shutdown()

        third = await coordinator(log)
        assert (committed(third), committed(third, "h")) == (10, 11)
        third.shutdown()

    run(scenario)


def test_rebuild_rules_of_transactional_records() -> None:
    key = OffsetKey("g", "t", 0)

    def offset(n: int) -> OffsetAndMetadata:
        return OffsetAndMetadata(n, commit_timestamp=1)

    groups = rebuild_groups([
        LoadedOffset(key, offset(1), 0),                 # plain
        LoadedOffset(key, offset(2), 1, producer_id=7),  # txn 7, committed below
        LoadedOffset(key, offset(3), 2),                 # a later plain commit
        LoadedMarker(7, commit=True),                    # older than 3: 3 stays
        LoadedOffset(OffsetKey("g", "t", 1), offset(4), 4, producer_id=8),
        LoadedOffset(OffsetKey("g", "t", 1), None, 5, producer_id=8),  # its tombstone
        LoadedOffset(OffsetKey("g", "t", 2), offset(5), 6, producer_id=8),
        LoadedMarker(8, commit=True),
        LoadedOffset(OffsetKey("only-pending", "t", 0), offset(6), 8, producer_id=9),
    ], now=0.0)
    by_id = {g.group_id: g for g in groups}
    assert {tp: o.offset for tp, o in by_id["g"].offsets.items()} == {("t", 0): 3,
                                                                       ("t", 2): 5}
    assert by_id["g"].offset_positions == {("t", 0): 2, ("t", 2): 6}
    pending = by_id["only-pending"]
    assert pending.state is GroupState.EMPTY and not pending.offsets
    assert pending.txn_offsets.producers == {9} and pending.has_pending_commit(("t", 0))


def test_kip_447_member_checks(tmp_path: Path) -> None:
    log = new_log(tmp_path)

    async def scenario() -> None:
        c = await coordinator(log)
        # an old-style commit (no member, no generation) creates the group
        assert await txn_commit(c, 1, group="fresh") == {TP: 0}
        assert "fresh" in c.groups
        # a stable group with a static member
        first = await c.join_group("g", "", "instance-1", True, False, "client",
                                   "/127.0.0.1", 1000, 1000, "consumer", [("range", b"r")])
        member = first.member_id
        if first.error == MemberIdRequiredError.code:  # static members skip this
            first = await c.join_group("g", member, "instance-1", True, False, "client",
                                       "/127.0.0.1", 1000, 1000, "consumer",
                                       [("range", b"r")])
            member = first.member_id
        await c.sync_group("g", first.generation, member, "instance-1", "consumer", "range",
                           {member: b"A"})
        gen = first.generation
        before = log.log_end_offset
        assert await txn_commit(c, 1, member=member, generation=gen + 1,
                                instance="instance-1") == {TP: IllegalGenerationError.code}
        assert await txn_commit(c, 1, member="stranger", generation=gen) == {
            TP: UnknownMemberIdError.code}
        assert await txn_commit(c, 1, member="stranger", generation=gen,
                                instance="instance-1") == {TP: FencedInstanceIdError.code}
        assert await txn_commit(c, 1, member=member, generation=gen,
                                instance="no-such-instance") == {
            TP: UnknownMemberIdError.code}
        # a generation alone is checked too: the member must be named
        assert await txn_commit(c, 1, generation=gen) == {TP: UnknownMemberIdError.code}
        assert log.log_end_offset == before  # nothing written for a refused commit
        assert c.unstable_offsets("g", [TP]) == set()
        # the member, and an old client naming no member, may commit
        assert await txn_commit(c, 7, member=member, generation=gen,
                                instance="instance-1") == {TP: 0}
        assert await txn_commit(c, 8, producer_id=PID + 1) == {TP: 0}
        # an empty group id is refused for the whole request
        try:
            await txn_commit(c, 1, group="")
            raise AssertionError("an empty group id was accepted")
        except InvalidGroupIdError:
            pass
        c.shutdown()

    run(scenario)


def test_a_stale_producer_epoch_is_refused_by_the_log(tmp_path: Path) -> None:
    log = new_log(tmp_path)

    async def scenario() -> None:
        c = await coordinator(log, offset_metadata_max_bytes=4)
        assert await txn_commit(c, 10, epoch=EPOCH) == {TP: 0}
        end = log.log_end_offset
        assert await txn_commit(c, 11, epoch=EPOCH - 1) == {
            TP: InvalidProducerEpochError.code}
        assert log.log_end_offset == end
        # the refused commit left the pending one of the current epoch alone
        marker(log, commit=True)
        c.on_transaction_marker(0, PID, True)
        assert committed(c) == 10
        # too much metadata: refused per partition, the others written
        mixed = {TP: OffsetAndMetadata(12, -1, "long metadata", 1),
                 ("orders", 1): OffsetAndMetadata(13, -1, "ok", 1)}
        assert await c.commit_transactional_offsets("g", PID, EPOCH, "", None, -1, mixed) == {
            TP: OffsetMetadataTooLargeError.code, ("orders", 1): 0}
        assert c.unstable_offsets("g", [TP, ("orders", 1)]) == {("orders", 1)}
        c.shutdown()

    run(scenario)


def test_deleting_offsets_or_the_group_takes_pending_ones(tmp_path: Path) -> None:
    log = new_log(tmp_path)

    async def scenario() -> None:
        c = await coordinator(log)
        assert await txn_commit(c, 10) == {TP: 0}
        assert await c.delete_offsets("g", [TP]) == {TP: 0}
        assert c.unstable_offsets("g", [TP]) == set()
        marker(log, commit=True)
        c.on_transaction_marker(0, PID, True)
        assert committed(c) is None
        # DeleteGroups of an Empty group with an open transaction: gone with it
        assert await txn_commit(c, 20, group="d") == {TP: 0}
        assert await c.delete_groups(["d"]) == {"d": 0}
        assert "d" not in c.groups
        marker(log, commit=True)
        c.on_transaction_marker(0, PID, True)
        assert committed(c, "d") is None
        c.shutdown()

    run(scenario)
