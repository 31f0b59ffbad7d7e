"""KIP-890 part 1 on the partition leader (Kafka 3.9's AddPartitionsToTxnManager and the
verification guards of its UnifiedLog): before a transactional batch may open a
transaction on a partition, the transaction coordinator confirms that the partition is
in the producer's ongoing transaction. Without this, a produce delayed past its
transaction's marker would open a transaction nobody ever closes (a hanging
transaction: the LSO stops, read_committed consumers and the cleaner with it).

The leader asks only for a producer with no transaction open on the partition; the
coordinator is the leader of the id's `__transaction_state` partition in the metadata
cache. Questions to one coordinator broker go in one AddPartitionsToTxn (v4+, verifyOnly)
at a time: those that arrive while one is in flight wait and go in the next. A second
question for a transactional id already waiting replaces it: the older epoch's asker
gets INVALID_PRODUCER_EPOCH, the same epoch's NETWORK_EXCEPTION (a retry), and a
question with an older epoch than the one waiting is refused at once.

A guard per (partition, producer) is taken before asking; a marker written for the
producer meanwhile drops it (the transaction the coordinator confirmed is over), so the
append after a confirmation happens only if the guard is still the one taken.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from moldau.coordinator.transaction.partitioning import (
    TRANSACTION_STATE_TOPIC,
    transaction_partition_for,
)
from moldau.errors import (
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    KafkaError,
    NetworkExceptionError,
    NotCoordinatorError,
    NotEnoughReplicasError,
    ProducerFencedError,
    TransactionAbortableError,
    UnsupportedVersionError,
    error_for,
    error_name,
)
from moldau.protocol.generated.add_partitions_to_txn_request import AddPartitionsToTxnRequest
from moldau.protocol.generated.add_partitions_to_txn_response import (
    AddPartitionsToTxnResponse,
)
from moldau.protocol.generated.api import ApiKey
from moldau.protocol.records import HEADER, HEADER_SIZE, first_batch_is_transactional

from .broker_links import BrokerLinks
from .metadata_cache import INTERNAL_TOPICS

if TYPE_CHECKING:
    from moldau.client.security import ClientSecurity
    from moldau.metrics.registry import MetricsRegistry
    from moldau.protocol.generated.produce_request import ProduceRequest
    from moldau.protocol.records import BytesLike
    from moldau.replication.replica_manager import ReplicaManager
    from moldau.storage.log import PartitionLog

    from .config import BrokerConfig
    from .metadata_cache import MetadataCache

log = logging.getLogger("kafka.server.AddPartitionsToTxnManager")

# the version asked: 5, the newest 3.9 has (v4 is the first with verifyOnly; v5 may answer
# TRANSACTION_ABORTABLE, which is mapped to what the producer's version understands)
VERIFY_VERSION = 5
# the coordinator could not be reached, or did not answer in time
NETWORK_EXCEPTION = NetworkExceptionError.code
TRANSACTION_ABORTABLE = TransactionAbortableError.code
LAST_PRODUCE_VERSION_WITHOUT_ABORTABLE = 10  # Produce v11 may see TRANSACTION_ABORTABLE
# the coordinator errors an older client would not retry on Produce: NOT_ENOUGH_REPLICAS
# instead, which it does retry without a metadata refresh (Kafka 3.9's ReplicaManager)
_RETRY_AS_NOT_ENOUGH_REPLICAS = frozenset({
    ConcurrentTransactionsError.code, NETWORK_EXCEPTION, CoordinatorLoadInProgressError.code,
    CoordinatorNotAvailableError.code, NotCoordinatorError.code})

METRIC = ("kafka.server", "AddPartitionsToTxnManager")
TopicPartition = tuple[str, int]
GuardKey = tuple[str, int, int]  # topic, partition, producer id
# sends an AddPartitionsToTxn to a broker: (broker id, version, request, timeout s)
Send = Callable[[int, int, AddPartitionsToTxnRequest, float],
                Awaitable[AddPartitionsToTxnResponse]]


class Guard:
    """One verification's token (Kafka's VerificationGuard): compared by identity."""

    __slots__ = ()


class VerificationGuards:
    """The guard of each (partition, producer) being verified on this leader."""

    def __init__(self) -> None:
        self._guards: dict[GuardKey, Guard] = {}

    def start(self, topic: str, partition: int, producer_id: int) -> Guard:
        """The guard to verify with: the one already taken, else a new one."""
        key = (topic, partition, producer_id)
        guard = self._guards.get(key)
        if guard is None:
            guard = self._guards[key] = Guard()
        return guard

    def holds(self, topic: str, partition: int, producer_id: int, guard: Guard) -> bool:
        """Whether guard is still the current one (no marker came in between)."""
        return self._guards.get((topic, partition, producer_id)) is guard

    def clear(self, topic: str, partition: int, producer_id: int) -> None:
        """A marker ended the producer's transaction on the partition: its guard goes."""
        self._guards.pop((topic, partition, producer_id), None)

    def release(self, topic: str, partition: int, producer_id: int, guard: Guard) -> None:
        """The append the guard was taken for is done (or refused): it goes, unless a
        later verification holds another one."""
        key = (topic, partition, producer_id)
        if self._guards.get(key) is guard:
            del self._guards[key]

    def __len__(self) -> int:
        return len(self._guards)


