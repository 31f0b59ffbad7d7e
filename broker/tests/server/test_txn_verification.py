"""KIP-890 part 1 on the leader (server/txn_verification.py and the Produce path): which
transactional batches are verified with the coordinator, how its questions are batched
per coordinator broker, Kafka 3.9's error mapping, and the guard a marker drops. The
coordinator is a fake `send`; the logs and the ReplicaManager are real."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from moldau.coordinator.transaction.partitioning import (
    TRANSACTION_STATE_TOPIC,
    transaction_partition_for,
)
from moldau.errors import (
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    NotEnoughReplicasError,
    ProducerFencedError,
    TransactionAbortableError,
    UnsupportedVersionError,
)
from moldau.metrics.registry import MetricsRegistry
from moldau.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from moldau.protocol.generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnResponse,
)
from moldau.protocol.generated.produce_request import ProduceRequest
from moldau.protocol.records import build_batch
from moldau.replication.replica_manager import LeaderAndIsr, ReplicaManager
from moldau.server.broker_metrics import DelayedOperations, NoTopicStats
from moldau.server.handlers.produce import ProduceAppends, ProduceHandler
from moldau.server.metadata_cache import BrokerEndpoints, MetadataCache, PartitionInfo, TopicInfo
from moldau.server.txn_verification import TxnVerifier
from moldau.storage.config import LogConfig
from moldau.storage.log_manager import LogManager, ManagerConfig

from .test_handler_ports import context

BROKER_ID = 1
COORDINATOR = 3
LISTENER = "PLAINTEXT"
TXN_ID = "tx-1"
PID = 500
R = AddPartitionsToTxnResponse


@dataclass
class Coordinator:
    """A fake transaction coordinator: answers each verify-only question from `errors`
    ((transactional id, topic, partition) -> code, NONE when absent), or raises/answers
    a top-level error."""

    errors: dict[tuple[str, str, int], int] = field(default_factory=dict)
    top_error: int = 0
    fail: Exception | None = None
    requests: list[tuple[int, int, AddPartitionsToTxnRequest]] = field(default_factory=list)
    before_answer: Any = None  # called before answering (a marker arriving meanwhile)
    gate: asyncio.Event | None = None  # when set: answers wait for it

    async def sent(self, count: int) -> None:
        """Until count requests went out."""
        while len(self.requests) < count:
            await asyncio.sleep(0)

    async def send(self, broker: int, version: int, request: AddPartitionsToTxnRequest,
                   timeout_s: float) -> AddPartitionsToTxnResponse:
        self.requests.append((broker, version, request))
        await asyncio.sleep(0)
        if self.gate is not None:
            await self.gate.wait()
        if self.before_answer is not None:
            self.before_answer()
        if self.fail is not None:
            raise self.fail
        if self.top_error:
            return R(error_code=self.top_error)
        return R(results_by_transaction=[
            R.AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=[
                R.AddPartitionsToTxnTopicResult(name=topic.name, results_by_partition=[
                    R.AddPartitionsToTxnPartitionResult(
                        partition_index=p,
                        partition_error_code=self.errors.get((t.transactional_id,
                                                              topic.name, p), 0))
                    for p in topic.partitions])
                for topic in t.topics])
            for t in request.transactions])


def metadata_with_coordinator(*ids: str) -> MetadataCache:
    """A cache in which broker 3 leads the __transaction_state partitions of ids."""
    cache = MetadataCache(BROKER_ID)
    cache.set_brokers([BrokerEndpoints(BROKER_ID, {LISTENER: ("h1", 9092)}),
                       BrokerEndpoints(COORDINATOR, {LISTENER: ("h3", 9092)})])
    cache.put_topic(TopicInfo(TRANSACTION_STATE_TOPIC, uuid.uuid4(), {
        transaction_partition_for(i): PartitionInfo(transaction_partition_for(i), COORDINATOR,
                                                    0, [COORDINATOR], [COORDINATOR])
        for i in ids}))
    return cache


def verifier(coordinator: Coordinator, metadata: MetadataCache,
             enabled: bool = True) -> TxnVerifier:
    return TxnVerifier(metadata, coordinator.send, enabled=lambda: enabled,
                       state_partitions=lambda: 50, inter_broker_listener=LISTENER)


# --- the verifier ---------------------------------------------------------------------------


def test_questions_to_one_coordinator_share_a_request() -> None:
    coordinator = Coordinator(errors={("b", "t", 1): TransactionAbortableError.code})
    v = verifier(coordinator, metadata_with_coordinator("a", "b"))

    async def both() -> list[dict[tuple[str, int], int]]:
        return list(await asyncio.gather(v.verify("a", 1, 0, [("t", 0)], 9),
                                         v.verify("b", 2, 0, [("t", 1), ("u", 0)], 9)))

    assert asyncio.run(both()) == [{}, {("t", 1): InvalidTxnStateError.code}]
    [(broker, version, request)] = coordinator.requests
    assert (broker, version) == (COORDINATOR, 5)
    assert [(t.transactional_id, t.producer_id, t.verify_only,
             [(x.name, x.partitions) for x in t.topics]) for t in request.transactions] == [
        ("a", 1, True, [("t", [0])]), ("b", 2, True, [("t", [1]), ("u", [0])])]


def test_error_mapping_follows_kafka_3_9() -> None:
    def ask(coordinator: Coordinator, produce_version: int = 10) -> dict[tuple[str, int], int]:
        v = verifier(coordinator, metadata_with_coordinator(TXN_ID))
        return asyncio.run(v.verify(TXN_ID, PID, 0, [("t", 0)], produce_version))

    abortable = {(TXN_ID, "t", 0): TransactionAbortableError.code}
    assert ask(Coordinator(errors=abortable)) == {("t", 0): InvalidTxnStateError.code}
    assert ask(Coordinator(errors=abortable), 11) == {("t", 0): TransactionAbortableError.code}
    fenced = {(TXN_ID, "t", 0): ProducerFencedError.code}
    assert ask(Coordinator(errors=fenced)) == {("t", 0): InvalidProducerEpochError.code}
    assert ask(Coordinator(top_error=ClusterAuthorizationFailedError.code)) == {
        ("t", 0): InvalidTxnStateError.code}
    assert ask(Coordinator(top_error=ConcurrentTransactionsError.code)) == {
        ("t", 0): ConcurrentTransactionsError.code}
    assert ask(Coordinator(fail=ConnectionError("gone"))) == {("t", 0): 13}
    assert ask(Coordinator(fail=TimeoutError())) == {("t", 0): 13}
    # a coordinator that does not know verifyOnly: the produce goes on unverified
    assert ask(Coordinator(top_error=UnsupportedVersionError.code)) == {}
    # no coordinator known: COORDINATOR_NOT_AVAILABLE, nothing sent
    unknown = Coordinator()
    v = verifier(unknown, MetadataCache(BROKER_ID))
    assert asyncio.run(v.verify(TXN_ID, PID, 0, [("t", 0)], 9)) == {("t", 0): 15}
    assert unknown.requests == []


def test_a_newer_question_for_the_same_id_replaces_the_waiting_one() -> None:
    coordinator = Coordinator()
    v = verifier(coordinator, metadata_with_coordinator(TXN_ID))

    async def race() -> list[dict[tuple[str, int], int]]:
        coordinator.gate = asyncio.Event()
        # the first goes out at once; the next ones wait for its answer
        first = asyncio.ensure_future(v.verify(TXN_ID, PID, 1, [("t", 0)], 9))
        await coordinator.sent(1)
        asked = []
        for epoch, index in ((1, 1), (2, 2), (2, 3), (1, 4)):
            asked.append(asyncio.ensure_future(v.verify(TXN_ID, PID, epoch, [("t", index)],
                                                        9)))
            await asyncio.sleep(0)
        coordinator.gate.set()
        return list(await asyncio.gather(first, *asked))

    assert asyncio.run(race()) == [
        {},
        {("t", 1): InvalidProducerEpochError.code},  # a newer epoch came
        {("t", 2): 13},  # the same epoch again: a retry
        {},
        {("t", 4): InvalidProducerEpochError.code}]  # older than the one waiting
    assert len(coordinator.requests) == 2


# --- the Produce path -----------------------------------------------------------------------


@dataclass
class Leader:
    handler: ProduceHandler
    coordinator: Coordinator
    verifier: TxnVerifier
    replicas: ReplicaManager

    def produce(self, partitions: list[tuple[str, int]], *, pid: int = PID, seq: int = 0,
                transactional: bool = True, version: int = 10,
                txn_id: str | None = TXN_ID, pids: dict[tuple[str, int], int] | None = None
                ) -> dict[tuple[str, int], tuple[int, str | None]]:
        topics: dict[str, list[Any]] = {}
        for topic, index in partitions:
            producer = (pids or {}).get((topic, index), pid)
            topics.setdefault(topic, []).append(ProduceRequest.PartitionProduceData(
                index=index, records=build_batch(
                    [(b"k", b"v")], producer_id=producer, producer_epoch=0,
                    base_sequence=seq, is_transactional=transactional)))
        request = ProduceRequest(acks=1, timeout_ms=1000, transactional_id=txn_id,
                                 topic_data=[ProduceRequest.TopicProduceData(
                                     name=t, partition_data=p) for t, p in topics.items()])
        try:
            answer = self.handler(context(0, version), request)
            if asyncio.iscoroutine(answer):
                answer = asyncio.run(answer)
        except InvalidProducerIdMappingError as exc:  # the whole request (the dispatcher)
            return {tp: (exc.code, None) for tp in partitions}
        return {(t.name, p.index): (p.error_code, p.error_message)
                for t in answer.responses for p in t.partition_responses}

    def open_txn(self, index: int) -> int:
        partition = self.replicas.get_partition("orders", index)
        assert partition is not None
        entry = partition.log.producer_state.producers.get(PID)
        return -1 if entry is None else entry.current_txn_first_offset


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[Leader]:
    manager = LogManager(ManagerConfig([str(tmp_path)], BROKER_ID, "cluster"), LogConfig())
    replicas = ReplicaManager(BROKER_ID, manager)
    metadata = metadata_with_coordinator(TXN_ID)
    topic_id = uuid.uuid4()
    for index in (0, 1, 2):
        replicas.become_leader_or_follower("orders", index, topic_id,
                                           LeaderAndIsr(BROKER_ID, 0, [BROKER_ID], [BROKER_ID]))
    metadata.put_topic(TopicInfo("orders", topic_id, {
        i: PartitionInfo(i, BROKER_ID, 0, [BROKER_ID], [BROKER_ID]) for i in (0, 1, 2)}))
    registry = MetricsRegistry()
    appends = ProduceAppends(metadata, replicas, manager, NoTopicStats(registry),
                             {"Produce": DelayedOperations(registry, "Produce")})
    coordinator = Coordinator()
    v = verifier(coordinator, metadata)
    yield Leader(ProduceHandler(appends, v), coordinator, v, replicas)
    manager.shutdown()


def test_only_a_transactions_first_batch_on_a_partition_is_verified(leader: Leader) -> None:
    assert leader.produce([("orders", 0)]) == {("orders", 0): (0, None)}
    assert len(leader.coordinator.requests) == 1
    assert leader.open_txn(0) == 0
    # its transaction is open there now: the next batch goes without asking
    assert leader.produce([("orders", 0)], seq=1) == {("orders", 0): (0, None)}
    assert len(leader.coordinator.requests) == 1
    # non-transactional batches never ask
    assert leader.produce([("orders", 1)], pid=900, transactional=False, txn_id=None) == {
        ("orders", 1): (0, None)}
    assert len(leader.coordinator.requests) == 1
    assert len(leader.verifier.guards) == 0  # every guard released


def test_a_partition_not_in_the_transaction_is_refused(leader: Leader) -> None:
    leader.produce([("orders", 0)])
    leader.coordinator.errors = {(TXN_ID, "orders", 1): TransactionAbortableError.code}
    answer = leader.produce([("orders", 0), ("orders", 1), ("orders", 2)], seq=1)
    assert answer == {("orders", 0): (0, None),
                      ("orders", 1): (InvalidTxnStateError.code,
                                      "Partition was not added to the transaction"),
                      ("orders", 2): (0, None)}
    [_, (_, _, request)] = leader.coordinator.requests
    assert [(t.name, t.partitions) for t in request.transactions[0].topics] == [
        ("orders", [1, 2])]
    assert leader.open_txn(1) == -1  # nothing appended there
    # a v11 producer is told TRANSACTION_ABORTABLE
    assert leader.produce([("orders", 1)], seq=1, version=11)[("orders", 1)][0] == \
        TransactionAbortableError.code


def test_retriable_coordinator_errors_become_not_enough_replicas(leader: Leader) -> None:
    leader.coordinator.errors = {(TXN_ID, "orders", 0): ConcurrentTransactionsError.code}
    code, message = leader.produce([("orders", 0)])[("orders", 0)]
    assert code == NotEnoughReplicasError.code
    assert message == ("Unable to verify the partition has been added to the transaction. "
                       "Underlying error: CONCURRENT_TRANSACTIONS")
    leader.coordinator.errors = {}
    leader.coordinator.fail = ConnectionError("coordinator down")
    code, message = leader.produce([("orders", 0)])[("orders", 0)]
    assert (code, message and message.endswith("NETWORK_EXCEPTION")) == (
        NotEnoughReplicasError.code, True)
    assert leader.open_txn(0) == -1


def test_a_marker_during_verification_keeps_the_batch_out(leader: Leader) -> None:
    """The coordinator confirmed, but the transaction ended (its marker written here)
    before the append: the batch would open a transaction nobody closes."""
    leader.coordinator.before_answer = lambda: leader.verifier.guards.clear("orders", 0, PID)
    code, message = leader.produce([("orders", 0)])[("orders", 0)]
    assert (code, message) == (InvalidTxnStateError.code,
                               "Record was not part of an ongoing transaction")
    assert leader.open_txn(0) == -1
    leader.coordinator.before_answer = None
    assert leader.produce([("orders", 0)]) == {("orders", 0): (0, None)}


def test_two_producers_in_one_transactional_request(leader: Leader) -> None:
    answer = leader.produce([("orders", 0), ("orders", 1)], pids={("orders", 1): PID + 1})
    assert answer == {("orders", 0): (InvalidProducerIdMappingError.code, None),
                      ("orders", 1): (InvalidProducerIdMappingError.code, None)}
    assert leader.coordinator.requests == []
    assert len(leader.verifier.guards) == 0


def test_verification_off_appends_without_asking(leader: Leader) -> None:
    leader.verifier.enabled = lambda: False
    assert leader.produce([("orders", 0)]) == {("orders", 0): (0, None)}
    assert leader.coordinator.requests == []
    assert leader.open_txn(0) == 0
