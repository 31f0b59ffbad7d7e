"""The admin calls of kafka-transactions.sh, routed and retried as Kafka 3.9's AdminClient
does them (its ListTransactions, DescribeTransactions, DescribeProducers and
AbortTransaction handlers): every broker for ListTransactions, the transaction coordinator
(FindCoordinator key type 1) for DescribeTransactions, the partition leader (or the broker
asked for) for DescribeProducers and for the abort's WriteTxnMarkers.

A failure is an `AdminFailure` whose text is the message of the exception Kafka's client
completes its future with, so the tool can print it after its own context. Retriable
answers are retried until `default.api.timeout.ms` (60 s) has passed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from moldau.protocol.generated.describe_producers_request import DescribeProducersRequest
from moldau.protocol.generated.describe_producers_response import DescribeProducersResponse
from moldau.protocol.generated.describe_transactions_response import (
    DescribeTransactionsResponse,
)
from moldau.protocol.generated.write_txn_markers_request import WriteTxnMarkersRequest
from moldau.protocol.generated.write_txn_markers_response import WriteTxnMarkersResponse
from moldau.tools.admin import Admin
from moldau.tools.kafka_errors import error_text
from moldau.tools.options import ToolError

TP = tuple[str, int]
T = TypeVar("T")

NOT_LEADER, UNKNOWN_TOPIC, INVALID_TOPIC = 6, 3, 17
TOPIC_AUTHORIZATION, CLUSTER_AUTHORIZATION = 29, 31
LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
TRANSACTIONAL_ID_AUTHORIZATION, TRANSACTIONAL_ID_NOT_FOUND = 53, 105
INVALID_PRODUCER_EPOCH, COORDINATOR_FENCED = 47, 52
# WriteTxnMarkers answers after which Kafka looks the leader up again
ABORT_RETRIABLE = {NOT_LEADER, 9, 8, UNKNOWN_TOPIC}  # + REPLICA_/BROKER_NOT_AVAILABLE
LEADER_LOOKUP_RETRIABLE = {UNKNOWN_TOPIC, 5, 8}  # unknown topic, no leader, broker gone
PARTITION_LOOKUP_RETRIABLE = {NOT_LEADER, 9, 5, 8, 56, UNKNOWN_TOPIC}


def topic_partition_text(tp: TP) -> str:
    """Kafka's TopicPartition.toString."""
    return f"{tp[0]}-{tp[1]}"


class AdminFailure(ToolError):
    """A call's failure, worded as the exception Kafka's AdminClient raises."""


class TransactionalIdNotFound(AdminFailure):
    """Kafka's TransactionalIdNotFoundException (error 105)."""


