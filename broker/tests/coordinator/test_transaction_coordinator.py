"""The transaction coordinator (coordinator/transaction/coordinator.py) on small fakes of
its log and marker channel: the state transitions of InitProducerId, AddPartitionsToTxn,
EndTxn and the markers' completion; fencing and epochs; the error codes Kafka 3.9 answers
for bad input; the timers; loading and unloading a partition. The network side is in
broker/tests/transactions/."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

import pytest

from moldau.coordinator.transaction.config import TransactionConfig, now_ms
from moldau.coordinator.transaction.coordinator import TransactionCoordinator
from moldau.coordinator.transaction.loading import KeyValue
from moldau.coordinator.transaction.log_records import (
    read_key,
    read_value,
    transaction_log_key,
    transaction_log_value,
)
from moldau.coordinator.transaction.markers import MarkerJob, MarkerOutcome, TransactionResult
from moldau.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from moldau.coordinator.transaction.state import TransactionState
from moldau.coordinator.transaction.txn_log import Record, TransactionLog, coordinator_error
from moldau.errors import (
    KafkaStorageError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    RecordTooLargeError,
    RequestTimedOutError,
)
from moldau.server.handlers.transactions import fenced_for

T = TypeVar("T")
S = TransactionState
NONE, NOT_AVAILABLE, LOADING, NOT_COORDINATOR = 0, 15, 14, 16
INVALID_REQUEST, INVALID_EPOCH, INVALID_STATE, INVALID_MAPPING = 42, 47, 48, 49
INVALID_TIMEOUT, CONCURRENT, FENCED, NOT_FOUND, ABORTABLE = 50, 51, 90, 105, 120
EPOCH = 7  # the coordinator epoch the fake partitions are elected at
TID = "txn-a"


class FakeLog(TransactionLog):
    """Appends are recorded (and answered `fail` while it is set); reads return `stored`."""

    def __init__(self) -> None:
        self.appended: list[tuple[int, list[Record]]] = []
        self.stored: dict[int, list[KeyValue]] = {}
        self.fail = 0
        self.hold: asyncio.Event | None = None  # set: appends wait for it

    def max_batch_bytes(self, index: int) -> int:
        return 1024 * 1024

    async def append(self, index: int, records: Sequence[Record], timeout_ms: int) -> int:
        if self.hold is not None:
            await self.hold.wait()
        if self.fail:
            return self.fail
        self.appended.append((index, list(records)))
        return 0

    async def read(self, index: int, buffer_size: int) -> list[KeyValue]:
        return self.stored.get(index, [])

    def states(self, tid: str = TID) -> list[str]:
        """The states written for an id, in order ("tombstone" for a null value)."""
        found = []
        for _, records in self.appended:
            for key, value in records:
                if read_key(key) == tid:
                    metadata = read_value(tid, value)
                    found.append("tombstone" if metadata is None
                                 else metadata.state.display_name)
        return found


class FakeChannel:
    def __init__(self) -> None:
        self.jobs: list[MarkerJob] = []
        self.removed: list[str] = []

    def send(self, job: MarkerJob) -> None:
        self.jobs.append(job)

    def remove_transactions(self, transactional_ids: Iterable[str]) -> None:
        self.removed.extend(transactional_ids)

    def ack(self, job: MarkerJob, error: int = 0) -> None:
        for topic, partition in sorted(job.partitions):
            job.on_partition_done(MarkerOutcome(topic, partition, error))


class World:
    def __init__(self, **config: int) -> None:
        self.log = FakeLog()
        self.channel = FakeChannel()
        self.next_id = 1000
        self.coordinator = TransactionCoordinator(
            TransactionConfig(num_partitions=3, **config), self.log, self.channel,
            self._producer_id)
        self.coordinator.active = True

    async def _producer_id(self) -> int:
        self.next_id += 1
        return self.next_id

    async def elect(self, *partitions: int, epoch: int = EPOCH) -> None:
        for partition in partitions or (0, 1, 2):
            self.coordinator.on_elected(partition, epoch)
        await settle()

    def metadata(self, tid: str = TID) -> TransactionMetadata:
        found = self.coordinator.state.get(tid)[1]
        assert found is not None
        return found

    async def init(self, tid: str = TID, timeout: int = 60000,
                   expected: tuple[int, int] | None = None) -> tuple[int, int, int]:
        r = await self.coordinator.init_producer_id(tid, timeout, expected)
        return r.error, r.producer_id, r.producer_epoch

    async def ongoing(self, tid: str = TID, *partitions: tuple[str, int]) -> tuple[int, int]:
        """An initialized id with a transaction on the partitions (default t-0, t-1)."""
        _, pid, epoch = await self.init(tid)
        error = await self.coordinator.add_partitions(tid, pid, epoch,
                                                      partitions or [("t", 0), ("t", 1)])
        assert error == NONE
        return pid, epoch


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def run(test: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), 10))


# --- InitProducerId -----------------------------------------------------------------------


def test_init_creates_the_id_then_bumps_its_epoch() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        assert await w.init() == (NONE, 1001, 0)
        assert await w.init() == (NONE, 1001, 1)
        assert w.log.states() == ["Empty", "Empty"]
        assert w.metadata().state == S.EMPTY and w.metadata().txn_timeout_ms == 60000
    run(go)


@pytest.mark.parametrize(("tid", "timeout", "error"), [
    ("", 60000, INVALID_REQUEST),
    (TID, 900001, INVALID_TIMEOUT),  # above transaction.max.timeout.ms
    (TID, 0, INVALID_TIMEOUT),
    (TID, -5, INVALID_TIMEOUT),
])
def test_init_refuses_bad_input_and_writes_nothing(tid: str, timeout: int,
                                                   error: int) -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        assert (await w.init(tid, timeout))[0] == error
        assert w.log.appended == [] and list(w.coordinator.state.all_transactions()) == []
    run(go)


def test_init_answers_the_coordinators_state_of_the_partition() -> None:
    async def go() -> None:
        w = World()
        assert (await w.init())[0] == NOT_COORDINATOR
        w.log.hold = asyncio.Event()  # not read: the partition stays loading
        w.coordinator.on_elected(w.coordinator.partition_for(TID), EPOCH)
        assert (await w.init())[0] == LOADING
    run(go)


def test_init_with_a_producer_id_that_is_not_the_ids_is_fenced() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        _, pid, epoch = await w.init()
        assert (await w.init(expected=(pid + 5, epoch)))[0] == FENCED
        # KIP-360: the current id and epoch resume with a bump
        assert await w.init(expected=(pid, epoch)) == (NONE, pid, epoch + 1)
        # a retry of that bump (the last epoch) answers the same epoch again
        assert await w.init(expected=(pid, epoch)) == (NONE, pid, epoch + 1)
        assert (await w.init(expected=(pid, epoch + 7)))[0] == FENCED
    run(go)


def test_an_exhausted_epoch_rotates_to_a_new_producer_id() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        _, pid, _ = await w.init()
        w.metadata().producer_epoch = 32766
        assert await w.init() == (NONE, pid + 1, 0)
        assert w.metadata().last_producer_id == pid
    run(go)


def test_init_during_an_ongoing_transaction_fences_and_aborts_it() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        pid, epoch = await w.ongoing()
        assert (await w.init())[0] == CONCURRENT
        assert w.log.states() == ["Empty", "Ongoing", "PrepareAbort"]
        job, = w.channel.jobs
        assert (job.result, job.producer_epoch) == (TransactionResult.ABORT, epoch + 1)
        # the zombie is fenced
        assert await w.coordinator.end_transaction(TID, pid, epoch, True) == FENCED
        assert await w.coordinator.add_partitions(TID, pid, epoch, [("t", 2)]) == FENCED
        # while the markers are out, the retry is told to wait
        assert (await w.init())[0] == CONCURRENT
        w.channel.ack(job)
        await settle()
        assert w.metadata().state == S.COMPLETE_ABORT
        assert await w.init() == (NONE, pid, epoch + 2)  # two bumps over the zombie
    run(go)


def test_a_failed_fence_does_not_bump_the_epoch_again() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        _, epoch = await w.ongoing()
        w.log.fail = NOT_AVAILABLE
        assert (await w.init())[0] == NOT_AVAILABLE
        metadata = w.metadata()
        assert metadata.has_failed_epoch_fence and metadata.state == S.ONGOING
        assert metadata.producer_epoch == epoch + 1 and metadata.pending_state is None
        w.log.fail = 0
        assert (await w.init())[0] == CONCURRENT
        assert w.channel.jobs[0].producer_epoch == epoch + 1
    run(go)


# --- AddPartitionsToTxn -------------------------------------------------------------------


def test_add_partitions_checks_the_producer_then_writes_ongoing() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        add = w.coordinator.add_partitions
        assert await add("", 1, 0, [("t", 0)]) == INVALID_REQUEST
        assert await add(TID, 1, 0, [("t", 0)]) == INVALID_MAPPING  # no such id
        _, pid, epoch = await w.init()
        assert await add(TID, pid + 1, epoch, [("t", 0)]) == INVALID_MAPPING
        assert await add(TID, pid, epoch + 1, [("t", 0)]) == FENCED
        assert await add(TID, pid, epoch, [("t", 0)]) == NONE
        metadata = w.metadata()
        assert metadata.state == S.ONGOING and metadata.topic_partitions == {("t", 0)}
        assert metadata.txn_start_timestamp > 0
        # partitions already in it: answered without a write
        written = len(w.log.appended)
        assert await add(TID, pid, epoch, [("t", 0)]) == NONE
        assert len(w.log.appended) == written
        assert await add(TID, pid, epoch, [("t", 1)]) == NONE
        assert metadata.topic_partitions == {("t", 0), ("t", 1)}
    run(go)


def test_a_failed_append_changes_nothing_and_maps_kafkas_errors() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        _, pid, epoch = await w.init()
        w.log.fail = NOT_AVAILABLE
        assert await w.coordinator.add_partitions(TID, pid, epoch, [("t", 0)]) == NOT_AVAILABLE
        metadata = w.metadata()
        assert metadata.state == S.EMPTY and metadata.pending_state is None
        assert not metadata.topic_partitions
    run(go)
    assert coordinator_error(NotEnoughReplicasError()) == NOT_AVAILABLE
    assert coordinator_error(RequestTimedOutError()) == NOT_AVAILABLE
    assert coordinator_error(NotLeaderOrFollowerError()) == NOT_COORDINATOR
    assert coordinator_error(KafkaStorageError()) == NOT_COORDINATOR
    assert coordinator_error(RecordTooLargeError()) == -1


def test_verify_only_answers_per_partition_and_writes_nothing() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        pid, epoch = await w.ongoing(TID, ("t", 0))
        verify = w.coordinator.verify_partitions
        assert verify(TID, pid, epoch, [("t", 0), ("t", 1)]) == {("t", 0): NONE,
                                                                 ("t", 1): ABORTABLE}
        assert verify(TID, pid, epoch + 1, [("t", 0)]) == {("t", 0): FENCED}
        assert verify(TID, pid + 1, epoch, [("t", 0)]) == {("t", 0): INVALID_MAPPING}
        assert verify("unknown", pid, epoch, [("t", 0)]) == {("t", 0): INVALID_MAPPING}
        assert verify("", pid, epoch, [("t", 0)]) == {("t", 0): INVALID_REQUEST}
        assert w.log.states() == ["Empty", "Ongoing"]
    run(go)


# --- EndTxn and the markers -----------------------------------------------------------------


def test_commit_answers_at_prepare_then_completes_when_every_marker_is_written() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        pid, epoch = await w.ongoing()
        assert await w.coordinator.end_transaction(TID, pid, epoch, True) == NONE
        assert w.log.states() == ["Empty", "Ongoing", "PrepareCommit"]
        job, = w.channel.jobs
        assert job.partitions == {("t", 0), ("t", 1)} and job.coordinator_epoch == EPOCH
        assert (job.producer_id, job.producer_epoch) == (pid, epoch)
        # meanwhile: a retry waits, a new partition waits, the other outcome is refused
        assert await w.coordinator.end_transaction(TID, pid, epoch, True) == CONCURRENT
        assert await w.coordinator.add_partitions(TID, pid, epoch, [("t", 2)]) == CONCURRENT
        job.on_partition_done(MarkerOutcome("t", 0, 0))
        await settle()
        assert w.metadata().state == S.PREPARE_COMMIT  # one marker is not written yet
        job.on_partition_done(MarkerOutcome("t", 1, 0))
        await settle()
        assert w.log.states()[-1] == "CompleteCommit"
        metadata = w.metadata()
        assert metadata.state == S.COMPLETE_COMMIT and not metadata.topic_partitions
        # a retry of the commit is fine; an abort now is not
        assert await w.coordinator.end_transaction(TID, pid, epoch, True) == NONE
        assert await w.coordinator.end_transaction(TID, pid, epoch, False) == INVALID_STATE
        # the next transaction starts from CompleteCommit
        assert await w.coordinator.add_partitions(TID, pid, epoch, [("t", 2)]) == NONE
    run(go)


def test_end_txn_bad_input() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        end = w.coordinator.end_transaction
        assert await end("", 1, 0, True) == INVALID_REQUEST
        assert await end(TID, 1, 0, True) == INVALID_MAPPING
        _, pid, epoch = await w.init()
        assert await end(TID, pid, epoch, True) == INVALID_STATE  # no transaction
        assert await end(TID, pid, epoch, False) == INVALID_STATE
        assert await end(TID, pid + 1, epoch, True) == INVALID_MAPPING
        await w.coordinator.add_partitions(TID, pid, epoch, [("t", 0)])
        assert await end(TID, pid, epoch - 1, True) == FENCED  # a stale epoch
        assert await end(TID, pid, epoch + 1, True) == FENCED
        assert w.log.states() == ["Empty", "Ongoing"]
    run(go)


def test_a_fenced_marker_stops_the_completion() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        pid, epoch = await w.ongoing()
        await w.coordinator.end_transaction(TID, pid, epoch, False)
        job, = w.channel.jobs
        job.on_partition_done(MarkerOutcome("t", 0, INVALID_EPOCH))
        await settle()
        assert w.channel.removed == [TID]
        assert w.metadata().state == S.PREPARE_ABORT
        assert w.log.states()[-1] == "PrepareAbort"
    run(go)


def test_a_deleted_topics_partition_counts_as_done() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        pid, epoch = await w.ongoing()
        await w.coordinator.end_transaction(TID, pid, epoch, True)
        job, = w.channel.jobs
        job.on_partition_done(MarkerOutcome("t", 0, 3))
        job.on_partition_done(MarkerOutcome("t", 1, 0))
        await settle()
        assert w.metadata().state == S.COMPLETE_COMMIT
    run(go)


def test_completion_is_written_again_while_the_isr_is_short() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        pid, epoch = await w.ongoing()
        await w.coordinator.end_transaction(TID, pid, epoch, True)
        w.log.fail = NOT_AVAILABLE
        w.channel.ack(w.channel.jobs[0])
        await asyncio.sleep(0.05)
        assert w.metadata().pending_state == S.COMPLETE_COMMIT  # kept for the retry
        # waiting to be written again: Kafka's LogAppendRetryQueueSize
        assert w.coordinator.completion.retrying == 1
        w.log.fail = 0
        await asyncio.sleep(0.2)
        assert w.metadata().state == S.COMPLETE_COMMIT
        assert w.coordinator.completion.retrying == 0
    run(go)


# --- timers -------------------------------------------------------------------------------


def test_a_transaction_past_its_timeout_is_fenced_and_aborted() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        pid, epoch = await w.ongoing()
        await w.coordinator._abort_timed_out()
        assert w.channel.jobs == []  # not timed out yet
        w.metadata().txn_start_timestamp = now_ms() - 61000
        await w.coordinator._abort_timed_out()
        job, = w.channel.jobs
        assert (job.result, job.producer_epoch) == (TransactionResult.ABORT, epoch + 1)
        assert w.log.states()[-1] == "PrepareAbort"
        # the producer's next request is fenced
        assert await w.coordinator.end_transaction(TID, pid, epoch, True) == FENCED
    run(go)


def test_idle_ids_expire_with_tombstones() -> None:
    async def go() -> None:
        w = World(transactional_id_expiration_ms=1000)
        await w.elect()
        await w.init("old")
        await w.init("young")
        await w.ongoing("busy")
        for tid in ("old", "busy"):
            w.metadata(tid).txn_last_update_timestamp -= 5000
        await w.coordinator._remove_expired()
        assert w.log.states("old")[-1] == "tombstone"
        assert w.coordinator.state.get("old")[1] is None
        assert w.metadata("young") is not None
        assert w.metadata("busy").state == S.ONGOING  # an ongoing one never expires
        assert w.coordinator.describe("old").error == NOT_FOUND
    run(go)


# --- describe, list -----------------------------------------------------------------------


def test_describe_and_list() -> None:
    async def go() -> None:
        w = World()
        assert w.coordinator.list_transactions([], []).error == NONE
        await w.elect()
        pid, _ = await w.ongoing("a")
        await w.init("b")
        found = w.coordinator.describe("a")
        assert found.error == NONE and found.metadata is not None
        assert found.metadata.state == S.ONGOING
        assert w.coordinator.describe("nope").error == NOT_FOUND
        assert w.coordinator.describe("").error == INVALID_REQUEST
        listed = w.coordinator.list_transactions([], [])
        assert sorted((t.transactional_id, t.state) for t in listed.transactions) == [
            ("a", "Ongoing"), ("b", "Empty")]
        only = w.coordinator.list_transactions([], ["Ongoing", "Bogus"])
        assert [t.transactional_id for t in only.transactions] == ["a"]
        assert only.unknown_state_filters == ["Bogus"]
        assert [t.transactional_id for t in w.coordinator.list_transactions(
            [pid], []).transactions] == ["a"]
        # v1: only transactions running longer than the duration
        assert w.coordinator.list_transactions([], ["Ongoing"], 60000).transactions == []
        w.metadata("a").txn_start_timestamp -= 120000
        assert len(w.coordinator.list_transactions([], ["Ongoing"], 60000).transactions) == 1
        w.coordinator.active = False
        assert w.coordinator.list_transactions([], []).error == NOT_AVAILABLE
        assert w.coordinator.describe("a").error == NOT_AVAILABLE
    run(go)


# --- leadership ---------------------------------------------------------------------------


def test_a_loaded_partition_sends_the_markers_of_prepared_transactions() -> None:
    async def go() -> None:
        w = World()
        partition = w.coordinator.partition_for(TID)
        prepared = TxnTransitMetadata(
            producer_id=55, last_producer_id=-1, producer_epoch=3, last_producer_epoch=-1,
            txn_timeout_ms=60000, state=S.PREPARE_COMMIT,
            topic_partitions=frozenset({("t", 0)}), txn_start_timestamp=1,
            txn_last_update_timestamp=2)
        w.log.stored[partition] = [(transaction_log_key(TID),
                                    transaction_log_value(prepared))]
        load_times: list[float] = []  # the partition-load-time sensor's records
        w.coordinator.state.on_load_time = load_times.append
        await w.elect(partition, epoch=9)
        assert len(load_times) == 1 and 0 <= load_times[0] < 10_000
        job, = w.channel.jobs
        assert (job.producer_id, job.coordinator_epoch, job.result) == (
            55, 9, TransactionResult.COMMIT)
        # answered 51 until the markers are written
        assert (await w.init())[0] == CONCURRENT
        w.channel.ack(job)
        await settle()
        assert w.metadata().state == S.COMPLETE_COMMIT
        # resignation: NOT_COORDINATOR, and the channel forgets its ids
        w.coordinator.on_resigned(partition, 9)
        assert (await w.init())[0] == NOT_COORDINATOR
        assert TID in w.channel.removed
    run(go)


def test_a_marker_answered_after_resignation_is_ignored() -> None:
    async def go() -> None:
        w = World()
        await w.elect()
        pid, epoch = await w.ongoing()
        await w.coordinator.end_transaction(TID, pid, epoch, True)
        job, = w.channel.jobs
        w.coordinator.on_resigned(w.coordinator.partition_for(TID), EPOCH)
        await w.elect(w.coordinator.partition_for(TID), epoch=EPOCH + 1)
        job.on_partition_done(MarkerOutcome("t", 0, 0))
        await settle()
        assert TID in w.channel.removed
    run(go)


# --- the handlers' version mapping ----------------------------------------------------------


def test_old_versions_get_invalid_producer_epoch_instead_of_fenced() -> None:
    assert fenced_for(0, FENCED) == fenced_for(1, FENCED) == INVALID_EPOCH
    assert fenced_for(2, FENCED) == FENCED
    assert fenced_for(1, CONCURRENT) == CONCURRENT
    assert fenced_for(3, FENCED, first_fenced_version=4) == INVALID_EPOCH
