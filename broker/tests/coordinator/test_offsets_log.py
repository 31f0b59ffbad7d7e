"""OffsetsLog.load against a real partition log: what a new coordinator reads back."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from moldau.coordinator.group.offsets_log import OffsetsLog
from moldau.coordinator.group.records import (
    OffsetAndMetadata,
    OffsetKey,
    offset_commit_key,
    offset_commit_value,
)
from moldau.protocol.records import build_batch
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

    committed = [(key.group, value.offset) for key, value in entries
                 if isinstance(key, OffsetKey)]
    assert committed == [("g", 10), ("g", 20), ("g", 30)]