@dataclass
class _Question:
    """One transactional id's partitions waiting to be verified by its coordinator."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: list[TopicPartition]
    answer: asyncio.Future[dict[TopicPartition, int]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())

    def fail(self, code: int) -> None:
        if not self.answer.done():
            self.answer.set_result({tp: code for tp in self.partitions})


@dataclass
class Verification:
    """One Produce request's transactional partitions: those whose producer has no
    transaction open there, to ask the coordinator about, with their guards; and, once
    it answered, the error of each it did not confirm."""

    guards_of: VerificationGuards
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: list[TopicPartition] = field(default_factory=list)
    guards: dict[TopicPartition, Guard] = field(default_factory=dict)
    errors: dict[TopicPartition, KafkaError] = field(default_factory=dict)

    def check(self, topic: str, index: int, records: BytesLike, plog: PartitionLog) -> None:
        """Before the append: the coordinator's refusal, if any; and INVALID_TXN_STATE
        for a transactional batch that would open a transaction no coordinator confirmed
        (not asked, or a marker came in between: Kafka's verification guard)."""
        error = self.errors.get((topic, index))
        if error is not None:
            raise error
        header = transactional_header(records)
        if header is None:
            return
        producer_id = header[0]
        entry = plog.producer_state.producers.get(producer_id)
        if entry is not None and entry.current_txn_first_offset >= 0:
            return  # its transaction is open here: nothing to verify
        guard = self.guards.get((topic, index))
        if guard is None or not self.guards_of.holds(topic, index, producer_id, guard):
            raise InvalidTxnStateError("Record was not part of an ongoing transaction")


def transactional_header(records: BytesLike | None) -> tuple[int, int] | None:
    """(producer id, epoch) of the first batch when it is transactional, else None."""
    if records is None or len(records) < HEADER_SIZE or not first_batch_is_transactional(
            records):
        return None
    fields = HEADER.unpack_from(records, 0)
    producer_id, epoch = fields[9], fields[10]
    return (producer_id, epoch) if producer_id >= 0 else None


def transactions_to_verify(request: ProduceRequest, authorized: list[bool],
                           replica_manager: ReplicaManager,
                           guards: VerificationGuards) -> Verification:
    """The request's partitions this broker leads whose first batch is transactional
    and whose producer has no transaction open there, each with a guard taken. Every
    transactional batch of a request must be one producer's (else
    INVALID_PRODUCER_ID_MAPPING for the whole request, as Kafka)."""
    found = Verification(guards)
    topic_data: ProduceRequest.TopicProduceData
    data: ProduceRequest.PartitionProduceData
    for topic_data, allowed in zip(request.topic_data, authorized, strict=True):
        name = topic_data.name
        if not allowed or name in INTERNAL_TOPICS:
            continue  # answered with its error, never appended
        for data in topic_data.partition_data:
            header = transactional_header(data.records)
            if header is None:
                continue
            if found.producer_id < 0:
                found.producer_id, found.producer_epoch = header
            elif header[0] != found.producer_id:
                for (topic, index), guard in found.guards.items():
                    guards.release(topic, index, found.producer_id, guard)
                raise InvalidProducerIdMappingError(
                    "Transactional records contained more than one producer ID")
            partition = replica_manager.get_partition(name, data.index)
            if partition is None or not partition.is_leader:
                continue  # the append answers why
            entry = partition.log.producer_state.producers.get(header[0])
            tp = (name, data.index)
            if (entry is not None and entry.current_txn_first_offset >= 0) or tp in found.guards:
                continue
            found.guards[tp] = guards.start(name, data.index, header[0])
            found.partitions.append(tp)
    return found


class TxnVerifier:
    """See the module docstring. `enabled` reads transaction.partition.verification.enable
    (a dynamic broker config in Kafka)."""

    def __init__(self, metadata: MetadataCache, send: Send, *,
                 enabled: Callable[[], bool], state_partitions: Callable[[], int],
                 inter_broker_listener: str, timeout_ms: int = 30000,
                 on_close: Callable[[], None] = lambda: None,
                 on_failures: Callable[[int], None] = lambda _count: None,
                 on_time: Callable[[float], None] = lambda _ms: None) -> None:
        self.metadata = metadata
        self.send = send
        self.on_close = on_close
        self.enabled = enabled
        self.state_partitions = state_partitions
        self.listener = inter_broker_listener
        self.timeout_s = timeout_ms / 1000
        self.guards = VerificationGuards()
        self._waiting: dict[int, dict[str, _Question]] = {}  # broker id -> id -> question
        self._in_flight: set[int] = set()
        self._tasks: set[asyncio.Future[None]] = set()
        # Kafka's AddPartitionsToTxnManager metrics: partitions not verified, and the wait
        self.on_failures = on_failures
        self.on_time = on_time

    def coordinator(self, transactional_id: str) -> int | None:
        """The broker leading the id's __transaction_state partition, if it is known
        and reachable on the inter-broker listener."""
        partition = transaction_partition_for(transactional_id, self.state_partitions())
        info = self.metadata.partition(TRANSACTION_STATE_TOPIC, partition)
        if info is None or info.leader < 0:
            return None
        if self.metadata.endpoint(info.leader, self.listener) is None:
            return None
        return info.leader

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition],
                     produce_version: int) -> dict[TopicPartition, int]:
        """The partitions the coordinator did not confirm, with the error code the
        Produce answer of produce_version carries (before the Produce path's own
        translation, `produce_error`); empty when all are in the transaction."""
        started = time.monotonic()
        broker = self.coordinator(transactional_id)
        if broker is None:
            found = {tp: CoordinatorNotAvailableError.code for tp in partitions}
        else:
            question = _Question(transactional_id, producer_id, producer_epoch, partitions)
            if self._enqueue(broker, question):
                found = await question.answer
            else:
                found = {tp: InvalidProducerEpochError.code for tp in partitions}
        self.on_time((time.monotonic() - started) * 1000)
        if found:
            self.on_failures(len(found))
        return {tp: _for_produce(code, produce_version) for tp, code in found.items()}

    def _enqueue(self, broker: int, question: _Question) -> bool:
        """Queue the question for its broker's next request; False when a question of a
        newer epoch for the same id is waiting already (this one is fenced)."""
        waiting = self._waiting.setdefault(broker, {})
        earlier = waiting.get(question.transactional_id)
        if earlier is not None:
            if earlier.producer_epoch > question.producer_epoch:
                return False
            earlier.fail(InvalidProducerEpochError.code
                         if earlier.producer_epoch < question.producer_epoch
                         else NETWORK_EXCEPTION)
        waiting[question.transactional_id] = question
        if broker not in self._in_flight:
            self._in_flight.add(broker)
            task = asyncio.ensure_future(self._run(broker))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return True

    async def _run(self, broker: int) -> None:
        """Send the broker's waiting questions, one request at a time, until none is
        left (questions asked in the same loop pass go in one request)."""
        try:
            await asyncio.sleep(0)
            while questions := self._waiting.pop(broker, None):
                await self._ask(broker, questions)
        finally:
            self._in_flight.discard(broker)
            # a question queued as the task was cancelled would wait forever
            for question in self._waiting.pop(broker, {}).values():
                question.fail(NETWORK_EXCEPTION)

    async def _ask(self, broker: int, questions: dict[str, _Question]) -> None:
        request = AddPartitionsToTxnRequest(transactions=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=q.transactional_id, producer_id=q.producer_id,
                producer_epoch=q.producer_epoch, verify_only=True,
                topics=_topics(q.partitions))
            for q in questions.values()])
        try:
            response = await self.send(broker, VERIFY_VERSION, request, self.timeout_s)
        except KafkaError as exc:  # the connection's authentication failed
            log.error("AddPartitionsToTxnRequest failed for node %d: %s", broker, exc)
            _fail_all(questions, exc.code)
            return
        except (OSError, ConnectionError, TimeoutError) as exc:
            log.warning("AddPartitionsToTxnRequest failed for node %d with a network "
                        "exception: %s", broker, exc)
            _fail_all(questions, NETWORK_EXCEPTION)
            return
        if response.error_code == UnsupportedVersionError.code:
            # a coordinator without verifyOnly: the produce goes on unverified (Kafka)
            log.warning("AddPartitionsToTxnRequest failed for node %d with an unsupported "
                        "version: verification is skipped", broker)
            for question in questions.values():
                if not question.answer.done():
                    question.answer.set_result({})
            return
        if response.error_code:
            log.error("AddPartitionsToTxnRequest for node %d returned with error %s", broker,
                      error_name(response.error_code))
            # a producer must not see the inter-broker CLUSTER_AUTHORIZATION_FAILED
            _fail_all(questions, InvalidTxnStateError.code
                      if response.error_code == ClusterAuthorizationFailedError.code
                      else response.error_code)
            return
        result: AddPartitionsToTxnResponse.AddPartitionsToTxnResult
        for result in response.results_by_transaction:
            asked = questions.pop(result.transactional_id, None)
            if asked is None or asked.answer.done():
                continue
            unverified: dict[TopicPartition, int] = {}
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    if p.partition_error_code:
                        code = p.partition_error_code
                        if code == ProducerFencedError.code:  # what producers expect here
                            code = InvalidProducerEpochError.code
                        unverified[(topic.name, p.partition_index)] = code
            asked.answer.set_result(unverified)
        _fail_all(questions, NETWORK_EXCEPTION)  # ids the answer left out

    def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        self.on_close()


