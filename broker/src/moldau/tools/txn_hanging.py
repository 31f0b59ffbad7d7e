"""`kafka-transactions.sh find-hanging`: Kafka 3.9's FindHangingTransactionsCommand.

A partition's open transaction is a candidate when its producer's last write is older
than the maximum transaction timeout (no live transaction can be that old). It hangs
when the coordinators know no transactional id for its producer id, when the id's
transaction cannot be described (TransactionalIdNotFound), or when the coordinator's
current transaction does not list the partition: then no coordinator will ever write its
marker. The decision (`candidates`, `hanging`) is pure; `find_hanging` asks the cluster."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from moldau.tools.options import ToolError
from moldau.tools.txn_admin import (
    TP,
    AdminFailure,
    ProducerState,
    TransactionalIdNotFound,
    TransactionDescription,
    TxnApi,
)
from moldau.tools.txn_output import CommandFailed, failed

MAX_BATCH_SIZE = 500  # topics per describe, partitions per DescribeProducers
HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
           "StartOffset", "LastTimestamp", "Duration(min)")
T = TypeVar("T")


@dataclass(frozen=True)
class OpenTransaction:
    topic_partition: TP
    producer: ProducerState


def candidates(producers: Mapping[TP, Sequence[ProducerState]], now_ms: int,
               max_timeout_ms: int) -> list[OpenTransaction]:
    """The open transactions whose producer last wrote more than the timeout ago."""
    return [OpenTransaction(tp, state) for tp, states in producers.items() for state in states
            if state.current_txn_start_offset is not None
            and now_ms - state.last_timestamp > max_timeout_ms]


def by_producer(transactions: Iterable[OpenTransaction]) -> dict[int, list[OpenTransaction]]:
    grouped: dict[int, list[OpenTransaction]] = {}
    for txn in transactions:
        grouped.setdefault(txn.producer.producer_id, []).append(txn)
    return grouped


def hanging(open_by_producer: Mapping[int, Sequence[OpenTransaction]],
            transactional_ids: Mapping[int, str],
            descriptions: Mapping[str, TransactionDescription | None]) -> list[OpenTransaction]:
    """Kafka's filterHangingTransactions, producer ids in ascending order."""
    found: list[OpenTransaction] = []
    for producer_id in sorted(open_by_producer):
        transactions = open_by_producer[producer_id]
        transactional_id = transactional_ids.get(producer_id)
        description = None if transactional_id is None else descriptions.get(transactional_id)
        if description is None:
            found += transactions
        else:  # the coordinator still owes a marker to the partitions it lists
            found += [t for t in transactions
                      if t.topic_partition not in description.topic_partitions]
    return found


def rows(transactions: Iterable[OpenTransaction], now_ms: int) -> list[list[str]]:
    def minutes(ms: int) -> int:  # TimeUnit.MILLISECONDS.toMinutes truncates toward zero
        return int(ms / 60000)
    return [[t.topic_partition[0], str(t.topic_partition[1]), str(t.producer.producer_id),
             str(t.producer.producer_epoch),
             str(-1 if t.producer.coordinator_epoch is None else t.producer.coordinator_epoch),
             str(-1 if t.producer.current_txn_start_offset is None
                 else t.producer.current_txn_start_offset),
             str(t.producer.last_timestamp), str(minutes(now_ms - t.producer.last_timestamp))]
            for t in transactions]


def _batches(items: Sequence[T], size: int = MAX_BATCH_SIZE) -> list[Sequence[T]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def _java_optional(value: int | None) -> str:
    return "Optional.empty" if value is None else f"Optional[{value}]"


def _partitions(api: TxnApi, topic: str | None, partition: int | None,
                broker_id: int | None) -> list[TP]:
    if topic is not None and partition is not None:
        return [(topic, partition)]
    if topic is not None:
        topics = [topic]
    else:
        try:
            topics = api.list_topics()
        except ToolError as exc:
            raise failed("Failed to list topics", exc) from None
    found: list[TP] = []
    for batch in _batches(topics):
        try:
            infos = api.describe_topics(batch)
        except ToolError as exc:
            raise failed(f"Failed to describe {len(batch)} topics", exc) from None
        found += [(p.topic, p.partition) for p in infos
                  if broker_id is None or broker_id in p.replicas]
    return found


def _open_transactions(api: TxnApi, partitions: list[TP], broker_id: int | None,
                       max_timeout_ms: int, now: Callable[[], int]) -> list[OpenTransaction]:
    found: list[OpenTransaction] = []
    for batch in _batches(partitions):
        try:
            answers = api.describe_producers(batch, broker_id)
            errors = [a for a in answers.values() if isinstance(a, AdminFailure)]
            if errors:
                raise errors[0]
        except ToolError as exc:
            raise failed(f"Failed to describe producers for {len(batch)} partitions on broker "
                         f"{_java_optional(broker_id)}", exc) from None
        producers = {tp: a for tp, a in answers.items() if not isinstance(a, AdminFailure)}
        found += candidates(producers, now(), max_timeout_ms)
    return found


def _transactional_ids(api: TxnApi, producer_ids: set[int]) -> dict[int, str]:
    try:
        listings = api.list_transactions(producer_ids=producer_ids)
    except ToolError as exc:
        raise failed(f"Failed to list transactions for {len(producer_ids)} producers",
                     exc) from None
    # a listing of a producer id not asked for is ignored, as Kafka does
    return {listing.producer_id: listing.transactional_id
            for broker in sorted(listings) for listing in listings[broker]
            if listing.producer_id in producer_ids}


def _descriptions(api: TxnApi, transactional_ids: Iterable[str]
                  ) -> dict[str, TransactionDescription | None]:
    wanted = sorted(set(transactional_ids))
    if not wanted:
        return {}
    try:
        answers = api.describe_transactions(wanted)
        descriptions: dict[str, TransactionDescription | None] = {}
        for tid in wanted:
            answer = answers.get(tid)
            if isinstance(answer, TransactionalIdNotFound):
                descriptions[tid] = None
            elif isinstance(answer, AdminFailure):
                raise answer
            else:
                descriptions[tid] = answer
    except ToolError as exc:
        raise failed(f"Failed to describe {len(wanted)} transactions", exc) from None
    return descriptions


def find_hanging(api: TxnApi, broker_id: int | None, topic: str | None,
                 partition: int | None, max_timeout_minutes: int,
                 now: Callable[[], int]) -> list[list[str]]:
    """The rows of the hanging transactions (Kafka's execute, in its order of checks)."""
    if topic is None and broker_id is None:
        raise CommandFailed("The `find-hanging` command requires either --topic or "
                            "--broker-id to limit the scope of the search")
    if partition is not None and topic is None:
        raise CommandFailed("The --partition argument requires --topic to be provided")
    partitions = _partitions(api, topic, partition, broker_id)
    open_transactions = _open_transactions(api, partitions, broker_id,
                                           max_timeout_minutes * 60000, now)
    if not open_transactions:
        return []
    grouped = by_producer(open_transactions)
    transactional_ids = _transactional_ids(api, set(grouped))
    descriptions = _descriptions(api, transactional_ids.values())
    return rows(hanging(grouped, transactional_ids, descriptions), now())
