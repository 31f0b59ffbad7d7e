"""The transaction admin calls over a scripted fake of the tools' admin client: routing,
retries of retriable answers, and Kafka's wording of each error."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace as NS
from typing import Any

import pytest

from moldau.tools.txn_admin import (
    AbortSpec,
    AdminFailure,
    ProducerState,
    TransactionalIdNotFound,
    TransactionsAdmin,
)

Answer = Callable[..., Any]


class FakeAdmin:
    """Metadata for one topic `t` (two partitions led by brokers 1 and 2); other calls
    answered by the scripted functions, one per API name (called with node and fields)."""

    def __init__(self, **answers: Answer) -> None:
        self.config = {"default.api.timeout.ms": "300", "retry.backoff.ms": "10"}
        self.answers = answers
        self.calls: list[tuple[str, int, int | None, dict[str, Any]]] = []
        self.topic_error = 0

    def supports(self, name: str, version: int = 0) -> bool:
        return True

    def metadata(self, topics: list[str] | None = None, auto_create: bool = False) -> Any:
        partitions = [NS(partition_index=i, error_code=0, leader_id=i + 1,
                         replica_nodes=[i + 1]) for i in range(2)]
        wanted = ["t"] if topics is None else topics
        return NS(brokers=[NS(node_id=2), NS(node_id=1)],
                  topics=[NS(name=t, error_code=self.topic_error if t == "t" else 3,
                             partitions=partitions if t == "t" else []) for t in wanted])

    def call(self, name: str, version: int, node_id: int | None = None, **fields: Any) -> Any:
        self.calls.append((name, version, node_id, fields))
        return self.answers[name](node_id, **fields)


def test_list_transactions_asks_every_broker_and_retries_a_loading_coordinator() -> None:
    loading = {2: 2}

    def answer(node: int, **fields: Any) -> Any:
        if loading.get(node):
            loading[node] -= 1
            return NS(error_code=14, transaction_states=[])
        return NS(error_code=0, transaction_states=[
            NS(transactional_id=f"id-{node}", producer_id=node * 10, transaction_state="Ongoing")])
    fake = FakeAdmin(ListTransactions=answer)
    result = TransactionsAdmin(fake).list_transactions(producer_ids=[20, 10], duration_ms=5)  # type: ignore[arg-type]
    assert {b: [t.transactional_id for t in ts] for b, ts in result.items()} == {
        1: ["id-1"], 2: ["id-2"]}
    assert [c[2] for c in fake.calls] == [1, 2, 2, 2]
    assert fake.calls[0][1] == 1
    assert fake.calls[0][3]["producer_id_filters"] == [10, 20]
    assert fake.calls[0][3]["duration_filter"] == 5

    shutting = FakeAdmin(ListTransactions=lambda node, **f: NS(error_code=15))
    with pytest.raises(AdminFailure, match="ListTransactions request sent to broker 1 failed "
                                           "because the coordinator is shutting down"):
        TransactionsAdmin(shutting).list_transactions()  # type: ignore[arg-type]
    always_loading = FakeAdmin(ListTransactions=lambda node, **f: NS(error_code=14))
    with pytest.raises(AdminFailure, match="Timed out waiting for a node assignment"):
        TransactionsAdmin(always_loading).list_transactions()  # type: ignore[arg-type]


def test_describe_transactions_finds_the_coordinator_first() -> None:
    not_yet = [15]

    def find(node: int | None, **fields: Any) -> Any:
        assert fields["key_type"] == 1
        code = not_yet.pop() if not_yet else 0
        return NS(coordinators=[NS(key=k, error_code=code, node_id=2)
                                for k in fields["coordinator_keys"]])

    def describe(node: int, **fields: Any) -> Any:
        return NS(transaction_states=[
            NS(transactional_id="a", error_code=0, transaction_state="Ongoing",
               transaction_timeout_ms=1000, transaction_start_time_ms=-1, producer_id=3,
               producer_epoch=1, topics=[NS(topic="t", partitions=[0, 1])]),
            NS(transactional_id="b", error_code=105),
            NS(transactional_id="c", error_code=53)])
    fake = FakeAdmin(FindCoordinator=find, DescribeTransactions=describe)
    result = TransactionsAdmin(fake).describe_transactions(["c", "b", "a"])  # type: ignore[arg-type]
    a = result["a"]
    assert not isinstance(a, AdminFailure)
    assert (a.coordinator_id, a.state, a.transaction_start_time_ms, a.topic_partitions) == (
        2, "Ongoing", None, frozenset({("t", 0), ("t", 1)}))
    assert isinstance(result["b"], TransactionalIdNotFound)
    assert str(result["c"]) == ("DescribeTransactions request for transactionalId `c` failed "
                                "due to authorization failure")
    assert [c[0] for c in fake.calls] == ["FindCoordinator", "FindCoordinator",
                                          "DescribeTransactions"]
    assert fake.calls[-1][2] == 2


def test_describe_producers_from_the_leaders_or_one_broker() -> None:
    def answer(node: int, **fields: Any) -> Any:
        (topic,) = fields["topics"]
        return NS(topics=[NS(name=topic.name, partitions=[
            NS(partition_index=p, error_code=0 if node == p + 1 else 6, error_message=None,
               active_producers=[NS(producer_id=7, producer_epoch=2, last_sequence=9,
                                    last_timestamp=100, coordinator_epoch=-1,
                                    current_txn_start_offset=40)])
            for p in topic.partition_indexes])])
    fake = FakeAdmin(DescribeProducers=answer)
    api = TransactionsAdmin(fake)  # type: ignore[arg-type]
    result = api.describe_producers([("t", 1), ("t", 0)])
    assert result[("t", 0)] == [ProducerState(7, 2, 9, 100, None, 40)]
    assert sorted(c[2] for c in fake.calls) == [1, 2]  # each partition to its leader
    on_two = api.describe_producers([("t", 0)], broker_id=2)
    assert str(on_two[("t", 0)]) == ("Failed to describe active producers for partition t-0 "
                                     "on brokerId 2")
    with pytest.raises(AdminFailure, match="Timed out waiting for a node assignment"):
        api.describe_producers([("t", 0)], broker_id=9)
    fake.topic_error = 29
    denied = api.describe_producers([("t", 0)])
    assert str(denied[("t", 0)]) == ("Failed to fetch metadata for partition t-0 due to topic "
                                     "authorization failure")


@pytest.mark.parametrize(("code", "message"), [
    (31, "WriteTxnMarkers request with {spec} failed due to cluster authorization error"),
    (47, "WriteTxnMarkers request with {spec} failed due an invalid producer epoch"),
    (52, "WriteTxnMarkers request with {spec} failed since the provided coordinator epoch 4 "
         "has been fenced by the active coordinator"),
    (43, "WriteTxnMarkers request with {spec} failed due to unexpected error: The "
         "message format version on the broker does not support the request."),
])
def test_abort_errors(code: int, message: str) -> None:
    spec = AbortSpec(("t", 1), 7, 2, 4)

    def answer(node: int, **fields: Any) -> Any:
        (marker,) = fields["markers"]
        assert (node, marker.transaction_result, marker.coordinator_epoch) == (2, False, 4)
        return NS(markers=[NS(producer_id=7, topics=[NS(name="t", partitions=[
            NS(partition_index=1, error_code=code)])])])
    fake = FakeAdmin(WriteTxnMarkers=answer)
    with pytest.raises(AdminFailure) as caught:
        TransactionsAdmin(fake).abort_transaction(spec)  # type: ignore[arg-type]
    assert str(caught.value) == message.format(spec=spec)


def test_abort_retries_a_moving_leader() -> None:
    codes = [0, 6]

    def answer(node: int, **fields: Any) -> Any:
        return NS(markers=[NS(producer_id=7, topics=[NS(name="t", partitions=[
            NS(partition_index=0, error_code=codes.pop())])])])
    fake = FakeAdmin(WriteTxnMarkers=answer)
    TransactionsAdmin(fake).abort_transaction(AbortSpec(("t", 0), 7, 2, 0))  # type: ignore[arg-type]
    assert [c[0] for c in fake.calls] == ["WriteTxnMarkers", "WriteTxnMarkers"]
