"""The marker channel's routing and its reading of WriteTxnMarkers answers
(server/txn_marker_channel.py), without a network: which partitions are done, retried or
stop the transaction, as Kafka's TransactionMarkerRequestCompletionHandler decides; the
request it builds. The channel over real brokers is in broker/tests/transactions/."""

from __future__ import annotations

import asyncio
import uuid

from moldau.client.security import ClientSecurity
from moldau.coordinator.transaction.markers import MarkerJob, MarkerOutcome, TransactionResult
from moldau.protocol.generated.write_txn_markers_response import WriteTxnMarkersResponse
from moldau.server import txn_marker_channel
from moldau.server.metadata_cache import BrokerEndpoints, MetadataCache, PartitionInfo, TopicInfo
from moldau.server.txn_marker_channel import Queued, TxnMarkerChannel, _request

R = WriteTxnMarkersResponse


class FakeQueue:
    def __init__(self) -> None:
        self.items: list[Queued] = []
        self.closed = False

    def put(self, item: Queued) -> None:
        self.items.append(item)

    def close(self) -> None:
        self.closed = True


def channel_and_outcomes() -> tuple[TxnMarkerChannel, dict[int, FakeQueue],
                                    list[MarkerOutcome], MarkerJob]:
    metadata = MetadataCache(1)
    metadata.set_brokers([BrokerEndpoints(1, {"PLAINTEXT": ("h", 1)}),
                          BrokerEndpoints(2, {"PLAINTEXT": ("h", 2)})])
    metadata.put_topic(TopicInfo("t", uuid.uuid4(), {
        0: PartitionInfo(0, 1, 0, [1, 2], [1, 2]),
        1: PartitionInfo(1, 2, 0, [1, 2], [1, 2]),
        2: PartitionInfo(2, -1, 0, [1, 2], [])}))
    metadata.initialized = True
    plaintext = ClientSecurity("PLAINTEXT", None, None, None)
    channel = TxnMarkerChannel(1, "PLAINTEXT", metadata, lambda: plaintext)
    queues: dict[int, FakeQueue] = {}
    channel._queue_for = lambda broker: queues.setdefault(broker, FakeQueue())  # type: ignore
    outcomes: list[MarkerOutcome] = []
    job = MarkerJob("tx", 42, 3, 5, TransactionResult.COMMIT,
                    frozenset({("t", 0), ("t", 1), ("t", 2), ("gone", 0)}), outcomes.append)
    return channel, queues, outcomes, job


def answer(*rows: tuple[str, int, int], producer_id: int = 42) -> WriteTxnMarkersResponse:
    topics: dict[str, list[R.WritableTxnMarkerPartitionResult]] = {}
    for topic, partition, code in rows:
        topics.setdefault(topic, []).append(R.WritableTxnMarkerPartitionResult(
            partition_index=partition, error_code=code))
    return R(markers=[R.WritableTxnMarkerResult(producer_id=producer_id, topics=[
        R.WritableTxnMarkerTopicResult(name=n, partitions=ps) for n, ps in topics.items()])])


def test_partitions_go_to_their_leaders_and_a_deleted_topics_is_done() -> None:
    async def go() -> None:
        channel, queues, outcomes, job = channel_and_outcomes()
        channel.send(job)
        assert [tp for _, tp in queues[1].items] == [("t", 0)]
        assert [tp for _, tp in queues[2].items] == [("t", 1)]
        assert outcomes == [MarkerOutcome("gone", 0, 3)]
        # t-2 has no leader: routed again once it has one
        channel.metadata.update_partition("t", PartitionInfo(2, 2, 1, [1, 2], [2]))
        await asyncio.sleep(txn_marker_channel.RETRY_BACKOFF_S * 2)
        assert [tp for _, tp in queues[2].items] == [("t", 1), ("t", 2)]
        channel.close()
    asyncio.run(go())


def test_markers_without_a_known_leader_are_the_unknown_destination_queue() -> None:
    # Kafka's UnknownDestinationQueueSize: one marker per transaction and attempt
    async def go() -> None:
        channel, _queues, outcomes, job = channel_and_outcomes()
        assert channel.unknown_destination_markers() == 0
        channel.send(job)
        assert channel.unknown_destination_markers() == 1  # t-2 has no leader
        channel.metadata.update_partition("t", PartitionInfo(2, 2, 1, [1, 2], [2]))
        await asyncio.sleep(txn_marker_channel.RETRY_BACKOFF_S * 2)
        assert channel.unknown_destination_markers() == 0
        # a removed transaction's markers no longer wait
        other = MarkerJob("tx2", 43, 0, 5, TransactionResult.ABORT,
                          frozenset({("t", 2), ("u", 0)}), outcomes.append)
        channel.metadata.update_partition("t", PartitionInfo(2, -1, 2, [1, 2], []))
        channel.metadata.put_topic(TopicInfo("u", uuid.uuid4(), {
            0: PartitionInfo(0, 3, 0, [3], [3])}))  # broker 3 is not alive
        channel.send(other)
        assert channel.unknown_destination_markers() == 1
        channel.remove_transactions(["tx2"])
        assert channel.unknown_destination_markers() == 0
        channel.close()
    asyncio.run(go())


def test_answers_are_done_retried_or_stop_the_transaction() -> None:
    async def go() -> None:
        channel, queues, outcomes, job = channel_and_outcomes()
        channel.send(job)
        outcomes.clear()
        batch = queues[1].items + queues[2].items
        queues[1].items, queues[2].items = [], []
        # t-0 written; t-1's leader moved: retried (after the backoff)
        channel.on_response(1, batch, answer(("t", 0, 0), ("t", 1, 6)))
        assert outcomes == [MarkerOutcome("t", 0, 0)]
        await asyncio.sleep(txn_marker_channel.RETRY_BACKOFF_S * 2)
        assert [tp for _, tp in queues[2].items] == [("t", 1)]
        # the old format: the partition leaves the transaction
        channel.on_response(2, queues[2].items, answer(("t", 1, 43)))
        assert outcomes[-1] == MarkerOutcome("t", 1, 43)
        assert "tx" in channel.sending  # t-2 is still to go
        # a newer producer epoch: the rest of the transaction is not sent
        channel.on_response(2, [(job, ("t", 2))], answer(("t", 2, 47)))
        assert outcomes[-1] == MarkerOutcome("t", 2, 47)
        assert "tx" not in channel.sending
        channel.close()
    asyncio.run(go())


def test_removed_transactions_are_not_sent_or_reported() -> None:
    async def go() -> None:
        channel, queues, outcomes, job = channel_and_outcomes()
        channel.send(job)
        outcomes.clear()
        channel.remove_transactions(["tx"])
        assert not channel.wanted(job, ("t", 0))
        channel.on_response(1, queues[1].items, answer(("t", 0, 0)))
        assert outcomes == []
        channel.close()
    asyncio.run(go())


def test_the_request_groups_each_jobs_partitions_by_topic() -> None:
    job = MarkerJob("tx", 42, 3, 5, TransactionResult.ABORT,
                    frozenset({("b", 1), ("a", 0), ("b", 0)}), lambda _: None)
    request = _request([(job, ("b", 1)), (job, ("a", 0)), (job, ("b", 0))])
    marker, = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
            marker.transaction_result) == (42, 3, 5, False)
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("a", [0]),
                                                                      ("b", [0, 1])]
