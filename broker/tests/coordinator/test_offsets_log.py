"""OffsetsLog against a real partition log: what a new coordinator reads back, and the
batches the coordinator writes, header fields as Kafka writes them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from moldau.coordinator.group.coordinator import CoordinatorConfig, GroupCoordinator
from moldau.coordinator.group.offsets_log import LoadedOffset, OffsetsLog
from moldau.coordinator.group.records import (
    GroupKey,
    OffsetAndMetadata,
    OffsetKey,
    offset_commit_key,
    offset_commit_value,
    read_key,
)
from moldau.errors import MemberIdRequiredError
from moldau.protocol.records import NO_PRODUCER_ID, NO_SEQUENCE, build_batch, iter_batches
from moldau.storage.config import LogConfig
from moldau.storage.log import PartitionLog


def offsets_log_over(log: PartitionLog) -> OffsetsLog:
    partition = SimpleNamespace(log=log)
    manager = SimpleNamespace(leader_partition=lambda topic, index, require_leader: partition)
    return OffsetsLog(lambda: manager)


def commit(log: PartitionLog, group: str, offset: int) -> None:
    record = (offset_commit_key(group, "orders", 0),
              offset_commit_value(OffsetAndMetadata(offset, commit_timestamp=1)))
    log.append_as_leader(build_batch([record]), 0, from_client=False)


def test_a_new_leader_loads_commits_beyond_its_high_watermark(tmp_path: Path) -> None:
    # A follower that becomes leader may not know the old leader's high watermark yet:
    # commits it already holds past its own are the group's latest (Kafka reads to the
    # log end), and must not vanish with the move.
    log = PartitionLog(str(tmp_path / "__consumer_offsets-0"), LogConfig(), sync=False)
    commit(log, "g", 10)
    commit(log, "g", 20)
    log.update_high_watermark(1)
    commit(log, "g", 30)
    assert log.high_watermark == 1 and log.log_end_offset == 3

    entries = asyncio.run(offsets_log_over(log).load(0))

    committed = [(e.key.group, e.value.offset, e.position) for e in entries
                 if isinstance(e, LoadedOffset) and e.value is not None]
    assert committed == [("g", 10, 0), ("g", 20, 1), ("g", 30, 2)]


def leading(log: PartitionLog) -> OffsetsLog:
    """An OffsetsLog that leads the partition alone: each append is committed at once."""
    partition = SimpleNamespace(
        log=log, name="__consumer_offsets-0", leader_epoch=0, state=SimpleNamespace(isr=[1]),
        maybe_increment_high_watermark=lambda: log.update_high_watermark(log.log_end_offset),
        appended=lambda: None)
    manager = SimpleNamespace(leader_partition=lambda topic, index, require_leader: partition)
    return OffsetsLog(lambda: manager)


def test_a_commit_batch_has_base_sequence_zero_in_kafkas_record_order(tmp_path: Path) -> None:
    # Kafka's storeOffsets builds a commit's batch with base sequence 0 (producer id -1),
    # so its records show sequences 0..n-1 in the order of Kafka's map; the group's own
    # records (storeGroup) and tombstones have no sequence.
    log = PartitionLog(str(tmp_path / "__consumer_offsets-0"), LogConfig(), sync=False)
    codecs = ("none", "gzip", "snappy", "lz4", "zstd")

    async def scenario() -> None:
        config = CoordinatorConfig(offsets_partitions=1, initial_rebalance_delay_ms=0,
                                   min_session_timeout_ms=10)
        c = GroupCoordinator(config, leading(log), asyncio.get_running_loop())
        c.on_elected(0)
        while c.owned != {0}:
            await asyncio.sleep(0)
        first = await c.join_group("g", "", None, True, False, "client", "/127.0.0.1", 1000,
                                   1000, "consumer", [("range", b"r")])
        assert first.error == MemberIdRequiredError.code
        joined = await c.join_group("g", first.member_id, None, True, False, "client",
                                    "/127.0.0.1", 1000, 1000, "consumer", [("range", b"r")])
        await c.sync_group("g", joined.generation, joined.member_id, None, "consumer",
                           "range", {joined.member_id: b"A"})
        offsets = {(f"jc-{codec}", 0): OffsetAndMetadata(5, 0, "", 1) for codec in codecs}
        errors = await c.commit_offsets("g", joined.member_id, None, joined.generation,
                                        offsets)
        assert set(errors.values()) == {0}
        assert c.leave_group("g", [(joined.member_id, None, None)]) == [0]
        while log.log_end_offset < 7:  # the Empty group is written in the background
            await asyncio.sleep(0.01)
        assert await c.delete_offsets("g", [("jc-none", 0)]) == {("jc-none", 0): 0}
        c.shutdown()

    asyncio.run(asyncio.wait_for(scenario(), 20))
    buffer = log.read_bytes(log.read(0, 1 << 20))
    batches = [(b.base_sequence, b.last_sequence, b.producer_id,
                [read_key(r.key) for r in b.records()]) for b in iter_batches(buffer)]
    assert [(seq, last, pid) for seq, last, pid, _ in batches] == [
        (NO_SEQUENCE, NO_SEQUENCE, NO_PRODUCER_ID),  # the group after its rebalance
        (0, 4, NO_PRODUCER_ID),  # the commit
        (NO_SEQUENCE, NO_SEQUENCE, NO_PRODUCER_ID),  # the group, Empty
        (NO_SEQUENCE, NO_SEQUENCE, NO_PRODUCER_ID),  # OffsetDelete's tombstone
    ]
    assert isinstance(batches[0][3][0], GroupKey)
    # the order of Kafka's log in the reference lab (compat/, dump-log.consumer-offsets)
    committed = [key.topic for key in batches[1][3] if isinstance(key, OffsetKey)]
    assert committed == ["jc-none", "jc-snappy", "jc-zstd", "jc-lz4", "jc-gzip"]