@dataclass(frozen=True)
class ProducerState:
    """An active producer of a partition (Kafka's admin ProducerState)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int | None  # None: the partition has seen no marker from it
    current_txn_start_offset: int | None  # None: no open transaction


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int | None
    topic_partitions: frozenset[TP]


@dataclass(frozen=True)
class AbortSpec:
    """Kafka's AbortTransactionSpec: which producer's transaction to end on a partition."""

    topic_partition: TP
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int

    def __str__(self) -> str:
        return (f"AbortTransactionSpec(topicPartition={topic_partition_text(self.topic_partition)}"
                f", producerId={self.producer_id}, producerEpoch={self.producer_epoch}, "
                f"coordinatorEpoch={self.coordinator_epoch})")


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    replicas: tuple[int, ...]


class TxnApi(Protocol):
    """The calls the tool makes (TransactionsAdmin; a fake in unit tests)."""

    def list_topics(self) -> list[str]: ...

    def describe_topics(self, topics: Sequence[str]) -> list[PartitionInfo]: ...

    def describe_producers(self, partitions: Iterable[TP], broker_id: int | None = None
                           ) -> dict[TP, list[ProducerState] | AdminFailure]: ...

    def list_transactions(self, producer_ids: Iterable[int] = (), duration_ms: int = -1
                          ) -> dict[int, list[TransactionListing]]: ...

    def describe_transactions(self, transactional_ids: Iterable[str]
                              ) -> dict[str, TransactionDescription | AdminFailure]: ...

    def abort_transaction(self, spec: AbortSpec) -> None: ...


class TransactionsAdmin:
    """The calls the tool makes, over the tools' blocking admin client."""

    def __init__(self, admin: Admin) -> None:
        self.admin = admin
        config = admin.config
        self.api_timeout = int(config.get("default.api.timeout.ms", "60000")) / 1000
        self.backoff = int(config.get("retry.backoff.ms", "100")) / 1000

    # --- retrying -----------------------------------------------------------------------

    def _until_done(self, name: str, step: Callable[[], T | None]) -> T:
        """step() until it answers something other than None (None: retry after a
        backoff), or Kafka's TimeoutException once the API timeout has passed."""
        deadline = time.monotonic() + self.api_timeout
        while True:
            answer = step()
            if answer is not None:
                return answer
            if time.monotonic() + self.backoff > deadline:
                raise AdminFailure(f"Timed out waiting for a node assignment. Call: {name}")
            time.sleep(self.backoff)

    # --- cluster ------------------------------------------------------------------------

    def broker_ids(self) -> list[int]:
        return sorted(b.node_id for b in self.admin.metadata([]).brokers)

    def list_topics(self) -> list[str]:
        """Every topic, internal ones included (listInternal(true))."""
        return sorted(t.name for t in self.admin.metadata(None).topics if t.error_code == 0)

    def describe_topics(self, topics: Sequence[str]) -> list[PartitionInfo]:
        """The partitions of the topics, failing as describeTopics().allTopicNames() fails
        on the first topic in error."""
        answer = self.admin.metadata(list(topics))
        found: list[PartitionInfo] = []
        for topic in answer.topics:
            if topic.error_code:
                raise AdminFailure(error_text(topic.error_code))
            found += [PartitionInfo(topic.name, p.partition_index, tuple(p.replica_nodes))
                      for p in sorted(topic.partitions, key=lambda p: p.partition_index)]
        return found

    def _leaders(self, partitions: Iterable[TP],
                 failed: dict[TP, AdminFailure]) -> dict[TP, int]:
        """PartitionLeaderStrategy: the known leaders; partitions in a fatal error go to
        `failed`, the others (unknown yet, no leader) are left out to be retried."""
        wanted = set(partitions)
        answer = self.admin.metadata(sorted({t for t, _ in wanted}))
        leaders: dict[TP, int] = {}
        for topic in answer.topics:
            mine = [tp for tp in wanted if tp[0] == topic.name]
            if topic.error_code in LEADER_LOOKUP_RETRIABLE:
                continue
            if topic.error_code == TOPIC_AUTHORIZATION:
                failed.update({tp: AdminFailure(
                    f"Failed to fetch metadata for partition {topic_partition_text(tp)} due "
                    "to topic authorization failure") for tp in mine})
                continue
            if topic.error_code == INVALID_TOPIC:
                failed.update({tp: AdminFailure(
                    f"Failed to fetch metadata for partition {topic_partition_text(tp)} due "
                    f"to invalid topic `{topic.name}`") for tp in mine})
                continue
            if topic.error_code:
                failed.update({tp: AdminFailure(
                    f"Failed to fetch metadata for partition {topic_partition_text(tp)} due "
                    f"to unexpected error for topic `{topic.name}`") for tp in mine})
                continue
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if tp not in wanted or p.error_code in PARTITION_LOOKUP_RETRIABLE:
                    continue
                if p.error_code:
                    failed[tp] = AdminFailure(
                        f"Unexpected error during metadata lookup for {topic_partition_text(tp)}")
                elif p.leader_id >= 0:
                    leaders[tp] = p.leader_id
        return leaders

    # --- ListTransactions ---------------------------------------------------------------

    def list_transactions(self, producer_ids: Iterable[int] = (),
                          duration_ms: int = -1) -> dict[int, list[TransactionListing]]:
        """Every broker's transactions, by broker id (allByBrokerId)."""
        version = 1 if self.admin.supports("ListTransactions", 1) else 0
        if duration_ms >= 0 and version < 1:
            raise AdminFailure(
                "Duration filter can be set only when using API version 1 or higher. If "
                "client is connected to an older broker, do not specify duration filter or "
                "set duration filter to -1.")
        filters = sorted(set(producer_ids))
        result: dict[int, list[TransactionListing]] = {}
        for broker in self.broker_ids():
            def ask(broker: int = broker) -> list[TransactionListing] | None:
                answer = self.admin.call("ListTransactions", version, broker, state_filters=[],
                                         producer_id_filters=filters,
                                         duration_filter=duration_ms)
                if answer.error_code == LOAD_IN_PROGRESS:
                    return None
                if answer.error_code == COORDINATOR_NOT_AVAILABLE:
                    raise AdminFailure(f"ListTransactions request sent to broker {broker} "
                                       "failed because the coordinator is shutting down")
                if answer.error_code:
                    raise AdminFailure(f"ListTransactions request sent to broker {broker} "
                                       "failed with an unexpected exception")
                return [TransactionListing(s.transactional_id, s.producer_id,
                                           s.transaction_state)
                        for s in answer.transaction_states]
            result[broker] = self._until_done("listTransactions(api=LIST_TRANSACTIONS)", ask)
        return result

    # --- DescribeTransactions -----------------------------------------------------------

    def _find_coordinators(self, ids: list[str],
                           failed: dict[str, AdminFailure]) -> dict[str, int]:
        """CoordinatorStrategy for transactional ids: the coordinators found; ids in a
        fatal error go to `failed`, the others are retried."""
        found: dict[str, int] = {}
        if self.admin.supports("FindCoordinator", 4):
            answers = self.admin.call("FindCoordinator", 4, key_type=1,
                                      coordinator_keys=ids).coordinators
            pairs = [(c.key, c.error_code, c.node_id) for c in answers]
        else:  # an older broker: one id per request
            pairs = []
            for tid in ids:
                one = self.admin.call("FindCoordinator", 3, key=tid, key_type=1)
                pairs.append((tid, one.error_code, one.node_id))
        for tid, code, node in pairs:
            if code in (LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR):
                continue
            if code == TRANSACTIONAL_ID_AUTHORIZATION:
                failed[tid] = AdminFailure(f"FindCoordinator request for transactionalId "
                                           f"`{tid}` failed due to authorization failure")
            elif code:
                failed[tid] = AdminFailure(f"FindCoordinator request for key CoordinatorKey("
                                           f"idValue='{tid}', type=TRANSACTION) failed due "
                                           "to an unexpected error")
            else:
                found[tid] = node
        return found

    def describe_transactions(
            self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription | AdminFailure]:
        """Each id's description, or the failure of that id."""
        pending = sorted(set(transactional_ids))
        result: dict[str, TransactionDescription | AdminFailure] = {}
        if not pending:
            return result

        def step() -> bool | None:
            failed: dict[str, AdminFailure] = {}
            coordinators = self._find_coordinators(pending, failed)
            result.update(failed)
            by_node: dict[int, list[str]] = {}
            for tid, node in coordinators.items():
                by_node.setdefault(node, []).append(tid)
            for node, ids in sorted(by_node.items()):
                answer = self.admin.call("DescribeTransactions", 0, node, transactional_ids=ids)
                for state in answer.transaction_states:
                    if state.transactional_id in ids:
                        outcome = self._description(node, state)
                        if outcome is not None:
                            result[state.transactional_id] = outcome
            pending[:] = [tid for tid in pending if tid not in result]
            return True if not pending else None

        self._until_done("describeTransactions(api=FIND_COORDINATOR)", step)
        return result

    @staticmethod
    def _description(node: int, state: DescribeTransactionsResponse.TransactionState
                     ) -> TransactionDescription | AdminFailure | None:
        tid, code = state.transactional_id, state.error_code
        if code in (LOAD_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE):
            return None
        if code == TRANSACTIONAL_ID_AUTHORIZATION:
            return AdminFailure(f"DescribeTransactions request for transactionalId `{tid}` "
                                "failed due to authorization failure")
        if code == TRANSACTIONAL_ID_NOT_FOUND:
            return TransactionalIdNotFound(f"DescribeTransactions request for transactionalId "
                                           f"`{tid}` failed because the ID could not be found")
        if code:
            return AdminFailure(f"DescribeTransactions request for transactionalId `{tid}` "
                                "failed due to unexpected error")
        start = state.transaction_start_time_ms
        return TransactionDescription(
            node, state.transaction_state, state.producer_id, state.producer_epoch,
            state.transaction_timeout_ms, None if start < 0 else start,
            frozenset((t.topic, p) for t in state.topics for p in t.partitions))

    # --- DescribeProducers --------------------------------------------------------------

    def describe_producers(self, partitions: Iterable[TP], broker_id: int | None = None
                           ) -> dict[TP, list[ProducerState] | AdminFailure]:
        """Each partition's active producers, from its leader or from `broker_id`."""
        pending = sorted(set(partitions))
        result: dict[TP, list[ProducerState] | AdminFailure] = {}
        if not pending:
            return result
        # Kafka waits the whole timeout for a broker it does not know, then says this
        if broker_id is not None and broker_id not in self.broker_ids():
            raise AdminFailure("Timed out waiting for a node assignment. Call: "
                               "describeProducers(api=DESCRIBE_PRODUCERS)")

        def step() -> bool | None:
            failed: dict[TP, AdminFailure] = {}
            if broker_id is None:
                targets = self._leaders(pending, failed)
            else:
                targets = dict.fromkeys(pending, broker_id)
            result.update(failed)
            by_node: dict[int, list[TP]] = {}
            for tp, node in targets.items():
                by_node.setdefault(node, []).append(tp)
            for node, tps in sorted(by_node.items()):
                topics: dict[str, list[int]] = {}
                for topic, partition in sorted(tps):
                    topics.setdefault(topic, []).append(partition)
                answer = self.admin.call("DescribeProducers", 0, node, topics=[
                    DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps)
                    for t, ps in topics.items()])
                for topic in answer.topics:
                    for p in topic.partitions:
                        tp = (topic.name, p.partition_index)
                        if tp in tps:
                            outcome = self._producers(tp, p, broker_id)
                            if outcome is not None:
                                result[tp] = outcome
            pending[:] = [tp for tp in pending if tp not in result]
            return True if not pending else None

        self._until_done("describeProducers(api=METADATA)", step)
        return result

    @staticmethod
    def _producers(tp: TP, answer: DescribeProducersResponse.PartitionResponse,
                   broker_id: int | None) -> list[ProducerState] | AdminFailure | None:
        code = answer.error_code
        name = topic_partition_text(tp)
        if code == NOT_LEADER:
            if broker_id is None:
                return None  # a new leader is looked up
            return AdminFailure(f"Failed to describe active producers for partition {name} "
                                f"on brokerId {broker_id}")
        if code == UNKNOWN_TOPIC:
            return None
        if code == INVALID_TOPIC:
            return AdminFailure(f"Failed to fetch metadata for partition {name} due to invalid "
                                f"topic error: {answer.error_message or error_text(code)}")
        if code == TOPIC_AUTHORIZATION:
            return AdminFailure(f"Failed to describe active producers for partition {name} due "
                                f"to authorization failure on topic `{tp[0]}`")
        if code:
            return AdminFailure(f"Failed to describe active producers for partition {name} "
                                "due to unexpected error")
        return [ProducerState(
            s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp,
            None if s.coordinator_epoch < 0 else s.coordinator_epoch,
            None if s.current_txn_start_offset < 0 else s.current_txn_start_offset)
            for s in answer.active_producers]

    # --- abortTransaction ---------------------------------------------------------------

    def abort_transaction(self, spec: AbortSpec) -> None:
        """WriteTxnMarkers ABORT for the spec's partition, sent to its leader."""
        version = 1 if self.admin.supports("WriteTxnMarkers", 1) else 0
        topic, partition = spec.topic_partition

        def step() -> bool | None:
            failed: dict[TP, AdminFailure] = {}
            leader = self._leaders([spec.topic_partition], failed).get(spec.topic_partition)
            if spec.topic_partition in failed:
                raise failed[spec.topic_partition]
            if leader is None:
                return None
            answer = self.admin.call("WriteTxnMarkers", version, leader, markers=[
                WriteTxnMarkersRequest.WritableTxnMarker(
                    producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
                    transaction_result=False, coordinator_epoch=spec.coordinator_epoch,
                    topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(
                        name=topic, partition_indexes=[partition])])])
            code = _marker_code(answer.markers, spec)
            if code in ABORT_RETRIABLE:
                return None
            if code == CLUSTER_AUTHORIZATION:
                raise AdminFailure(f"WriteTxnMarkers request with {spec} failed due to "
                                   "cluster authorization error")
            if code == INVALID_PRODUCER_EPOCH:
                raise AdminFailure(f"WriteTxnMarkers request with {spec} failed due an invalid "
                                   "producer epoch")
            if code == COORDINATOR_FENCED:
                raise AdminFailure(f"WriteTxnMarkers request with {spec} failed since the "
                                   f"provided coordinator epoch {spec.coordinator_epoch} has "
                                   "been fenced by the active coordinator")
            if code:
                raise AdminFailure(f"WriteTxnMarkers request with {spec} failed due to "
                                   f"unexpected error: {error_text(code)}")
            return True

        self._until_done("abortTransaction(api=WRITE_TXN_MARKERS)", step)


def _marker_code(markers: Sequence[WriteTxnMarkersResponse.WritableTxnMarkerResult],
                 spec: AbortSpec) -> int:
    """The error of the spec's partition in a WriteTxnMarkers response; a response that
    does not hold exactly that entry is Kafka's KafkaException."""
    topic, partition = spec.topic_partition
    entries = [p for m in markers if m.producer_id == spec.producer_id
               for t in m.topics if t.name == topic
               for p in t.partitions if p.partition_index == partition]
    if len(markers) != 1 or len(entries) != 1:
        raise AdminFailure("WriteTxnMarkers response included unexpected marker entries "
                           f"(expected to find exactly one entry with producerId "
                           f"{spec.producer_id})")
    return int(entries[0].error_code)