def network_verifier(config: BrokerConfig, broker_id: int, metadata: MetadataCache,
                     security_for: Callable[[], ClientSecurity],
                     metrics: MetricsRegistry) -> TxnVerifier:
    """The broker's verifier, asking coordinators over the inter-broker listener, with
    Kafka's kafka.server:type=AddPartitionsToTxnManager metrics."""
    listener = config.inter_broker_listener_name
    links = BrokerLinks(f"broker-{broker_id}-txn-verification",
                        lambda broker: metadata.endpoint(broker, listener), security_for,
                        connect_timeout_s=config["socket.connection.setup.timeout.ms"] / 1000)

    async def send(broker: int, version: int, request: AddPartitionsToTxnRequest,
                   timeout_s: float) -> AddPartitionsToTxnResponse:
        response: AddPartitionsToTxnResponse = await links.request(
            broker, ApiKey.ADD_PARTITIONS_TO_TXN, version, request, timeout_s)
        return response

    return TxnVerifier(
        metadata, send,
        enabled=lambda: bool(config["transaction.partition.verification.enable"]),
        state_partitions=lambda: int(config["transaction.state.log.num.partitions"]),
        inter_broker_listener=listener, timeout_ms=config["request.timeout.ms"],
        on_close=links.close,
        on_failures=metrics.meter(*METRIC, "VerificationFailureRate").mark,
        on_time=metrics.histogram(*METRIC, "VerificationTimeMs").update)


def _topics(partitions: list[TopicPartition]
            ) -> list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]:
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    return [AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=name, partitions=indexes)
            for name, indexes in by_topic.items()]


def _fail_all(questions: dict[str, _Question], code: int) -> None:
    for question in questions.values():
        question.fail(code)


def _for_produce(code: int, produce_version: int) -> int:
    """TRANSACTION_ABORTABLE is INVALID_TXN_STATE for a producer too old to know it."""
    if code == TRANSACTION_ABORTABLE and produce_version <= LAST_PRODUCE_VERSION_WITHOUT_ABORTABLE:
        return InvalidTxnStateError.code
    return code


def produce_error(code: int) -> KafkaError:
    """The error a partition's Produce answer carries for a failed verification (Kafka
    3.9's ReplicaManager): retriable coordinator errors become NOT_ENOUGH_REPLICAS, which
    every client retries; INVALID_TXN_STATE says why."""
    if code in _RETRY_AS_NOT_ENOUGH_REPLICAS:
        return NotEnoughReplicasError(
            "Unable to verify the partition has been added to the transaction. Underlying "
            f"error: {error_name(code)}")
    if code == InvalidTxnStateError.code:
        return InvalidTxnStateError("Partition was not added to the transaction")
    return error_for(code)()
